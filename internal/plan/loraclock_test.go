package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// loraClockPool is 8 soft adapters of llama-3.1-8b at 1.5 req/s each (12 in all) of 2,000 + 128
// tokens, TTFT p99 ≤ 400 ms, on 4 H100s, of energy class class ("" for the default), and one
// adapter of class other ("" for none).
func loraClockPool(t testing.TB, class, other string) *v1.Pool {
	t.Helper()
	y := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: lc}
fleet:
  nodes:
  - name: node-a
    gpus: [{board: H100-SXM5-80GB, count: 4}]
policy: {burstPoolPercent: 0}
tenants:
`
	ad := func(i int, c string) string {
		s := fmt.Sprintf(`- name: ad-%d
  path: acme/x
  isolation: soft
  model: {name: llama-3.1-8b, quantization: bf16, adapter: {name: ad-%d-lora, repo: acme/ad-%d, rank: 16}}
  traffic: {rps: 1.5, inputTokens: 2000, outputTokens: 128}
  slo: {ttftP99: 400ms, tpotP99: 50ms}
`, i, i, i)
		if c != "" {
			s += "  energyClass: " + c + "\n"
		}
		return s
	}
	for i := range 8 {
		y += ad(i, class)
	}
	if other != "" {
		y += ad(8, other)
	}
	p, err := v1.LoadPool([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An engine of efficiency adapters runs on a GPU locked at 0.7 of boost (the class locks it, as a
// dense tenant's; the LoRA engine simulator runs it there), so it is sized there (ADR 0095). At
// the boost clock the queueing model puts the group's 12 req/s on one engine (predicted TTFT p99
// 364 ms), which the simulator at the lock serves within the objectives for about 22 % of its
// requests; at the lock it takes two engines, which meet them in every run (seeds 1-3).
func TestLoRAEngineSizedAtItsClock(t *testing.T) {
	fg, _, err := LoRAFleetGroups(loraClockPool(t, "efficiency", ""), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fg) != 1 || fg[0].Group.Class != v1.EnergyEfficiency || !strings.HasSuffix(fg[0].Group.Key, "/efficiency") {
		t.Fatalf("groups %+v", fg)
	}
	g := fg[0]
	for _, b := range g.Boards {
		if c := b.Engine.Slice().ClockCap; c != 0.7 {
			t.Errorf("board %s: engine at clock %v, want the efficiency lock 0.7", b.Board, c)
		}
	}
	if n := len(g.Plan.Engines); n != 2 {
		t.Errorf("%d engines at the lock, want 2", n)
	}
	// The simulator at the lock (the engine built apart from the plan's): the planned engines
	// meet the objectives.
	arch, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	h100, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := perf.DefaultOptions().ClockCap("efficiency")
	if err != nil {
		t.Fatal(err)
	}
	eng, cost, err := perf.PlaceLoRAAt(arch, llm.QuantBF16, h100, lock)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range g.Plan.Engines {
		var ads []LoRAAdapter
		for _, a := range g.Group.Adapters {
			if r, ok := e.Load[a.Tenant]; ok {
				a.RPS = r
				ads = append(ads, a)
			}
		}
		for seed := uint64(1); seed <= 3; seed++ {
			res, err := loraSimRun(context.Background(), LoRASimInput{Engine: eng, Cost: cost, LoRA: e, Adapters: ads, Duration: 10 * time.Minute, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			var n, ok float64
			for _, s := range res {
				n += float64(s.Judged)
				ok += float64(s.Judged) * s.Attainment
			}
			if ok/n < 0.99 {
				t.Errorf("engine %s, seed %d: %.2f %% within the objectives at the lock", e.Name, seed, 100*ok/n)
			}
		}
	}
	// The same adapters of the default class: one engine at the boost clock, and no class in the key.
	fb, _, err := LoRAFleetGroups(loraClockPool(t, "", ""), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fb) != 1 || fb[0].Boards[0].Engine.Slice().ClockCap != 0 || len(fb[0].Plan.Engines) != 1 || strings.Contains(fb[0].Group.Key, "balanced") {
		t.Errorf("balanced: %d groups, key %q, %d engines", len(fb), fb[0].Group.Key, len(fb[0].Plan.Engines))
	}
}

// Adapters of different energy classes never share an engine (clocks are per GPU), and an
// engine's GPU of a class that is not balanced says so, as a dense tenant's does.
func TestLoRAEngineOneClassAGPU(t *testing.T) {
	pool := loraClockPool(t, "efficiency", "performance")
	fg, _, err := LoRAFleetGroups(pool, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(fg) != 2 {
		t.Fatalf("%d groups, want one a class", len(fg))
	}
	for _, g := range fg {
		want := 0.0
		if g.Group.Class == v1.EnergyEfficiency {
			want = 0.7
		}
		if c := g.Boards[0].Engine.Slice().ClockCap; c != want {
			t.Errorf("group %s: clock %v, want %v", g.Group.Key, c, want)
		}
	}
	pl, _ := planWithLoRA(t, pool, nil)
	eff := 0
	for _, g := range pl.GPUs {
		if g.LoRAEngine == "" {
			continue
		}
		has := false
		for _, r := range g.Reasons {
			has = has || r.Code == v1.ReasonEnergyClass
		}
		if has {
			eff++
		}
	}
	if len(pl.LoRAEngines) != 3 || eff != 3 {
		t.Errorf("%d engines, %d with an EnergyClass reason; want 3 and 3 (two efficiency, one performance)", len(pl.LoRAEngines), eff)
	}
}
