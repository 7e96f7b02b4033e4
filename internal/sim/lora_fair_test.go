package sim

import (
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/plan"
)

// Weighted shares of an engine become caps: with 64 slots and four adapters of weights 1, 1, 2
// and 4 each wanting 64, weighted max-min gives 8, 8, 16 and 32; an adapter wanting less than its
// share keeps what it wants and the rest goes to the others by weight; a reservation is served
// first.
func TestLoRAFairCaps(t *testing.T) {
	p := plan.LoRAPlan{Shares: []plan.LoRAShare{{Tenant: "a", Engine: "e", Weight: 1}, {Tenant: "b", Engine: "e", Weight: 1},
		{Tenant: "c", Engine: "e", Weight: 2}, {Tenant: "d", Engine: "e", Weight: 4}, {Tenant: "x", Engine: "other", Weight: 9}}}
	shares := weightsOn(p, "e")
	now := time.Unix(0, 0)
	all := map[string]int{"a": 64, "b": 64, "c": 64, "d": 64}
	caps, err := LoRAFairCaps("e", shares, 64, all, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range map[string]int{"a": 8, "b": 8, "c": 16, "d": 32} {
		if caps[n] != w {
			t.Errorf("%s: cap %d, want %d (all %v)", n, caps[n], w, caps)
		}
	}
	if _, ok := caps["x"]; ok {
		t.Error("another engine's adapter got a cap")
	}
	// d wants 4: the 60 others split 1:1:2 → 15, 15, 30.
	caps, _ = LoRAFairCaps("e", shares, 64, map[string]int{"a": 64, "b": 64, "c": 64, "d": 4}, nil, now)
	for n, w := range map[string]int{"a": 15, "b": 15, "c": 30, "d": 4} {
		if caps[n] != w {
			t.Errorf("%s wanting less: cap %d, want %d (all %v)", n, caps[n], w, caps)
		}
	}
	// a reserves 20: 20 first, then the weighted split leaves it there (its fair part is 8).
	caps, _ = LoRAFairCaps("e", shares, 64, all, map[string]int{"a": 20}, now)
	if caps["a"] < 20 || caps["a"]+caps["b"]+caps["c"]+caps["d"] > 64 {
		t.Errorf("reservation: %v", caps)
	}
	if _, err := LoRAFairCaps("none", weightsOn(p, "none"), 64, all, nil, now); err == nil {
		t.Error("an engine without adapters was accepted")
	}
}

// weightsOn is the weights of engine's adapters in a plan's shares.
func weightsOn(p plan.LoRAPlan, engine string) map[string]float64 {
	w := map[string]float64{}
	for _, s := range p.Shares {
		if s.Engine == engine {
			w[s.Tenant] += s.Weight
		}
	}
	return w
}

// The fair allocator's caps protect the neighbours of a noisy adapter in simulation, as the
// fixed cap of TestLoRANoisyNeighbourAndCap does: eight adapters of equal weight each wanting the
// whole engine get 1/8 of its slots.
func TestLoRAFairCapsInSimulation(t *testing.T) {
	cfg := loraSetup(t, 8, 0.5, 8)
	cfg.Adapters[0].Burst = LoRABurst{Start: 30 * time.Second, End: 50 * time.Second, RPS: 150}
	shares := map[string]float64{}
	want := map[string]int{}
	for _, a := range cfg.Adapters {
		shares[a.Name] = 1
		want[a.Name] = cfg.Engine.MaxSeqs()
	}
	caps, err := LoRAFairCaps("e", shares, cfg.Engine.MaxSeqs(), want, nil, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	uncapped := runLoRA(t, cfg, 3)
	for i := range cfg.Adapters {
		cfg.Adapters[i].Cap = caps[cfg.Adapters[i].Name]
	}
	capped := runLoRA(t, cfg, 3)
	worst := func(r LoRAResult) float64 {
		w := 1.0
		for _, a := range r.Adapters[1:] {
			w = min(w, a.Attainment)
		}
		return w
	}
	t.Logf("fair caps %v (of %d slots); neighbours' worst attainment %.3f uncapped, %.3f capped", caps, cfg.Engine.MaxSeqs(), worst(uncapped), worst(capped))
	if worst(capped) <= worst(uncapped) || worst(capped) < 0.99 {
		t.Errorf("fair caps did not protect the neighbours: %.3f against %.3f", worst(capped), worst(uncapped))
	}
}
