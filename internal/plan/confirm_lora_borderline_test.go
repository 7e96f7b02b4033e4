package plan

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// fakeLoRASim answers every adapter of every engine with att(seed) of its requests within the
// objectives (its load times the run's length) and a TTFT p99 of ttft(seed), and counts the runs
// by seed.
type fakeLoRASim struct {
	att, ttft func(seed uint64) float64 // ttft: a share of the adapter's target
	mu        sync.Mutex
	runs      map[uint64]int
}

func (f *fakeLoRASim) run(_ context.Context, in LoRASimInput) (map[string]SimTenant, error) {
	f.mu.Lock()
	f.runs[in.Seed]++
	f.mu.Unlock()
	out := map[string]SimTenant{}
	for _, a := range in.Adapters {
		out[a.Tenant] = SimTenant{Judged: int64(a.RPS * in.Duration.Seconds()), Attainment: f.att(in.Seed),
			TTFTP99: time.Duration(f.ttft(in.Seed) * float64(a.SLO.TTFT))}
	}
	return out, nil
}

// seeds is how many runs f made at seeds [lo, hi).
func (f *fakeLoRASim) seeds(lo, hi uint64) int {
	n := 0
	for s, c := range f.runs {
		if s >= lo && s < hi {
			n += c
		}
	}
	return n
}

// planFake plans loraFleetPool(8 GPUs, 4 adapters of 15 req/s) with f as the LoRA engine
// simulator (the dense tenant is not simulated), and returns the plan and the model's engines.
func planFake(t *testing.T, f *fakeLoRASim) (*v1.Plan, int) {
	t.Helper()
	f.runs = map[uint64]int{}
	pool := loraFleetPool(t, 8, 4)
	model := buildLoRA(t, pool, Options{})
	pl, _, err := BuildWithLoRA(context.Background(), pool, Options{SimulateLoRA: f.run}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl, len(model.LoRAEngines)
}

func simulatedOf(t *testing.T, pl *v1.Plan, name string) string {
	t.Helper()
	for _, pt := range pl.Tenants {
		if pt.Name == name {
			if r, ok := pt.Reason(v1.ReasonSimulated); ok {
				return r.Message
			}
			return ""
		}
	}
	t.Fatalf("no tenant %s", name)
	return ""
}

// LoRA engines are confirmed by the dense tenants' rules (ADR 0095): engines whose first three
// runs are clear are not run again and keep the model's plan; engines whose first runs pass
// near the edge (99.8 %: below 99.9 %) get the six runs more (ADR 0078), and, where only the
// spread floor fails them (their runs alike), the 40 tail runs (ADR 0083), which pass them; an
// adapter whose p99 sits above 90 % of its target in runs that all meet it is borderline too
// (ADR 0089); and a borderline engine that its six runs more find short gets an engine more.
func TestConfirmLoRABorderline(t *testing.T) {
	one := func(v float64) func(uint64) float64 { return func(uint64) float64 { return v } }

	clear := &fakeLoRASim{att: one(1), ttft: one(0.5)}
	pl, model := planFake(t, clear)
	if n := clear.seeds(confirmRuns, 1000); n != 0 || clear.seeds(0, confirmRuns) != confirmRuns*model || len(pl.LoRAEngines) != model {
		t.Errorf("clear: %d runs after the first %d, %d engines (model %d)", n, clear.seeds(0, confirmRuns), len(pl.LoRAEngines), model)
	}
	if m := simulatedOf(t, pl, "ad-0"); m != "" {
		t.Errorf("clear: a Simulated reason %q", m)
	}

	near := &fakeLoRASim{att: one(0.998), ttft: one(0.5)}
	pl, model = planFake(t, near)
	extra, tail := near.seeds(confirmRuns, confirmRuns+confirmExtraRuns), near.seeds(confirmRuns+confirmExtraRuns, 1000)
	// Tail runs: each engine's, and its two adapters' (15 req/s each, half the engine's rate:
	// runs twice as long), of that engine alone.
	if extra != confirmExtraRuns*model || tail != 2*confirmTailRuns*model || len(pl.LoRAEngines) != model {
		t.Errorf("borderline: %d extra runs, %d tail runs, %d engines; want %d, %d, %d", extra, tail, len(pl.LoRAEngines),
			confirmExtraRuns*model, 2*confirmTailRuns*model, model)
	}
	t.Log(simulatedOf(t, pl, "ad-0"))
	if m := simulatedOf(t, pl, "ad-0"); !strings.Contains(m, "borderline in its first 3 runs") || !strings.Contains(m, "which pass it") {
		t.Errorf("borderline: Simulated %q", m)
	}
	for _, pt := range pl.Tenants {
		if pt.Infeasible {
			t.Errorf("borderline: %s infeasible: %v", pt.Name, pt.Reasons)
		}
	}

	p99 := &fakeLoRASim{att: one(1), ttft: one(0.95)}
	pl, model = planFake(t, p99)
	if extra := p99.seeds(confirmRuns, confirmRuns+confirmExtraRuns); extra != confirmExtraRuns*model || len(pl.LoRAEngines) != model {
		t.Errorf("p99 near its target: %d extra runs, %d engines", extra, len(pl.LoRAEngines))
	}

	// Borderline in the first runs (99.7 %), short in the six more (98.5 %): raised.
	worse := &fakeLoRASim{att: func(s uint64) float64 {
		if s < confirmRuns {
			return 0.997
		}
		return 0.985
	}, ttft: one(0.5)}
	pl, model = planFake(t, worse)
	if len(pl.LoRAEngines) <= model {
		t.Errorf("short in the runs more: %d engines, model %d", len(pl.LoRAEngines), model)
	}
	t.Log(simulatedOf(t, pl, "ad-0"))
	if m := simulatedOf(t, pl, "ad-0"); !strings.Contains(m, "short of the SLO") || !strings.Contains(m, "an estimated") {
		t.Errorf("short in the runs more: Simulated %q", m)
	}
}
