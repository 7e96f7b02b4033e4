package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// A partial re-pack takes the re-packed plan's layout on some GPUs and keeps the plan in force on
// the others. It cannot split what hangs together: a tenant whose replicas move takes every GPU
// it runs on before and after with it, and so on through the tenants of those GPUs. Each such
// component is taken whole or not at all; it costs the replica moves of its tenants and saves
// the GPUs it frees. Components with a tenant the plan in force does not serve (a new tenant, one
// whose load grew) must be taken; the others are chosen to save the most GPUs within the budget
// (a 0/1 knapsack over moves).

// repackPart is one component: its GPUs (by "node/index"), tenants, moves and GPUs saved.
type repackPart struct {
	gpus    []string
	tenants []string
	moves   int
	saved   int
	forced  bool
}

// partialRepack is the best partial re-pack within limit moves, the moves it makes and how many
// components it takes; an error when the components that must be taken already move more, or
// when the mix is not a valid plan.
func (p *planner) partialRepack(next *v1.Plan, limit int) (*v1.Plan, int, error) {
	gpus, uses := p.inForce()
	cur := &v1.Plan{APIVersion: next.APIVersion, Kind: next.Kind, Metadata: next.Metadata, Pool: next.Pool, GPUs: gpus}
	for _, t := range p.o.Current.Tenants {
		if _, ok := uses[t.Name]; ok {
			cur.Tenants = append(cur.Tenants, t)
		}
	}
	parts := p.repackParts(cur, next, uses)
	var take []int
	moves, budget := 0, limit
	var optional []int
	for i, pt := range parts {
		switch {
		case pt.forced:
			take = append(take, i)
			moves += pt.moves
		case pt.saved > 0:
			optional = append(optional, i)
		}
	}
	if moves > limit {
		return nil, 0, fmt.Errorf("the tenants the plan in force does not serve move %d replicas by themselves", moves)
	}
	budget -= moves
	for _, i := range bestParts(parts, optional, budget) {
		take = append(take, i)
		moves += parts[i].moves
	}
	adopt := map[string]bool{}
	keep := map[string]bool{} // tenants whose replicas would move but stay where they are
	for _, pt := range parts {
		for _, t := range pt.tenants {
			keep[t] = true
		}
	}
	for _, i := range take {
		for _, g := range parts[i].gpus {
			adopt[g] = true
		}
		for _, t := range parts[i].tenants {
			delete(keep, t)
		}
	}
	mixed, err := mixPlans(p.pool, cur, next, adopt, keep)
	if err != nil {
		return nil, 0, err
	}
	return mixed, moves, nil
}

func gpuKey(node string, index int) string { return node + "/" + strconv.Itoa(index) }

// repackParts splits the difference between the plan in force cur and next into components.
func (p *planner) repackParts(cur, next *v1.Plan, uses map[string][]slotUse) []repackPart {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if _, ok := parent[x]; !ok {
			parent[x] = x
		}
		if parent[x] != x {
			parent[x] = find(parent[x])
		}
		return parent[x]
	}
	union := func(a, b string) { parent[find(a)] = find(b) }

	steps := replicaSteps(cur, next)
	movesOf := map[string]int{}
	var changed []string
	for _, s := range steps {
		if _, ok := movesOf[s.Tenant]; !ok {
			changed = append(changed, s.Tenant)
			movesOf[s.Tenant] = 0
		}
		if (s.Kind == StepMove || s.Kind == StepRestart) && !s.inPlace { // not a reconfiguration on its own GPU
			movesOf[s.Tenant]++
		}
	}
	before, after := replicaSlots(cur), replicaSlots(next)
	tenantKey := func(t string) string { return "tenant:" + t }
	for _, t := range changed {
		for _, sl := range append(slices.Clone(before[t]), after[t]...) {
			for _, i := range sl.gpuIndices() {
				union(tenantKey(t), gpuKey(sl.gpu.Node, i))
			}
		}
	}
	for _, s := range Migration(cur, next, 1) {
		if s.Kind == StepGPU {
			find(gpuKey(s.GPU.Node, s.GPU.Index))
		}
	}
	used := func(pl *v1.Plan) map[string]bool {
		m := map[string]bool{}
		for _, g := range pl.GPUs {
			if g.ReplicaCount() > 0 {
				m[gpuKey(g.Node, g.Index)] = true
			}
		}
		return m
	}
	usedCur, usedNext := used(cur), used(next)
	byTenant := map[string]*tenant{}
	for _, tn := range p.tenants {
		byTenant[tn.t.Name] = tn
	}
	idx := map[string]int{}
	var parts []repackPart
	partOf := func(x string) *repackPart {
		r := find(x)
		i, ok := idx[r]
		if !ok {
			i = len(parts)
			idx[r] = i
			parts = append(parts, repackPart{})
		}
		return &parts[i]
	}
	keys := make([]string, 0, len(parent))
	for k := range parent {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		pt := partOf(k)
		if t, ok := strings.CutPrefix(k, "tenant:"); ok {
			pt.tenants = append(pt.tenants, t)
			pt.moves += movesOf[t]
			if tn := byTenant[t]; tn != nil && servedInForce(tn, uses[t]) != nil {
				pt.forced = true
			}
			continue
		}
		pt.gpus = append(pt.gpus, k)
		if usedCur[k] {
			pt.saved++
		}
		if usedNext[k] {
			pt.saved--
		}
	}
	return parts
}

// bestParts chooses among the optional components those that save the most GPUs with at most
// budget moves in all: exactly (dynamic programming over the budget) when the budget is at most
// maxKnapsack moves, else greedily by GPUs saved per move.
func bestParts(parts []repackPart, optional []int, budget int) []int {
	const maxKnapsack = 4096
	if budget <= 0 {
		var free []int
		for _, i := range optional {
			if parts[i].moves == 0 {
				free = append(free, i)
			}
		}
		return free
	}
	if budget > maxKnapsack {
		order := slices.Clone(optional)
		slices.SortStableFunc(order, func(a, b int) int {
			// saved[a]/moves[a] > saved[b]/moves[b], with a move-free part first
			x := parts[a].saved * max(parts[b].moves, 1)
			y := parts[b].saved * max(parts[a].moves, 1)
			return y - x
		})
		var out []int
		for _, i := range order {
			if parts[i].moves <= budget {
				out = append(out, i)
				budget -= parts[i].moves
			}
		}
		return out
	}
	// best[j][b]: the most GPUs saved by optional[:j] within b moves
	n := len(optional)
	best := make([][]int, n+1)
	for j := range best {
		best[j] = make([]int, budget+1)
	}
	for j, i := range optional {
		m, v := parts[i].moves, parts[i].saved
		for b := 0; b <= budget; b++ {
			best[j+1][b] = best[j][b]
			if m <= b && best[j][b-m]+v > best[j+1][b] {
				best[j+1][b] = best[j][b-m] + v
			}
		}
	}
	var out []int
	for j, b := n, budget; j > 0; j-- {
		if best[j][b] != best[j-1][b] {
			i := optional[j-1]
			out = append(out, i)
			b -= parts[i].moves
		}
	}
	slices.Reverse(out)
	return out
}

// mixPlans is next on the GPUs in adopt and cur elsewhere. Replicas are renumbered per tenant in
// fleet order; a tenant in keep (its replicas stay where cur puts them, not where next would)
// keeps cur's entry (predictions, reasons), every other tenant takes next's.
func mixPlans(pool *v1.Pool, cur, next *v1.Plan, adopt, keep map[string]bool) (*v1.Plan, error) {
	mixed, err := mixUnchecked(cur, next, adopt, keep)
	if err != nil {
		return nil, err
	}
	if err := v1.ValidatePlan(mixed, pool); err != nil {
		return nil, fmt.Errorf("the partial re-pack is not valid for the pool: %w", err)
	}
	return mixed, nil
}

// mixUnchecked is mixPlans without the validation.
func mixUnchecked(cur, next *v1.Plan, adopt, keep map[string]bool) (*v1.Plan, error) {
	curGPU := map[string]v1.PlanGPU{}
	for _, g := range cur.GPUs {
		curGPU[gpuKey(g.Node, g.Index)] = g
	}
	type src struct {
		fromNext bool
		tenant   string
		index    int
	}
	refs := map[src]v1.ReplicaRef{}
	for _, pl := range []*v1.Plan{cur, next} {
		for _, t := range pl.Tenants {
			for _, r := range t.Replicas {
				refs[src{pl == next, t.Name, r.Index}] = r
			}
		}
	}
	renum := map[src]int{}
	count := map[string]int{}
	var newRefs = map[string][]v1.ReplicaRef{}
	number := func(fromNext bool, rs []v1.PlanReplica) ([]v1.PlanReplica, error) {
		out := slices.Clone(rs)
		for i, r := range out {
			k := src{fromNext, r.Tenant, r.Index}
			n, ok := renum[k]
			if !ok {
				ref, found := refs[k]
				if !found {
					return nil, fmt.Errorf("replica %d of tenant %s is not in its plan's tenant list", r.Index, r.Tenant)
				}
				n = count[r.Tenant]
				count[r.Tenant]++
				renum[k] = n
				ref.Index = n
				newRefs[r.Tenant] = append(newRefs[r.Tenant], ref)
			}
			out[i].Index = n
		}
		return out, nil
	}
	mixed := &v1.Plan{APIVersion: next.APIVersion, Kind: next.Kind, Metadata: next.Metadata, Pool: next.Pool}
	for _, ng := range next.GPUs {
		k := gpuKey(ng.Node, ng.Index)
		g, fromNext := ng, true
		if cg, ok := curGPU[k]; ok && !adopt[k] {
			g, fromNext = cg, false
		}
		var err error
		if g.Replicas, err = number(fromNext, g.Replicas); err != nil {
			return nil, err
		}
		g.Instances = slices.Clone(g.Instances)
		for i := range g.Instances {
			if g.Instances[i].Replicas, err = number(fromNext, g.Instances[i].Replicas); err != nil {
				return nil, err
			}
		}
		mixed.GPUs = append(mixed.GPUs, g)
	}
	curT := map[string]v1.PlanTenant{}
	for _, t := range cur.Tenants {
		curT[t.Name] = t
	}
	for _, t := range next.Tenants {
		if ct, ok := curT[t.Name]; ok && keep[t.Name] {
			t = ct
		}
		t.Replicas = newRefs[t.Name]
		mixed.Tenants = append(mixed.Tenants, t)
	}
	mixed.Summary = v1.Summary{GPUsUsed: usedGPUs(mixed.GPUs), GPUsTotal: len(mixed.GPUs), LowerBound: next.Summary.LowerBound,
		Baselines: next.Summary.Baselines, Objective: next.Summary.Objective}
	return mixed, nil
}
