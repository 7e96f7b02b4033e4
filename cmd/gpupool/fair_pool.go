package main

import (
	"errors"
	"fmt"
	"math"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/fair"
)

// poolPlanConfig turns a Pool and its Plan into the allocator's configuration: capacity is the
// slices the plan created, tenants come from the pool with the plan's replicas as demand.
//
//   - A whole GPU in mode exclusive is one BOARD/exclusive slice; in mode mps each replica is one
//     BOARD/mps-P slice (P its SM percentage; unset, an equal part of 100); in mode timeslice each
//     replica takes its references' part of one BOARD/exclusive.
//   - A MIG instance is one BOARD/PROFILE slice; a replica on an instance it shares takes its SM
//     percentage of it (MPS) or its references' part (time-slicing), one replica alone all of it.
//   - Pool GPUs count; canary and idle GPUs run no replicas and count nothing. Burst GPUs count
//     their layout (one BOARD/exclusive when they have none) and form the burst pool: the allocator
//     withholds the same percentage of every resource, so burstPoolPercent is the burst GPUs' part
//     of all counted SMs, an approximation where boards or layouts differ.
//   - A tenant's task is the slice its replicas use (the mean when they use several kinds, so
//     their sum is kept); its demand is its replica count; weight, path, reservation and cap come
//     from the pool. A tenant without replicas has no task shape and is left out (with a note).
func poolPlanConfig(pool *v1.Pool, plan *v1.Plan) (fair.Config, []string, error) {
	ps, err := collectPlanSlices(plan)
	if err != nil {
		return fair.Config{}, nil, fmt.Errorf("plan %s: %w", plan.Metadata.Name, err)
	}
	capv, est, err := fair.SliceCapacity(ps.counts)
	if err != nil {
		return fair.Config{}, nil, fmt.Errorf("plan %s: %w", plan.Metadata.Name, err)
	}
	cfg := fair.Config{Capacity: capv}
	if ps.allSMs > 0 {
		cfg.BurstPoolPercent = 100 * ps.burstSMs / ps.allSMs
	}
	var notes []string
	for _, kind := range sortedStrings(est) {
		notes = append(notes, fmt.Sprintf("%s: %s estimated by proportion (no measured value in the board table)",
			kind, strings.Join(est[kind], ", ")))
	}
	for _, t := range pool.Tenants {
		vs := ps.use[t.Name]
		if len(vs) == 0 {
			notes = append(notes, fmt.Sprintf("tenant %s: no replicas in the plan, so no slice to size its task; left out", t.Name))
			continue
		}
		ft := fair.Tenant{Name: t.Name, Path: t.Path, Task: meanVector(vs), Demand: len(vs), Reservation: t.Reservation}
		if t.Weight != nil {
			ft.Weight = *t.Weight
		}
		if t.Cap != nil {
			ft.Cap = *t.Cap
		}
		if ks := sortedStrings(ps.kinds[t.Name]); len(ks) > 1 {
			notes = append(notes, fmt.Sprintf("tenant %s: replicas on %s; its task is their mean", t.Name, strings.Join(ks, ", ")))
		}
		cfg.Tenants = append(cfg.Tenants, ft)
	}
	return cfg, notes, nil
}

// planSlices is what the pool and burst GPUs of a plan hold.
type planSlices struct {
	counts           map[string]int             // slice kind → count
	use              map[string][]fair.Vector   // tenant → one vector per replica
	kinds            map[string]map[string]bool // tenant → the kinds its replicas use
	burstSMs, allSMs float64
}

// collectPlanSlices walks the plan's pool and burst GPUs, naming every bad GPU.
func collectPlanSlices(plan *v1.Plan) (planSlices, error) {
	ps := planSlices{counts: map[string]int{}, use: map[string][]fair.Vector{}, kinds: map[string]map[string]bool{}}
	var errs []error
	for gi, g := range plan.GPUs {
		if g.Role != v1.RolePool && g.Role != v1.RoleBurst {
			continue
		}
		slices, reps, err := gpuSlices(g)
		if err != nil {
			errs = append(errs, fmt.Errorf("gpus[%d] (%s/%d): %w", gi, g.Node, g.Index, err))
			continue
		}
		if g.Role == v1.RoleBurst && len(slices) == 0 {
			slices = map[string]int{g.Board + "/exclusive": 1}
		}
		capv, _, err := fair.SliceCapacity(slices)
		if err != nil {
			errs = append(errs, fmt.Errorf("gpus[%d] (%s/%d): %w", gi, g.Node, g.Index, err))
			continue
		}
		ps.allSMs += capv[fair.ResourceSM]
		if g.Role == v1.RoleBurst {
			ps.burstSMs += capv[fair.ResourceSM]
		}
		for k, n := range slices {
			ps.counts[k] += n
		}
		for _, r := range reps {
			ps.use[r.tenant] = append(ps.use[r.tenant], r.vec)
			if ps.kinds[r.tenant] == nil {
				ps.kinds[r.tenant] = map[string]bool{}
			}
			ps.kinds[r.tenant][r.kind] = true
		}
	}
	return ps, errors.Join(errs...)
}

// planReplica is what one replica of a plan uses.
type planReplica struct {
	tenant, kind string
	vec          fair.Vector
}

// gpuSlices lists the slices one GPU of a plan holds (kind → count) and what each replica on it
// uses.
func gpuSlices(g v1.PlanGPU) (map[string]int, []planReplica, error) {
	slices := map[string]int{}
	var reps []planReplica
	var errs []error
	add := func(kind string, r v1.PlanReplica, part float64) {
		s, err := fair.SliceVector(kind)
		if err != nil {
			errs = append(errs, err)
			return
		}
		reps = append(reps, planReplica{tenant: r.Tenant, kind: s.Kind, vec: scaled(s.Vector, part)})
	}
	switch g.Mode {
	case v1.ModeMIG:
		for _, in := range g.Instances {
			kind := g.Board + "/" + in.Profile
			slices[kind]++
			parts := sharedParts(in.Replicas, in.Sharing.Mode == v1.SharingMPS)
			for i, r := range in.Replicas {
				add(kind, r, parts[i])
			}
		}
	case v1.ModeExclusive:
		slices[g.Board+"/exclusive"] = 1
		for _, r := range g.Replicas {
			add(g.Board+"/exclusive", r, 1/float64(len(g.Replicas)))
		}
	case v1.ModeMPS:
		parts := sharedParts(g.Replicas, true)
		for i, r := range g.Replicas {
			p := max(1, int(parts[i]*100+0.5))
			kind := fmt.Sprintf("%s/mps-%d", g.Board, p)
			slices[kind]++
			add(kind, r, 1)
		}
	case v1.ModeTimeSlice:
		if len(g.Replicas) > 0 {
			slices[g.Board+"/exclusive"] = 1
		}
		parts := sharedParts(g.Replicas, false)
		for i, r := range g.Replicas {
			add(g.Board+"/exclusive", r, parts[i])
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want exclusive, mig, mps or timeslice", g.Mode))
	}
	return slices, reps, errors.Join(errs...)
}

// sharedParts is each replica's part of one slice: its SM percentage under MPS (unset: an
// equal part of what the others leave), else its time-slice references over all of them.
func sharedParts(reps []v1.PlanReplica, mps bool) []float64 {
	parts := make([]float64, len(reps))
	if mps {
		left, unset := 100, 0
		for _, r := range reps {
			left -= r.Limits.SMPercent
			if r.Limits.SMPercent == 0 {
				unset++
			}
		}
		for i, r := range reps {
			p := float64(r.Limits.SMPercent)
			if p == 0 {
				p = float64(max(left, 0)) / float64(unset)
			}
			parts[i] = p / 100
		}
		return parts
	}
	total := 0
	for _, r := range reps {
		total += max(1, r.Limits.TimeSliceReplicas)
	}
	for i, r := range reps {
		parts[i] = float64(max(1, r.Limits.TimeSliceReplicas)) / float64(total)
	}
	return parts
}

func scaled(v fair.Vector, f float64) fair.Vector {
	out := make(fair.Vector, len(v))
	for k, x := range v {
		out[k] = floorMicro(x * f)
	}
	return out
}

// floorMicro rounds down to the allocator's millionths, so that parts of a slice, or n tasks of
// a mean, never add up to more than the slices they come from.
func floorMicro(x float64) float64 { return math.Floor(x*1e6+1e-6) / 1e6 }

// meanVector averages vectors, resource by resource.
func meanVector(vs []fair.Vector) fair.Vector {
	out := fair.Vector{}
	for _, v := range vs {
		for k, x := range v {
			out[k] += x
		}
	}
	for k := range out {
		out[k] = floorMicro(out[k] / float64(len(vs)))
	}
	return out
}
