package control

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// plannedSlot is one replica of the applied plan: the node and GPU the plan placed it on, the
// MIG instance ("profile@start", MIG kinds only), the slice kind and the sharing limits.
type plannedSlot struct {
	tenant string
	node   string
	gpu    int // index among the GPUs the node reports
	inst   string
	kind   v1.SliceKind
	limits v1.Limits
}

// planSlots lists the applied plan's replicas, a shared LoRA engine's under its key (loraKey).
// A tensor-parallel replica is listed under each GPU
// of its group; it is taken once, on the group's first GPU.
func planSlots(p *v1.Plan) []plannedSlot {
	if p == nil {
		return nil
	}
	var out []plannedSlot
	for _, g := range p.GPUs {
		if g.LoRAEngine != "" { // a shared LoRA engine: one replica on the whole GPU
			out = append(out, plannedSlot{tenant: loraKey(g.LoRAEngine), node: g.Node, gpu: g.Index, kind: v1.SliceExclusive})
		}
		for _, r := range g.Replicas {
			if !r.TensorParallel.IsZero() && len(r.TensorParallel.GPUs) > 0 && r.TensorParallel.GPUs[0] != g.Index {
				continue
			}
			out = append(out, plannedSlot{tenant: r.Tenant, node: g.Node, gpu: g.Index, kind: v1.SliceOf(g.Mode, ""), limits: r.Limits})
		}
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				out = append(out, plannedSlot{tenant: r.Tenant, node: g.Node, gpu: g.Index,
					inst: fmt.Sprintf("%s@%d", in.Profile, in.Start), kind: v1.SliceOf(g.Mode, in.Sharing.Mode), limits: r.Limits})
			}
		}
	}
	return out
}

// slicePlaces describes the live slices as the plan names places: for each node and GPU index
// (among the GPUs the node reports), its live slices by id, each with its MIG instance
// ("profile@start"; the agent reports a GPU's slices in the order of its MIG layout).
func (e *Engine) slicePlaces() map[placeKey][]placedSlice {
	out := map[placeKey][]placedSlice{}
	for _, n := range e.nodes {
		for gi, g := range n.Inventory.GPUs {
			var l gpu.Layout
			if g.MIG != "" {
				if pl, err := gpu.ParseLayout(g.MIG); err == nil {
					l = pl.Sorted()
				}
			}
			for k := range g.Slices {
				id := sliceID(n.Name, g.UUID, k)
				s, live := e.slices[id]
				if !live {
					continue
				}
				ps := placedSlice{s: s}
				if k < len(l) {
					ps.inst = fmt.Sprintf("%s@%d", l[k].Profile, l[k].Start)
				}
				out[placeKey{n.Name, gi}] = append(out[placeKey{n.Name, gi}], ps)
			}
		}
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b placedSlice) int { return strings.Compare(a.s.ID, b.s.ID) })
	}
	return out
}

type placeKey struct {
	node string
	gpu  int
}

type placedSlice struct {
	s    Slice
	inst string
}

// fits reports whether a live slice (with its MIG instance) is the kind of a planned replica;
// the caller matched node and GPU.
func fits(p plannedSlot, s Slice, inst string) bool {
	switch p.kind {
	case v1.SliceExclusive:
		return s.Kind == "exclusive"
	case v1.SliceMPS:
		if p.limits.SMPercent > 0 {
			return s.Kind == fmt.Sprintf("mps-%d", p.limits.SMPercent)
		}
		return strings.HasPrefix(s.Kind, "mps")
	case v1.SliceTimeSlice:
		return true
	default: // MIG kinds
		return inst == p.inst
	}
}

// placement maps each live slice the applied plan places a replica on to that replica (the
// first fitting slice by id for each planned replica). It is rebuilt when the slices or the
// plan change (nil means stale).
func (e *Engine) placement() map[string]plannedSlot {
	if e.planned != nil {
		return e.planned
	}
	e.planned = map[string]plannedSlot{}
	slots := planSlots(e.plan)
	if len(slots) == 0 {
		return e.planned
	}
	places := e.slicePlaces()
	for _, p := range slots {
		for _, ps := range places[placeKey{p.node, p.gpu}] {
			if _, taken := e.planned[ps.s.ID]; !taken && fits(p, ps.s, ps.inst) {
				e.planned[ps.s.ID] = p
				break
			}
		}
	}
	return e.planned
}

// limitsFor returns the sharing limits the applied plan gives the tenant's replica on a slice,
// or nil.
func (e *Engine) limitsFor(tenant, sliceID string) *v1.Limits {
	if e.plan == nil {
		return nil
	}
	p, ok := e.placement()[sliceID]
	if !ok || p.tenant != tenant || p.limits == (v1.Limits{}) {
		return nil
	}
	l := p.limits
	return &l
}
