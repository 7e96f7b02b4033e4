package sim

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// Strategies UniformPlan knows.
var Strategies = []v1.Mode{v1.ModeExclusive, v1.ModeMIG, v1.ModeMPS, v1.ModeTimeSlice}

// UniformPlan builds a simple plan that uses one sharing mode everywhere, so that strategies can
// be compared on the same traffic. It is a baseline, not the planner: every tenant gets its
// fixed replica count (plus one with redundancy), else max(1, reservation) replicas; the
// replicas are dealt round-robin over the pool's non-canary GPUs in fleet order, and each GPU
// holding k replicas is used as the strategy says:
//
//	exclusive  one replica per GPU (k must be 1: as many GPUs as replicas)
//	mig        k instances of the largest profile k of which the board can place (gpu.Place)
//	mps        k MPS clients of ⌊100/k⌋ % SMs and 1/k of the memory each
//	timeslice  k time-sliced replicas with 1/k of the memory each
//
// GPUs left over are idle. The pool should be defaulted.
func UniformPlan(pool *v1.Pool, strategy v1.Mode) (*v1.Plan, error) {
	if !slices.Contains(Strategies, strategy) {
		return nil, fmt.Errorf("build uniform plan: unknown strategy %q (valid: exclusive, mig, mps, timeslice)", strategy)
	}
	all, usable, canary, err := poolSlots(pool)
	if err != nil {
		return nil, err
	}
	var reps []v1.PlanReplica
	for _, t := range pool.Tenants {
		for i := range replicaCount(t) {
			reps = append(reps, v1.PlanReplica{Tenant: t.Name, Index: i})
		}
	}
	if len(usable) == 0 {
		return nil, fmt.Errorf("build uniform plan: the pool has no GPU outside the canaries")
	}
	if strategy == v1.ModeExclusive && len(reps) > len(usable) {
		return nil, fmt.Errorf("build uniform plan: exclusive needs one GPU per replica: %d replicas, %d pool GPUs", len(reps), len(usable))
	}
	perGPU := make([][]v1.PlanReplica, len(usable))
	for i, r := range reps {
		perGPU[i%len(usable)] = append(perGPU[i%len(usable)], r)
	}
	plan := &v1.Plan{APIVersion: v1.APIVersion, Kind: v1.KindPlan, Pool: pool.Metadata.Name,
		Metadata: v1.Metadata{Name: pool.Metadata.Name + "-" + string(strategy)}}
	byTenant := map[string][]v1.ReplicaRef{}
	k := 0
	for _, s := range all {
		g := v1.PlanGPU{Node: s.ref.Node, Index: s.ref.Index, Board: s.board.Name, Role: v1.RoleIdle, Mode: v1.ModeExclusive}
		if canary[s.ref] {
			g.Role = v1.RoleCanary
		} else {
			rs := perGPU[k]
			k++
			if len(rs) > 0 {
				if err := fillGPU(&g, s.board, strategy, rs, byTenant); err != nil {
					return nil, err
				}
				plan.Summary.GPUsUsed++
			}
		}
		plan.GPUs = append(plan.GPUs, g)
	}
	for _, t := range pool.Tenants {
		plan.Tenants = append(plan.Tenants, v1.PlanTenant{Name: t.Name, Replicas: byTenant[t.Name]})
	}
	plan.Summary.GPUsTotal = len(plan.GPUs)
	return plan, nil
}

// slot is one GPU of the fleet.
type slot struct {
	ref   v1.GPURef
	board *gpu.Board
}

// poolSlots lists the fleet's GPUs in order, those outside the canaries, and the canaries.
func poolSlots(pool *v1.Pool) (all, usable []slot, canary map[v1.GPURef]bool, err error) {
	canary = map[v1.GPURef]bool{}
	for _, c := range pool.Policy.CanaryGPUs {
		canary[c] = true
	}
	for _, n := range pool.Fleet.Nodes {
		idx := 0
		for _, g := range n.GPUs {
			b, err := gpu.Lookup(g.Board)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("build uniform plan: node %s: %w", n.Name, err)
			}
			for range g.Count {
				s := slot{ref: v1.GPURef{Node: n.Name, Index: idx}, board: b}
				idx++
				all = append(all, s)
				if !canary[s.ref] {
					usable = append(usable, s)
				}
			}
		}
	}
	return all, usable, canary, nil
}

func replicaCount(t v1.Tenant) int {
	if t.Replicas != nil {
		n := *t.Replicas
		if t.Redundancy {
			n++
		}
		return n
	}
	return max(1, t.Reservation)
}

// fillGPU puts replicas rs on g as strategy says and records where they went.
func fillGPU(g *v1.PlanGPU, b *gpu.Board, strategy v1.Mode, rs []v1.PlanReplica, byTenant map[string][]v1.ReplicaRef) error {
	g.Role, g.Mode = v1.RolePool, strategy
	n := len(rs)
	share := v1.Bytes((b.MemoryMiB / int64(n)) << 20)
	kind := v1.SliceExclusive
	switch strategy {
	case v1.ModeMIG:
		prof, layout, err := largestProfile(b, n)
		if err != nil {
			return fmt.Errorf("build uniform plan: GPU %s: %w", g.Ref(), err)
		}
		for i, in := range layout {
			g.Instances = append(g.Instances, v1.PlanInstance{Profile: in.Profile, Start: in.Start,
				Sharing: v1.Sharing{Mode: v1.SharingNone}, Replicas: []v1.PlanReplica{rs[i]}})
			byTenant[rs[i].Tenant] = append(byTenant[rs[i].Tenant], v1.ReplicaRef{Index: rs[i].Index, GPU: g.Ref(),
				Instance: v1.InstanceRef{Profile: in.Profile, Start: in.Start}, Slice: v1.SliceMIG})
		}
		g.Reasons = []v1.Reason{v1.NewReason(v1.ReasonSLOShapeUniform, "uniform mig: %d × %s", n, prof)}
		return nil
	case v1.ModeMPS:
		kind = v1.SliceMPS
		for i := range rs {
			rs[i].Limits = v1.Limits{SMPercent: max(1, 100/n), Memory: share}
		}
	case v1.ModeTimeSlice:
		kind = v1.SliceTimeSlice
		for i := range rs {
			rs[i].Limits = v1.Limits{Memory: share, TimeSliceReplicas: 1}
		}
	}
	g.Replicas = rs
	for _, r := range rs {
		byTenant[r.Tenant] = append(byTenant[r.Tenant], v1.ReplicaRef{Index: r.Index, GPU: g.Ref(), Slice: kind})
	}
	return nil
}

// largestProfile picks the profile with the most compute (then memory) of which n instances
// can be placed on b, skipping media-extension variants.
func largestProfile(b *gpu.Board, n int) (string, gpu.Layout, error) {
	if !b.MIGCapable() {
		return "", nil, fmt.Errorf("board %s has no MIG", b.Name)
	}
	ps := make([]*gpu.Profile, 0, len(b.Profiles))
	for i := range b.Profiles {
		p := &b.Profiles[i]
		if p.MediaExtension || strings.Contains(p.Name, "+") {
			continue
		}
		ps = append(ps, p)
	}
	slices.SortStableFunc(ps, func(x, y *gpu.Profile) int {
		if x.ComputeSlices != y.ComputeSlices {
			return y.ComputeSlices - x.ComputeSlices
		}
		return int(y.MemoryMiB - x.MemoryMiB)
	})
	for _, p := range ps {
		if l, err := b.Place(map[string]int{p.Name: n}); err == nil {
			return p.Name, l, nil
		}
	}
	return "", nil, fmt.Errorf("no MIG profile of %s fits %d instances", b.Name, n)
}
