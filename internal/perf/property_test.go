package perf

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"gpupool.dev/gpupool/internal/gpu"
)

// drawSlice draws any valid slice of the A100 or H100: exclusive, MIG, MPS or time-slice, alone
// or stacked inside a MIG instance.
func drawSlice(t *rapid.T, boards []*gpu.Board) Slice {
	b := rapid.SampledFrom(boards).Draw(t, "board")
	s := Slice{Board: b, Mode: Mode(rapid.IntRange(0, 2).Draw(t, "mode"))}
	if rapid.Bool().Draw(t, "mig") {
		s.Profile = &b.Profiles[rapid.IntRange(0, len(b.Profiles)-1).Draw(t, "profile")]
	}
	if s.Mode == MPS {
		s.SMPercent = rapid.SampledFrom([]float64{0, 1, 12.5, 30, 50, 70, 100}).Draw(t, "smPercent")
	}
	return s
}

func drawBatch(t *rapid.T) Batch {
	d := rapid.IntRange(0, 512).Draw(t, "decode")
	return Batch{
		PrefillTokens: rapid.IntRange(0, 16384).Draw(t, "prefill"),
		PrefillSeqs:   rapid.IntRange(0, 32).Draw(t, "prefillSeqs"),
		DecodeSeqs:    d,
		KVTokens:      int64(d) * int64(rapid.IntRange(0, 32768).Draw(t, "context")),
	}
}

func drawLoad(t *rapid.T) Load {
	return Load{
		Active:    rapid.IntRange(-1, 8).Draw(t, "active"),
		Duty:      rapid.Float64Range(-0.5, 1.5).Draw(t, "duty"),
		SMPercent: rapid.Float64Range(-10, 120).Draw(t, "nbSM"),
		BoardBusy: rapid.Float64Range(-1, 2).Draw(t, "boardBusy"),
	}
}

// Step time is positive and finite for any non-empty batch, zero for an empty one, and never
// shrinks when the batch grows in any dimension.
func TestPropStepTimeMonotoneInWork(t *testing.T) {
	boards := []*gpu.Board{a100Literal(), h100Literal()}
	m := mustModel(t, llama7B)
	rapid.Check(t, func(t *rapid.T) {
		e, err := m.Place(drawSlice(t, boards))
		if err != nil {
			t.Fatal(err)
		}
		b, l := drawBatch(t), drawLoad(t)
		base := e.StepTime(b, l)
		if b.PrefillTokens+b.DecodeSeqs == 0 {
			if base != 0 {
				t.Fatalf("empty batch took %v", base)
			}
			return
		}
		if base <= 0 || base == time.Duration(math.MaxInt64) {
			t.Fatalf("step %v for %+v", base, b)
		}
		grow := b
		switch rapid.IntRange(0, 2).Draw(t, "grow") {
		case 0:
			grow.DecodeSeqs++
		case 1:
			grow.PrefillTokens += rapid.IntRange(1, 4096).Draw(t, "more")
			grow.PrefillSeqs = max(grow.PrefillSeqs, 1)
			b.PrefillSeqs = grow.PrefillSeqs
			base = e.StepTime(b, l)
		case 2:
			grow.KVTokens += int64(rapid.IntRange(1, 1<<20).Draw(t, "moreKV"))
		}
		if got := e.StepTime(grow, l); got < base {
			t.Fatalf("more work %+v took %v < %v for %+v", grow, got, base, b)
		}
	})
}

// More active neighbours never make a step faster; an exclusive slice ignores them.
func TestPropNeighboursNeverHelp(t *testing.T) {
	boards := []*gpu.Board{a100Literal(), h100Literal()}
	m := mustModel(t, llama13B)
	rapid.Check(t, func(t *rapid.T) {
		s := drawSlice(t, boards)
		e, _ := m.Place(s)
		b := drawBatch(t)
		l := drawLoad(t)
		l.Active = rapid.IntRange(0, 6).Draw(t, "n")
		more := l
		more.Active++
		a, c := e.StepTime(b, l), e.StepTime(b, more)
		if c < a {
			t.Fatalf("%s: %d active neighbours %v faster than %d: %v", s.Name(), more.Active, c, l.Active, a)
		}
		if s.Mode == Exclusive && c != a {
			t.Fatalf("exclusive slice changed with neighbours: %v vs %v", a, c)
		}
	})
}

// A MIG profile with at least the SMs and memory slices of another is never slower.
func TestPropBiggerInstanceNotSlower(t *testing.T) {
	m := mustModel(t, llama7B)
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SampledFrom([]*gpu.Board{a100Literal(), h100Literal()}).Draw(t, "board")
		i := rapid.IntRange(0, len(b.Profiles)-1).Draw(t, "i")
		j := rapid.IntRange(0, len(b.Profiles)-1).Draw(t, "j")
		p, q := &b.Profiles[i], &b.Profiles[j]
		if !(q.SMs >= p.SMs && q.MemorySlices >= p.MemorySlices) {
			return
		}
		small, _ := m.Place(Slice{Board: b, Profile: p})
		big, _ := m.Place(Slice{Board: b, Profile: q})
		batch := drawBatch(t)
		if s, g := small.StepTime(batch, Load{}), big.StepTime(batch, Load{}); g > s {
			t.Fatalf("%s (%v) slower than %s (%v) for %+v", q.Name, g, p.Name, s, batch)
		}
	})
}

// A stricter SLO never admits a higher rate.
func TestPropStricterSLOLowerRate(t *testing.T) {
	m := mustModel(t, llama7B)
	e := mustEngine(t, m, Slice{Board: a100Literal()})
	rapid.Check(t, func(t *rapid.T) {
		w := Workload{InputTokens: rapid.IntRange(1, 4096).Draw(t, "in"), OutputTokens: rapid.IntRange(1, 1024).Draw(t, "out")}
		loose := SLO{TTFT: time.Duration(rapid.IntRange(50, 5000).Draw(t, "ttft")) * time.Millisecond,
			TPOT: time.Duration(rapid.IntRange(15, 200).Draw(t, "tpot")) * time.Millisecond}
		strict := SLO{TTFT: loose.TTFT * 8 / 10, TPOT: loose.TPOT * 8 / 10}
		a, err := e.MaxRate(w, loose, Load{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := e.MaxRate(w, strict, Load{})
		if b.RequestsPerSec > a.RequestsPerSec*(1+1e-3) {
			t.Fatalf("strict SLO %v admits %.3f req/s > loose %v %.3f req/s", strict, b.RequestsPerSec, loose, a.RequestsPerSec)
		}
		if a.RequestsPerSec > 0 && (a.TTFT > loose.TTFT || a.TPOT > loose.TPOT) {
			t.Fatalf("reported p99 %v/%v beyond the SLO %v", a.TTFT, a.TPOT, loose)
		}
	})
}

// Closed-loop throughput never falls when more requests are kept in flight.
func TestPropEstimateThroughputGrowsWithConcurrency(t *testing.T) {
	m := mustModel(t, llama7B)
	e := mustEngine(t, m, Slice{Board: h100Literal()})
	rapid.Check(t, func(t *rapid.T) {
		w := Workload{InputTokens: rapid.IntRange(1, 2048).Draw(t, "in"), OutputTokens: rapid.IntRange(2, 1024).Draw(t, "out"),
			Concurrency: rapid.IntRange(1, 300).Draw(t, "c")}
		a, err := e.Estimate(w, Load{})
		if err != nil {
			t.Fatal(err)
		}
		w.Concurrency += rapid.IntRange(1, 64).Draw(t, "more")
		b, _ := e.Estimate(w, Load{})
		if b.OutputTokensPerSec < a.OutputTokensPerSec*(1-1e-9) {
			t.Fatalf("concurrency %d: %.1f tok/s < %.1f at %d", w.Concurrency, b.OutputTokensPerSec, a.OutputTokensPerSec, a.Concurrency)
		}
		if a.TTFT <= 0 || a.TPOT <= 0 || a.E2E < a.TTFT {
			t.Fatalf("bad latencies %+v", a)
		}
	})
}

// TTFT is continuous in the prompt length across the chunk boundary at any concurrency: one
// more token than the budget costs at most one more step carrying that token beside the other
// requests' decodes, not a second full chunk (which costs about the whole TTFT again).
func TestPropTTFTContinuousAtBudget(t *testing.T) {
	m := mustModel(t, llama7B)
	h := h100Literal()
	rapid.Check(t, func(t *rapid.T) {
		s := Slice{Board: h}
		if rapid.Bool().Draw(t, "mig") {
			s.Profile = &h.Profiles[rapid.IntRange(0, len(h.Profiles)-1).Draw(t, "profile")]
		}
		e, err := m.Place(s)
		if err != nil || !e.FitsWeights() {
			t.Skip("does not fit")
		}
		b := e.MaxBatchedTokens()
		w := Workload{OutputTokens: rapid.IntRange(2, 512).Draw(t, "out"), Concurrency: rapid.IntRange(1, 64).Draw(t, "c")}
		var ttft [2]float64
		c := w.Concurrency
		step := e.StepTime(Batch{PrefillTokens: 1, PrefillSeqs: 1, DecodeSeqs: c, KVTokens: int64(c) * int64(b+w.OutputTokens)}, Load{}).Seconds()
		for i, in := range []int{b, b + 1} {
			w.InputTokens = in
			r, err := e.Estimate(w, Load{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Running < r.Concurrency {
				// The KV cache or the sequence limit holds fewer: a whole request more waiting
				// for a slot is a step in TTFT of its own, not the chunk boundary's.
				t.Skip("admission binds")
			}
			ttft[i] = r.TTFT.Seconds()
		}
		if d := ttft[1] - ttft[0]; d > 1.05*step || d < -0.05*ttft[0] {
			t.Fatalf("%s budget %d, %+v: TTFT %.2f ms at the budget, %.2f ms one token over (one step: %.2f ms)",
				s.Name(), b, w, 1e3*ttft[0], 1e3*ttft[1], 1e3*step)
		}
	})
}

// A measured-only engine's step takes a positive, finite time for any batch and neighbours.
func TestPropMeasuredEngineStep(t *testing.T) {
	a := a100Literal()
	tab := readParva(t, "bert")
	rapid.Check(t, func(t *rapid.T) {
		p := &a.Profiles[rapid.IntRange(0, len(a.Profiles)-1).Draw(t, "profile")]
		e, err := NewMeasuredEngine(tab, Slice{Board: a, Profile: p, Mode: MPS, Replicas: 3}, DefaultOptions())
		if err != nil {
			t.Skip("no rows for this instance size")
		}
		b := Batch{DecodeSeqs: rapid.IntRange(1, 4096).Draw(t, "batch")}
		l := Load{Active: rapid.IntRange(0, 6).Draw(t, "active")}
		d, j := e.StepTimeEnergy(b, l)
		if d <= 0 || !(j > 0) || math.IsInf(j, 0) {
			t.Fatalf("%s batch %d active %d: %v, %v J", p.Name, b.DecodeSeqs, l.Active, d, j)
		}
	})
}
