package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"

	v1 "gpupool.dev/gpupool/api/v1"
)

// boundSlack absorbs floating-point error before rounding a fractional bound up.
const boundSlack = 1e-6

// lowerBound is a proven lower bound on the pool GPUs any plan built from the candidate slices
// needs for the feasible tenants: the larger of the Lagrangian volume bound, the sharing-group
// bound, the volume bound with each board's GPUs as a limit (boardCapBound) and, when small
// enough, the LP relaxation of the pattern formulation solved with the simplex method.
//
// It does not trust the planner's replica counts: every candidate is counted at its lbReplicas,
// the fewest replicas that keep up with the tenant's load at all on that slice kind (the
// queueing model's saturation count or the TTFT floor, with idle neighbours, with the pool's
// fixed count, floors and redundancy), so that "no plan from these slice kinds uses fewer GPUs"
// holds whatever the SLO sizing says. Nor does it trust the sizing's rejections: a tenant's
// candidates are its feasible ones and those rejected only under busy neighbours (boundExtra,
// boundAdmits), since a plan may give a replica idle ones.
func (p *planner) lowerBound() int {
	lb := 0
	p.atBoundCounts(func() {
		lb = p.volumeBound()
		if p.stopped() { // Build discards the plan
			return
		}
		lb = max(lb, p.groupBound())
		if p.stopped() {
			return
		}
		lb = max(lb, int(math.Ceil(p.boardCapBound()-boundSlack)))
		if v, ok := p.lpBound(); ok && v > lb {
			lb = v
		}
	})
	return lb
}

// atBoundCounts runs f with the candidates as the lower bound counts them: each tenant's
// feasible ones and those rejected only under busy neighbours (boundExtra), every one at its
// lbReplicas where that is below its replicas. It restores them after.
func (p *planner) atBoundCounts(f func()) {
	type saved struct {
		c *cand
		r int
	}
	var restore []saved
	feasible := make([][]*cand, len(p.tenants))
	for i, tn := range p.tenants {
		feasible[i] = tn.feasible
		if len(tn.boundExtra) > 0 { // kinds rejected with busy neighbours, which a plan may avoid
			tn.feasible = append(slices.Clip(tn.feasible), tn.boundExtra...)
		}
		if tn.t.Replicas != nil {
			tn.feasible = fixedCarrying(tn, tn.feasible)
		}
		for _, c := range tn.feasible {
			if c.lbReplicas > 0 && (c.lbReplicas < c.replicas || c.replicas == 0) {
				restore = append(restore, saved{c, c.replicas})
				c.replicas = c.lbReplicas
				p.replicasSet.Add(1)
			}
		}
	}
	defer func() {
		for _, s := range restore {
			s.c.replicas = s.r
		}
		p.replicasSet.Add(1)
		for i, tn := range p.tenants {
			tn.feasible = feasible[i]
		}
	}()
	f()
}

// fixedCarrying is the candidates of a tenant with a fixed replica count on which that count
// can meet its SLO at all (carries), when the plan's own choice for it is one of them; all of
// cands otherwise. The bound counts a fixed tenant at its count whatever its load (poolFloor),
// so without this its cheapest column could be a slice kind where the count cannot even keep up
// with the load: no plan meeting the tenant's SLO uses such a kind, since there the count is
// below the kind's loadFloor, the fewest replicas any schedule needs with idle neighbours.
// Where the plan's choice is not such a kind, the planner found no room for one or none exists
// ("planned as fixed, not sized"): the plan itself misses the tenant's SLO, and every kind stays
// counted so that the bound still holds for plans like it. Either way the plan's own choice is
// among the columns counted, as before.
func fixedCarrying(tn *tenant, cands []*cand) []*cand {
	if tn.choice == nil || !carries(tn, tn.choice) {
		return cands
	}
	var ok []*cand
	for _, c := range cands {
		if carries(tn, c) {
			ok = append(ok, c)
		}
	}
	return ok
}

// carries reports whether c's count as the bound takes it (its lbReplicas where lower) is at
// least its loadFloor (as fixedFloors recorded it; a candidate it did not see counts as
// carrying, which only keeps a column).
func carries(tn *tenant, c *cand) bool {
	n := c.replicas
	if c.lbReplicas > 0 && (c.lbReplicas < n || n == 0) {
		n = c.lbReplicas
	}
	return tn.loadFloors[c] <= n
}

// fixedFloors records loadFloor for every candidate of a fixed-count tenant that the lower
// bound or the plan may take: its evaluated ones, the rejected ones the bound counts and the
// fixed count's fallbacks. It runs in evaluate, since the queueing models' memos it fills are
// also read by the predictions that run beside the bound.
func fixedFloors(tn *tenant) {
	if tn.t.Replicas == nil {
		return
	}
	tn.loadFloors = map[*cand]int{}
	for _, cs := range [][]*cand{tn.cands, tn.feasible, tn.boundExtra, tn.fixedFallback} {
		for _, c := range cs {
			if _, ok := tn.loadFloors[c]; !ok {
				tn.loadFloors[c] = loadFloor(tn, c)
			}
		}
	}
}

// loadFloor is the fewest replicas on c's slice kind that keep up with tn's load for any
// schedule: the saturation count at the long-run mean rate and the TTFT floor (lbfloor.go), both
// with idle neighbours. 0 where the candidate has no queueing model (a measured profile) or the
// rate is not a long-run mean (diurnal traffic states its peak hour's).
func loadFloor(tn *tenant, c *cand) int {
	ev := c.ev
	t := tn.t.Traffic
	if ev == nil || ev.q == nil || ev.err != nil || t.Pattern == v1.PatternDiurnal || !(t.RPS > 0) || math.IsInf(t.RPS, 0) {
		return 0
	}
	return max(ev.q.bestCase().saturation(t.RPS), ev.q.ttftFloor(floorRate(t), tn.slo))
}

// volumeBound: with prices π(P) = λ·memory share + (1−λ)·compute share for a MIG instance of
// profile P and 1 for a whole GPU, every GPU's contents cost at most 1 (a legal layout uses at
// most all memory slices and all compute slices), so Σ over tenants of its cheapest candidate's
// price (replicas / share × π, π = tp for a tensor-parallel group) is a lower bound for every λ in [0, 1] (weak LP duality). The
// bound takes the best λ on a grid of 21 points.
func (p *planner) volumeBound() int {
	var total [21]float64 // by grid point; each tenant's candidates are read once for all of them
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		for i := range total {
			lam := float64(i) / 20
			m := math.Inf(1)
			for _, c := range tn.feasible {
				price := float64(max(c.tp, 1)) // a whole GPU, or a tensor-parallel group of tp
				if c.profile != nil {
					price = lam*c.memFrac + (1-lam)*c.compFrac
				}
				m = min(m, float64(c.replicas)/float64(c.share)*price)
			}
			total[i] += m
		}
	}
	best := 0.0
	for _, t := range total {
		best = max(best, t)
	}
	return int(math.Ceil(best - boundSlack))
}

// lpBound solves the LP relaxation
//
//	minimise  Σ_p x_p + Σ_{t, c whole-GPU} (r_tc / k_c) y_tc
//	s.t.      Σ_c y_tc = 1                                          for every feasible tenant t
//	          Σ_p a_pP x_p − Σ_{t, c MIG P} (r_tc / k_c) y_tc ≥ 0   for every board and profile P
//	          x, y ≥ 0
//
// where x_p counts GPUs laid out as maximal pattern p and y_tc is the share of tenant t served
// by candidate c with r_tc replicas, k_c per unit. Every plan is an integer point of it, so its
// optimum, rounded up, is a lower bound. It reports false when the LP is too large or the solver
// fails (degenerate input), and the volume bound stands alone.
func (p *planner) lpBound() (bound int, ok bool) {
	cols, m, rhs := p.lpColumns()
	nT := len(rhs)
	if nT == 0 || len(cols) > p.o.LPVariables || len(cols) < m {
		return 0, false
	}
	A, c := lpMatrix(cols, m)
	b := make([]float64, m)
	copy(b, rhs)
	if basis := startBasis(cols, m, nT); basis != nil {
		if v, ok := solveBound(c, A, b, basis); ok {
			return v, true
		}
	}
	return solveBound(c, A, b, nil)
}

// lpMatrix is the constraint matrix of cols (rows rows) and their costs.
func lpMatrix(cols []lpCol, rows int) (*mat.Dense, []float64) {
	A := mat.NewDense(rows, len(cols), nil)
	c := make([]float64, len(cols))
	for j, cl := range cols {
		c[j] = cl.cost
		for i, v := range cl.entries {
			A.Set(i, j, v)
		}
	}
	return A, c
}

// startBasis is a feasible basis to start the simplex method from, which spares the solver its
// search for one (most of its time on large pools): per class its cheapest whole-GPU choice
// (taking the class's size), and every coverage row's surplus (0). nil when a class has no
// whole-GPU choice; the solver then finds a basis itself.
func startBasis(cols []lpCol, rows, classes int) []int {
	basis := make([]int, rows)
	for i := range basis {
		basis[i] = -1
	}
	for j, cl := range cols {
		if len(cl.entries) != 1 {
			continue
		}
		for r, v := range cl.entries {
			switch {
			case r < classes && v == 1 && (basis[r] < 0 || cl.cost < cols[basis[r]].cost):
				basis[r] = j
			case r >= classes && v == -1 && cl.cost == 0:
				basis[r] = j
			}
		}
	}
	if slices.Contains(basis, -1) {
		return nil
	}
	return basis
}

// lpCol is one column of the LP: its non-zero rows and its cost.
type lpCol struct {
	entries map[int]float64
	cost    float64
}

// lpChoice is one column of a tenant class: a board and MIG profile ("" for a whole GPU) and
// the GPUs or instances one tenant takes there, replicas / share.
type lpChoice struct {
	row  lpRow
	size float64
}

type lpRow struct{ board, profile string }

// lpClasses reduces the tenants to the columns the LP needs. Of a tenant's candidates on one
// board and profile (or on whole GPUs) only the one taking the least, replicas / share, can be
// in an optimum (the others use the same row more), and tenants with the same reduced columns
// form one class whose choice row sums to the class's size: a convex combination of the
// members' choices is a point of the class's polytope and back. Both leave the optimum as it is.
func (p *planner) lpClasses() (classes [][]lpChoice, count []float64) {
	index := map[string]int{}
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		best := map[lpRow]float64{}
		var rows []lpRow
		for _, c := range tn.feasible {
			r := lpRow{c.board.Name, profName(c.profile)}
			size := float64(c.replicas) / float64(c.share) * float64(max(c.tp, 1)) // GPUs, or instances
			if v, seen := best[r]; !seen || size < v {
				if !seen {
					rows = append(rows, r)
				}
				best[r] = size
			}
		}
		slices.SortFunc(rows, func(a, b lpRow) int { return cmp.Or(cmp.Compare(a.board, b.board), cmp.Compare(a.profile, b.profile)) })
		cl := make([]lpChoice, len(rows))
		var sig strings.Builder
		for i, r := range rows {
			cl[i] = lpChoice{r, best[r]}
			fmt.Fprintf(&sig, "%s/%s=%.12g;", r.board, r.profile, best[r])
		}
		if i, ok := index[sig.String()]; ok {
			count[i]++
			continue
		}
		index[sig.String()] = len(classes)
		classes, count = append(classes, cl), append(count, 1)
	}
	return classes, count
}

// lpColumns builds the LP's columns — patterns, tenant-class choices, then one surplus per
// coverage row — and returns them with the number of rows and the right-hand sides of the
// class rows (rows 0 … len(rhs)−1, the class sizes; coverage rows follow, one per board and MIG
// profile some candidate uses, with right-hand side 0).
func (p *planner) lpColumns() (cols []lpCol, rows int, rhs []float64) {
	classes, count := p.lpClasses()
	nT := len(classes)
	cover := map[lpRow]int{}
	for _, cl := range classes {
		for _, ch := range cl {
			if _, seen := cover[ch.row]; ch.row.profile != "" && !seen {
				cover[ch.row] = len(cover)
			}
		}
	}
	pc := newPatternCache()
	for _, b := range p.boards {
		ps, err := pc.get(b)
		if !b.MIGCapable() || err != nil {
			continue
		}
		for _, a := range ps.a {
			e := map[int]float64{}
			for i, n := range a {
				if r, in := cover[lpRow{b.Name, ps.profiles[i].Name}]; in && n > 0 {
					e[nT+r] = float64(n)
				}
			}
			if len(e) > 0 {
				cols = append(cols, lpCol{entries: e, cost: 1})
			}
		}
	}
	for ti, cl := range classes {
		for _, ch := range cl {
			col := lpCol{entries: map[int]float64{ti: 1}, cost: ch.size}
			if ch.row.profile != "" {
				col.entries[nT+cover[ch.row]] = -ch.size
				col.cost = 0
			}
			cols = append(cols, col)
		}
	}
	for r := range len(cover) {
		cols = append(cols, lpCol{entries: map[int]float64{nT + r: -1}})
	}
	return cols, nT + len(cover), count
}

// solveBound runs the simplex method (from basis, when not nil) and rounds the optimum up; a
// solver panic or error (the library panics on malformed dimensions or a basis that is not
// feasible, and may fail on degenerate problems) yields false.
func solveBound(c []float64, A *mat.Dense, b []float64, basis []int) (bound int, ok bool) {
	defer func() {
		if recover() != nil {
			bound, ok = 0, false
		}
	}()
	opt, _, err := lp.Simplex(c, A, b, 1e-10, basis)
	if err != nil || math.IsNaN(opt) {
		return 0, false
	}
	return int(math.Ceil(opt - boundSlack)), true
}
