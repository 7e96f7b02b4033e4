package plan

import (
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
)

// pos is one slot of a packed GPU: the whole GPU (inst −1) or one of its MIG instances.
type pos struct {
	g    *gpuPlan
	inst int
}

func (x pos) unit() *unit {
	if x.inst < 0 {
		return x.g.whole
	}
	return x.g.insts[x.inst].u
}

func (x pos) set(u *unit) {
	if x.inst < 0 {
		x.g.whole = u
	} else {
		x.g.insts[x.inst].u = u
	}
}

// was counts the replicas per tenant on x's slot in the plan in force.
func (x pos) was(current map[v1.GPURef]v1.PlanGPU) map[string]int {
	cur := current[x.g.fg.ref]
	out := map[string]int{}
	if x.inst < 0 {
		for _, r := range cur.Replicas {
			out[r.Tenant]++
		}
		return out
	}
	in := x.g.insts[x.inst].in
	for _, ci := range cur.Instances {
		if ci.Profile == in.Profile && ci.Start == in.Start {
			for _, r := range ci.Replicas {
				out[r.Tenant]++
			}
		}
	}
	return out
}

// keepScore is how many of u's replicas ran on a slot whose tenants were w.
func keepScore(u *unit, w map[string]int) int {
	n := 0
	for _, r := range u.reps {
		if w[r.tn.t.Name] > 0 {
			n++
		}
	}
	return n
}

// keepReplicas swaps equal units (same board, energy class, kind, profile, share and sharing
// group) between slots of one node so that as many replicas as possible run where they run in
// the plan in force: nothing about any GPU or node changes, only which tenant sits in which of
// two interchangeable slots, and every replica that stays is a pod that need not move. Units of
// tenants with redundancy stay where they are (their replicas were spread over GPUs on purpose).
func (p *planner) keepReplicas(current map[v1.GPURef]v1.PlanGPU) {
	for _, ps := range p.swapClasses() {
		if len(ps) < 2 {
			continue
		}
		units := make([]*unit, len(ps))
		ws := make([]map[string]int, len(ps))
		for i, x := range ps {
			units[i], ws[i] = x.unit(), x.was(current)
		}
		for i, u := range assignKept(units, ws) {
			ps[i].set(u)
		}
	}
}

// swapClasses groups the busy slots by node and unit key, in fleet order.
func (p *planner) swapClasses() [][]pos {
	type classKey struct {
		node string
		key  groupKey
	}
	index := map[classKey]int{}
	var out [][]pos
	for _, g := range p.gpus {
		var ps []pos
		if g.whole != nil {
			ps = append(ps, pos{g, -1})
		}
		for i, pi := range g.insts {
			if pi.u != nil {
				ps = append(ps, pos{g, i})
			}
		}
		for _, x := range ps {
			if slices.ContainsFunc(x.unit().reps, func(r replica) bool { return r.tn.t.Redundancy }) {
				continue
			}
			if x.unit().tp.Size > 0 { // a tensor-parallel group moves as a whole or not at all
				continue
			}
			k := classKey{g.fg.ref.Node, x.unit().key}
			i, ok := index[k]
			if !ok {
				i = len(out)
				index[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], x)
		}
	}
	return out
}

// assignKept gives each slot (with its former tenants ws[i]) one of units: greedily the free unit
// that keeps most of its replicas, then the rest in order.
func assignKept(units []*unit, ws []map[string]int) []*unit {
	used := make([]bool, len(units))
	out := make([]*unit, len(ws))
	for i := range ws {
		best, bestScore := -1, 0
		for j, u := range units {
			if sc := keepScore(u, ws[i]); !used[j] && sc > bestScore {
				best, bestScore = j, sc
			}
		}
		if best >= 0 {
			out[i], used[best] = units[best], true
		}
	}
	j := 0
	for i := range out {
		if out[i] != nil {
			continue
		}
		for used[j] {
			j++
		}
		out[i], used[j] = units[j], true
	}
	return out
}
