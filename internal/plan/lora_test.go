package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

func adapterTenant(name, path string, iso v1.Isolation, model string, q llm.Quantization, rps float64) v1.Tenant {
	d := v1.Duration(time.Second)
	p := v1.Duration(50 * time.Millisecond)
	return v1.Tenant{Name: name, Path: path, Isolation: iso,
		Model:   v1.Model{Name: model, Quantization: q, Adapter: &v1.Adapter{Name: name + "-lora", Repo: "o/" + name, Rank: 8}},
		Traffic: v1.Traffic{RPS: rps, InputTokens: 512, OutputTokens: 128},
		SLO:     v1.SLO{TTFTP99: &d, TPOTP99: &p}}
}

// Adapters share an engine only with the same base model, quantization and trust group; a hard
// tenant serves alone; a tenant without an adapter is not a LoRA tenant at all.
func TestGroupLoRA(t *testing.T) {
	p := &v1.Pool{Tenants: []v1.Tenant{
		adapterTenant("a", "acme/x", v1.IsolationSoft, "llama-3.1-8b", "bf16", 1),
		adapterTenant("b", "acme/x", v1.IsolationSoft, "llama-3.1-8b", "bf16", 2),
		adapterTenant("c", "acme/y", v1.IsolationSoft, "llama-3.1-8b", "bf16", 1), // another trust group
		adapterTenant("d", "acme/x", v1.IsolationSoft, "llama-3.1-8b", "fp8", 1),  // another quantization
		adapterTenant("e", "acme/x", v1.IsolationSoft, "qwen2.5-7b", "bf16", 1),   // another base
		adapterTenant("f", "acme/x", v1.IsolationHard, "llama-3.1-8b", "bf16", 1), // hard
		{Name: "plain", Model: v1.Model{Name: "llama-3.1-8b"}},
	}}
	loaded := map[string]llm.Adapter{"b": {Config: llm.AdapterConfig{Rank: 16, MaxRank: 64}, Bytes: 123}}
	groups, solos := GroupLoRA(p, loaded)
	var keys []string
	for _, g := range groups {
		var names []string
		for _, a := range g.Adapters {
			names = append(names, a.Tenant)
		}
		keys = append(keys, g.Key+"="+strings.Join(names, ","))
	}
	want := "llama-3.1-8b/bf16/soft:acme/x=a,b llama-3.1-8b/bf16/soft:acme/y=c llama-3.1-8b/fp8/soft:acme/x=d qwen2.5-7b/bf16/soft:acme/x=e"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("groups\n%s\nwant\n%s", got, want)
	}
	if len(solos) != 1 || solos[0].Tenant != "f" || !strings.Contains(solos[0].Reason, "hard") {
		t.Errorf("solos %+v", solos)
	}
	if b := groups[0].Adapters[1]; b.Rank != 64 || b.Bytes != 123 {
		t.Errorf("loaded adapter not used: %+v", b)
	}
}

func loraInput(t testing.TB, n int, rps float64) LoRAInput {
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
	g := LoRAGroup{Key: "g"}
	for i := range n {
		g.Adapters = append(g.Adapters, LoRAAdapter{Tenant: string(rune('a'+i%26)) + string(rune('a'+i/26)), Rank: 16,
			RPS: rps / float64(i+1), InputTokens: 512, OutputTokens: 128, Weight: float64(1 + i%3),
			SLO: perf.SLO{TTFT: time.Second, TPOT: 50 * time.Millisecond}})
	}
	return LoRAInput{Group: g, Engine: e, Cost: c, Prefix: "eng"}
}

// More traffic never needs fewer engines; every adapter gets a reason naming its engine and
// neighbours; weights become shares of the engine that add up to 1.
func TestPlanLoRA(t *testing.T) {
	prev := 0
	for _, rps := range []float64{1, 10, 30, 60} {
		p, err := PlanLoRA(loraInput(t, 40, rps))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Engines) < prev {
			t.Errorf("%v req/s: %d engines, fewer than %d at less traffic", rps, len(p.Engines), prev)
		}
		prev = len(p.Engines)
		sum := map[string]float64{}
		seen := map[string]bool{}
		for _, e := range p.Engines {
			for _, a := range e.Adapters {
				seen[a] = true
			}
			// max_loras: a power of two, or every adapter of the engine when that is fewer.
			pow2 := e.MaxLoRAs&(e.MaxLoRAs-1) == 0
			if e.MaxLoRAs < 1 || e.MaxLoRAs > len(e.Adapters) || !pow2 && e.MaxLoRAs != len(e.Adapters) ||
				e.MaxLoRAs < min(len(e.Adapters), 2*e.ActiveP99) || e.MaxCPULoRAs < e.MaxLoRAs || e.MaxRank != 16 {
				t.Errorf("engine %+v", e)
			}
		}
		weights := map[string]float64{}
		load := map[string]float64{}
		for _, e := range p.Engines {
			for tn, l := range e.Load {
				load[tn] += l
			}
		}
		for _, a := range loraInput(t, 40, rps).Group.Adapters {
			if math.Abs(load[a.Tenant]-a.RPS) > 1e-9 {
				t.Errorf("%s: %v req/s on its engines, want %v", a.Tenant, load[a.Tenant], a.RPS)
			}
		}
		for _, s := range p.Shares {
			sum[s.Engine] += s.Share
			weights[s.Tenant] += s.Weight
		}
		for _, a := range loraInput(t, 40, rps).Group.Adapters {
			if math.Abs(weights[a.Tenant]-a.Weight) > 1e-9 {
				t.Errorf("%s: weights on its engines add to %v, want %v", a.Tenant, weights[a.Tenant], a.Weight)
			}
		}
		for e, v := range sum {
			if math.Abs(v-1) > 1e-9 {
				t.Errorf("engine %s shares add to %v", e, v)
			}
		}
		if len(seen) != 40 || len(p.Reasons) != 40 || len(p.Shares) < 40 {
			t.Errorf("%d adapters placed, %d reasons, %d shares", len(seen), len(p.Reasons), len(p.Shares))
		}
		if r := p.Reasons["ba"]; !strings.Contains(r, "shares engine eng-") || !strings.Contains(r, "max_loras") {
			t.Errorf("reason %q", r)
		}
		if rps == 60 && !strings.Contains(p.Reasons["aa"], "served by 2 engines") {
			t.Errorf("the 60 req/s adapter: %q, want it on two engines", p.Reasons["aa"])
		}
		t.Logf("%v req/s: %s", rps, p)
	}
	if prev < 2 {
		t.Errorf("60 req/s on one H100: want more than one engine")
	}
}

// LPT: the largest rates spread first; no engine's load exceeds the mean by more than the
// largest single rate.
func TestLoRALPT(t *testing.T) {
	in := loraInput(t, 50, 20)
	for _, n := range []int{1, 2, 3, 7} {
		bins := lptAssign(in.Group.Adapters, n)
		var total, biggest float64
		for _, a := range in.Group.Adapters {
			total += a.RPS
			biggest = max(biggest, a.RPS)
		}
		for i, b := range bins {
			var l float64
			for _, a := range b {
				l += a.RPS
			}
			if l > total/float64(n)+biggest+1e-9 {
				t.Errorf("%d engines: engine %d carries %.3f, mean %.3f", n, i, l, total/float64(n))
			}
		}
	}
}

func TestPlanLoRAErrors(t *testing.T) {
	in := loraInput(t, 2, 1)
	in.Group.Adapters[1].Rank = 0
	in.Cost = nil
	if _, err := PlanLoRA(in); err == nil || !strings.Contains(err.Error(), "adapters[1]") || !strings.Contains(err.Error(), "cost") {
		t.Errorf("got %v", err)
	}
	args := LoRAEngine{MaxLoRAs: 4, MaxRank: 16, MaxCPULoRAs: 8, Adapters: []string{"a", "b"}}.LoRAArgs(map[string]string{"a": "/x/a"})
	if f := strings.Join(args.Flags(), " "); f != "--enable-lora --max-loras 4 --max-lora-rank 16 --max-cpu-loras 8 --lora-modules a=/x/a" {
		t.Errorf("flags %q", f)
	}
}

// PlanLoRA for 200 adapters (the example's size) at 80 req/s.
func BenchmarkPlanLoRA(b *testing.B) {
	in := loraInput(b, 200, 14)
	for b.Loop() {
		if _, err := PlanLoRA(in); err != nil {
			b.Fatal(err)
		}
	}
}

// PlanLoRA for 200 adapters at 400 req/s: the engine search tries every count up to about ten,
// so predictions (each a max-rate search) must be made for the count chosen only.
func BenchmarkPlanLoRAManyEngines(b *testing.B) {
	in := loraInput(b, 200, 400)
	for b.Loop() {
		if _, err := PlanLoRA(in); err != nil {
			b.Fatal(err)
		}
	}
}

// An engine's prediction is the queueing model's at its load: the p99s grow with the first
// engine's load (18, 36 and 47.7 req/s here) and
// stay within the objectives of a plan that meets them, and its max rate is at least its load,
// with the objectives just met there (a little more is too much). The group's traffic.lengths
// are sized for as the dense planner sizes them: exponential lengths need at least the engines
// fixed ones do and predict a longer TTFT (the 99th-percentile prompt), and lengths "fixed" plan
// exactly as none.
func TestPlanLoRAPredictionAndLengths(t *testing.T) {
	var prev LoRAPrediction
	prevRPS := 0.0
	for _, rps := range []float64{5, 20, 40} {
		in := loraInput(t, 20, rps)
		p, err := PlanLoRA(in)
		if err != nil {
			t.Fatal(err)
		}
		e := p.Engines[0]
		pr := e.Predicted
		if e.RPS <= prevRPS || pr.TTFT <= prev.TTFT || pr.TPOT <= prev.TPOT {
			t.Errorf("%v req/s: prediction %+v, not above %+v at less load", rps, pr, prev)
		}
		if pr.TTFT > time.Second || pr.TPOT > 50*time.Millisecond || pr.MaxRPS < e.RPS {
			t.Errorf("%v req/s: prediction %+v of an engine at %.3g req/s", rps, pr, e.RPS)
		}
		var bin []LoRAAdapter
		for _, a := range in.Group.Adapters {
			if slices.Contains(e.Adapters, a.Tenant) {
				a.RPS = e.Load[a.Tenant]
				bin = append(bin, a)
			}
		}
		over := pr.MaxRPS / e.RPS * 1.01
		scaled := slices.Clone(bin)
		for i := range scaled {
			scaled[i].RPS *= over
		}
		active := max(min(activeP99(in.Engine, in.Cost, e.MaxRank, scaled), e.MaxLoRAs), e.ActiveP99)
		if _, ok := engineModel(in, bin, e, over, active); ok {
			t.Errorf("%v req/s: the engine meets the objectives 1 %% above its max rate %.3g", rps, pr.MaxRPS)
		}
		prev, prevRPS = pr, e.RPS
		t.Logf("%v req/s: %d engines, first at %.3g req/s: %+v", rps, len(p.Engines), e.RPS, pr)
	}
	for _, rps := range []float64{20, 60} {
		fixed := loraInput(t, 20, rps)
		pf, err := PlanLoRA(fixed)
		if err != nil {
			t.Fatal(err)
		}
		named := loraInput(t, 20, rps)
		for i := range named.Group.Adapters {
			named.Group.Adapters[i].Lengths = v1.LengthsFixed
		}
		if pn, err := PlanLoRA(named); err != nil || fmt.Sprint(pn) != fmt.Sprint(pf) {
			t.Errorf("%v req/s: lengths fixed planned %v, none %v (%v)", rps, pn, pf, err)
		}
		exp := loraInput(t, 20, rps)
		exp.Group.Adapters[0].Lengths = v1.LengthsExponential // one adapter's law sizes its engine
		pe, err := PlanLoRA(exp)
		if err != nil {
			t.Fatal(err)
		}
		if len(pe.Engines) < len(pf.Engines) || pe.Engines[0].Predicted.TTFT <= pf.Engines[0].Predicted.TTFT {
			t.Errorf("%v req/s: exponential lengths %d engines (TTFT %v), fixed %d (%v)", rps, len(pe.Engines),
				pe.Engines[0].Predicted.TTFT, len(pf.Engines), pf.Engines[0].Predicted.TTFT)
		}
		t.Logf("%v req/s: fixed %d engines, TTFT p99 %v; exponential %d, %v", rps, len(pf.Engines), pf.Engines[0].Predicted.TTFT,
			len(pe.Engines), pe.Engines[0].Predicted.TTFT)
	}
}
