package sim

import (
	"math/rand/v2"
	"os"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
)

// loraExample is examples/lora-200.yaml's one group on its engine (Llama-3.1-8B on a whole H100).
func loraExample(t *testing.T) plan.LoRAInput {
	t.Helper()
	return loraExampleGroup(t, "lora-200.yaml", 200, 0)
}

// loraExampleGroup is the one shared group of examples/NAME, of n adapters, beside solos
// hard-isolated adapter tenants, on a whole H100 (its base model is Llama-3.1-8B at bf16).
func loraExampleGroup(t *testing.T, name string, n, solo int) plan.LoRAInput {
	t.Helper()
	data, err := os.ReadFile("../../examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v1.LoadPool(data)
	if err != nil {
		t.Fatal(err)
	}
	groups, solos := plan.GroupLoRA(p, nil)
	if len(groups) != 1 || len(solos) != solo || len(groups[0].Adapters) != n {
		t.Fatalf("%s: groups %d (solos %d), want one of %d adapters", name, len(groups), len(solos), n)
	}
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	bytes, err := llm.LoRAAdapterBytes(a, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := groups[0]
	for i := range g.Adapters {
		g.Adapters[i].Bytes = bytes
	}
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	e, c, err := perf.PlaceLoRA(a, llm.QuantBF16, b)
	if err != nil {
		t.Fatal(err)
	}
	return plan.LoRAInput{Group: g, Engine: e, Cost: c, Prefix: "llama-8b-lora"}
}

// simulateLoRAPlan runs every engine of p for d and reports whether every adapter met its
// objectives, with the worst adapter's attainment and TTFT p99.
func simulateLoRAPlan(t *testing.T, in plan.LoRAInput, p plan.LoRAPlan, d time.Duration) (bool, float64, time.Duration, int64) {
	t.Helper()
	ok, worst, ttft, loads := true, 1.0, time.Duration(0), int64(0)
	for i, eng := range p.Engines {
		res, err := SimulateLoRA(loraEngineConfig(in, eng, d), rand.New(rand.NewPCG(uint64(i)+1, 14)))
		if err != nil {
			t.Fatal(err)
		}
		ok = ok && res.MeetsAll()
		loads += res.Loads
		for _, a := range res.Adapters {
			worst, ttft = min(worst, a.Attainment), max(ttft, a.TTFTP99)
		}
	}
	return ok, worst, ttft, loads
}

// TestLoRA200Example holds examples/lora-200.yaml to its bars: every adapter meets its objectives
// in simulation on at least 10× fewer GPUs than one replica per adapter, on the fleet's eight
// GPUs, and the planner's engine count is within 1.25× of the fewest engines that meet the
// objectives in simulation (found by trying every count below the planner's with its grouping).
func TestLoRA200Example(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 200 adapters several times")
	}
	in := loraExample(t)
	p, err := plan.PlanLoRA(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p.String())
	const d = 300 * time.Second
	ok, worst, ttft, loads := simulateLoRAPlan(t, in, p, d)
	n := len(p.Engines)
	t.Logf("planned %d engines (%d GPUs against 200 for one replica per adapter, %.1f× fewer): every adapter meets its SLO %v, worst attainment %.4f, worst TTFT p99 %v, %d adapter loads",
		n, n, 200/float64(n), ok, worst, ttft, loads)
	if !ok {
		t.Errorf("an adapter misses its objectives on the planned %d engines", n)
	}
	if 200 < 10*n || n > 8 {
		t.Errorf("%d engines: want ≤ 20 (10× fewer than 200) and ≤ 8 (the fleet)", n)
	}
	fewest := 0
	for m := 1; m <= 8 && fewest == 0; m++ {
		pm, _, err := plan.PlanLoRAWith(in, m)
		if err != nil {
			t.Fatal(err)
		}
		okm, wm, tm, lm := simulateLoRAPlan(t, in, pm, d)
		t.Logf("%d engines: meets %v, worst attainment %.4f, worst TTFT p99 %v, %d loads", m, okm, wm, tm, lm)
		if okm {
			fewest = m
		}
	}
	if fewest == 0 {
		t.Fatal("no engine count up to 8 meets the objectives in simulation")
	}
	t.Logf("planner %d engines, fewest meeting the objectives in simulation %d: %.2f×", n, fewest, float64(n)/float64(fewest))
	if float64(n) > 1.25*float64(fewest) {
		t.Errorf("planner's %d engines are more than 1.25× the %d that simulation shows enough", n, fewest)
	}
}

// loraEngineConfig is one planned engine of in with its adapters' traffic on it, for d.
func loraEngineConfig(in plan.LoRAInput, eng plan.LoRAEngine, d time.Duration) LoRAConfig {
	by := map[string]plan.LoRAAdapter{}
	for _, a := range in.Group.Adapters {
		by[a.Tenant] = a
	}
	cfg := LoRAConfig{Engine: in.Engine, Cost: in.Cost, MaxLoRAs: eng.MaxLoRAs, MaxRank: eng.MaxRank,
		MaxCPULoRAs: eng.MaxCPULoRAs, Duration: d}
	for _, name := range eng.Adapters {
		a := by[name]
		cfg.Adapters = append(cfg.Adapters, LoRAAdapter{Name: name, RPS: eng.Load[name], InputTokens: a.InputTokens,
			OutputTokens: a.OutputTokens, Lengths: a.Lengths, MaxContext: a.MaxContext, Bytes: a.Bytes, Rank: a.Rank, TTFT: a.SLO.TTFT, TPOT: a.SLO.TPOT})
	}
	return cfg
}
