package plan

import (
	"fmt"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// ReplicaPower is each replica's mean power above idle, in watts over all its GPUs, at its
// planned load: its tenant's offered rate divided evenly over the tenant's replicas, served as
// Poisson arrivals of the tenant's request shape on the replica's slice, through the fitted step
// power model (perf.Engine.PowerAt; docs/cost.md, "Planned"). Replicas sharing a GPU or an
// instance are placed with the others busy beside them (perf.Load.Active). Keyed "tenant/index",
// for cost.PlanOptions.DynamicWatts. Replicas it cannot model are left out, and the cost rule
// gives them its coarse estimate: infeasible tenants, tenants without traffic, models given as a
// directory, measured profiles, and slices the engine does not fit.
func ReplicaPower(pool *v1.Pool, pl *v1.Plan, o perf.Options) map[string]float64 {
	tenants := map[string]v1.Tenant{}
	for _, t := range pool.Tenants {
		tenants[t.Name] = t
	}
	replicas, skip := map[string]int{}, map[string]bool{}
	for _, t := range pl.Tenants {
		replicas[t.Name] = len(t.Replicas)
		skip[t.Name] = t.Infeasible
	}
	models := map[string]*perf.Model{}
	model := func(t v1.Tenant) *perf.Model {
		if m, ok := models[t.Name]; ok {
			return m
		}
		models[t.Name] = nil
		if t.Model.Name == "" || t.Profile != "" {
			return nil
		}
		a, err := llm.Lookup(t.Model.Name)
		if err != nil {
			return nil
		}
		q := t.Model.Quantization
		if q == "" && a.Quantization != "" {
			q = llm.Quantization(a.Quantization)
		}
		mo := o
		if mo.KVElemBytes, err = llm.KVElemBytes(t.Model.KVCacheDtype); err != nil {
			return nil
		}
		if t.Concurrency > 0 {
			mo.MaxSeqs = t.Concurrency
		}
		m, err := perf.New(a, q, mo)
		if err != nil {
			return nil
		}
		models[t.Name] = m
		return m
	}
	out := map[string]float64{}
	place := func(b *gpu.Board, prof *gpu.Profile, mode perf.Mode, reps []v1.PlanReplica) {
		for _, r := range reps {
			t, ok := tenants[r.Tenant]
			if !ok || skip[r.Tenant] || t.Traffic.RPS <= 0 || replicas[r.Tenant] == 0 {
				continue
			}
			m := model(t)
			if m == nil {
				continue
			}
			sl := perf.Slice{Board: b, Profile: prof, Mode: mode, Replicas: len(reps), TensorParallel: max(r.TensorParallel.Size, 0)}
			if sl.TensorParallel == 1 {
				sl.TensorParallel = 0
			}
			if mode == perf.MPS && r.Limits.SMPercent > 0 {
				sl.SMPercent = float64(r.Limits.SMPercent)
			}
			if mode != perf.Exclusive && r.Limits.Memory > 0 {
				sl.MemoryMiB = int64(r.Limits.Memory) >> 20
			}
			cp, err := o.ClockCap(string(t.EnergyClass))
			if err != nil {
				continue
			}
			sl.ClockCap = cp
			e, err := m.Place(sl)
			if err != nil || !e.FitsWeights() {
				continue
			}
			var l perf.Load
			if mode != perf.Exclusive {
				l.Active = len(reps) - 1
			}
			w := perf.Workload{InputTokens: max(t.Traffic.InputTokens, 1), OutputTokens: max(t.Traffic.OutputTokens, 1)}
			p, err := e.PowerAt(w, t.Traffic.RPS/float64(replicas[r.Tenant]), l)
			if err != nil {
				continue
			}
			out[fmt.Sprintf("%s/%d", r.Tenant, r.Index)] = p
		}
	}
	for _, g := range pl.GPUs {
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			continue
		}
		if g.Mode != v1.ModeMIG {
			mode := map[v1.Mode]perf.Mode{v1.ModeMPS: perf.MPS, v1.ModeTimeSlice: perf.TimeSlice}[g.Mode]
			reps := make([]v1.PlanReplica, 0, len(g.Replicas))
			for _, r := range g.Replicas { // a tensor-parallel replica once, on its group's first GPU
				if tp := r.TensorParallel.GPUs; len(tp) == 0 || tp[0] == g.Index {
					reps = append(reps, r)
				}
			}
			place(b, nil, mode, reps)
			continue
		}
		for _, in := range g.Instances {
			prof, err := b.Profile(in.Profile)
			if err != nil {
				continue
			}
			mode := map[v1.SharingMode]perf.Mode{v1.SharingMPS: perf.MPS, v1.SharingTimeSlice: perf.TimeSlice}[in.Sharing.Mode]
			place(b, prof, mode, in.Replicas)
		}
	}
	return out
}
