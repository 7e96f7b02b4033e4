package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// loraSetup is Llama-3.1-8B on a whole H100 with LoRA, and n adapters of rank 16 (80 MiB, every
// linear layer) at rps each, 512 prompt and 128 output tokens, TTFT p99 ≤ 1 s, TPOT p99 ≤ 50 ms.
func loraSetup(t testing.TB, n int, rps float64, maxLoras int) LoRAConfig {
	t.Helper()
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	e, c, err := perf.PlaceLoRA(a, llm.QuantBF16, b)
	if err != nil {
		t.Fatal(err)
	}
	cfg := LoRAConfig{Engine: e, Cost: c, MaxLoRAs: maxLoras, MaxRank: 16, MaxCPULoRAs: n, Duration: 120 * time.Second}
	for i := range n {
		cfg.Adapters = append(cfg.Adapters, LoRAAdapter{Name: fmt.Sprintf("a%d", i), RPS: rps, InputTokens: 512,
			OutputTokens: 128, Bytes: 83_886_080, Rank: 16, TTFT: time.Second, TPOT: 50 * time.Millisecond})
	}
	return cfg
}

func runLoRA(t testing.TB, cfg LoRAConfig, seed uint64) LoRAResult {
	t.Helper()
	res, err := SimulateLoRA(cfg, rand.New(rand.NewPCG(seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Every arrival completes, and the tokens the engine computed per adapter add up to what the
// requests asked for: what splitting a shared engine's energy by tokens relies on.
func TestLoRATokensConserved(t *testing.T) {
	res := runLoRA(t, loraSetup(t, 12, 0.5, 4), 1)
	for _, a := range res.Adapters {
		if a.Completed != a.Arrived || a.Arrived == 0 {
			t.Fatalf("%s: %d of %d completed", a.Name, a.Completed, a.Arrived)
		}
		if a.OutputTokens != a.Completed*128 || a.InputTokens != a.Completed*512 {
			t.Errorf("%s: %d/%d tokens for %d requests", a.Name, a.InputTokens, a.OutputTokens, a.Completed)
		}
	}
	again := runLoRA(t, loraSetup(t, 12, 0.5, 4), 1)
	if fmt.Sprint(again) != fmt.Sprint(res) {
		t.Error("the same seed gave another run")
	}
}

// With as many slots as adapters, each adapter loads once (from the host cache it was started
// in); with 2 slots for 12 busy adapters the engine swaps all the time, and TTFT pays for it.
func TestLoRASwapsWhenSlotsAreFew(t *testing.T) {
	many := runLoRA(t, loraSetup(t, 12, 0.5, 12), 2)
	few := runLoRA(t, loraSetup(t, 12, 0.5, 2), 2)
	if many.Loads != 12 || many.DiskLoads != 0 {
		t.Errorf("12 slots: %d loads (%d from disk), want 12 and 0", many.Loads, many.DiskLoads)
	}
	if few.Loads < 10*many.Loads || few.DiskLoads != 0 {
		t.Errorf("2 slots: %d loads (%d from disk), want ≥ %d and 0 (the host cache holds all)", few.Loads, few.DiskLoads, 10*many.Loads)
	}
	worst := func(r LoRAResult) time.Duration {
		var w time.Duration
		for _, a := range r.Adapters {
			w = max(w, a.TTFTP99)
		}
		return w
	}
	t.Logf("TTFT p99: 12 slots %v (%d loads), 2 slots %v (%d loads, %v loading)", worst(many), many.Loads, worst(few), few.Loads, few.LoadTime)
	if worst(few) <= worst(many) {
		t.Errorf("swapping did not cost TTFT: %v ≤ %v", worst(few), worst(many))
	}
}

// A noisy adapter's burst (150 rps for 20 s on top of its 0.5, more than the engine serves) degrades its neighbours on the same
// engine; a per-adapter cap of 16 requests in the engine keeps them within their objectives and
// puts the wait on the noisy adapter alone. The three runs share a seed and the same arrivals.
func TestLoRANoisyNeighbourAndCap(t *testing.T) {
	calm := loraSetup(t, 8, 0.5, 8)
	noisy := loraSetup(t, 8, 0.5, 8)
	noisy.Adapters[0].Burst = LoRABurst{Start: 30 * time.Second, End: 50 * time.Second, RPS: 150}
	capped := loraSetup(t, 8, 0.5, 8)
	capped.Adapters[0].Burst = noisy.Adapters[0].Burst
	for i := range capped.Adapters {
		capped.Adapters[i].Cap = 16
	}
	victims := func(r LoRAResult) (time.Duration, float64) {
		var w time.Duration
		att := 1.0
		for _, a := range r.Adapters[1:] {
			w, att = max(w, a.TTFTP99), min(att, a.Attainment)
		}
		return w, att
	}
	rc, rn, rk := runLoRA(t, calm, 3), runLoRA(t, noisy, 3), runLoRA(t, capped, 3)
	wc, ac := victims(rc)
	wn, an := victims(rn)
	wk, ak := victims(rk)
	t.Logf("neighbours' worst TTFT p99 / attainment: calm %v / %.3f, burst %v / %.3f, burst with cap 16 %v / %.3f; noisy adapter's own TTFT p99: %v uncapped, %v capped",
		wc, ac, wn, an, wk, ak, rn.Adapters[0].TTFTP99, rk.Adapters[0].TTFTP99)
	if !rc.MeetsAll() {
		t.Fatalf("the calm engine misses objectives: %+v", rc.Adapters)
	}
	if wn < 2*wc || an >= ac {
		t.Errorf("the burst did not hurt the neighbours: TTFT %v against %v calm, attainment %.3f against %.3f", wn, wc, an, ac)
	}
	if wk >= wn || ak <= an {
		t.Errorf("the cap bought nothing: TTFT %v against %v uncapped, attainment %.3f against %.3f", wk, wn, ak, an)
	}
	if rk.Adapters[0].TTFTP99 <= rn.Adapters[0].TTFTP99/2 {
		t.Logf("note: the capped noisy adapter's own TTFT p99 fell too: %v against %v", rk.Adapters[0].TTFTP99, rn.Adapters[0].TTFTP99)
	}
}

func TestLoRAConfigErrors(t *testing.T) {
	cfg := loraSetup(t, 2, 1, 2)
	cfg.MaxRank, cfg.Duration = 12, 0
	cfg.Adapters[1].InputTokens, cfg.Adapters[0].Rank = 0, 64
	_, err := SimulateLoRA(cfg, rand.New(rand.NewPCG(1, 1)))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"maxRank", "duration", "adapters[1]: inputTokens", "adapters[0].rank"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not name %s: %v", w, err)
		}
	}
}

func BenchmarkSimulateLoRA(b *testing.B) {
	cfg := loraSetup(b, 50, 0.2, 8)
	for b.Loop() {
		runLoRA(b, cfg, 1)
	}
}

// The adapters an engine is started with (--lora-modules, up to max_cpu_loras) are in host
// memory before traffic arrives, as vLLM loads them at start-up: only adapters beyond
// max_cpu_loras are ever read from disk, and then the host cache churns.
func TestLoRAHostCacheStartsWarm(t *testing.T) {
	cfg := loraSetup(t, 12, 0.5, 4)
	res := runLoRA(t, cfg, 3)
	if res.Loads == 0 || res.DiskLoads != 0 {
		t.Errorf("12 adapters in a host cache of 12: %d loads, %d from disk; want loads and none from disk", res.Loads, res.DiskLoads)
	}
	cfg.MaxCPULoRAs = 6
	res = runLoRA(t, cfg, 3)
	if res.DiskLoads == 0 {
		t.Errorf("12 adapters in a host cache of 6: no load from disk")
	}
	t.Logf("host cache of 6: %d loads, %d from disk", res.Loads, res.DiskLoads)
}

// An adapter's requests draw their lengths by its law, as the dense simulator draws a tenant's:
// exponential lengths keep their means and vary, a drawn pair stays within MaxContext, and
// lengths "fixed" are the run without a law, arrival for arrival.
func TestLoRALengths(t *testing.T) {
	cfg := loraSetup(t, 6, 2, 6)
	base := runLoRA(t, cfg, 3)
	for i := range cfg.Adapters {
		cfg.Adapters[i].Lengths = LengthsFixed
	}
	if fixed := runLoRA(t, cfg, 3); fmt.Sprint(fixed) != fmt.Sprint(base) {
		t.Error("lengths fixed changed the run")
	}
	for i := range cfg.Adapters {
		cfg.Adapters[i].Lengths, cfg.Adapters[i].MaxContext = LengthsExponential, 2048
		cfg.Adapters[i].RPS = 20
	}
	reqs := loraArrivals(cfg, rand.New(rand.NewPCG(3, 1)))
	var in, out float64
	distinct := map[int]bool{}
	for _, q := range reqs {
		if q.in+q.out > 2048 || q.in < 1 || q.out < 1 {
			t.Fatalf("drawn %d + %d tokens, beyond the context of 2048", q.in, q.out)
		}
		in += float64(q.in)
		out += float64(q.out)
		distinct[q.in] = true
	}
	n := float64(len(reqs))
	t.Logf("%d requests: mean %.1f prompt and %.1f output tokens, %d distinct prompt lengths", len(reqs), in/n, out/n, len(distinct))
	if math.Abs(in/n-512)/512 > 0.05 || math.Abs(out/n-128)/128 > 0.05 || len(distinct) < 100 {
		t.Errorf("exponential lengths: mean %.1f/%.1f tokens (want 512/128 within 5 %%), %d distinct prompt lengths", in/n, out/n, len(distinct))
	}
	res := runLoRA(t, cfg, 3)
	for _, a := range res.Adapters {
		if a.Completed != a.Arrived {
			t.Errorf("%s: %d of %d completed", a.Name, a.Completed, a.Arrived)
		}
	}
}
