package main

import (
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// simulate runs a shared engine at the clock its adapters' energy class locks its GPU at, the
// lowest lock of its adapters where a plan mixes them (ADR 0095); balanced and performance
// adapters leave it at the power-limited boost clock.
func TestLoRAEngineModelClock(t *testing.T) {
	ad := func(name string, e v1.EnergyClass) v1.Tenant {
		return v1.Tenant{Name: name, EnergyClass: e,
			Model: v1.Model{Name: "llama-3.1-8b", Quantization: llm.QuantBF16, Adapter: &v1.Adapter{Name: name, Rank: 16}}}
	}
	pool := &v1.Pool{Tenants: []v1.Tenant{ad("a", v1.EnergyEfficiency), ad("b", v1.EnergyPerformance), ad("c", v1.EnergyBalanced), ad("d", "")}}
	for _, c := range []struct {
		adapters []string
		want     float64
	}{{[]string{"a"}, 0.7}, {[]string{"b", "a"}, 0.7}, {[]string{"b", "c", "d"}, 0}, {[]string{"d"}, 0}} {
		pl := &v1.Plan{GPUs: []v1.PlanGPU{{Node: "n", Index: 0, Board: "H100-SXM5-80GB"}}}
		e := v1.PlanLoRAEngine{Name: "e", GPU: v1.GPURef{Node: "n", Index: 0}}
		for _, a := range c.adapters {
			e.Adapters = append(e.Adapters, v1.PlanLoRAAdapter{Tenant: a})
		}
		pl.LoRAEngines = []v1.PlanLoRAEngine{e}
		ms, err := loraEngineModels(pl, pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ms["e"].engine.Slice().ClockCap; got != c.want {
			t.Errorf("adapters %v: engine at clock %v, want %v", c.adapters, got, c.want)
		}
	}
	bad := &v1.Pool{Tenants: []v1.Tenant{ad("a", "eco")}}
	pl := &v1.Plan{GPUs: []v1.PlanGPU{{Node: "n", Board: "H100-SXM5-80GB"}}, LoRAEngines: []v1.PlanLoRAEngine{{Name: "e", Adapters: []v1.PlanLoRAAdapter{{Tenant: "a"}}}}}
	if _, err := loraEngineModels(pl, bad, nil); err == nil {
		t.Error("unknown energy class: no error")
	}
}
