package plan

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

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

// tpModel is the queueing model of one replica of model (quantization quant) tensor-parallel over
// tp GPUs of board, for prompts of in tokens and out output tokens.
func tpModel(t *testing.T, model string, quant llm.Quantization, board string, tp, in, out int) *qmodel {
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
