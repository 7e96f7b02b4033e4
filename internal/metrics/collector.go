package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshot is what the agent knows at one instant.
type Snapshot struct {
	GPUs []GPU
	// TenantGPUs is each tenant's energy on each GPU since the agent started (the per-GPU parts
	// of Tenant.EnergyJoules), for bills per GPU (docs/cost.md).
	TenantGPUs []TenantGPU
	Slices     []Slice
	Tenants    []Tenant
	MPS        []MPSDaemon
	Gate       Gate
	XIDs       []XID
	// PollSeconds is how long the last poll took.
	PollSeconds float64
	// Cost is the node's bill since the agent started; nil without a cost policy.
	Cost *Cost
}

// Cost is the node's bill since the agent started, by docs/cost.md's rule: each tenant's line and
// the idle line, which add up to the node's GPUs' hardware and energy cost and carbon.
type Cost struct {
	// Currency is the policy's currency; Money is false when a board or the energy price is
	// missing (no cost figures, as a bill without a price has none).
	Currency string
	Money    bool
	// Location and Market say which carbon intensities the policy gives.
	Location, Market bool
	Tenants          []TenantCost
	Idle             CostFigures
}

// TenantCost is one tenant's line.
type TenantCost struct {
	Tenant string
	CostFigures
}

// CostFigures are cumulative: chargeback (hardware on the allocation basis plus energy cost),
// showback (hardware on the usage basis plus energy cost), and gCO2e location- and market-based.
type CostFigures struct {
	Chargeback, Showback         float64
	CarbonLocation, CarbonMarket float64
}

// GPU is one GPU.
type GPU struct {
	UUID, Board string
	// Node and Index place the GPU as a Plan does ("node/index").
	Node         string
	Index        int
	EnergyJoules float64 // the counter, since driver load
	// IdleEnergyJoules is the part of the energy since the agent started that no tenant was
	// charged: idle power over each interval, and all of it while no tenant ran (docs/cost.md).
	IdleEnergyJoules float64
	// Split is how the GPU's active energy was split among its tenants over the last interval
	// (MIG: "mig-activity-x-size" from GPM, or "mig-size" without it; docs/cost.md); empty when
	// no tenant runs on it.
	Split string
}

// TenantGPU is one tenant's energy on one GPU.
type TenantGPU struct {
	GPU, Tenant  string
	EnergyJoules float64
}

// Slice is one slice a tenant replica runs on.
type Slice struct {
	GPU, Slice, Tenant string // slice: "3g.40gb@4", "mps", "timeslice" or "whole"
	MemoryUsed         float64
	MemoryPlanned      float64
	SMShare            float64 // 0–1
}

// Histogram is a cumulative histogram as vLLM exposes it.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64 // upper bound → cumulative count
}

// Tenant is one tenant on the node.
type Tenant struct {
	Name          string
	Tokens        float64 // prompt and generated
	OutputTokens  float64 // generated only
	EnergyJoules  float64
	JoulesPerTok  float64 // over the last interval; 0 when no tokens
	TTFT, TPOT    *Histogram
	SLOAttainment float64 // share of requests within the SLO, 0–1; negative when unknown
}

// XID counts one GPU's XID error events of one code.
type XID struct {
	GPU, Code string
	Count     int
}

// MPSDaemon is one supervised MPS control daemon.
type MPSDaemon struct {
	UUID     string
	Restarts int
	Healthy  bool
}

// Gate is the node's reconfiguration gate.
type Gate struct {
	Phase    string
	Cordoned bool
	// Changes counts finished changes by outcome code (GateDone, GateRolledBack, …).
	Changes map[string]int
}

// Source gives the current snapshot; it must not block for long.
type Source interface {
	Snapshot() Snapshot
}

// Collector turns snapshots into metrics at each scrape.
type Collector struct {
	src   Source
	descs map[string]*prometheus.Desc
}

// NewCollector returns a collector over src.
func NewCollector(src Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{src: src, descs: map[string]*prometheus.Desc{
		NameSliceMemoryUsed:      d(NameSliceMemoryUsed, "Device memory the tenant's processes use on the slice (NVML per-process), in bytes.", "gpu", "slice", "tenant"),
		NameSliceMemoryPlanned:   d(NameSliceMemoryPlanned, "Device memory the plan budgets for the tenant on the slice, in bytes.", "gpu", "slice", "tenant"),
		NameSliceSMShare:         d(NameSliceSMShare, "Share of the GPU's SMs the tenant's slice holds (MIG: the instance's SMs; MPS: the active thread percentage), 0-1.", "gpu", "slice", "tenant"),
		NameTenantTokens:         d(NameTenantTokens, "Tokens (prompt and generated) the tenant's engines on this node processed, from vLLM.", "tenant"),
		NameTenantOutputTokens:   d(NameTenantOutputTokens, "Tokens the tenant's engines on this node generated (output tokens), from vLLM.", "tenant"),
		NameTenantEnergy:         d(NameTenantEnergy, "Energy attributed to the tenant on this node, in joules (see package metrics for the split).", "tenant"),
		NameTenantJPerToken:      d(NameTenantJPerToken, "Joules per token of the tenant over the last polling interval.", "tenant"),
		NameTenantTTFT:           d(NameTenantTTFT, "Time to first token of the tenant's requests, from vLLM, in seconds.", "tenant"),
		NameTenantTPOT:           d(NameTenantTPOT, "Time per output token of the tenant's requests, from vLLM, in seconds.", "tenant"),
		NameTenantSLO:            d(NameTenantSLO, "Share of the tenant's requests that met its latency SLO, 0-1.", "tenant"),
		NameGPUEnergy:            d(NameGPUEnergy, "The GPU's total-energy counter (NVML), in joules.", "gpu"),
		NameGPUIdleEnergy:        d(NameGPUIdleEnergy, "Energy of the GPU since the agent started that no tenant was charged (idle power, or no tenant on the GPU), in joules; tenants plus this add up to the counter's increase.", "gpu"),
		NameGPUEnergySplit:       d(NameGPUEnergySplit, "How the GPU's energy above idle was split among its tenants over the last interval: mig-activity-x-size (GPM), mig-size, process-sm or even; always 1.", "gpu", "split"),
		NameGPUInfo:              d(NameGPUInfo, "The GPU's catalog board and its place in a plan (node and index); always 1.", "gpu", "board", "node", "index"),
		NameTenantGPUEnergy:      d(NameTenantGPUEnergy, "Energy attributed to the tenant on one GPU since the agent started, in joules; per GPU, tenants plus the GPU's idle energy add up to the counter's increase.", "gpu", "tenant"),
		NameMPSRestarts:          d(NameMPSRestarts, "Restarts of the MPS control daemon by the supervisor.", "uuid"),
		NameMPSHealthy:           d(NameMPSHealthy, "1 when the MPS control daemon answers with its limits applied.", "uuid"),
		NameGatePhase:            d(NameGatePhase, "1 for the gate's current phase, 0 for the others.", "phase"),
		NameGateCordoned:         d(NameGateCordoned, "1 while the gate holds the node cordoned.", nil...),
		NameGateChanges:          d(NameGateChanges, "MIG changes the gate finished, by outcome.", "outcome"),
		NameGPUXID:               d(NameGPUXID, "Critical XID error events the GPU reported since the agent started, by XID code.", "gpu", "xid"),
		NameTenantChargeback:     d(NameTenantChargeback, "Cost of the tenant on this node since the agent started on the allocation basis (chargeback: hardware by reserved fraction plus energy), in the policy's currency (docs/cost.md).", "tenant", "currency"),
		NameTenantShowback:       d(NameTenantShowback, "Cost of the tenant on this node since the agent started on the usage basis (showback: hardware by activity plus energy), in the policy's currency (docs/cost.md).", "tenant", "currency"),
		NameTenantCarbonLocation: d(NameTenantCarbonLocation, "Emissions of the tenant's energy on this node since the agent started, location-based, in grams CO2e.", "tenant"),
		NameTenantCarbonMarket:   d(NameTenantCarbonMarket, "Emissions of the tenant's energy on this node since the agent started, market-based, in grams CO2e.", "tenant"),
		NameIdleChargeback:       d(NameIdleChargeback, "The node's idle line on the allocation basis since the agent started (idle energy and unallocated capacity), in the policy's currency; tenants plus this add up to the GPUs' cost.", "currency"),
		NameIdleShowback:         d(NameIdleShowback, "The node's idle line on the usage basis since the agent started (idle energy and unused time), in the policy's currency; tenants plus this add up to the GPUs' cost.", "currency"),
		NameIdleCarbonLocation:   d(NameIdleCarbonLocation, "Emissions of the node's idle energy since the agent started, location-based, in grams CO2e.", nil...),
		NameIdleCarbonMarket:     d(NameIdleCarbonMarket, "Emissions of the node's idle energy since the agent started, market-based, in grams CO2e.", nil...),
		NamePollDuration:         d(NamePollDuration, "How long the agent's last poll of NVML and the engines took, in seconds.", nil...),
	}}
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect emits the current snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Snapshot()
	g := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
	}
	ctr := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v, labels...)
	}
	for _, x := range s.GPUs {
		ctr(NameGPUEnergy, x.EnergyJoules, x.UUID)
		ctr(NameGPUIdleEnergy, x.IdleEnergyJoules, x.UUID)
		g(NameGPUInfo, 1, x.UUID, x.Board, x.Node, strconv.Itoa(x.Index))
		if x.Split != "" {
			g(NameGPUEnergySplit, 1, x.UUID, x.Split)
		}
	}
	for _, x := range s.TenantGPUs {
		ctr(NameTenantGPUEnergy, x.EnergyJoules, x.GPU, x.Tenant)
	}
	if k := s.Cost; k != nil {
		for _, t := range k.Tenants {
			if k.Money {
				ctr(NameTenantChargeback, t.Chargeback, t.Tenant, k.Currency)
				ctr(NameTenantShowback, t.Showback, t.Tenant, k.Currency)
			}
			if k.Location {
				ctr(NameTenantCarbonLocation, t.CarbonLocation, t.Tenant)
			}
			if k.Market {
				ctr(NameTenantCarbonMarket, t.CarbonMarket, t.Tenant)
			}
		}
		if k.Money {
			ctr(NameIdleChargeback, k.Idle.Chargeback, k.Currency)
			ctr(NameIdleShowback, k.Idle.Showback, k.Currency)
		}
		if k.Location {
			ctr(NameIdleCarbonLocation, k.Idle.CarbonLocation)
		}
		if k.Market {
			ctr(NameIdleCarbonMarket, k.Idle.CarbonMarket)
		}
	}
	for _, x := range s.Slices {
		g(NameSliceMemoryUsed, x.MemoryUsed, x.GPU, x.Slice, x.Tenant)
		g(NameSliceMemoryPlanned, x.MemoryPlanned, x.GPU, x.Slice, x.Tenant)
		g(NameSliceSMShare, x.SMShare, x.GPU, x.Slice, x.Tenant)
	}
	for _, t := range s.Tenants {
		ctr(NameTenantTokens, t.Tokens, t.Name)
		ctr(NameTenantOutputTokens, t.OutputTokens, t.Name)
		ctr(NameTenantEnergy, t.EnergyJoules, t.Name)
		g(NameTenantJPerToken, t.JoulesPerTok, t.Name)
		if t.SLOAttainment >= 0 {
			g(NameTenantSLO, t.SLOAttainment, t.Name)
		}
		for name, h := range map[string]*Histogram{NameTenantTTFT: t.TTFT, NameTenantTPOT: t.TPOT} {
			if h != nil {
				ch <- prometheus.MustNewConstHistogram(c.descs[name], h.Count, h.Sum, h.Buckets, t.Name)
			}
		}
	}
	for _, m := range s.MPS {
		ctr(NameMPSRestarts, float64(m.Restarts), m.UUID)
		g(NameMPSHealthy, b2f(m.Healthy), m.UUID)
	}
	for _, p := range GatePhases {
		g(NameGatePhase, b2f(p == s.Gate.Phase), p)
	}
	g(NameGateCordoned, b2f(s.Gate.Cordoned))
	for code, n := range s.Gate.Changes {
		ctr(NameGateChanges, float64(n), code)
	}
	for _, x := range s.XIDs {
		ctr(NameGPUXID, float64(x.Count), x.GPU, x.Code)
	}
	g(NamePollDuration, s.PollSeconds)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
