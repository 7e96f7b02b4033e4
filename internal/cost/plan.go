package cost

import (
	"fmt"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// PlanOptions set how a plan's energy is estimated.
type PlanOptions struct {
	// Seconds is the period; 3,600 when 0.
	Seconds float64
	// IdlePowerFraction is a board's idle power as a fraction of its TDP (perf.Options'
	// IdlePowerFraction).
	IdlePowerFraction float64
	// DynamicWatts is each replica's mean power above idle at its planned load, by
	// "tenant/index", over all its GPUs: the fitted step power model (plan.ReplicaPower, through
	// perf.Engine.PowerAt). A replica without an entry gets the coarse estimate: TDP above idle
	// while busy, in proportion to its slice's size.
	DynamicWatts map[string]float64
}

// FromPlan estimates every GPU of a plan over a period (Planned basis): each replica's reserved
// fraction follows its slice; a GPU draws its idle power plus its replicas' dynamic power. A
// replica with an entry in o.DynamicWatts draws that (the step power model at its planned load);
// its activity is that energy over the board's dynamic range, as FromRun counts it. Otherwise its
// load is the tenant's offered rate over the rate its replicas sustain within the SLOs
// (Prediction.MaxRPS), capped at 1, and it draws TDP above idle while busy, in proportion to its
// slice's size. Tokens are the offered tokens, divided evenly over the tenant's replicas; a
// tensor-parallel replica's energy and tokens are divided evenly over its GPUs. Infeasible
// tenants serve nothing.
func FromPlan(pl *v1.Plan, pool *v1.Pool, o PlanOptions) ([]Device, error) {
	if o.Seconds == 0 {
		o.Seconds = 3600
	}
	traffic := map[string]v1.Traffic{}
	for _, t := range pool.Tenants {
		traffic[t.Name] = t.Traffic
	}
	load := map[string]float64{}
	count := map[string]int{}
	for _, t := range pl.Tenants {
		count[t.Name] = len(t.Replicas)
		tr := traffic[t.Name]
		switch {
		case t.Infeasible || tr.RPS == 0:
		case t.Predicted.MaxRPS > 0:
			load[t.Name] = min(1, tr.RPS/t.Predicted.MaxRPS)
		default:
			load[t.Name] = 1
		}
	}
	return devices(pl, Planned, o, func(d *Device, tdp float64, r v1.PlanReplica, reserved, part float64) {
		tr := traffic[r.Tenant]
		served := 0.0
		if load[r.Tenant] > 0 {
			served = tr.RPS * o.Seconds / float64(max(count[r.Tenant], 1)) * part
		}
		act := reserved * load[r.Tenant] * o.Seconds
		dyn := (tdp - d.IdleWatts) * act
		if w, ok := o.DynamicWatts[fmt.Sprintf("%s/%d", r.Tenant, r.Index)]; ok && load[r.Tenant] > 0 {
			dyn, act = w*part*o.Seconds, 0
			if span := tdp - d.IdleWatts; span > 0 {
				act = dyn / span
			}
		}
		d.Slices = append(d.Slices, Slice{Tenant: r.Tenant, Reserved: reserved, Active: act,
			OutputTokens: served * float64(tr.OutputTokens), Tokens: served * float64(tr.InputTokens+tr.OutputTokens)})
		d.EnergyJ += dyn
	})
}

// ReplicaUse is what one replica did over a run: its dynamic energy above idle (the power
// model's, or a measured share) and the tokens it served.
type ReplicaUse struct {
	DynamicJ             float64
	OutputTokens, Tokens float64
}

// RunOptions describe a run over a plan.
type RunOptions struct {
	Basis             Basis
	Seconds           float64
	IdlePowerFraction float64
	// Replicas is each replica's use, by "tenant/index".
	Replicas map[string]ReplicaUse
}

// FromRun builds the devices of a simulated or measured run over plan pl: a replica's reserved
// fraction follows its slice as in FromPlan; its activity is its dynamic energy over the board's
// dynamic range (TDP − idle power), in GPU-seconds at full power, so that active energy is split
// in proportion to each replica's own steps; a GPU's energy is its idle power over the run plus
// its replicas' dynamic energy.
func FromRun(pl *v1.Plan, o RunOptions) ([]Device, error) {
	if !(o.Seconds > 0) {
		return nil, fmt.Errorf("cost of run: period %g s must be positive", o.Seconds)
	}
	return devices(pl, o.Basis, PlanOptions{Seconds: o.Seconds, IdlePowerFraction: o.IdlePowerFraction},
		func(d *Device, tdp float64, r v1.PlanReplica, reserved, part float64) {
			u := o.Replicas[fmt.Sprintf("%s/%d", r.Tenant, r.Index)]
			act := 0.0
			if span := tdp - d.IdleWatts; span > 0 {
				act = u.DynamicJ * part / span
			}
			d.Slices = append(d.Slices, Slice{Tenant: r.Tenant, Reserved: reserved, Active: act,
				OutputTokens: u.OutputTokens * part, Tokens: u.Tokens * part})
			d.EnergyJ += u.DynamicJ * part
		})
}

// devices walks the plan's GPUs and calls add for every listing of a replica with its reserved
// fraction and the part of the replica the listing stands for: 1, or 1/size for each GPU of a
// tensor-parallel group (listed under every GPU of it); the device's energy starts at its idle
// power over the period.
func devices(pl *v1.Plan, basis Basis, o PlanOptions, add func(d *Device, tdp float64, r v1.PlanReplica, reserved, part float64)) ([]Device, error) {
	var out []Device
	for _, g := range pl.GPUs {
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			return nil, fmt.Errorf("cost of plan: gpu %s: %w", g.Ref(), err)
		}
		d := Device{GPU: g.Ref().String(), Board: b.Name, Basis: basis, Seconds: o.Seconds,
			IdleWatts: o.IdlePowerFraction * b.TDPWatts}
		d.EnergyJ = d.IdleWatts * o.Seconds
		for _, in := range g.Instances {
			size := 0.0
			if p, err := b.Profile(in.Profile); err == nil && b.ComputeSlices > 0 {
				size = float64(p.ComputeSlices) / float64(b.ComputeSlices)
			}
			for _, r := range in.Replicas {
				add(&d, b.TDPWatts, r, size/float64(len(in.Replicas)), 1)
			}
		}
		for _, r := range g.Replicas {
			part := 1.0
			if n := r.TensorParallel.Size; n > 1 {
				part = 1 / float64(n)
			}
			add(&d, b.TDPWatts, r, wholeGPUShare(g, r), part)
		}
		out = append(out, d)
	}
	return out, nil
}

// wholeGPUShare is a replica's reserved fraction of a whole GPU: its MPS SM percentage (an even
// share when unset), 1/k of k time-slices, or all of an exclusive GPU.
func wholeGPUShare(g v1.PlanGPU, r v1.PlanReplica) float64 {
	if g.Mode == v1.ModeMPS && r.Limits.SMPercent > 0 {
		return float64(r.Limits.SMPercent) / 100
	}
	return 1 / float64(len(g.Replicas))
}
