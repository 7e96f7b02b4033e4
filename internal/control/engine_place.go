package control

import (
	"fmt"
	"maps"
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

// planSlots lists the applied plan's replicas. A tensor-parallel replica is listed under each GPU
// of its group; it is taken once, on the group's first GPU.
func planSlots(p *v1.Plan) []plannedSlot {
	if p == nil {
		return nil
	}
	var out []plannedSlot
	for _, g := range p.GPUs {
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

// sliceAt describes a live slice as the plan names places: its GPU's index on the node and,
// under MIG, its instance ("profile@start": the agent reports a GPU's slices in the order of
// its MIG layout).
func (e *Engine) sliceAt(s Slice) (gpuIdx int, inst string) {
	n := e.nodes[s.Node]
	if n == nil {
		return -1, ""
	}
	k := strings.LastIndexByte(s.ID, '/')
	for i, g := range n.Inventory.GPUs {
		if g.UUID != s.GPU {
			continue
		}
		if g.MIG != "" {
			if l, err := gpu.ParseLayout(g.MIG); err == nil {
				l = l.Sorted()
				var j int
				if _, err := fmt.Sscan(s.ID[k+1:], &j); err == nil && j >= 0 && j < len(l) {
					inst = fmt.Sprintf("%s@%d", l[j].Profile, l[j].Start)
				}
			}
		}
		return i, inst
	}
	return -1, ""
}

// fits reports whether a live slice is the place and kind of a planned replica.
func (e *Engine) fits(p plannedSlot, s Slice) bool {
	if s.Node != p.node {
		return false
	}
	gi, inst := e.sliceAt(s)
	if gi != p.gpu {
		return false
	}
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
	ids := slices.Sorted(maps.Keys(e.slices))
	for _, p := range slots {
		for _, id := range ids {
			if _, taken := e.planned[id]; !taken && e.fits(p, e.slices[id]) {
				e.planned[id] = p
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
