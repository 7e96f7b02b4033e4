package perf

import (
	"fmt"
	"math"
	"time"
)

// SLO is a pair of p99 latency targets; a zero target is not checked.
type SLO struct {
	TTFT time.Duration `json:"ttftP99"`
	TPOT time.Duration `json:"tpotP99"`
}

// Rate is the answer to "how much Poisson traffic can one replica take within the SLO".
type Rate struct {
	RequestsPerSec     float64 `json:"requestsPerSec"`
	OutputTokensPerSec float64 `json:"outputTokensPerSec"`
	// TTFT and TPOT are the model's p99 at that rate (at a rate near zero when none is met).
	TTFT time.Duration `json:"ttftP99"`
	TPOT time.Duration `json:"tpotP99"`
	// Limit is what binds just above the rate.
	Limit Limit `json:"limit"`
}

// zP99 is the standard normal 99th percentile, for the Poisson spread of the decode batch.
const zP99 = 2.326

// point is the open-loop state of an engine at one arrival rate.
type point struct {
	ttft, tpot float64
	limit      Limit // saturated, kv-capacity or max-seqs; LimitNone when the state is stable
}

// MaxRate is the highest Poisson arrival rate of requests shaped like w that one replica on e
// sustains with the p99 targets of slo met, while l holds (doc.go, "Open loop and p99"). The p99
// values come from a queueing approximation, not a simulation. A rate of 0 means even a trickle
// misses the SLO; Limit says which target.
func (e *Engine) MaxRate(w Workload, slo SLO, l Load) (Rate, error) {
	if err := w.Validate(); err != nil {
		return Rate{}, fmt.Errorf("max rate %s on %s: %w", e.m.name, e.s.Name(), err)
	}
	if slo.TTFT < 0 || slo.TPOT < 0 {
		return Rate{}, fmt.Errorf("max rate %s on %s: negative SLO target", e.m.name, e.s.Name())
	}
	if e.measuredOnly {
		return Rate{}, fmt.Errorf("max rate %s on %s: %w", e.m.name, e.s.Name(), errMeasuredOnly)
	}
	if !e.FitsWeights() {
		return Rate{Limit: LimitNoFit}, nil
	}
	ok := func(lam float64) (point, Limit) {
		p := e.openLoop(w, lam, l)
		if p.limit != LimitNone {
			return p, p.limit
		}
		if slo.TPOT > 0 && p.tpot > slo.TPOT.Seconds() {
			return p, LimitTPOT
		}
		if slo.TTFT > 0 && p.ttft > slo.TTFT.Seconds() {
			return p, LimitTTFT
		}
		return p, LimitNone
	}
	const trickle = 1e-9
	p0, lim := ok(trickle)
	if lim != LimitNone {
		return Rate{TTFT: seconds(p0.ttft), TPOT: seconds(p0.tpot), Limit: lim}, nil
	}
	lo, hi, best := trickle, 1.0, p0
	for ; hi < 1e9; hi *= 2 {
		p, l := ok(hi)
		if l != LimitNone {
			lim = l
			break
		}
		lo, best = hi, p
	}
	for range 60 {
		if (hi-lo)/hi < 1e-4 {
			break
		}
		mid := (lo + hi) / 2
		if p, l := ok(mid); l == LimitNone {
			lo, best = mid, p
		} else {
			hi, lim = mid, l
		}
	}
	return Rate{RequestsPerSec: lo, OutputTokensPerSec: lo * float64(w.OutputTokens),
		TTFT: seconds(best.ttft), TPOT: seconds(best.tpot), Limit: lim}, nil
}

// openLoop solves the mean step time t of Poisson arrivals at rate lam, then the p99 TPOT and
// TTFT around it.
func (e *Engine) openLoop(w Workload, lam float64, l Load) point {
	in, out := float64(w.InputTokens), float64(w.OutputTokens)
	o1 := out - 1
	// The tagged request decodes with the others: d = 1 + λ(O−1)t sequences in a mean step.
	at := func(t, dec float64) work {
		return work{p: lam * in * t, ps: lam * t, pairs: lam * t * in * (in + 1) / 2, d: dec, kv: dec * (in + out/2)}
	}
	f := func(t float64) float64 { return e.step(at(t, 1+lam*o1*t), l).total }
	t, okfp := fixedPoint(f)
	if !okfp {
		return point{limit: LimitSaturated}
	}
	d := lam * o1 * t
	d99 := 1 + d + zP99*math.Sqrt(d)
	if d99 > float64(e.maxSeqs) {
		return point{limit: LimitMaxSeqs}
	}
	if d99*e.kvPerSeq(w)+lam*t*in > float64(e.KVCapacityTokens()) {
		return point{limit: LimitKV}
	}
	tpot := e.step(at(t, d99), l).total
	// Prefill as an M/D/1 server: B−d99 prompt tokens per full-budget step.
	bp := float64(e.maxBatchedTokens) - d99
	if bp < 1 {
		return point{limit: LimitSaturated}
	}
	busy := at(t, d99)
	busy.p, busy.ps, busy.pairs = bp, math.Max(1, bp/in), bp*(math.Min(in, bp)+1)/2
	svc := in / bp * e.step(busy, l).total
	rho := lam * svc
	if rho >= 1 {
		return point{limit: LimitSaturated}
	}
	var w99 float64
	if rho > 0.01 {
		wq := rho * svc / (2 * (1 - rho))
		w99 = wq / rho * math.Log(100*rho)
	}
	// The prompt's own chunks: k−1 full ones of bp tokens and a last one of what remains, so
	// that TTFT is continuous in the prompt length across a chunk boundary.
	k := math.Ceil(in / bp)
	full := math.Min(in, bp)
	last := in - (k-1)*full
	chunk := func(c, off float64) float64 {
		own := at(t, d99)
		own.p += c
		own.ps++
		own.pairs += float64(ChunkPairs(int(c), int(off)))
		return e.step(own, l).total
	}
	ttft := tpot + w99 + chunk(last, in-last)
	if k > 1 {
		ttft += (k - 1) * chunk(full, (k-2)*full/2)
	}
	return point{ttft: ttft, tpot: tpot}
}

// fixedPoint finds the least t > 0 with f(t) = t for an increasing f with f(0) > 0, by Newton's
// method from the left; false when none exists (f grows at least as fast as t).
func fixedPoint(f func(float64) float64) (float64, bool) {
	t := f(0)
	for range 100 {
		ft := f(t)
		h := ft - t
		if math.Abs(h) <= 1e-9+1e-7*t {
			return ft, true
		}
		if t > 1e4 || math.IsNaN(h) {
			return 0, false
		}
		dt := 1e-6*t + 1e-12
		slope := (f(t+dt) - ft) / dt
		if slope >= 1 {
			if h > 0 {
				return 0, false
			}
			t = ft // past the root on a flat stretch: step back by iteration
			continue
		}
		t -= h / (slope - 1)
	}
	return 0, false
}
