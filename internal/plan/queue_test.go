package plan

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	v1 "gpupool.dev/gpupool/api/v1"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// h100Model is qwen2.5-7b (bf16) on a whole H100 SXM5 with max-num-seqs slots.
func h100Model(t testing.TB, slots int, in, out int) *qmodel {
	t.Helper()
	a, err := llm.Lookup("qwen2.5-7b")
	if err != nil {
		t.Fatal(err)
	}
	o := perf.DefaultOptions()
	o.MaxSeqs = slots
	m, err := perf.New(a, llm.QuantBF16, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.Place(perf.Slice{Board: b})
	if err != nil {
		t.Fatal(err)
	}
	return newQModel(e, perf.Workload{InputTokens: in, OutputTokens: out}, perf.Load{})
}

// Erlang C against values computed by hand: one server is M/M/1 (C = ρ); two servers with a = 1
// give C = 1/3 (B(2, 1) = 0.2, C = 0.2 / (1 − 0.5 + 0.5·0.2) = 1/3).
func TestErlangC(t *testing.T) {
	for _, c := range []struct {
		n    int
		a    float64
		want float64
	}{{1, 0.5, 0.5}, {1, 0.9, 0.9}, {2, 1, 1.0 / 3}} {
		if got := erlangC(c.n, c.a); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("C(%d, %g) = %.6f, want %.6f", c.n, c.a, got, c.want)
		}
	}
}

// erlangCAbove decides erlangC(servers, a) > limit as erlangC does, and returns its very value
// where it exceeds the limit, on a grid of pools and loads and at the loads where Erlang C
// crosses each limit the planner compares it with (found by bisection, then a few floats either
// side), where an early answer that is off by a rounding would show; and it does answer early on
// many slots at a light load.
func TestErlangCAbove(t *testing.T) {
	check := func(servers int, a, limit float64) bool {
		t.Helper()
		want := erlangC(servers, a)
		c, above := erlangCAbove(servers, a, limit)
		if above != (want > limit) || (above && c != want) || (!above && c != 0) {
			t.Fatalf("erlangCAbove(%d, %v, %g) = %v, %v; erlangC = %v", servers, a, limit, c, above, want)
		}
		return above
	}
	limits := []float64{kvThrashMiss, cappedSpreadMiss, cappedWaitMiss, 0.01, 0.3}
	for _, servers := range []int{1, 2, 3, 4, 5, 8, 12, 16, 64, 256, 512, 1000, 2560, 4096} {
		n := float64(servers)
		for i := 1; i < 200; i++ {
			a := n * float64(i) / 200
			for _, limit := range limits {
				check(servers, a, limit)
			}
		}
		for _, limit := range limits {
			lo, hi := 0.0, n
			for range 200 {
				mid := (lo + hi) / 2
				if erlangC(servers, mid) > limit {
					hi = mid
				} else {
					lo = mid
				}
			}
			for _, x := range []float64{lo, hi} {
				a := x
				for range 4 {
					a = math.Nextafter(a, 0)
				}
				for range 9 {
					check(servers, a, limit)
					a = math.Nextafter(a, n)
				}
			}
			if servers >= 64 && check(servers, lo/2, limit) {
				t.Fatalf("C(%d, %v) above %g", servers, lo/2, limit)
			}
		}
	}
}

// erlangCAbove's early answer: on 2,560 slots (ten replicas of 256) at a load of 20 it decides
// within a few dozen of the 2,560 steps of Erlang B's recursion.
func BenchmarkErlangCAbove(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func() bool
	}{
		{"full", func() bool { return erlangC(2560, 20) > cappedWaitMiss }},
		{"above", func() bool { _, above := erlangCAbove(2560, 20, cappedWaitMiss); return above }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.f() {
					b.Fatal("above")
				}
			}
		})
	}
}

// The sizing is the fewest replicas meeting the SLO: n meets it, n − 1 does not (unless n is the
// saturation count), n never falls below the saturation count, and more traffic never needs
// fewer replicas.
func TestQueueSizingProperties(t *testing.T) {
	models := map[int]*qmodel{}
	for _, c := range []int{1, 4, 32} {
		models[c] = h100Model(t, c, 512, 256)
	}
	slo := perf.SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}
	rapid.Check(t, func(rt *rapid.T) {
		q := models[rapid.SampledFrom([]int{1, 4, 32}).Draw(rt, "slots")]
		lam := rapid.Float64Range(0.01, 20).Draw(rt, "rps")
		s := q.size(lam, slo)
		if s.n == 0 {
			rt.Fatalf("%.3g req/s infeasible: %s", lam, s.why)
		}
		if meets(q.state(lam, s.n), slo) != perf.LimitNone {
			rt.Fatalf("%d replicas do not meet the SLO at %.3g req/s", s.n, lam)
		}
		if s.n > 1 && s.n > s.lowest && meets(q.state(lam, s.n-1), slo) == perf.LimitNone {
			rt.Fatalf("%d replicas also meet the SLO at %.3g req/s (sized %d)", s.n-1, lam, s.n)
		}
		if s.n < s.lowest {
			rt.Fatalf("sized %d below the saturation count %d", s.n, s.lowest)
		}
		if more := q.size(lam*1.5, slo); more.n < s.n {
			rt.Fatalf("%.3g req/s needs %d replicas, %.3g req/s only %d", lam, s.n, lam*1.5, more.n)
		}
	})
}

// BenchmarkQueueSize sizes one tenant (the planner's per-candidate hot path) with a warm step-time
// memo, as tenants alike share it.
func BenchmarkQueueSize(b *testing.B) {
	q := h100Model(b, 8, 512, 256)
	slo := perf.SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}
	lam := 0.5
	for b.Loop() {
		lam = math.Mod(lam*1.37, 20) + 0.05
		q.size(lam, slo)
	}
}

// TestMeanStepMemo: meanStep's memo of its latest answers gives, bit for bit, what a fresh model
// solves at each rate, for rates asked again while kept and after more than meanMemo others have
// pushed them out, saturated ones included.
func TestMeanStepMemo(t *testing.T) {
	q := h100Model(t, 8, 512, 256)
	var rates []float64
	for i := range 3 * meanMemo {
		rates = append(rates, 0.3*float64(i+1)*float64(i+1))
	}
	ask := append(slices.Clone(rates), rates[:meanMemo/2]...)
	ask = append(ask, rates[len(rates)-meanMemo/2:]...)
	ask = append(ask, rates...)
	kept, saturated := 0, 0
	for _, lam := range ask {
		fresh := h100Model(t, 8, 512, 256)
		want, wantOK := fresh.solveMean(lam)
		for i, m := range q.means {
			if q.meanSet&(1<<i) != 0 && m.lam == lam {
				kept++
				break
			}
		}
		got, ok := q.meanStep(lam)
		if ok != wantOK || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("meanStep(%g) = %v, %v; a fresh model solves %v, %v", lam, got, ok, want, wantOK)
		}
		if !ok {
			saturated++
		}
	}
	if kept == 0 || saturated == 0 || saturated == len(ask) {
		t.Fatalf("the rates asked hit the memo %d times and saturate %d of %d times: want both, and rates that do not saturate", kept, saturated, len(ask))
	}
	// Every slot holds a rate the replica keeps up with, then one it does not, then the first
	// again: the answers kept follow their slots' rates (the flags are kept apart from them).
	q = h100Model(t, 8, 512, 256)
	low, high := rates[0], rates[len(rates)-1]
	if _, ok := h100Model(t, 8, 512, 256).solveMean(low); !ok {
		t.Fatalf("%g req/s saturates: want a rate that does not", low)
	}
	if _, ok := h100Model(t, 8, 512, 256).solveMean(high); ok {
		t.Fatalf("%g req/s does not saturate: want one that does", high)
	}
	var seq []float64
	for _, base := range []float64{low, high, high, low, low} {
		for i := range meanMemo {
			seq = append(seq, base*(1+float64(i)/1000))
		}
	}
	for _, lam := range seq {
		want, wantOK := h100Model(t, 8, 512, 256).solveMean(lam)
		if got, ok := q.meanStep(lam); ok != wantOK || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("meanStep(%g) = %v, %v after slots held other rates; a fresh model solves %v, %v", lam, got, ok, want, wantOK)
		}
	}
}

// poissonP99 against the exact quantiles (the least c with P(N ≤ c) ≥ 0.99, summed by hand from
// the Poisson pmf): 0 at a mean of 0.01 (e^−0.01 ≥ 0.99), 3 at 0.5, 4 at 1, 16 at 8.4, 67 at 50;
// at 100 (exact 124) the expansion is within one count; and it never falls as the mean grows.
func TestPoissonP99(t *testing.T) {
	for _, c := range []struct{ m, want float64 }{{0, 0}, {0.01, 0}, {0.5, 3}, {1, 4}, {8.4, 16}, {50, 67}} {
		if got := poissonP99(c.m); got != c.want {
			t.Errorf("poissonP99(%g) = %g, want %g", c.m, got, c.want)
		}
	}
	if got := poissonP99(100); math.Abs(got-124) > 1 {
		t.Errorf("poissonP99(100) = %g, want 124 ± 1", got)
	}
	prev := 0.0
	for m := 0.0; m < 200; m += 0.05 {
		if got := poissonP99(m); got < prev-1e-9 {
			t.Fatalf("poissonP99(%g) = %g < %g at a smaller mean", m, got, prev)
		} else {
			prev = got
		}
	}
}

// The slots are what the engine runs at once, by perf's admission rule: max-num-seqs when the KV
// cache holds that many requests, else the cache's tokens over a request's prompt and half its
// output (8,192 tokens of 512 + 256-token requests: ⌊8192 / 640⌋ = 12 of 64). A cache that
// binds never needs fewer replicas than one that does not.
func TestSlotsFollowKVCache(t *testing.T) {
	full := h100Model(t, 64, 512, 256)
	if full.slots != 64 || full.kvBound {
		t.Fatalf("an H100 with 64 sequences: %d slots (kv-bound %v), want 64 set by max-num-seqs", full.slots, full.kvBound)
	}
	w := perf.Workload{InputTokens: 512, OutputTokens: 256}
	small := newQModel(full.e.WithKVCapacity(8192), w, perf.Load{})
	if want := 8192 / (512 + 256/2); small.slots != want || !small.kvBound {
		t.Fatalf("8,192 KV tokens: %d slots (kv-bound %v), want %d set by the KV cache", small.slots, small.kvBound, want)
	}
	if n, _ := full.e.WithKVCapacity(8192).Running(w, 64); n != small.slots {
		t.Fatalf("slots %d differ from perf's Running %d", small.slots, n)
	}
	if !strings.Contains(small.slotsWhy(), "KV cache") {
		t.Errorf("reason for KV-bound slots: %q", small.slotsWhy())
	}
	slo := perf.SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}
	for _, lam := range []float64{0.5, 2, 5, 10, 20} {
		a, b := full.size(lam, slo), small.size(lam, slo)
		if b.n < a.n {
			t.Errorf("%g req/s: %d replicas with a binding KV cache, %d without", lam, b.n, a.n)
		}
	}
}

// A request's TPOT tail on a small MIG instance, where one prompt's prefill costs several decode
// steps: llama-3.1-8b on an A100's 1g.20gb at 1.1 req/s of 512 + 128 tokens. The model's p99 TPOT
// must not fall below the simulator's (it did by 5 % when it charged every step the mean number
// of prompts, and a tenant planned there met its TPOT target for 98.6 % of its requests), nor
// exceed it by more than 25 %.
func TestTPOTTailOnSmallSlice(t *testing.T) {
	doc := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: small}
fleet:
  nodes:
  - name: n0
    gpus: [{board: A100-SXM4-80GB, count: 1}]
policy: {burstPoolPercent: 0, allowedModes: [mig]}
tenants:
- name: t
  model: {name: llama-3.1-8b}
  concurrency: 23
  replicas: 1
  isolation: hard
  traffic: {rps: 1.1, inputTokens: 512, outputTokens: 128}
  slo: {ttftP99: 10s, tpotP99: 300ms}
`
	pool, err := v1.LoadPool([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible || len(tn.Replicas) != 1 || tn.Replicas[0].Instance.Profile != "1g.20gb" {
		t.Fatalf("setup: want one replica on 1g.20gb, got %+v", tn)
	}
	requests := 3000
	if testing.Short() || raceEnabled {
		requests = 1500
	}
	res := simulate(t, pool, pl, time.Duration(float64(requests)/1.1*1e9), 3)
	got, want := res.Report.Tenants[0].TPOT.P99, float64(tn.Predicted.TPOTP99.Std())/1e6
	t.Logf("TPOT p99: simulated %.1f ms, predicted %.1f ms", got, want)
	if got > want || want > 1.25*got {
		t.Errorf("TPOT p99: simulated %.1f ms, predicted %.1f ms (want simulated ≤ predicted ≤ 1.25 × simulated)", got, want)
	}
}

// Long prompts on a small slice (the review pool c5's t0: qwen2.5-3b at 0.088 req/s, 3000-token
// prompts, 50 output tokens, one A100 1g.10gb replica): a prompt costs 1.47 chunks of 2047
// tokens, about 0.7 s, against 30 ms a decode step, so the prompts that share a request's 49
// decode steps set its TPOT tail. They are the ones that arrive during its decode and those that
// arrived while it was prefilling (still prefilling when its decode begins), each with all its
// chunks: counted as a Poisson number of chunks over the decode alone, the model predicted 48.3
// ms where the simulator's p99 is 55 ms (97.6 % of requests within a 50 ms target in 20-hour
// runs).
func TestTPOTTailLongPrompts(t *testing.T) {
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: long-prompts}
fleet:
  nodes:
  - name: n0
    gpus: [{board: A100-SXM4-80GB, count: 1}]
policy: {burstPoolPercent: 0, allowedModes: [mig]}
tenants:
- name: t0
  isolation: hard
  model: {name: qwen2.5-3b, quantization: bf16}
  concurrency: 8
  traffic: {rps: 0.088, inputTokens: 3000, outputTokens: 50, pattern: poisson}
  slo: {tpotP99: 50ms, e2eP99: 90s}
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
	i := slices.IndexFunc(p.tenants[0].feasible, func(c *cand) bool { return c.label() == "mig 1g.10gb" })
	if i < 0 {
		t.Fatal("no candidate mig 1g.10gb")
	}
	model := p.tenants[0].feasible[i].ev.q.state(0.088, 1)
	pl := bestCasePlan(t, pool, "mig 1g.10gb", 1)
	requests := 4000
	if testing.Short() || raceEnabled {
		requests = 2000
	}
	res := simulate(t, pool, pl, time.Duration(float64(requests)/0.088*1e9), 3)
	got, want := res.Report.Tenants[0].TPOT.P99, model.tpot*1e3
	t.Logf("TPOT p99: simulated %.1f ms, predicted %.1f ms", got, want)
	if got > want || want > 1.25*got {
		t.Errorf("TPOT p99: simulated %.1f ms, predicted %.1f ms (want simulated ≤ predicted ≤ 1.25 × simulated)", got, want)
	}
}
