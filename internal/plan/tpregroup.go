package plan

import (
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
)

// regroupOnFree moves a tensor-parallel group that regroups onto GPUs its tenant's old groups
// hold (two groups of 2 becoming one of 4 on the same GPUs) to whole GPUs of its board that run
// nothing now and that the new plan leaves idle, when one node has enough of them: the group then
// starts there before the old groups stop (a move, make-before-break), instead of restarting on
// their GPUs after they stop, which leaves the tenant without those replicas meanwhile. The GPUs
// trade places whole (configuration and role), so the plan uses as many GPUs as before; the
// target node must run only whole exclusive GPUs in the new plan (no MIG or shared GPU whose
// device-plugin setting a new exclusive GPU could conflict with). current is the plan in force
// by GPU.
func (p *planner) regroupOnFree(current map[v1.GPURef]v1.PlanGPU) {
	// the GPU sets of each tenant's tensor-parallel groups in force
	old := map[string][][]v1.GPURef{}
	seen := map[string]bool{}
	for _, g := range current {
		for _, r := range g.Replicas {
			if r.TensorParallel.Size == 0 {
				continue
			}
			var set []v1.GPURef
			for _, i := range r.TensorParallel.GPUs {
				set = append(set, v1.GPURef{Node: g.Node, Index: i})
			}
			key := r.Tenant + "/" + v1.GPURef{Node: g.Node, Index: r.TensorParallel.GPUs[0]}.String()
			if !seen[key] {
				seen[key] = true
				old[r.Tenant] = append(old[r.Tenant], set)
			}
		}
	}
	if len(old) == 0 {
		return
	}
	done := map[*unit]bool{}
	for _, g := range p.gpus {
		u := g.whole
		if u == nil || u.tp.Size == 0 || done[u] || len(u.reps) != 1 || g.fg.canary {
			continue
		}
		done[u] = true
		name := u.reps[0].tn.t.Name
		var idx []int // indices into p.gpus of the group's GPUs, ascending by GPU index
		var refs []v1.GPURef
		for i, h := range p.gpus {
			if h.whole == u {
				idx, refs = append(idx, i), append(refs, h.fg.ref)
			}
		}
		if !regroups(refs, old[name]) {
			continue
		}
		target := p.freeGroup(g, len(idx), old[name], current)
		if target == nil {
			continue
		}
		gpus := make([]int, len(target))
		for k, t := range target {
			a, b := idx[k], t
			ga, gb := p.gpus[a], p.gpus[b]
			ga.fg, gb.fg = gb.fg, ga.fg
			p.gpus[a], p.gpus[b] = gb, ga
			p.gidx = nil // the GPUs changed places and nodes within the same slice
			gpus[k] = ga.fg.ref.Index
		}
		u.tp.GPUs = gpus
	}
}

// regroups reports whether a new group on refs overlaps one of the tenant's old groups without
// being one of them.
func regroups(refs []v1.GPURef, old [][]v1.GPURef) bool {
	overlap := false
	for _, set := range old {
		if len(set) == len(refs) && !slices.ContainsFunc(refs, func(r v1.GPURef) bool { return !slices.Contains(set, r) }) {
			return false // the same group
		}
		if slices.ContainsFunc(refs, func(r v1.GPURef) bool { return slices.Contains(set, r) }) {
			overlap = true
		}
	}
	return overlap
}

// freeGroup finds n GPUs of g's board on one node, ascending by index, each idle in the new plan
// (not a canary, no replica, role idle), running nothing in the plan in force and in none of the
// tenant's old groups, on a node whose busy GPUs in the new plan are all whole exclusive GPUs;
// nil when no node has them. It returns their indices into p.gpus, the first such node in fleet
// order.
func (p *planner) freeGroup(g *gpuPlan, n int, old [][]v1.GPURef, current map[v1.GPURef]v1.PlanGPU) []int {
	byNode := map[string][]int{}
	bad := map[string]bool{}
	var nodes []string
	for i, h := range p.gpus {
		node := h.fg.ref.Node
		if _, ok := byNode[node]; !ok {
			byNode[node] = nil
			nodes = append(nodes, node)
		}
		if h.busy() && (h.whole == nil || h.mode != v1.ModeExclusive) {
			bad[node] = true
		}
		if h.fg.board != g.fg.board || h.fg.canary || h.busy() || h.role != v1.RoleIdle {
			continue
		}
		if cur, ok := current[h.fg.ref]; ok && (hasReplicas(cur) || cur.LoRAEngine != "") {
			continue
		}
		if slices.ContainsFunc(old, func(set []v1.GPURef) bool { return slices.Contains(set, h.fg.ref) }) {
			continue
		}
		byNode[node] = append(byNode[node], i)
	}
	for _, node := range nodes {
		if free := byNode[node]; !bad[node] && len(free) >= n {
			slices.SortFunc(free, func(a, b int) int { return p.gpus[a].fg.ref.Index - p.gpus[b].fg.ref.Index })
			return free[:n]
		}
	}
	return nil
}
