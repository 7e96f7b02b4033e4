package agent

import (
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/metrics"
)

// costSlice is one engine on a GPU during a poll, as the cost rule sees it (docs/cost.md).
type costSlice struct {
	tenant string
	kind   string  // "mig", "mps", "timeslice", "whole"
	inst   string  // the MIG instance, "3g.40gb@4"
	size   float64 // MIG: the instance's compute slices over the board's
	share  float64 // the plan's SM share (MPS), 0 when unset
}

// costDevice builds one GPU's device over an interval of dt seconds with energy joules, of which
// tenantJ is what the agent's energy attribution gave each tenant: each slice's reserved fraction
// by docs/cost.md's table (MIG: its size, divided among the replicas sharing the instance; MPS:
// its SM share, even when unset; time-slice of k: 1/k; whole: 1) and its activity as the measured
// bill (`gpupool cost --from`, cost.FromMeasured) takes it: its tenant's energy on the GPU, split
// evenly over the tenant's slices there, over the board's dynamic range (TDP − idle), in
// GPU-seconds at full power. The agent's energy metrics and its cost counters thus split a GPU's
// active energy alike.
func costDevice(uuid, board string, dt, joules float64, sl []costSlice, tenantJ map[string]float64) cost.Device {
	d := cost.Device{GPU: uuid, Board: board, Basis: cost.Measured, Seconds: dt, EnergyJ: max(joules, 0), IdleWatts: idleWatts(board)}
	span := 0.0
	if b, err := gpu.Lookup(board); err == nil {
		d.Board, span = b.Name, b.TDPWatts-d.IdleWatts
	}
	perInst, n, perTenant := map[string]int{}, map[string]int{}, map[string]int{}
	for _, s := range sl {
		n[s.kind]++
		perTenant[s.tenant]++
		if s.kind == "mig" {
			perInst[s.inst]++
		}
	}
	for _, s := range sl {
		var r float64
		switch s.kind {
		case "mig":
			r = s.size / float64(perInst[s.inst])
		case "mps":
			r = s.share
			if !(r > 0) {
				r = 1 / float64(n["mps"])
			}
		case "timeslice":
			r = 1 / float64(n["timeslice"])
		default:
			r = 1
		}
		a := 0.0
		if span > 0 {
			a = max(tenantJ[s.tenant], 0) / float64(perTenant[s.tenant]) / span
		}
		d.Slices = append(d.Slices, cost.Slice{Tenant: s.tenant, Reserved: r, Active: a})
	}
	return d
}

// addCost bills one GPU's interval by the rule with the node's prices (idle policy none: the
// agent sees one node, so the idle line stays its own) and adds it to the running totals.
func addCost(acc *metrics.Cost, p cost.Prices, d cost.Device) error {
	if !(d.Seconds > 0) {
		return nil
	}
	rep, err := cost.Compute([]cost.Device{d}, p)
	if err != nil {
		return err
	}
	h := d.Seconds / 3600
	add := func(f *metrics.CostFigures, l cost.Line) {
		if l.ChargebackPerHour != nil {
			f.Chargeback += *l.ChargebackPerHour * h
		}
		if l.ShowbackPerHour != nil {
			f.Showback += *l.ShowbackPerHour * h
		}
		if l.GCO2eLocation != nil {
			f.CarbonLocation += *l.GCO2eLocation
		}
		if l.GCO2eMarket != nil {
			f.CarbonMarket += *l.GCO2eMarket
		}
	}
	acc.Money = acc.Money && rep.Idle.ChargebackPerHour != nil
	for _, l := range rep.Tenants {
		i := 0
		for i < len(acc.Tenants) && acc.Tenants[i].Tenant != l.Name {
			i++
		}
		if i == len(acc.Tenants) {
			acc.Tenants = append(acc.Tenants, metrics.TenantCost{Tenant: l.Name})
		}
		add(&acc.Tenants[i].CostFigures, l)
	}
	add(&acc.Idle, rep.Idle)
	return nil
}
