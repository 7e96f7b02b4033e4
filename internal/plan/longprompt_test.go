package plan

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Long prompts on tensor-parallel replicas (the third review's pools, whose prompts' prefill
// takes most of the TTFT target): the planned count is within max(k + 1, 1.25 k) of k, the fewest
// of the plan's own replicas the simulator is satisfied with (99 % of the requests, found by
// search as in the agreement suite), and every tenant is feasible and met in simulation. Before
// the queueing model priced a long prompt's chunks at their real sizes and let the least-loaded
// router spare it the wait for other prompts' prefills, llama-3.1-70b fp8 at 0.5 req/s of
// 12,000 + 400 tokens was planned on 10 replicas of TP 4 where 2 suffice, llama-3.1-8b at
// 0.05 req/s of 100,000 + 500 tokens on 5 where 2 suffice, and that tenant on one 8-GPU node was
// NoCapacity.
func TestLongPromptTensorParallelSizing(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates each pool several times")
	}
	for _, name := range []string{"r1-70b-longprompt-tp4", "r2-100k-prompt-tp4", "r3-100k-prompt-8gpu"} {
		pool := loadPool(t, "../../cmd/gpupool/testdata/review3/"+name+".yaml")
		pl := buildWith(t, pool, confirmed)
		tn := pl.Tenants[0]
		if tn.Infeasible {
			t.Errorf("%s: infeasible: %v", name, tn.Reasons)
			continue
		}
		rate := pool.Tenants[0].Traffic.RPS
		d := time.Duration(2200/rate*1e9) + 30*time.Second
		res := simulate(t, pool, pl, d, 1)
		if a := res.Report.Tenants[0].SLOAttainment; a < 0.99 {
			t.Errorf("%s: planned %d replicas meet the SLO for %.2f %% of requests in simulation", name, len(tn.Replicas), 100*a)
			continue
		}
		planned := len(tn.Replicas)
		k := fewestOfPlan(t, pool, pl, d, 1)
		lim := max(float64(k+1), 1.25*float64(k))
		t.Logf("%s: planned %d × %s (%d GPUs), predicted TTFT p99 %s; simulator's fewest %d", name, planned,
			tn.Replicas[0].Slice, pl.Summary.GPUsUsed, tn.Predicted.TTFTP99.Std(), k)
		if float64(planned) > lim {
			t.Errorf("%s: planned %d replicas > max(k+1, 1.25k) = %g with k = %d", name, planned, lim, k)
		}
	}
}

// The third review's r4 (cmd/gpupool/testdata/review3/r4-rag-a100.yaml): llama-3.1-8b bf16 at
// 0.8 req/s of 24,000 + 300 tokens on A100-40GB TP-2 (12 chunks of 2,047 tokens a prompt, TPOT
// target 50 ms). The least-loaded router spreads the prompts that share a request's decode over
// the replicas (routedPromptsP99): counted as a Poisson stream per replica the model's TPOT p99
// over 3 replicas was 50.5 ms, above the target, so 4 were planned where the simulator's p99 on 3
// (the hand plan) is 31.1 ms. The model must stay at or above the simulator there and pass the
// target; the planner gives rag-8b 3 replicas, all the simulator needs, and rag-8b-fp8kv (28,000 +
// 500 tokens on A100-80GB TP-2, NoCapacity before) its second replica, both met in simulation.
func TestLongPromptTPOTRouter(t *testing.T) {
	q := tpModel(t, "llama-3.1-8b", llm.QuantBF16, "A100-SXM4-40GB", 2, 24000, 300)
	model := q.state(0.8, 3).tpot * 1e3
	dir := "../../cmd/gpupool/testdata/review3/"
	pool := loadPool(t, dir+"r4-rag-a100.yaml")
	data, err := os.ReadFile(dir + "r4-rag-a100.hand-plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hand, err := v1.DecodePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	res := simulate(t, pool, hand, 2*time.Hour, 1)
	sim := res.Report.Tenants[0].TPOT.P99
	t.Logf("rag-8b on 3 × TP-2: TPOT p99 model %.1f ms, simulator %.1f ms", model, sim)
	if model > 50 || model < sim {
		t.Errorf("TPOT p99 over 3 replicas: model %.1f ms, simulator %.1f ms; want simulator ≤ model ≤ 50 ms", model, sim)
	}
	for _, m := range []float64{0.5, 3, 12, 80} {
		if routedPromptsP99(m, 1) != poissonP99(m) {
			t.Errorf("one replica, mean %g: routed p99 %g, Poisson p99 %g", m, routedPromptsP99(m, 1), poissonP99(m))
		}
	}
	if testing.Short() {
		return
	}
	pl := buildWith(t, pool, confirmed)
	res = simulate(t, pool, pl, 2*time.Hour, 1)
	for j, tn := range pl.Tenants[:2] {
		if tn.Infeasible {
			t.Errorf("%s: infeasible: %v", tn.Name, tn.Reasons)
			continue
		}
		a := res.Report.Tenants[j].SLOAttainment
		t.Logf("%s: %d replicas, %.2f %% in simulation", tn.Name, len(tn.Replicas), 100*a)
		if a < 0.99 {
			t.Errorf("%s: %d replicas meet the SLO for %.2f %% of requests in simulation", tn.Name, len(tn.Replicas), 100*a)
		}
	}
	// rag-8b's simulator count is 3 (the hand plan, 100 %): the bar max(k + 1, 1.25 k) is 4, and
	// the model's 3 is k itself.
	if n := len(pl.Tenants[0].Replicas); n != 3 {
		t.Errorf("rag-8b: planned %d replicas, want 3", n)
	}
}

// tpModel is the queueing model of one replica of model (quantization quant) tensor-parallel over
// tp GPUs of board, for prompts of in tokens and out output tokens.
func tpModel(t testing.TB, model string, quant llm.Quantization, board string, tp, in, out int) *qmodel {
	t.Helper()
	a, err := llm.Lookup(model)
	if err != nil {
		t.Fatal(err)
	}
	m, err := perf.New(a, quant, perf.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.Lookup(board)
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.Place(perf.Slice{Board: b, TensorParallel: tp})
	if err != nil {
		t.Fatal(err)
	}
	return newQModel(e, perf.Workload{InputTokens: in, OutputTokens: out}, perf.Load{})
}

// A prompt longer than one chunk costs what its chunks cost at their real sizes: 12,000 tokens
// of llama-3.1-70b fp8 on four H100s in chunks of 8,191 are one chunk of 8,191 and one of 3,809
// (0.60 s by perf.Engine.StepTime), not two of 8,191 (0.80 s, the model before). Over ten replicas
// behind the least-loaded router at 0.5 req/s a request practically never meets another prompt's
// prefill (the simulator's TTFT p99 is 598 ms), so the model's p99 is the prefill alone; on one
// replica the wait is the M/D/1 queue's p99.
func TestLongPromptTTFT(t *testing.T) {
	q := tpModel(t, "llama-3.1-70b", llm.QuantFP8, "H100-SXM5-80GB", 4, 12000, 400)
	if q.k != 2 || q.chunk != 8191 {
		t.Fatalf("k %g chunks of %d, want 2 of 8191", q.k, q.chunk)
	}
	alone := 0.0
	for kv := 0; kv < 12000; kv += q.chunk {
		c := min(q.chunk, 12000-kv)
		alone += q.e.StepTime(perf.Batch{DecodeSeqs: 1, KVTokens: 12200, PrefillTokens: c, PrefillSeqs: 1,
			PrefillPairs: perf.ChunkPairs(c, kv)}, perf.Load{}).Seconds()
	}
	tr := q.trickle().ttft
	if want := q.step(1, 0) + alone; math.Abs(tr-want) > 0.01*want {
		t.Errorf("TTFT at a trickle %.3f s, want the step in progress and the prompt's two chunks, %.3f s", tr, want)
	}
	if s := q.state(0.5, 10); s.ttft > tr*1.05 {
		t.Errorf("10 replicas at 0.5 req/s: TTFT p99 %.3f s, more than 5 %% above the prefill alone (%.3f s)", s.ttft, tr)
	}
	// One replica: the wait is the M/D/1 queue's p99 at 0.5 req/s of prefills of sOne seconds.
	d99 := int(math.Min(float64(q.slots), 1+poissonP99(0.5*399*mustMeanStep(t, q, 0.5))))
	sOne := q.ownPrefill(d99) + q.k*q.step(float64(d99), 0)
	w, ok := q.longPromptWait(0.5, 1, sOne)
	if !ok || math.Abs(mdOneTail(0.5, sOne, w)-0.01) > 1e-4 {
		t.Errorf("one replica: wait %.3f s (ok %v) has P(W > wait) = %.4f, want 0.01", w, ok, mdOneTail(0.5, sOne, w))
	}
	for _, n := range []int{1, 2, 3, 4, 5, 10} {
		t.Logf("%d replicas: TTFT p99 %.3f s", n, q.state(0.5, n).ttft)
	}
}

func mustMeanStep(t *testing.T, q *qmodel, lam float64) float64 {
	t.Helper()
	m, ok := q.meanStep(lam)
	if !ok {
		t.Fatalf("saturated at %g req/s", lam)
	}
	return m
}

// Erlang's M/D/1 waiting time law: P(W > 0) = ρ, below one service time P(W ≤ x) = (1 − ρ)e^(λx),
// and against the Lindley recursion sampled over a million arrivals at ρ = 0.3 and 0.8.
func TestMDOneTail(t *testing.T) {
	for _, rho := range []float64{0.05, 0.3, 0.8} {
		lam, s := rho, 1.0
		if got := mdOneTail(lam, s, 0); math.Abs(got-rho) > 1e-9 {
			t.Errorf("ρ %g: P(W > 0) = %g", rho, got)
		}
		x := 0.7
		if got, want := mdOneTail(lam, s, x), 1-(1-rho)*math.Exp(lam*x); math.Abs(got-want) > 1e-9 {
			t.Errorf("ρ %g: P(W > %g) = %g, want %g", rho, x, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rho := range []float64{0.3, 0.8} {
		lam, s := rho, 1.0
		xs := []float64{0.5, 1.5, 3.5}
		over := make([]int, len(xs))
		w := 0.0
		const n = 1_000_000
		for range n {
			for i, x := range xs {
				if w > x {
					over[i]++
				}
			}
			w = math.Max(0, w+s-rng.ExpFloat64()/lam)
		}
		for i, x := range xs {
			got, want := float64(over[i])/n, mdOneTail(lam, s, x)
			if math.Abs(got-want) > 0.005+0.05*want {
				t.Errorf("ρ %g: P(W > %g) sampled %.4f, Erlang's law %.4f", rho, x, got, want)
			}
		}
	}
}

// A slice whose engine (perf's, from the slice's memory, as the simulator builds it) cannot hold
// one request is refused even when the memory fit's cache, which rounds differently, holds it:
// qwen2.5-7b at 14,444 + 64 tokens on an H200's MPS 1/8 share (perf's 14,448 tokens) was planned
// there, and the plan's own confirmation by simulation then failed ("slice too small"), so
// `gpupool plan` exited with an error (a pool of the agreement suite's generator).
func TestEngineKVHoldsOneRequest(t *testing.T) {
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: kv-edge}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H200-141GB, count: 1}]
policy: {burstPoolPercent: 0, allowedModes: [mps]}
tenants:
- name: t
  model: {name: qwen2.5-7b}
  concurrency: 14
  isolation: shared
  traffic: {rps: 0.2, inputTokens: 14444, outputTokens: 64}
  slo: {ttftP99: 4576ms, tpotP99: 89ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx = context.Background()
	p.evaluate()
	found := false
	for _, c := range p.tenants[0].cands {
		if c.label() != "mps 1/8" {
			continue
		}
		found = true
		if c.reject != v1.ReasonNoFit || !strings.Contains(c.why, "engine's KV cache") {
			t.Errorf("mps 1/8: reject %q (%s), want NoFit for the engine's KV cache", c.reject, c.why)
		}
		if fit, err := p.cache.fit(p.tenants[0], llm.Slice{Board: "H200-141GB", Kind: llm.SliceShared, MemoryBytes: c.ev.capBytes,
			GPUBytes: llm.VisibleBytes(c.board.MemoryMiB)}); err != nil || !fit.Fits || fit.MaxTokens < 14508 {
			t.Errorf("setup: the memory fit should hold one request on mps 1/8 (fits %v, %d tokens, %v)", fit.Fits, fit.MaxTokens, err)
		}
	}
	if !found {
		t.Fatal("no candidate mps 1/8")
	}
	pl := build(t, pool)
	if tn := pl.Tenants[0]; tn.Infeasible {
		t.Fatalf("infeasible: %v", tn.Reasons)
	}
	simulate(t, pool, pl, 10*time.Minute, 1) // fails the test if the simulator refuses a slice
}

// A KV-bound replica of prompts longer than one chunk (short-150-on-60's t00033: qwen2.5-3b,
// 8,000 + 150 tokens, on an H100's 1g.10gb instances of 6 slots; and 4,000-token prompts, 12
// slots): when every slot of the replicas is full, the next arrival is admitted by its first
// chunk, preempted at its second and recomputed, over and over (firstChunkThrash). The model
// counted that as an ordinary slot wait and gave one replica of 8,000-token prompts 0.415 req/s
// and two 1.051, where the simulator meets the SLO up to about 0.21 and 0.64 and collapses at the
// model's rates (3–4 % of requests within it, TTFT p99 of many minutes); 4,000-token prompts
// 1.26 and 2.84 where it meets up to 0.63 and 1.94. At the model's rate for one and two
// replicas the simulator must meet the SLO for 99 % of the requests in two runs, and at twice it
// must not (the model is at most a factor 2 below). This is the uncapped engine: the pool sets
// concurrency 256 and the replicas run --max-num-seqs 256, so the engine may admit beyond the
// slots (with concurrency unset the planner caps it at them, TestLongPromptKVThrashSparesCapped).
func TestLongPromptKVThrash(t *testing.T) {
	slo := perf.SLO{TTFT: 2800 * time.Millisecond, TPOT: 100 * time.Millisecond}
	for _, in := range []int{8000, 4000} {
		q := migModel(t, "qwen2.5-3b", "H100-SXM5-80GB", "1g.10gb", in, 150, 256)
		if !q.kvBound || q.k <= 1 || q.capped {
			t.Fatalf("%d-token prompts: slots %d kvBound %t capped %t, %g chunks: want an uncapped KV-bound replica of long prompts",
				in, q.slots, q.kvBound, q.capped, q.k)
		}
		for n := 1; n <= 2; n++ {
			rate, _ := q.maxRateOver(slo, n, 0)
			at := simOnMIG(t, in, rate, n, 256)
			over := simOnMIG(t, in, 2*rate, n, 256)
			t.Logf("%d-token prompts, %d × 1g.10gb (%d slots): model %.3f req/s; simulator %.2f %% of requests within the SLO there, %.2f %% at twice it",
				in, n, q.slots, rate, 100*at, 100*over)
			if at < 0.99 {
				t.Errorf("%d-token prompts, %d replicas: at the model's %.3f req/s the simulator meets the SLO for %.2f %% of requests", in, n, rate, 100*at)
			}
			if over >= 0.99 {
				t.Errorf("%d-token prompts, %d replicas: at twice the model's %.3f req/s the simulator still meets the SLO (%.2f %%)", in, n, rate, 100*over)
			}
		}
	}
}

// migModel is the queueing model of one replica of model (bf16) on an exclusive MIG instance of
// profile on board, for fixed prompts of in tokens and out output tokens, of a tenant whose pool
// sets concurrency conc (0: unset).
func migModel(t *testing.T, model, board, profile string, in, out, conc int) *qmodel {
	t.Helper()
	e := migEngine(t, model, board, profile, 0)
	return newQModel(e, perf.Workload{InputTokens: in, OutputTokens: out}, perf.Load{}).withSeqCap(conc)
}

// migEngine is model (bf16, perf's default options) placed on an exclusive MIG instance of
// profile on board, its clock capped at clock of boost (0: boost).
func migEngine(t *testing.T, model, board, profile string, clock float64) *perf.Engine {
	t.Helper()
	a, err := llm.Lookup(model)
	if err != nil {
		t.Fatal(err)
	}
	m, err := perf.New(a, llm.QuantBF16, perf.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.Lookup(board)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Profile(profile)
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.Place(perf.Slice{Board: b, Profile: p, ClockCap: clock})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// migPlan is a hand-written Plan of pool name: one GPU of board (as a Plan names it) on node n0
// in MIG mode, with one replica of tenant t on each instance of profile at starts, rendered as the
// planner renders them (memory utilisation 0.9, max-num-batched-tokens 2,048) at --max-model-len
// maxLen and --max-num-seqs seqs.
func migPlan(t *testing.T, name, board, profile string, starts []int, maxLen, seqs int) *v1.Plan {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: gpupool.dev/v1\nkind: Plan\nmetadata: {name: %s}\npool: %s\ngpus:\n- {board: %s, index: 0, node: n0, mode: mig, role: pool, instances: [", name, name, board)
	for i, st := range starts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{profile: %s, start: %d, replicas: [{index: %d, tenant: t, vllmArgs: [--gpu-memory-utilization, "0.9", --max-model-len, "%d", --max-num-seqs, "%d", --max-num-batched-tokens, "2048"]}]}`, profile, st, i, maxLen, seqs)
	}
	b.WriteString("]}\nsummary: {gpusTotal: 1, gpusUsed: 1}\ntenants:\n- name: t\n  replicas:\n")
	for i, st := range starts {
		fmt.Fprintf(&b, "  - {gpu: n0/0, index: %d, instance: %s@%d, slice: mig}\n", i, profile, st)
	}
	pl, err := v1.DecodePlan([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// downFrom is n instance starts from 6 down by step: 6, 5, 4 for 1g.10gb, 6, 4, 2 for 1g.20gb.
func downFrom(n, step int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 6 - step*i
	}
	return s
}

// simOnMIG is the worst SLO attainment, over seeds 1 and 2 and about 4,000 requests each, of
// qwen2.5-3b at rps req/s of in + 150 tokens (TTFT 2.8 s, TPOT 100 ms) on n 1g.10gb instances of
// one H100, as the planner renders them (max-num-batched-tokens 2,048) at --max-num-seqs seqs
// (the pool's concurrency at 256).
func simOnMIG(t *testing.T, in int, rps float64, n, seqs int) float64 {
	t.Helper()
	conc := ""
	if seqs == 256 {
		conc = "  concurrency: 256\n"
	}
	pool, err := v1.LoadPool([]byte(fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: thrash}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100, count: 1}]
tenants:
- name: t
  isolation: hard
  model: {name: qwen2.5-3b}
  traffic: {rps: %g, inputTokens: %d, outputTokens: 150}
  slo: {ttftP99: 2800ms, tpotP99: 100ms}
  replicas: %d
%s`, rps, in, n, conc)))
	if err != nil {
		t.Fatal(err)
	}
	pl := migPlan(t, "thrash", "H100-SXM5-80GB", "1g.10gb", downFrom(n, 1), 8192, seqs)
	d := time.Duration(4000/rps*1e9) + 30*time.Second
	worst := 1.0
	for seed := uint64(1); seed <= 2; seed++ {
		worst = min(worst, simulate(t, pool, pl, d, seed).Report.Tenants[0].SLOAttainment)
	}
	return worst
}

// A capped replica (the pool leaves concurrency unset and the lengths are fixed, so the planner
// runs --max-num-seqs at the slots the KV cache holds at full length, ADR 0088) admits no request
// beyond its slots, and the first-chunk rule (firstChunkThrash) leaves it alone: its rate is the
// slot wait's, above the uncapped replica's of TestLongPromptKVThrash. At that rate the simulator
// at the cap must meet the SLO for 99 % of the requests in both runs (ADR 0091): the slot wait
// priced the slot's holding time without the prefill it spans (cappedHolding) and let arrivals
// find every slot full more often than the cap allows (cappedWaitMiss), and the rates it gave,
// 1.260 / 2.836 req/s for 4,000-token prompts on one and two replicas and 0.415 / 1.051 for
// 8,000, met it for only 95.7–98.2 % of the requests (now 0.956 / 2.561 and 0.297 / 0.885, two
// replicas priced by cappedSpreadWait, ADR 0094's amendment). The planner keeps
// short-150-on-60's t00033 (testdata/confirm-fixed-short.yaml) on two 1g.10gb at --max-num-seqs
// 6 when the pool leaves concurrency unset, and moves it to 1g.20gb at concurrency 256.
func TestLongPromptKVThrashSparesCapped(t *testing.T) {
	slo := perf.SLO{TTFT: 2800 * time.Millisecond, TPOT: 100 * time.Millisecond}
	for _, in := range []int{8000, 4000} {
		capped := migModel(t, "qwen2.5-3b", "H100-SXM5-80GB", "1g.10gb", in, 150, 0)
		open := migModel(t, "qwen2.5-3b", "H100-SXM5-80GB", "1g.10gb", in, 150, 256)
		if !capped.capped || open.capped {
			t.Fatalf("%d-token prompts: capped %t at concurrency unset, %t at 256; want true and false", in, capped.capped, open.capped)
		}
		for n := 1; n <= 2; n++ {
			rate, st := capped.maxRateOver(slo, n, 0)
			openRate, _ := open.maxRateOver(slo, n, 0)
			at := simOnMIG(t, in, rate, n, capped.slots)
			t.Logf("%d-token prompts, %d × 1g.10gb at --max-num-seqs %d: model %.3f req/s (%.3f uncapped), simulator %.2f %% of requests within the SLO there",
				in, n, capped.slots, rate, openRate, 100*at)
			if at < 0.99 {
				t.Errorf("%d-token prompts, %d replicas at --max-num-seqs %d: %.2f %% of requests within the SLO at the model's %.3f req/s",
					in, n, capped.slots, 100*at, rate)
			}
			if rate <= openRate || st.limit != perf.LimitNone {
				t.Errorf("%d-token prompts, %d replicas: capped %.3f req/s (%s), uncapped %.3f: want the capped model spared the first-chunk rule",
					in, n, rate, st.limit, openRate)
			}
		}
	}
	for _, c := range []struct {
		conc          int
		profile, seqs string
	}{{0, "1g.10gb", "6"}, {256, "1g.20gb", "256"}} {
		pool := loadPool(t, "testdata/confirm-fixed-short.yaml")
		pool.Tenants[0].Concurrency = c.conc
		pl := buildWith(t, pool, Options{})
		tn := pl.Tenants[0]
		seqs := maxNumSeqsOf(pl)
		if tn.Infeasible || len(tn.Replicas) != 2 || len(seqs) != 2 {
			t.Fatalf("concurrency %d: %d replicas (infeasible %t), --max-num-seqs %v: want 2 served: %v", c.conc, len(tn.Replicas), tn.Infeasible, seqs, tn.Reasons)
		}
		for i, r := range tn.Replicas {
			if r.Instance.Profile != c.profile || seqs[i] != c.seqs {
				t.Errorf("concurrency %d: replica %d on %s at --max-num-seqs %s, want %s at %s", c.conc, i, r.Instance, seqs[i], c.profile, c.seqs)
			}
		}
	}
}
