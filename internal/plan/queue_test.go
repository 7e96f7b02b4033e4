package plan

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

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
	return newQModel(e, perf.Workload{InputTokens: in, OutputTokens: out}, perf.Load{}, slots, e.KVCapacityTokens())
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
