package plan

import (
	"cmp"
	"math"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
)

// boardCapIters is how many subgradient steps boardCapBound takes per price λ.
const boardCapIters = 200

// boardCapBound is the volume bound with the fleet's GPUs of each board as a limit. Every plan
// uses at most N_b GPUs of board b (the fleet holds no more), and the contents of each GPU of
// board b cost at most 1 at the volume bound's prices (π = 1 for a whole GPU, tp for a
// tensor-parallel group, λ·memory share + (1−λ)·compute share for a MIG instance), so the GPUs
// G_b a plan uses on board b are at least V_b, the price of what it places there, and for every
// μ ≥ 0 (one multiplier per board)
//
//	Σ_b G_b ≥ Σ_b G_b + Σ_b μ_b (G_b − N_b) ≥ Σ_b (1 + μ_b) V_b − Σ_b μ_b N_b
//	        ≥ Σ_t min_c (1 + μ_b(c)) · replicas_c / share_c · π_c − Σ_b μ_b N_b,
//
// the last step as in the volume bound (each tenant counted at its cheapest candidate, now
// priced by its board's multiplier). At μ = 0 it is the volume bound. Where the tenants'
// cheapest candidates lie on one board, as on a fleet of several boards whose newest board is
// the cheapest for most tenants, they cannot all go there, and a μ > 0 on that board counts the
// dearer boards some of them must take. The multipliers are found by projected subgradient
// ascent (any μ ≥ 0 gives a valid bound; the search only picks a good one), at each price λ of
// the volume bound's 21-point grid. Returns 0 on a fleet of one board, where it is the volume
// bound.
//
// Where the fleet is too small to serve every tenant no plan serves them all, and the limits
// would lift the bound past any plan's GPUs; so a tenant the packing left short of GPUs
// (ReasonNoCapacity) is left out of this term, which then bounds every plan that serves the
// tenants this plan serves in full (fewer tenants only lower it).
func (p *planner) boardCapBound() float64 {
	bidx := map[string]int{}
	var capN []float64
	for _, g := range p.fleet {
		i, ok := bidx[g.board.Name]
		if !ok {
			i = len(capN)
			bidx[g.board.Name] = i
			capN = append(capN, 0)
		}
		capN[i]++
	}
	nb := len(capN)
	if nb < 2 {
		return 0
	}
	var ts []*tenant
	for _, tn := range p.tenants {
		if tn.choice != nil && !shortOfGPUs(tn) {
			ts = append(ts, tn)
		}
	}
	if len(ts) == 0 {
		return 0
	}
	m := make([]float64, len(ts)*nb) // tenant × board: its cheapest priced volume there
	mu := make([]float64, nb)
	use := make([]float64, nb)
	// The candidates as the prices read them, read from the candidates once for all 21 prices.
	cs, from := capCands(ts, bidx)
	best := 0.0
	for gi := 0; gi <= 20; gi++ {
		lam := float64(gi) / 20
		for i := range ts {
			row := m[i*nb : (i+1)*nb]
			for b := range row {
				row[b] = math.Inf(1)
			}
			for _, c := range cs[from[i]:from[i+1]] {
				row[c.b] = min(row[c.b], c.vol*c.price(lam))
			}
		}
		clear(mu)
		for k := range boardCapIters {
			clear(use)
			v := 0.0
			for b := range nb {
				v -= mu[b] * capN[b]
			}
			for i := range ts {
				row := m[i*nb : (i+1)*nb]
				bb, bv := -1, math.Inf(1)
				for b, x := range row {
					if y := (1 + mu[b]) * x; y < bv {
						bb, bv = b, y
					}
				}
				if bb < 0 {
					continue // no candidate (the volume bound would be infinite)
				}
				v += bv
				use[bb] += row[bb]
			}
			best = max(best, v)
			// Step along the subgradient use − N, projected on μ ≥ 0.
			norm := 0.0
			for b := range nb {
				g := use[b] - capN[b]
				if mu[b] == 0 && g < 0 {
					g = 0
				}
				use[b] = g
				norm += g * g
			}
			if norm == 0 {
				break // μ is optimal at this λ
			}
			step := 0.5 / math.Sqrt(float64(k+1)) / math.Sqrt(norm)
			for b := range nb {
				mu[b] = max(0, mu[b]+step*use[b])
			}
		}
	}
	return best
}

// capCand is one candidate as boardCapBound prices it: its board's index, replicas / share,
// and what unitPrice reads.
type capCand struct {
	b                 int
	vol               float64 // replicas / share
	whole             float64 // unitPrice of a candidate without a MIG profile; 0 for a MIG one
	memFrac, compFrac float64
}

// price is unitPrice(c, lam), computed the same way.
func (c *capCand) price(lam float64) float64 {
	if c.whole > 0 {
		return c.whole
	}
	return lam*c.memFrac + (1-lam)*c.compFrac
}

// capCands lists the feasible candidates of ts as boardCapBound reads them, tenant i's at
// cs[from[i]:from[i+1]], in the order of its feasible candidates.
func capCands(ts []*tenant, bidx map[string]int) (cs []capCand, from []int) {
	from = make([]int, 1, len(ts)+1)
	n := 0
	for _, tn := range ts {
		n += len(tn.feasible)
	}
	cs = make([]capCand, 0, n)
	for _, tn := range ts {
		for _, c := range tn.feasible {
			e := capCand{b: bidx[c.board.Name], vol: float64(c.replicas) / float64(c.share)}
			if c.profile == nil {
				e.whole = float64(max(c.tp, 1))
			} else {
				e.memFrac, e.compFrac = c.memFrac, c.compFrac
			}
			cs = append(cs, e)
		}
		from = append(from, len(cs))
	}
	return cs, from
}

// shortOfGPUs says whether the packing left tn short of GPUs (some or all of its replicas).
func shortOfGPUs(tn *tenant) bool {
	for _, r := range tn.infeas {
		if r.Code == v1.ReasonNoCapacity {
			return true
		}
	}
	return false
}

// candGPUs is c's GPU-equivalents: its replicas over its share, each a whole unit's GPUs or its
// MIG instance's share of one.
func candGPUs(c *cand) float64 {
	u := c.unitFrac
	if c.whole() {
		u = unitGPUs(c)
	}
	return float64(c.replicas) / float64(max(c.share, 1)) * u
}

// greedyBoards is a board for every tenant whose count is not fixed: each starts on its
// cheapest allowed candidate's board, and every board whose tenants' GPU-equivalents exceed frac
// of its pool GPUs gives tenants up, the tenant whose cheapest candidate on another board with
// room adds least GPU-equivalents per GPU-equivalent freed first, until it is within frac.
// Nil where no tenant left its board.
func (p *planner) greedyBoards(frac, room float64) []string {
	pool := p.poolGPUs()
	load := map[string]float64{}
	first := make([]*cand, len(p.tenants))
	for i, tn := range p.tenants {
		if len(tn.feasible) == 0 {
			continue
		}
		first[i] = p.firstAllowed(tn)
		load[first[i].board.Name] += candGPUs(first[i])
	}
	out := make([]string, len(p.tenants))
	for i, c := range first {
		if c != nil && p.tenants[i].t.Replicas == nil {
			out[i] = c.board.Name
		}
	}
	moved := false
	for _, b := range p.boards {
		limit := frac * float64(pool[b.Name])
		if load[b.Name] <= limit {
			continue
		}
		type leaver struct {
			i     int
			ratio float64
		}
		var ls []leaver
		for i, c := range first {
			if c == nil || c.board != b || out[i] == "" {
				continue
			}
			here := candGPUs(c)
			best := math.Inf(1)
			for _, o := range p.tenants[i].feasible {
				if o.board != b && !p.forbidden(p.tenants[i], o) {
					best = min(best, candGPUs(o))
				}
			}
			if !math.IsInf(best, 1) && here > 0 {
				ls = append(ls, leaver{i, (best - here) / here})
			}
		}
		slices.SortStableFunc(ls, func(x, y leaver) int { return cmp.Compare(x.ratio, y.ratio) })
		for _, l := range ls {
			if load[b.Name] <= limit {
				break
			}
			tn := p.tenants[l.i]
			var to *cand
			for _, o := range tn.feasible { // cheapest first
				if o.board != b && !p.forbidden(tn, o) && load[o.board.Name]+candGPUs(o) <= room*float64(pool[o.board.Name]) {
					if to == nil || candGPUs(o) < candGPUs(to) {
						to = o
					}
				}
			}
			if to == nil {
				continue
			}
			load[b.Name] -= candGPUs(first[l.i])
			load[to.board.Name] += candGPUs(to)
			out[l.i], moved = to.board.Name, true
		}
	}
	if !moved {
		return nil
	}
	return out
}

// boardFills are the shares of a board's pool GPUs that fillBoards tries in turn, until one's
// plan is kept: the share a board's cheapest tenants fill before the rest leave (fill), and the
// share of another board that those leaving may take (room).
var boardFills = []struct{ fill, room float64 }{{0.9, 0.9}, {0.9, 0.675}}

// maxFillWork is the tenant-packings (packScored) after which fillBoards starts no fill plan: the
// genscale.py 1,000-tenant pools have packed 28,000 and 30,000 when it starts, and their first
// fill plan about as many again; from about 2,100 tenants on, none starts.
const maxFillWork = 2 * maxAltWork

// fillBoards plans again, when best's choice held a board to a limit (capBoards), with each
// tenant whose count is not fixed kept to the board greedyBoards gives it, once for each share
// of boardFills until a plan is kept, and returns the best plan: a fill plan replaces best only where its packing
// leaves no tenant short of GPUs, uses fewer pool GPUs and scores better (plans are scored before
// the rescue, and one that left tenants short there may serve fewer after it). Where none is
// kept, refused is the first fill plan that was refused although it is within reach of best
// (withinReach) and its packings left the work within maxFillWork, for optimise to weigh after
// the rescue (weighFill); nil otherwise. The
// limited choice moves tenants off a full board one at a time, each to the move that lowers its
// objective most, and the retries after it forbid the kinds a node rule kept off their board,
// which sends tenants to dearer boards; kept to one board each, a tenant's kinds are forbidden
// within that board only. Each plan's retries run afresh (no kinds forbidden, no board counted
// in nodes, no limits). When such a plan is kept, the tenants' feasible candidates stay those
// of their board until optimise's choice is final, and full is every tenant's feasible
// candidates as they were, for optimise to give back; otherwise everything is as it was and
// full is nil.
func (p *planner) fillBoards(best *packed) (full [][]*cand, out *packed, refused *fillPlan, err error) {
	p.filled = nil
	if best.caps == nil {
		return nil, best, nil, nil
	}
	kept := p.fillStateOf(nil, 0)
	work := p.packedWork
	full = make([][]*cand, len(p.tenants))
	for i, tn := range p.tenants {
		full[i] = tn.feasible
	}
	var last []string
	for _, try := range boardFills {
		if p.packedWork > maxFillWork && !p.fullEffort {
			break // a pool of thousands of tenants (ADR 0103's bound on re-plans)
		}
		p.forbid, p.nodeRule, p.nodeMPS = nil, nil, nil
		for i, tn := range p.tenants {
			tn.feasible = full[i]
		}
		boards := p.greedyBoards(try.fill, try.room)
		if boards == nil || slices.Equal(boards, last) {
			continue
		}
		last = boards
		for i, tn := range p.tenants {
			if boards[i] != "" {
				tn.feasible = onBoard(full[i], boards[i])
			}
		}
		p.caps, p.packFirst = nil, nil
		alt, err := p.optimiseRetries()
		if err != nil {
			return nil, nil, nil, err
		}
		if !anyShortOfGPUs(alt) && poolUsed(alt) < poolUsed(best) && slices.Compare(alt.score[:], best.score[:]) < 0 {
			best = alt
			kept = p.fillStateOf(boards, try.fill)
			break
		}
		if refused == nil && (p.packedWork <= maxFillWork || p.fullEffort) && withinReach(alt, best) {
			refused = &fillPlan{fillState: p.fillStateOf(boards, try.fill), plan: alt, work: p.packedWork, full: full}
		}
	}
	kept.apply(p, full)
	if kept.boards == nil {
		p.packedWork = work // the later re-plans' bounds as though no fill plan ran
		p.filled = nil
		return nil, best, refused, nil
	}
	return full, best, nil, nil
}

// fillState is what a fill plan was planned under: the forbidden kinds and counted boards of its
// retries, its board limits and first-packed groups, each tenant's board ("" for one left free;
// nil when no fill plan) and the share of boardFills.
type fillState struct {
	forbid, nodeRule map[*tenant]map[forbidKey]string
	nodeMPS          map[string]int
	caps             map[string]float64
	packFirst        map[groupKey]bool
	boards           []string
	fill             float64
}

// fillStateOf is the planner's state now, with boards and fill.
func (p *planner) fillStateOf(boards []string, fill float64) fillState {
	return fillState{p.forbid, p.nodeRule, p.nodeMPS, p.caps, p.packFirst, boards, fill}
}

// apply puts st back on p, with each tenant's feasible candidates full's, kept to its board
// where st gives it one (p.filled, p.fillShare).
func (st fillState) apply(p *planner, full [][]*cand) {
	p.forbid, p.nodeRule, p.nodeMPS, p.caps, p.packFirst = st.forbid, st.nodeRule, st.nodeMPS, st.caps, st.packFirst
	p.filled, p.fillShare = map[*tenant]string{}, st.fill
	for i, tn := range p.tenants {
		tn.feasible = full[i]
		if st.boards != nil && st.boards[i] != "" {
			tn.feasible = onBoard(full[i], st.boards[i])
			p.filled[tn] = st.boards[i]
		}
	}
}

// onBoard is a copy of cs with only the candidates on board, a tenant kept to the board a
// greedy fill gave it.
func onBoard(cs []*cand, board string) []*cand {
	return slices.DeleteFunc(slices.Clone(cs), func(c *cand) bool { return c.board.Name != board })
}

// anyShortOfGPUs reports whether s's packing left a tenant short of GPUs.
func anyShortOfGPUs(s *packed) bool {
	for _, rs := range s.infeas {
		for _, r := range rs {
			if r.Code == v1.ReasonNoCapacity {
				return true
			}
		}
	}
	return false
}

// poolUsed is the pool GPUs s's packing used.
func poolUsed(s *packed) int {
	n := 0
	for _, u := range s.used {
		n += u
	}
	return n
}

// fillPlan is a fill plan fillBoards refused before the rescue, with what it was planned under
// (fillState), the packings made up to it, and every tenant's feasible candidates before the
// fill.
type fillPlan struct {
	fillState
	plan *packed
	work int
	full [][]*cand
}

// withinReach says whether fill plan alt, refused before the rescue, may still serve what best
// serves on fewer pool GPUs after it: its pool GPUs and the GPU-equivalents its packing left
// without a GPU are fewer than best's. The rescue seats short units on the GPUs a plan left idle,
// so that sum is about a plan's GPUs after it where it serves them all.
func withinReach(alt, best *packed) bool {
	return float64(poolUsed(alt))+unitsVolume(alt.unplaced) < float64(poolUsed(best))+unitsVolume(best.unplaced)-1e-9
}

// unitsVolume is the GPU-equivalents of us (unitVolume).
func unitsVolume(us []*unit) float64 {
	v := 0.0
	for _, u := range us {
		v += unitVolume(u)
	}
	return v
}

// settled is the planner's state after optimise's steps that follow the choice of plan (settle):
// what a plan's rescue and the steps after it made of it, so that optimise can put it back.
type settled struct {
	forbid, nodeRule, withheld map[*tenant]map[forbidKey]string
	nodeMPS                    map[string]int
	caps, capLoad              map[string]float64
	packFirst                  map[groupKey]bool
	filled                     map[*tenant]string
	fillShare                  float64
	keep                       map[string]migUse
	nodeUse                    map[string]map[string]migUse
	blocked                    map[*unit]blockage
	gpus                       []*gpuPlan
	unplaced                   []*unit
	released                   map[*tenant]string
	fixedSteps, stepUpMissed   map[*tenant]fixedStep
	moved, unmoved             map[*tenant]string
	unmovedOwn, unmovedServed  map[*tenant]string
	unspreadRoom               map[string]string
	packedWork                 int
	choice                     []*cand
	infeas                     [][]v1.Reason
	feasible                   [][]*cand
	// served says which tenants are served in full, used the pool GPUs that hold replicas, and
	// part each tenant's placed replicas over its chosen count (0 without a choice).
	served []bool
	used   int
	part   []float64
}

// saveSettled records the planner's state for restore.
func (p *planner) saveSettled() *settled {
	s := &settled{forbid: p.forbid, nodeRule: p.nodeRule, withheld: p.withheld, nodeMPS: p.nodeMPS, caps: p.caps, capLoad: p.capLoad,
		packFirst: p.packFirst, filled: p.filled, fillShare: p.fillShare, keep: p.keep, nodeUse: p.nodeUse, blocked: p.blocked,
		gpus: p.gpus, unplaced: p.unplaced, released: p.released, fixedSteps: p.fixedSteps, stepUpMissed: p.stepUpMissed,
		moved: p.moved, unmoved: p.unmoved, unmovedOwn: p.unmovedOwn, unmovedServed: p.unmovedServed, unspreadRoom: p.unspreadRoom,
		packedWork: p.packedWork}
	for _, tn := range p.tenants {
		s.choice, s.infeas, s.feasible = append(s.choice, tn.choice), append(s.infeas, slices.Clone(tn.infeas)), append(s.feasible, tn.feasible)
		s.served = append(s.served, servedInFull(tn))
	}
	placed := map[*tenant]int{}
	seen := map[*unit]bool{}
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		if g.busy() {
			s.used++
		}
		for u := range g.eachUnit {
			if !seen[u] { // a tensor-parallel unit is on each of its GPUs
				seen[u] = true
				for _, r := range u.reps {
					placed[r.tn]++
				}
			}
		}
	}
	for _, tn := range p.tenants {
		part := 0.0
		if tn.choice != nil && tn.choice.replicas > 0 {
			part = float64(placed[tn]) / float64(tn.choice.replicas)
		}
		s.part = append(s.part, part)
	}
	return s
}

// restore puts s back on p.
func (s *settled) restore(p *planner) {
	p.forbid, p.nodeRule, p.withheld, p.nodeMPS, p.caps, p.capLoad = s.forbid, s.nodeRule, s.withheld, s.nodeMPS, s.caps, s.capLoad
	p.packFirst, p.filled, p.fillShare, p.keep, p.nodeUse, p.blocked = s.packFirst, s.filled, s.fillShare, s.keep, s.nodeUse, s.blocked
	p.gpus, p.unplaced, p.released, p.fixedSteps, p.stepUpMissed = s.gpus, s.unplaced, s.released, s.fixedSteps, s.stepUpMissed
	p.moved, p.unmoved, p.unmovedOwn, p.unmovedServed, p.unspreadRoom = s.moved, s.unmoved, s.unmovedOwn, s.unmovedServed, s.unspreadRoom
	p.packedWork = s.packedWork
	for i, tn := range p.tenants {
		tn.choice, tn.infeas, tn.feasible = s.choice[i], s.infeas[i], s.feasible[i]
	}
}

// betterThan reports whether s serves in full every tenant plain serves in full, and more
// tenants, or as many on fewer pool GPUs with each tenant short in both holding no smaller part
// of its chosen replicas: tenants served first, as the plans' scores rank them, and no short
// tenant's partial service traded for GPUs (on the review's rnd-304 a fill plan on 15 GPUs
// against 23 left its short tenant 2 of the 16 replicas the plain plan placed, and in
// simulation 20 % of its requests within the SLO against 93 %).
func (s *settled) betterThan(plain *settled) bool {
	more, kept := 0, true
	for i, ok := range plain.served {
		switch {
		case ok && !s.served[i]:
			return false
		case !ok && s.served[i]:
			more++
		case !ok && s.part[i] < plain.part[i]-1e-9:
			kept = false
		}
	}
	return more > 0 || s.used < plain.used && kept
}

// weighFill settles (settle) both best, the plan fillBoards kept, and fill, the fill plan it
// refused before the rescue, and keeps the fill plan's outcome only where it serves in full every
// tenant best's serves, and more, or as many on fewer pool GPUs (betterThan); otherwise the
// planner is as best's settle left it.
// The fill plan settles as fillBoards keeps one: each tenant kept to its board until the choice
// is final, and the rescue and the steps after it free to take any board again.
func (p *planner) weighFill(best *packed, fill *fillPlan) error {
	start := p.saveSettled()
	if err := p.settle(nil, best); err != nil {
		return err
	}
	plain := p.saveSettled()
	start.restore(p)
	fill.apply(p, fill.full)
	p.packedWork = fill.work
	full := slices.Clone(fill.full)
	if err := p.settle(full, fill.plan); err != nil {
		return err
	}
	if !p.saveSettled().betterThan(plain) {
		plain.restore(p)
	}
	return nil
}
