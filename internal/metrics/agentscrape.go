package metrics

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// AgentScrape is what one read of the agent's /metrics says about energy and tokens: counters since
// the agent started.
type AgentScrape struct {
	// GPUs by UUID.
	GPUs map[string]ScrapedGPU
	// TenantGPU is each tenant's energy on each GPU: GPU UUID → tenant → joules.
	TenantGPU map[string]map[string]float64
	// TenantTokens are the tokens (prompt and generated) of each tenant's engines.
	TenantTokens map[string]float64
	// TenantOutputTokens are the tokens each tenant's engines generated; a tenant is absent when
	// the agent did not export them (agents before output tokens were counted apart).
	TenantOutputTokens map[string]float64
}

// ScrapedGPU is one GPU's place and counters.
type ScrapedGPU struct {
	Board, Node         string
	Index               int
	EnergyJoules, IdleJ float64
	// Split is how the agent split the GPU's active energy in its last interval (GPU.Split).
	Split                string
	hasInfo, hasCounters bool
}

// ParseAgent reads the agent's Prometheus text exposition. Every GPU with an energy counter must
// have its info series (board, node, index); every value must be a finite count.
func ParseAgent(r io.Reader) (AgentScrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return AgentScrape{}, fmt.Errorf("parse agent metrics: %w", err)
	}
	s := AgentScrape{GPUs: map[string]ScrapedGPU{}, TenantGPU: map[string]map[string]float64{}, TenantTokens: map[string]float64{},
		TenantOutputTokens: map[string]float64{}}
	var bad error
	each := func(name string, f func(labels map[string]string, v float64)) {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				bad = fmt.Errorf("parse agent metrics: %s%v is %v, not a count", name, labels, v)
				continue
			}
			f(labels, v)
		}
	}
	each(NameGPUInfo, func(l map[string]string, _ float64) {
		g := s.GPUs[l["gpu"]]
		idx, err := strconv.Atoi(l["index"])
		if err != nil {
			bad = fmt.Errorf("parse agent metrics: %s{gpu=%q}: index %q is not a number", NameGPUInfo, l["gpu"], l["index"])
			return
		}
		g.Board, g.Node, g.Index, g.hasInfo = l["board"], l["node"], idx, true
		s.GPUs[l["gpu"]] = g
	})
	each(NameGPUEnergy, func(l map[string]string, v float64) {
		g := s.GPUs[l["gpu"]]
		g.EnergyJoules, g.hasCounters = v, true
		s.GPUs[l["gpu"]] = g
	})
	each(NameGPUIdleEnergy, func(l map[string]string, v float64) {
		g := s.GPUs[l["gpu"]]
		g.IdleJ = v
		s.GPUs[l["gpu"]] = g
	})
	each(NameGPUEnergySplit, func(l map[string]string, _ float64) {
		g := s.GPUs[l["gpu"]]
		g.Split = l["split"]
		s.GPUs[l["gpu"]] = g
	})
	each(NameTenantGPUEnergy, func(l map[string]string, v float64) {
		if s.TenantGPU[l["gpu"]] == nil {
			s.TenantGPU[l["gpu"]] = map[string]float64{}
		}
		s.TenantGPU[l["gpu"]][l["tenant"]] = v
	})
	each(NameTenantTokens, func(l map[string]string, v float64) { s.TenantTokens[l["tenant"]] = v })
	each(NameTenantOutputTokens, func(l map[string]string, v float64) { s.TenantOutputTokens[l["tenant"]] = v })
	if bad != nil {
		return AgentScrape{}, bad
	}
	// In UUID order, so that the same text names the same GPU every time.
	for _, u := range slices.Sorted(maps.Keys(s.GPUs)) {
		if g := s.GPUs[u]; g.hasCounters && !g.hasInfo {
			return AgentScrape{}, fmt.Errorf("parse agent metrics: gpu %q has an energy counter but no %s series", u, NameGPUInfo)
		}
	}
	return s, nil
}
