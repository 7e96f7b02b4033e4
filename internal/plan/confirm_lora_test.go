package plan

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// loraSimRun is internal/plansim.RunLoRA (which this package's tests cannot import): the LoRA
// engine simulator gpupool plan confirms shared engines with.
func loraSimRun(ctx context.Context, in LoRASimInput) (map[string]SimTenant, error) {
	e := in.LoRA
	cfg := sim.LoRAConfig{Engine: in.Engine, Cost: in.Cost, MaxLoRAs: e.MaxLoRAs, MaxRank: e.MaxRank, MaxCPULoRAs: e.MaxCPULoRAs, Duration: in.Duration}
	for _, a := range in.Adapters {
		cfg.Adapters = append(cfg.Adapters, sim.LoRAAdapter{Name: a.Tenant, RPS: a.RPS, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
			Lengths: a.Lengths, MaxContext: a.MaxContext, Bytes: a.Bytes, Rank: a.Rank, TTFT: a.SLO.TTFT, TPOT: a.SLO.TPOT})
	}
	r, err := sim.SimulateLoRA(cfg, rand.New(rand.NewPCG(in.Seed, in.Stream)))
	if err != nil {
		return nil, err
	}
	out := map[string]SimTenant{}
	for _, a := range r.Adapters {
		out[a.Name] = SimTenant{Judged: a.Arrived, Attainment: a.Attainment, TTFTP99: a.TTFTP99, TPOTP99: a.TPOTP99}
	}
	return out, nil
}

// lora200 is examples/lora-200.yaml (200 Zipf adapters, 80 req/s in all, on 8 H100s) with its
// objectives' TPOT p99 and its GPU count replaced.
func lora200(t testing.TB, tpot string, gpus int) *v1.Pool {
	t.Helper()
	b, err := os.ReadFile("../../examples/lora-200.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.ReplaceAll(string(b), "tpotP99: 50ms", "tpotP99: "+tpot)
	y = strings.Replace(y, "count: 8", "count: "+strconv.Itoa(gpus), 1)
	p, err := v1.LoadPool([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func buildLoRA(t testing.TB, pool *v1.Pool, o Options) *v1.Plan {
	t.Helper()
	pl, _, err := BuildWithLoRA(context.Background(), pool, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// loraConfirmed are gpupool plan's options for shared engines (the default budget).
var loraConfirmed = Options{Simulate: simRun, SimulateLoRA: loraSimRun}

// At a TPOT objective of 26 ms the queueing model accepts the 200 adapters on two engines of
// 40 req/s (their predicted TPOT p99 is 24.7 ms), where the LoRA engine simulator measures
// about 28 ms: in the confirming runs (2,500 requests an engine a run) 98.30 % and 99.21 % of
// the engines' requests meet it, 96.24 % and 98.59 % in the worst run. The runs find the two
// engines short and the group gets a third, which passes; every adapter says so (Simulated)
// and stays served. With confirmation off (ConfirmRequests -1, --sim-requests -1) the plan is
// the model's.
func TestConfirmLoRAAddsEngine(t *testing.T) {
	pool := lora200(t, "26ms", 8)
	model := buildLoRA(t, pool, Options{})
	if len(model.LoRAEngines) != 2 {
		t.Fatalf("the model alone: %d engines, want 2", len(model.LoRAEngines))
	}
	off := loraConfirmed
	off.ConfirmRequests = -1
	if a, b := yamlOf(t, model), yamlOf(t, buildLoRA(t, pool, off)); a != b {
		t.Error("confirmation off: the plan differs from the model's")
	}
	pl := buildLoRA(t, pool, loraConfirmed)
	if len(pl.LoRAEngines) != 3 {
		t.Fatalf("confirmed: %d engines, want 3", len(pl.LoRAEngines))
	}
	for _, pt := range pl.Tenants {
		r, ok := pt.Reason(v1.ReasonSimulated)
		if pt.Infeasible || !ok || !strings.Contains(r.Message, "short of the SLO on 2 engine(s)") || !strings.Contains(r.Message, "model's count is 2") {
			t.Fatalf("%s: infeasible %v, reasons %v", pt.Name, pt.Infeasible, pt.Reasons)
		}
	}
	t.Log(pl.Tenants[0].Reasons)
}

// With no idle GPU for a third engine (a fleet of two H100s) the adapters the runs find short
// are left infeasible with a NoCapacity reason that gives what the runs measured; the engines
// stay two.
func TestConfirmLoRANoCapacity(t *testing.T) {
	pl := buildLoRA(t, lora200(t, "26ms", 2), loraConfirmed)
	if len(pl.LoRAEngines) != 2 {
		t.Fatalf("%d engines, want 2", len(pl.LoRAEngines))
	}
	for _, pt := range pl.Tenants {
		if !pt.Infeasible || len(pt.Reasons) == 0 || pt.Reasons[0].Code != v1.ReasonNoCapacity ||
			!strings.Contains(pt.Reasons[0].Message, " % of ") || !strings.Contains(pt.Reasons[0].Message, "no idle GPU for another engine") {
			t.Fatalf("%s: infeasible %v, reasons %v", pt.Name, pt.Infeasible, pt.Reasons)
		}
	}
	t.Log(pl.Tenants[0].Reasons[0])
}

// Engines the runs pass keep the model's plan byte for byte: examples/lora-200.yaml as it is
// (TPOT 50 ms).
func TestConfirmLoRAPassKeepsPlan(t *testing.T) {
	pool := lora200(t, "50ms", 8)
	if a, b := yamlOf(t, buildLoRA(t, pool, Options{})), yamlOf(t, buildLoRA(t, pool, loraConfirmed)); a != b {
		t.Errorf("the confirmed plan differs from the model's:\n%s\n---\n%s", a, b)
	}
}

func yamlOf(t testing.TB, pl *v1.Plan) string {
	t.Helper()
	b, err := v1.EncodeYAML(pl)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
