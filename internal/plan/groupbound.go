package plan

import (
	"math"
	"slices"
)

// Limits of the sharing-group bound: it runs on pools of at most groupBoundTenants tenants, on
// the groupBoundLambdas best prices of the volume bound, and gives up on a sharing group (using
// the fractional sum for it) after groupBoundNodes search nodes.
const (
	groupBoundTenants = 400
	groupBoundLambdas = 4
	groupBoundNodes   = 40000
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
	for _, lam := range p.bestLambdas(groupBoundLambdas) {
		total := 0.0
		for _, tn := range alone {
			total += minPrice(tn, lam)
		}
		for _, k := range keys {
			total += groupMin(comps[k], lam)
		}
		best = max(best, total)
	}
	return int(math.Ceil(best - boundSlack))
}

func unitPrice(c *cand, lam float64) float64 {
	if c.profile == nil {
		return 1
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
}

// groupSearch is the branch and bound of one sharing group at one price.
type groupSearch struct {
	opts   [][]groupOpt // per tenant, by fractional price
	suffix []float64    // Σ of the remaining tenants' cheapest fractional prices
	units  []int        // replicas per class so far
	price  []float64    // per class
	share  []int
	best   float64
	nodes  int
}

// groupMin is the least Σ ceil(replicas / share) × π over the group's choices, or the
// fractional sum when the search runs out of nodes (still a lower bound).
func groupMin(ts []*tenant, lam float64) float64 {
	s := &groupSearch{best: math.Inf(1)}
	class := map[groupKey]int{}
	frac := 0.0
	for _, tn := range ts {
		var os []groupOpt
		for _, c := range tn.feasible {
			k := keyOf(tn, c)
			ci, ok := class[k]
			if !ok {
				ci = len(class)
				class[k] = ci
				s.price, s.share = append(s.price, unitPrice(c, lam)), append(s.share, c.share)
			}
			o := groupOpt{class: ci, r: c.replicas, k: c.share, price: s.price[ci]}
			o.frac = float64(o.r) / float64(o.k) * o.price
			os = append(os, o)
		}
		slices.SortStableFunc(os, func(a, b groupOpt) int { return cmpF(a.frac, b.frac) })
		s.opts = append(s.opts, os)
		frac += os[0].frac
	}
	slices.SortStableFunc(s.opts, func(a, b []groupOpt) int { return -cmpF(a[0].frac, b[0].frac) })
	s.suffix = make([]float64, len(s.opts)+1)
	for i := len(s.opts) - 1; i >= 0; i-- {
		s.suffix[i] = s.suffix[i+1] + s.opts[i][0].frac
	}
	s.units = make([]int, len(class))
	s.search(0, 0, 0)
	if s.nodes > groupBoundNodes {
		return frac
	}
	return max(s.best, frac)
}

// search assigns tenant i onwards; cost is Σ ceil(units / share) × π so far and spare the value
// of the free places in open units (a later tenant may use them for nothing).
func (s *groupSearch) search(i int, cost, spare float64) {
	s.nodes++
	if s.nodes > groupBoundNodes {
		return
	}
	if i == len(s.opts) {
		s.best = min(s.best, cost)
		return
	}
	if cost+max(0, s.suffix[i]-spare) >= s.best-1e-12 {
		return
	}
	for _, o := range s.opts[i] {
		u := s.units[o.class]
		before := math.Ceil(float64(u) / float64(o.k))
		after := math.Ceil(float64(u+o.r) / float64(o.k))
		dc := (after - before) * o.price
		// spare places before and after, each worth price / share
		ds := ((after*float64(o.k) - float64(u+o.r)) - (before*float64(o.k) - float64(u))) * o.price / float64(o.k)
		s.units[o.class] = u + o.r
		s.search(i+1, cost+dc, spare+ds)
		s.units[o.class] = u
		if s.nodes > groupBoundNodes {
			return
		}
	}
}
