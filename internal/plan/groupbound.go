package plan

import (
	"cmp"
	"fmt"
	"math"
	mathbits "math/bits"
	"slices"
	"strings"
)

// Limits of the sharing-group bound: it runs on pools of at most groupBoundTenants tenants, on
// the groupBoundLambdas best prices of the volume bound, and gives up on a sharing group (using
// the fractional sum for it, rounded up to the prices' grid) after groupBoundNodes search nodes.
// The groups it gave up on are then searched again, fewest tenants first, with up to
// groupDeepNodes nodes each while groupDeepBudget nodes remain for the whole bound and
// finishing them could still lift the bound by a GPU (ADR 0058). With each unit kind's share
// capped at the replicas its group can put there (capShares, ADR 0114) every team group of the
// synthetic 1,000-tenant pool finishes, team-4 there after 121,341 nodes, and the group term
// is 214.25 (device-plugin path; 213.125 uncapped, where three teams stayed open). The local
// search's seed from the uncapped search (groupSeed) runs on pools of at most
// groupSeedTenants; above that the bound takes only the best price. At 1,000 synthetic
// tenants it then takes about 0.04–0.08 s of CPU (the standard and varied pools); at 10,000
// it would take 0.5–0.65 s and give 2,066.25, one GPU above the LP's 2,066.
const (
	groupBoundTenants = 2000
	groupSeedTenants  = 400
	groupBoundLambdas = 4
	groupBoundNodes   = 40000
	groupDeepNodes    = 400000
	groupDeepBudget   = 1000000
)

// groupBound strengthens the volume bound with the integrality of shared units. With prices π
// per unit (1 for a whole GPU, λ·memory share + (1−λ)·compute share for a MIG instance), every
// plan costs at least Σ over groups of ceil(replicas / share) × π: whole GPUs plus the λ-mix of
// the MIG instances' memory and compute, which is at most the GPUs they occupy. Tenants interact
// only through shared units of their own sharing group and energy class, so the minimum over
// all choices splits into one small problem per group, solved exactly by branch and bound; a
// tenant that shares with nobody takes its cheapest candidate. The volume bound is the same sum
// with the ceilings dropped, so this is never below it. Returns 0 when the pool is too large.
func (p *planner) groupBound() int {
	if len(p.tenants) > groupBoundTenants {
		return 0
	}
	lams := groupBoundLambdas
	if len(p.tenants) > groupSeedTenants {
		lams = 1 // the best price alone: on the synthetic 1,000-tenant pools the others add nothing
	}
	return int(math.Ceil(p.groupBoundAt(p.bestLambdas(lams)) - boundSlack))
}

// groupBoundAt is the sharing-group bound's value, the best over the prices lams, on a pool of
// any size (groupBound keeps to small pools for time).
func (p *planner) groupBoundAt(lams []float64) float64 {
	comps := map[string][]*tenant{}
	var keys []string
	var alone []*tenant
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		if tn.group == "" {
			alone = append(alone, tn)
			continue
		}
		k := tn.group + "\x00" + string(energyOf(tn.t))
		if _, ok := comps[k]; !ok {
			keys = append(keys, k)
		}
		comps[k] = append(comps[k], tn)
	}
	best := 0.0
	budget := groupDeepBudget
	for _, lam := range lams {
		total := 0.0
		for _, tn := range alone {
			total += minPrice(tn, lam)
		}
		var open []string // groups given up on
		val, inc := map[string]float64{}, map[string]float64{}
		// gain is the most the open groups can add, each at most its best plan found; unknown
		// (counted in planless) for a group whose search found no plan.
		gain, planless := 0.0, 0
		for _, k := range keys {
			r := groupSolve(comps[k], lam, groupBoundNodes, true)
			total += r.v
			if !r.done {
				open, val[k], inc[k] = append(open, k), r.v, r.inc
				if math.IsInf(r.inc, 1) {
					planless++
				} else {
					gain += r.inc - r.v
				}
			}
		}
		// Again with more nodes, smallest groups first (the likeliest to finish), while the
		// budget lasts and a finished group could still lift the bound past a whole GPU or
		// past the best price's so far: a group's value only rises (its optimum, or its
		// rounded fractional sum again), so each term stays a lower bound on its cost.
		slices.SortStableFunc(open, func(a, b string) int { return cmp.Compare(len(comps[a]), len(comps[b])) })
		for _, k := range open {
			target := max(best, math.Ceil(total-boundSlack)+boundSlack)
			if budget <= 0 || planless == 0 && total+gain <= target {
				break
			}
			r := groupSolve(comps[k], lam, min(groupDeepNodes, budget), true)
			budget -= r.nodes
			if math.IsInf(inc[k], 1) {
				planless--
			} else {
				gain -= inc[k] - val[k]
			}
			total += max(0, r.v-val[k])
		}
		best = max(best, total)
	}
	return best
}

func unitPrice(c *cand, lam float64) float64 {
	if c.profile == nil {
		return float64(max(c.tp, 1)) // a whole GPU, or a tensor-parallel group of tp
	}
	return lam*c.memFrac + (1-lam)*c.compFrac
}

// minPrice is the fractional price of tn's cheapest candidate: replicas / share × π.
func minPrice(tn *tenant, lam float64) float64 {
	m := math.Inf(1)
	for _, c := range tn.feasible {
		m = min(m, float64(c.replicas)/float64(c.share)*unitPrice(c, lam))
	}
	return m
}

// bestLambdas are the n prices of the 21-point grid with the highest fractional volume bound.
func (p *planner) bestLambdas(n int) []float64 {
	type lv struct{ lam, v float64 }
	var all []lv
	for i := 0; i <= 20; i++ {
		lam := float64(i) / 20
		v := 0.0
		for _, tn := range p.tenants {
			if tn.choice != nil {
				v += minPrice(tn, lam)
			}
		}
		all = append(all, lv{lam, v})
	}
	slices.SortStableFunc(all, func(a, b lv) int { return -cmpF(a.v, b.v) })
	out := make([]float64, 0, n)
	for _, x := range all[:min(n, len(all))] {
		out = append(out, x.lam)
	}
	return out
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groupOpt is one candidate of a tenant in a group's search: its class (a unit kind of the
// group), replicas, share and price.
type groupOpt struct {
	class, r, k int
	price, frac float64 // per unit; r / k × price
	c           *cand
}

// groupSearch is the branch and bound of one sharing group at one price.
type groupSearch struct {
	opts   [][]groupOpt // per tenant, by fractional price
	who    []int        // the index in ts of each row of opts
	pick   []*cand      // the candidates of the current branch, by row
	bestAt []*cand      // the candidates of the best leaf, by row
	// same marks a row whose tenant has the same options as the row before; at is the option
	// index taken in each row. Tenants alike are interchangeable, so a row marked same takes an
	// option no earlier than its predecessor's (every plan has a permutation of this form).
	same []bool
	at   []int
	// room[i][c] is Σ over rows i onwards with a candidate of kind c of its r / k × π: no more
	// than this of kind c's free places can be used by them.
	room   [][]float64
	suffix []float64 // Σ of the remaining tenants' cheapest fractional prices
	units  []int     // replicas per class so far
	// open has bit c set while units[c] > 0: usable visits those classes alone, in class order
	// (a class without replicas has no free places).
	open  []uint64
	price []float64 // per class
	share []int
	best  float64
	nodes int
	limit int // nodes before the search gives up
	// grid is a step every unit price of the group is a whole multiple of (1/8 for the MIG
	// memory shares of an eight-slice board at λ = 1 and whole GPUs), 0 when none up to 1/64:
	// every plan's cost is then a multiple of it, so a lower bound rounds up to it (up).
	grid float64
	// branches is search's buffer of branches by row.
	branches [][]groupBranch
	// capped: rows caps each kind's share at the most replicas the group can put there
	// (capShares).
	capped bool
}

// groupBranch is one option of a row in search: its index in the row, the cost it adds now and
// the change in the value of the free places.
type groupBranch struct {
	idx    int
	dc, ds float64
}

// groupMin is the least Σ ceil(replicas / share) × π over the group's choices, or the
// fractional sum when the search runs out of nodes (still a lower bound).
func groupMin(ts []*tenant, lam float64) float64 {
	return groupArgMinN(ts, lam, groupBoundNodes).v
}

// groupArgMin is groupMin with the choices of the best plan the search found, aligned with ts
// (nil when it found none). The choices are those of the optimum when the value is exact, an
// incumbent otherwise.
func groupArgMin(ts []*tenant, lam float64) (float64, []*cand) {
	r := groupArgMinN(ts, lam, groupBoundNodes)
	return r.v, r.choice
}

// groupResult is one group search's outcome: v, the group's value (its optimum when done);
// inc, the cost of the best plan found (+Inf if none), at least the optimum; choice, that
// plan's candidates (nil if none); nodes, the search nodes used.
type groupResult struct {
	v, inc float64
	choice []*cand
	nodes  int
	done   bool
}

// groupArgMinN is groupArgMin with limit search nodes.
func groupArgMinN(ts []*tenant, lam float64, limit int) groupResult {
	return groupSolve(ts, lam, limit, false)
}

// groupSolve is groupArgMinN; with capped, each unit kind's share is first capped at the most
// replicas the group's tenants can put there together (capShares), which leaves every plan's
// cost as it is and raises the fractional prices the search prunes by.
func groupSolve(ts []*tenant, lam float64, limit int, capped bool) groupResult {
	s := &groupSearch{best: math.Inf(1), limit: limit, capped: capped}
	frac := s.rows(ts, lam)
	s.pick, s.at = make([]*cand, len(s.opts)), make([]int, len(s.opts))
	s.room = make([][]float64, len(s.opts)+1)
	s.room[len(s.opts)] = make([]float64, len(s.price))
	for i := len(s.opts) - 1; i >= 0; i-- {
		s.room[i] = slices.Clone(s.room[i+1])
		for _, o := range s.opts[i] {
			s.room[i][o.class] += o.frac
		}
	}
	s.suffix = make([]float64, len(s.opts)+1)
	for i := len(s.opts) - 1; i >= 0; i-- {
		s.suffix[i] = s.suffix[i+1] + s.opts[i][0].frac
	}
	s.units = make([]int, len(s.price))
	s.open = make([]uint64, (len(s.price)+63)/64)
	s.search(0, 0, 0)
	r := groupResult{inc: s.best, nodes: s.nodes, done: s.nodes <= s.limit}
	if s.bestAt != nil {
		r.choice = make([]*cand, len(ts))
		for i, c := range s.bestAt {
			r.choice[s.who[i]] = c
		}
	}
	r.v = s.up(frac)
	if r.done {
		r.v = max(s.best, r.v)
	}
	return r
}

// rows sets the search's unit kinds (price and share) and one row of options per tenant, the
// dominated kinds dropped, each row by fractional price, rows by their cheapest (dearest first)
// with tenants alike next to each other; it returns Σ of the rows' cheapest fractional prices.
func (s *groupSearch) rows(ts []*tenant, lam float64) float64 {
	class := map[groupKey]int{}
	all := make([][]groupOpt, len(ts))
	for ti, tn := range ts {
		all[ti] = make([]groupOpt, 0, len(tn.feasible))
		for _, c := range tn.feasible {
			k := keyOf(tn, c)
			ci, ok := class[k]
			if !ok {
				ci = len(class)
				class[k] = ci
				s.price, s.share = append(s.price, unitPrice(c, lam)), append(s.share, c.share)
			}
			o := groupOpt{class: ci, r: c.replicas, k: c.share, price: s.price[ci], c: c}
			o.frac = float64(o.r) / float64(o.k) * o.price
			all[ti] = append(all[ti], o)
		}
	}
	if s.capped {
		capShares(all, s.share)
	}
	type row struct {
		os  []groupOpt
		who int
		sig string
	}
	var rowsOf []row
	frac := 0.0
	dead := dominated(all, s.price, s.share)
	for ti, opts := range all {
		var os []groupOpt
		for _, o := range opts {
			if !dead[o.class] {
				os = append(os, o)
			}
		}
		slices.SortStableFunc(os, func(a, b groupOpt) int { return cmpF(a.frac, b.frac) })
		var sig strings.Builder
		for _, o := range os {
			fmt.Fprintf(&sig, "%d/%d;", o.class, o.r)
		}
		rowsOf = append(rowsOf, row{os, ti, sig.String()})
		frac += os[0].frac
	}
	slices.SortStableFunc(rowsOf, func(a, b row) int {
		return cmp.Or(-cmpF(a.os[0].frac, b.os[0].frac), strings.Compare(a.sig, b.sig))
	})
	for i, r := range rowsOf {
		s.opts, s.who = append(s.opts, r.os), append(s.who, r.who)
		s.same = append(s.same, i > 0 && r.sig == rowsOf[i-1].sig)
	}
	s.grid = gridOf(s.price)
	return frac
}

// capShares lowers each unit kind's share k to U, the most replicas the group's tenants can put
// on that kind together (Σ over tenants of their most replicas there), where U < k, and each
// option's share and fractional price with it. No plan puts more than U replicas there, and for
// 0 < n ≤ U < k, ceil(n / k) = ceil(n / U) = 1: every plan's cost Σ ceil(n_c / k_c) × π_c is
// the same, so the group's minimum is too, while the fractional price r / U × π of an option
// there is above r / k × π (a kind that can never fill one unit is priced as the part of it
// the group can fill), and so are the fractional sum and the search's bounds built on it.
func capShares(all [][]groupOpt, share []int) {
	most := make([]int, len(share))
	for _, opts := range all {
		top := map[int]int{}
		for _, o := range opts {
			top[o.class] = max(top[o.class], o.r)
		}
		for c, r := range top {
			most[c] += r
		}
	}
	for c := range share {
		if most[c] > 0 && most[c] < share[c] {
			share[c] = most[c]
		}
	}
	for _, opts := range all {
		for j := range opts {
			o := &opts[j]
			if o.k != share[o.class] {
				o.k = share[o.class]
				o.frac = float64(o.r) / float64(o.k) * o.price
			}
		}
	}
}

// gridOf is the coarsest step 1/q (q ≤ 64) that every price is a whole multiple of, 0 if none.
func gridOf(prices []float64) float64 {
	for q := 1; q <= 64; q++ {
		ok := true
		for _, p := range prices {
			if x := p * float64(q); math.Abs(x-math.Round(x)) > 1e-9 {
				ok = false
				break
			}
		}
		if ok {
			return 1 / float64(q)
		}
	}
	return 0
}

// up rounds a lower bound on a plan's cost up to the grid. A value a hair above a grid point
// (float error) stays there: rounding down keeps a bound a bound.
func (s *groupSearch) up(x float64) float64 {
	if s.grid == 0 {
		return x
	}
	return math.Ceil(x/s.grid-1e-6) * s.grid
}

// search assigns tenant i onwards; cost is Σ ceil(units / share) × π so far and spare the value
// of the free places in open units (a later tenant may use them for nothing).
func (s *groupSearch) search(i int, cost, spare float64) {
	s.nodes++
	if s.nodes > s.limit {
		return
	}
	if i == len(s.opts) {
		if cost < s.best {
			s.best = cost
			s.bestAt = append(s.bestAt[:0], s.pick...)
		}
		return
	}
	if s.up(cost+max(0, s.suffix[i]-s.usable(i, spare))) >= s.best-1e-12 {
		return
	}
	first := 0
	if s.same[i] {
		first = s.at[i-1]
	}
	// Branches in order of the cost they add now (joining a unit with free places first), then
	// of their fractional price, so that good plans are found early. Each row has a buffer of
	// its own for them (a deeper row's search does not touch it), kept across the search's nodes.
	if i >= len(s.branches) {
		s.branches = append(s.branches, make([][]groupBranch, i+1-len(s.branches))...)
	}
	bs := s.branches[i][:0]
	for oi := first; oi < len(s.opts[i]); oi++ {
		o := s.opts[i][oi]
		u := s.units[o.class]
		before := math.Ceil(float64(u) / float64(o.k))
		after := math.Ceil(float64(u+o.r) / float64(o.k))
		// spare places before and after, each worth price / share
		ds := ((after*float64(o.k) - float64(u+o.r)) - (before*float64(o.k) - float64(u))) * o.price / float64(o.k)
		bs = append(bs, groupBranch{oi, (after - before) * o.price, ds})
	}
	s.branches[i] = bs
	slices.SortStableFunc(bs, func(a, b groupBranch) int { return cmpF(a.dc, b.dc) })
	for _, b := range bs {
		o := s.opts[i][b.idx]
		s.at[i] = b.idx
		u := s.units[o.class]
		s.units[o.class] = u + o.r
		s.setOpen(o.class)
		s.pick[i] = o.c
		s.search(i+1, cost+b.dc, spare+b.ds)
		s.units[o.class] = u
		s.setOpen(o.class)
		if s.nodes > s.limit {
			return
		}
	}
}

// groupSeed is a starting choice for the local search on small pools: per sharing group, the
// choices of the group bound's search at its best price (an optimum of the group's rounded cost
// where the search finished); a tenant that shares with nobody takes its cheapest candidate at
// that price. Aligned with p.tenants; nil on pools above groupSeedTenants.
func (p *planner) groupSeed() []*cand {
	if len(p.tenants) > groupSeedTenants {
		return nil
	}
	lam := p.bestLambdas(1)[0]
	seed := make([]*cand, len(p.tenants))
	comps := map[string][]int{}
	var keys []string
	for i, tn := range p.tenants {
		if len(tn.feasible) == 0 {
			continue
		}
		if tn.group == "" {
			seed[i] = cheapestAt(tn, lam)
			continue
		}
		k := tn.group + "\x00" + string(energyOf(tn.t))
		if _, ok := comps[k]; !ok {
			keys = append(keys, k)
		}
		comps[k] = append(comps[k], i)
	}
	for _, k := range keys {
		ts := make([]*tenant, len(comps[k]))
		for j, i := range comps[k] {
			ts[j] = p.tenants[i]
		}
		_, ch := groupArgMin(ts, lam)
		for j, i := range comps[k] {
			if ch != nil {
				seed[i] = ch[j]
			}
		}
	}
	return seed
}

// cheapestAt is tn's candidate with the lowest replicas / share × π at price lam.
func cheapestAt(tn *tenant, lam float64) *cand {
	var best *cand
	m := math.Inf(1)
	for _, c := range tn.feasible {
		if v := float64(c.replicas) / float64(c.share) * unitPrice(c, lam); v < m {
			best, m = c, v
		}
	}
	return best
}

// dominated marks the unit kinds of a group no optimum needs. Kind A is dominated by kind B when
// B's units cost no more (π_B ≤ π_A), hold at least as many replicas (k_B ≥ k_A), and every
// tenant with a candidate of kind A has one of kind B with no more replicas. Moving every tenant
// of A to B then costs no more: ceil((U_B + U_A') / k_B) π_B ≤ ceil(U_B / k_B) π_B +
// ceil(U_A / k_A) π_A, with U_A' ≤ U_A the replicas they take on B, since the ceiling is
// subadditive and k_B ≥ k_A, π_B ≤ π_A. So dropping A leaves the group's minimum as it is; of
// kinds that dominate each other the first is kept.
func dominated(all [][]groupOpt, price []float64, share []int) []bool {
	n := len(price)
	reps := make([]map[int]int, n) // kind → tenant → replicas
	for k := range reps {
		reps[k] = map[int]int{}
	}
	for ti, opts := range all {
		for _, o := range opts {
			if r, ok := reps[o.class][ti]; !ok || o.r < r {
				reps[o.class][ti] = o.r // the fewest, where a tenant has several of a kind
			}
		}
	}
	covers := func(b, a int) bool {
		if price[b] > price[a]+1e-12 || share[b] < share[a] {
			return false
		}
		for ti, r := range reps[a] {
			if rb, ok := reps[b][ti]; !ok || rb > r {
				return false
			}
		}
		return true
	}
	dead := make([]bool, n)
	for a := range n {
		for b := range n {
			if b != a && !dead[b] && covers(b, a) && (b < a || !covers(a, b)) {
				dead[a] = true
				break
			}
		}
	}
	return dead
}

// usable bounds what the free places of open units can save rows i onwards: the places of kind c
// are worth (free places) × π_c / k_c, and the rows that can take them pay at most room[i][c]
// there. The remaining rows cost at least Σ of their cheapest r / k × π minus this: each kind's
// increase is at least (replicas added − free places) × π_c / k_c.
func (s *groupSearch) usable(i int, spare float64) float64 {
	u := 0.0
	for w, bits := range s.open {
		for ; bits != 0; bits &= bits - 1 {
			c := w*64 + mathbits.TrailingZeros64(bits)
			u += s.freeValue(i, c)
		}
	}
	return min(u, spare)
}

// setOpen sets class c's bit in open from units[c].
func (s *groupSearch) setOpen(c int) {
	if s.units[c] > 0 {
		s.open[c/64] |= 1 << (c % 64)
	} else {
		s.open[c/64] &^= 1 << (c % 64)
	}
}

// freeValue is what class c's free places can save rows i onwards (usable's term for c).
func (s *groupSearch) freeValue(i, c int) float64 {
	n, k := s.units[c], s.share[c]
	// free is (k - n%k) % k with one division: the places left on the last unit.
	r := n % k
	free := k - r
	if r <= 0 {
		free = -r
	}
	if free <= 0 {
		return 0
	}
	return min(float64(free)*s.price[c]/float64(k), s.room[i][c])
}
