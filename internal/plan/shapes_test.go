package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// distinctShapesPool is n tenants of four models on H100 and A100-80GB nodes (MIG allowed), no
// two with the same request shape (fixed lengths): every tenant and slice kind is a queueing
// model of its own, the case where the sizing, not the packing, sets the planning time.
func distinctShapesPool(tb testing.TB, n int) *v1.Pool { return distinctShapesOn(tb, n, n) }

// distinctShapesOn is distinctShapesPool's n tenants on about gpus GPUs (nodes of 8, in pairs).
func distinctShapesOn(tb testing.TB, n, gpus int) *v1.Pool {
	tb.Helper()
	r := rand.New(rand.NewPCG(uint64(n), 11))
	models := []string{"llama-3.2-1b", "qwen2.5-3b", "llama-3.1-8b", "qwen2.5-7b"}
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: shapes}\nfleet:\n  nodes:\n")
	for i := range max(1, gpus/16) {
		fmt.Fprintf(&b, "  - name: h%d\n    gpus: [{board: H100, count: 8}]\n  - name: a%d\n    gpus: [{board: A100-SXM4-80GB, count: 8}]\n", i, i)
	}
	b.WriteString("tenants:\n")
	for i := range n {
		in, out := 100+7*i+r.IntN(7), 20+3*i%700+r.IntN(3)
		fmt.Fprintf(&b, "- name: t%04d\n  model: {name: %s}\n  traffic: {rps: %.2f, inputTokens: %d, outputTokens: %d}\n  slo: {ttftP99: %dms, tpotP99: %dms}\n",
			i, models[i%len(models)], 0.2+r.Float64()*8, in, out, 500+r.IntN(8)*250, 40+r.IntN(6)*20)
	}
	p, err := v1.DecodePool([]byte(b.String()))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkPlanDistinctShapes plans 200 tenants of distinct request shapes (distinctShapesPool).
func BenchmarkPlanDistinctShapes(b *testing.B) { benchPlanOn(b, distinctShapesPool(b, 200)) }

// BenchmarkPlanDistinctRedundant is BenchmarkPlanDistinctShapes with every tenth tenant asking
// for redundancy, so that the plan's assembly looks for tenants whose replicas share one GPU
// (spreadRedundant) on every GPU of the pool, as the 1,000-tenant fixed-length pool of distinct
// shapes does for its 75 redundant tenants.
func BenchmarkPlanDistinctRedundant(b *testing.B) {
	pool := distinctShapesPool(b, 200)
	for i := range pool.Tenants {
		pool.Tenants[i].Redundancy = i%10 == 0
	}
	benchPlanOn(b, pool)
}

// BenchmarkPlanShortDistinct plans 400 tenants of distinct request shapes on 64 GPUs, a fleet far
// too small for them: most tenants are short, and the rescue of short tenants (other candidates
// on the idle GPUs, the open slots of their sharing groups) is a large part of the time.
func BenchmarkPlanShortDistinct(b *testing.B) { benchPlanOn(b, distinctShapesOn(b, 400, 64)) }

// BenchmarkSizeDistinctShapes is the queueing model's part of it: for every tenant and slice
// kind of the pool, a fresh model sized at the tenant's rate and its highest rate on one replica
// (what the evaluation did for every candidate before that rate was computed on first read).
func BenchmarkSizeDistinctShapes(b *testing.B) {
	b.ReportAllocs()
	p, err := newPlanner(distinctShapesPool(b, 200), Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.evaluate()
	type job struct {
		q   *qmodel
		tn  *tenant
		lam float64
	}
	var jobs []job
	for _, tn := range p.tenants {
		for _, c := range tn.cands {
			if c.ev != nil && c.ev.q != nil {
				jobs = append(jobs, job{c.ev.q, tn, peakRate(tn.t.Traffic)})
			}
		}
	}
	for b.Loop() {
		for _, j := range jobs {
			q := newQModel(j.q.e, j.q.w, j.q.l).withLengths(j.q.lengths, j.q.maxCtx)
			q.size(j.lam, j.tn.slo)
			q.maxRate(j.tn.slo)
		}
	}
	b.ReportMetric(float64(len(jobs)), "models")
}

// TestOneRateOnRead: the evaluation leaves one replica's highest rate uncomputed, and reading it
// later, after the sizing has filled the model's memos, gives what a fresh model computes at
// once: the rate, its p99 TTFT and TPOT, and the term that binds above it.
func TestOneRateOnRead(t *testing.T) {
	p, err := newPlanner(distinctShapesPool(t, 24), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	models := 0
	for _, tn := range p.tenants {
		for _, c := range tn.cands {
			ev := c.ev
			if ev == nil || ev.q == nil {
				continue
			}
			if ev.rateSet {
				t.Fatalf("%s on %s %s: the evaluation computed one replica's rate", tn.t.Name, c.board.Name, c.label())
			}
			models++
			got := ev.oneRate()
			q := newQModel(ev.q.e, ev.q.w, ev.q.l).withLengths(ev.q.lengths, ev.q.maxCtx)
			rate, st := q.maxRate(tn.slo)
			want := perf.Rate{RequestsPerSec: rate, OutputTokensPerSec: rate * float64(tn.work.OutputTokens),
				TTFT: seconds(st.ttft), TPOT: seconds(st.tpot), Limit: meets(q.state(rate*1.01+1e-9, 1), tn.slo)}
			if got != want {
				t.Errorf("%s on %s %s: read %+v, fresh %+v", tn.t.Name, c.board.Name, c.label(), got, want)
			}
			if again := ev.oneRate(); again != got {
				t.Errorf("%s on %s %s: a second read gave %+v after %+v", tn.t.Name, c.board.Name, c.label(), again, got)
			}
		}
	}
	if models < 24 {
		t.Fatalf("only %d candidates with a queueing model", models)
	}
}

// TestLnFact: the table gives math.Lgamma's values bit for bit, inside it and beyond.
func TestLnFact(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 10, 170, 171, 1000, len(lnFactTable()) - 1, len(lnFactTable()), len(lnFactTable()) + 5, 1 << 20} {
		want, _ := math.Lgamma(float64(n) + 1)
		if got := lnFact(n); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("lnFact(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestPlaceShared: tenants of the same model and serving options but different request shapes
// get one engine per slice from the evaluation cache, which is what each tenant's own model
// places there; a tenant of another model, or another slice, gets its own.
func TestPlaceShared(t *testing.T) {
	p, err := newPlanner(distinctShapesPool(t, 8), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b, other := p.tenants[1], p.tenants[5], p.tenants[2] // tenants i and i+4 share a model
	if a.modKey != b.modKey || a.work == b.work || a.modKey == other.modKey {
		t.Fatalf("pool: want %s and %s alike but for the shape, %s another model", a.t.Name, b.t.Name, other.t.Name)
	}
	brd := p.fleet[0].board
	for _, s := range []perf.Slice{{Board: brd, Replicas: 1}, {Board: brd, Mode: perf.MPS, SMPercent: 50, Replicas: 2, MemoryMiB: 40 << 10}} {
		ea, err := p.cache.place(a, s)
		if err != nil {
			t.Fatal(err)
		}
		eb, err := p.cache.place(b, s)
		if err != nil {
			t.Fatal(err)
		}
		if ea != eb {
			t.Errorf("%v: %s and %s got different engines", s, a.t.Name, b.t.Name)
		}
		fresh, err := b.perfM.Place(s)
		if err != nil {
			t.Fatal(err)
		}
		if ea.KVCapacityTokens() != fresh.KVCapacityTokens() || ea.MaxSeqs() != fresh.MaxSeqs() || ea.MaxBatchedTokens() != fresh.MaxBatchedTokens() {
			t.Errorf("%v: cached engine (%d tokens, %d seqs, %d batched) differs from a fresh one (%d, %d, %d)", s,
				ea.KVCapacityTokens(), ea.MaxSeqs(), ea.MaxBatchedTokens(), fresh.KVCapacityTokens(), fresh.MaxSeqs(), fresh.MaxBatchedTokens())
		}
		if eo, err := p.cache.place(other, s); err != nil || eo == ea || eo.KVCapacityTokens() == ea.KVCapacityTokens() {
			t.Errorf("%v: %s (another model) got %s's engine or its capacity (err %v)", s, other.t.Name, a.t.Name, err)
		}
	}
	e1, _ := p.cache.place(a, perf.Slice{Board: brd, Replicas: 1})
	e2, _ := p.cache.place(a, perf.Slice{Board: brd, Mode: perf.MPS, SMPercent: 50, Replicas: 2, MemoryMiB: 40 << 10})
	if e1 == e2 || e1.KVCapacityTokens() <= e2.KVCapacityTokens() {
		t.Errorf("a whole GPU and a 40 GiB share got one engine or the share holds as much (%d ≥ %d tokens)", e2.KVCapacityTokens(), e1.KVCapacityTokens())
	}
}

// TestStepDensePages: the dense step-time table, read across its pages' edges, in rows of
// several chunk counts and in an order that grows a row's page list after later pages were
// filled, gives what the engine computes afresh for every batch, on first read and again.
func TestStepDensePages(t *testing.T) {
	p, err := newPlanner(distinctShapesPool(t, 8), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	var q *qmodel
	for _, tn := range p.tenants {
		for _, c := range tn.cands {
			if q == nil && c.ev != nil && c.ev.q != nil {
				q = c.ev.q
			}
		}
	}
	if q == nil {
		t.Fatal("no candidate with a queueing model")
	}
	fresh := newQModel(q.e, q.w, q.l)
	batches := []int{0, 1, densePageLen - 1, densePageLen, 5*densePageLen + 3, 2, 40*densePageLen - 1, 40 * densePageLen, 3 * densePageLen, denseDecodes - 1}
	for pass := 0; pass < 2; pass++ {
		for _, chunks := range []int{0, 3, 1} {
			for _, d := range batches {
				got, want := fresh.stepAt(d, chunks), fresh.stepTime(d, chunks)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Errorf("pass %d: step at %d decodes, %d chunks: %v from the table, %v computed", pass, d, chunks, got, want)
				}
			}
		}
	}
	if n := len(fresh.dense[3]); n > denseDecodes/densePageLen {
		t.Errorf("row of %d pages, more than the table's %d", n, denseDecodes/densePageLen)
	}
}

// TestOneRateExceeds: the baselines' test of a tenant's rate against a fraction of one replica's
// highest rate gives what comparing with the finished search gives, at rates on both sides of
// that fraction, at it bit for bit and one ulp either side, without computing the rate for later
// reads.
func TestOneRateExceeds(t *testing.T) {
	p, err := newPlanner(distinctShapesPool(t, 24), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	const frac = 0.7
	models, early := 0, 0
	for _, tn := range p.tenants {
		for _, c := range tn.cands {
			ev := c.ev
			if ev == nil || ev.q == nil {
				continue
			}
			models++
			rate, _ := newQModel(ev.q.e, ev.q.w, ev.q.l).withLengths(ev.q.lengths, ev.q.maxCtx).maxRate(tn.slo)
			at := frac * rate
			for _, rps := range []float64{0, 1e-3, at / 2, math.Nextafter(at, 0), at, math.Nextafter(at, math.Inf(1)), at * (1 + 1e-4), rate, 2 * rate, 1e8} {
				if got, want := ev.oneRateExceeds(rps, frac), rps > frac*rate; got != want {
					t.Errorf("%s on %s %s: %g req/s against %g × %g: %v, the finished search says %v", tn.t.Name, c.board.Name, c.label(), rps, frac, rate, got, want)
				}
			}
			if ev.rateSet {
				t.Fatalf("%s on %s %s: the test computed the rate for later reads", tn.t.Name, c.board.Name, c.label())
			}
			// once the rate is read, the test reads it
			got := ev.oneRate().RequestsPerSec
			if got != rate {
				t.Fatalf("%s on %s %s: rate %g, a fresh model's %g", tn.t.Name, c.board.Name, c.label(), got, rate)
			}
			if ev.oneRateExceeds(at, frac) || !ev.oneRateExceeds(math.Nextafter(at, math.Inf(1)), frac) {
				t.Errorf("%s on %s %s: after the read, the test disagrees with the rate at its edge", tn.t.Name, c.board.Name, c.label())
			}
			if rate > 0 {
				early++
			}
		}
	}
	if models < 24 || early < 12 {
		t.Fatalf("only %d candidates with a queueing model, %d with a rate", models, early)
	}
}

// TestFitPlaceByOptions: the memory fits and perf's engines are memoised by the tenant's model
// and options, numbered once a tenant: tenants alike but for the request shape share them,
// tenants of the same model with other options (max-num-seqs, the context) do not.
func TestFitPlaceByOptions(t *testing.T) {
	pool, err := v1.DecodePool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: opts}
fleet:
  nodes:
  - name: h0
    gpus: [{board: H100, count: 8}]
tenants:
- name: a
  model: {name: llama-3.1-8b}
  traffic: {rps: 1, inputTokens: 500, outputTokens: 100}
- name: b
  model: {name: llama-3.1-8b}
  traffic: {rps: 2, inputTokens: 900, outputTokens: 50}
- name: c
  model: {name: llama-3.1-8b}
  concurrency: 8
  traffic: {rps: 1, inputTokens: 500, outputTokens: 100}
- name: d
  model: {name: llama-3.1-8b}
  maxContext: 4096
  traffic: {rps: 1, inputTokens: 500, outputTokens: 100}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, d := p.tenants[0], p.tenants[1], p.tenants[2], p.tenants[3]
	brd := p.fleet[0].board
	s := perf.Slice{Board: brd, Replicas: 1}
	engine := func(tn *tenant) *perf.Engine {
		e, err := p.cache.place(tn, s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if engine(a) != engine(b) {
		t.Errorf("%s and %s differ only in the request shape but got different engines", a.t.Name, b.t.Name)
	}
	if ec := engine(c); ec == engine(a) || ec.MaxSeqs() != 8 || engine(a).MaxSeqs() == 8 {
		t.Errorf("%s (concurrency 8) got %s's engine or max-num-seqs %d", c.t.Name, a.t.Name, ec.MaxSeqs())
	}
	sl := llm.ReplicaSlice(brd, nil, 0, 1)
	fit := func(tn *tenant) llm.Fit {
		f, err := p.cache.fit(tn, sl)
		if err != nil {
			t.Fatal(err)
		}
		return *f
	}
	for _, tn := range []*tenant{a, b, c, d} {
		want, err := llm.FitSlice(tn.model, tn.llmOpt, sl)
		if err != nil {
			t.Fatal(err)
		}
		if got := fit(tn); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: memoised fit %+v, a fresh one %+v", tn.t.Name, got, want)
		}
	}
	if fa, fd := fit(a), fit(d); fa.Args.MaxModelLen == fd.Args.MaxModelLen {
		t.Errorf("%s (max context 4096) got %s's fit (max-model-len %d)", d.t.Name, a.t.Name, fd.Args.MaxModelLen)
	}
	if a.fitID != b.fitID || a.placeID != b.placeID || a.fitID == c.fitID || a.placeID == c.placeID || a.fitID == d.fitID {
		t.Errorf("numbers (fit, place): a (%d, %d), b (%d, %d), c (%d, %d), d (%d, %d)", a.fitID, a.placeID, b.fitID, b.placeID, c.fitID, c.placeID, d.fitID, d.placeID)
	}
}

// BenchmarkOneRateExceeds is the baselines' busy test on every candidate of 200 tenants of
// distinct shapes, on fresh models: "decide" stops the rate's search once the answer is known,
// "search" finishes it (maxRate) and compares.
func BenchmarkOneRateExceeds(b *testing.B) {
	p, err := newPlanner(distinctShapesPool(b, 200), Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.evaluate()
	var evs []*evalResult
	var rps []float64
	for _, tn := range p.tenants {
		for _, c := range tn.cands {
			if c.ev != nil && c.ev.q != nil {
				evs, rps = append(evs, c.ev), append(rps, tn.t.Traffic.RPS)
			}
		}
	}
	fresh := func(ev *evalResult) *evalResult {
		q := newQModel(ev.q.e, ev.q.w, ev.q.l).withLengths(ev.q.lengths, ev.q.maxCtx)
		return &evalResult{q: q, slo: ev.slo, out: ev.out}
	}
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, ev := range evs {
				fresh(ev).oneRateExceeds(rps[i], 0.7)
			}
		}
		b.ReportMetric(float64(len(evs)), "models")
	})
	b.Run("search", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, ev := range evs {
				_ = rps[i] > 0.7*fresh(ev).oneRate().RequestsPerSec
			}
		}
		b.ReportMetric(float64(len(evs)), "models")
	})
}

// BenchmarkEvaluateDistinctShapes is the evaluation of 200 tenants of distinct shapes on a fresh
// planner (memory fits, engines, queueing models and sizings, none shared between tenants but
// the fits and engines of the same model and options).
func BenchmarkEvaluateDistinctShapes(b *testing.B) {
	b.ReportAllocs()
	pool := distinctShapesPool(b, 200)
	for b.Loop() {
		p, err := newPlanner(pool, Options{})
		if err != nil {
			b.Fatal(err)
		}
		p.evaluate()
	}
}

// BenchmarkGroupBoundVaried1000 is the sharing-group bound of the varied synthetic 1,000 after
// their evaluation, each tenant on its cheapest candidate: its branch-and-bound search runs many nodes a group, and each node's
// branches sit in a buffer of their row, kept across nodes.
func BenchmarkGroupBoundVaried1000(b *testing.B) {
	b.ReportAllocs()
	p, err := newPlanner(Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7))), Options{})
	if err != nil {
		b.Fatal(err)
	}
	p.evaluate()
	for _, tn := range p.tenants { // the bound counts the tenants with a choice
		if len(tn.feasible) > 0 {
			tn.choice = tn.feasible[0]
		}
	}
	bound := 0
	for b.Loop() {
		bound = p.groupBound()
	}
	b.ReportMetric(float64(bound), "GPUs")
}
