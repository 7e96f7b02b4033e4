package plan

import (
	"fmt"
	"math"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// End-to-end latency of tenants of varying output lengths (docs/planner.md, "End-to-end
// targets", ADR 0082).
//
// A request's e2e latency is its TTFT plus its decode, TPOT × (L − 1) for its output length L.
// For fixed lengths the plan predicts the e2e p99 as TTFT p99 + TPOT p99 × (O − 1), as before.
// For varying lengths the requests in the e2e tail are the long ones, whose TPOT is an average
// over many steps and lies near the mean step, not the TPOT p99; the prediction is the 99th
// percentile of T + t̄ · (L − 1), with t̄ the model's mean step at the tenant's load (meanStep), L
// drawn from the tenant's length law as the simulator draws it, and T, the TTFT, taken as
// exponential with the model's TTFT p99 as its own p99 (P(T > y) = 100^(−y/ttft99)), independent
// of L.

// e2eP99Varying is the 99th percentile of T + step·(L − 1), T exponential with p99 ttft, L the
// output length under the model's law (capped by the maximum context as the simulator caps it),
// in seconds, bracketed by bisection to a microsecond.
//
// The bisection only asks whether the chance of exceeding x is above 1 %: the sum of its
// non-negative terms stops once it is (a float sum of such terms never decreases), and a term
// whose 100^(−y/ttft) is below the smallest float (y above 170 TTFT p99s) adds an exact 0 and is
// skipped. The same sums in the same order otherwise, so the same answer, bit for bit.
//
// That sum takes a power a term; e2eAboveFast answers most probes from a running product
// instead, and only those it cannot tell from 1 % by more than its error bound go to the sum.
func (q *qmodel) e2eP99Varying(ttft, step float64) float64 {
	ls, ps := q.outLaw()
	above := func(x float64) bool { // the chance of exceeding x above 1 %
		s := 0.0
		for i, l := range ls {
			y := x - step*(l-1)
			switch {
			case y <= 0:
				s += ps[i]
			case ttft > 0:
				z := -y / ttft
				if z < -e2eZeroTail {
					continue // 100^z is 0
				}
				s += ps[i] * math.Pow(100, z)
			}
			if s > 0.01 {
				return true
			}
		}
		return false
	}
	lo, hi := 0.0, ttft+step*(ls[len(ls)-1]-1)+1e-6
	fast := newE2EFast(ls, ttft, step, hi)
	for hi-lo > 1e-6 {
		mid := (lo + hi) / 2
		a, known := fast.above(ls, ps, mid)
		if !known {
			a = above(mid)
		}
		if a {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// e2eZeroTail is the exponent beyond which 100^(−z) is 0 in float64: 100^−170 is 1e-340,
// far below half the smallest subnormal (4.9e-324).
const e2eZeroTail = 170

// e2eFast answers e2eP99Varying's question (is the chance of exceeding x above 1 %?) where it
// is clear: the same terms, 100^(−y/ttft) taken as a running product, ×r = 100^(step/ttft) from
// one length to the next (recomputed by a power every e2eFastRun terms, and skipped below
// 100^(−e2eFastSkip)), summed in the same order, answer when the sum is more than e2eFastSlack
// above or below 1 %. Its error against the exact sum is at most bound (relative to the terms'
// sum, at most 1, plus what the skipped terms leave out): the exponents' rounding, up to
// 2ε·x/ttft + 170ε each (ε = 2^−53) plus e2eFastRun·ε·step/ttft through r, times ln 100; the
// powers' and products' rounding over a run (e2eFastPow a term); and each sum's, n·ε for n
// terms. Where bound exceeds a tenth of the slack (a TTFT p99 tiny against the decode, or more
// terms than the slack allows), it answers nothing.
type e2eFast struct {
	ok         bool
	ttft, step float64
	r          float64 // 100^(step/ttft)
}

const (
	e2eFastSlack = 1e-9  // absolute, on a chance compared with 1 %
	e2eFastRun   = 64    // terms between powers
	e2eFastSkip  = 140.0 // 100^−140 = 1e-280: a term below it is left out (counted in the bound)
	e2eFastPow   = 1e-13 // relative error of a power or a product, a term (far above Go's)
)

func newE2EFast(ls []float64, ttft, step, xmax float64) e2eFast {
	if !(ttft > 0) || !(step > 0) || math.IsInf(xmax, 0) || math.IsNaN(xmax) {
		return e2eFast{}
	}
	const eps = 0x1p-53
	n := float64(len(ls))
	dz := 2*eps*xmax/ttft + 170*eps + e2eFastRun*eps*step/ttft
	bound := 2*math.Ln10*dz + e2eFastRun*e2eFastPow + 2*n*eps + n*1e-280
	if !(bound <= e2eFastSlack/10) {
		return e2eFast{}
	}
	r := math.Pow(100, step/ttft)
	if math.IsInf(r, 0) || !(r > 0) {
		return e2eFast{}
	}
	return e2eFast{ok: true, ttft: ttft, step: step, r: r}
}

// above is whether the chance of exceeding x is above 1 %, and whether that is known.
func (f e2eFast) above(ls, ps []float64, x float64) (above, known bool) {
	if !f.ok {
		return false, false
	}
	s, g, run, prev := 0.0, 0.0, 0, math.NaN()
	for i, l := range ls {
		y := x - f.step*(l-1) // as e2eP99Varying's sum, so the same terms count as certain
		switch {
		case y <= 0:
			s += ps[i]
		default:
			z := -y / f.ttft
			if z < -e2eFastSkip {
				continue
			}
			if run > 0 && l == prev+1 {
				g *= f.r
				run--
			} else {
				g, run = math.Pow(100, z), e2eFastRun
			}
			prev = l
			s += ps[i] * g
		}
		if s > 0.01+e2eFastSlack {
			return true, true
		}
	}
	if s < 0.01-e2eFastSlack {
		return false, true
	}
	return false, false
}

// outLaw is the output length's law as the simulator draws it around the mean out: its values
// ascending and their chances. Uniform: max(1, ⌊out/2⌋ + j), j uniform on {0, …, out};
// exponential: geometric on {1, 2, …} of mean out, cut where less than 1e-9 of it lies above (the
// rest put on the last value); a maximum context above 1 caps a length at maxCtx − 1.
//
// The law is a function of the length law, the mean output and the maximum context alone: kept
// on the model, computed once (e2e predictions ask for it at every rate they try); its slices are
// read, never written.
func (q *qmodel) outLaw() ([]float64, []float64) {
	key := outLawKey{q.lengths, q.out, q.maxCtx}
	if ol := q.olaw; ol != nil && ol.key == key {
		return ol.ls, ol.ps
	}
	ls, ps := q.outLawFresh()
	q.olaw = &outLawOf{key: key, ls: ls, ps: ps}
	return ls, ps
}

// outLawKey is what an output law (outLaw) is a function of.
type outLawKey struct {
	lengths v1.Lengths
	out     float64
	maxCtx  int
}

// outLawOf is one output law, its values and their chances, and what it is the law of.
type outLawOf struct {
	key    outLawKey
	ls, ps []float64
}

// outLawFresh is outLaw, computed.
func (q *qmodel) outLawFresh() ([]float64, []float64) {
	out := int(q.out)
	n := 1 // the values at most, allocated at once
	switch q.lengths {
	case v1.LengthsUniform:
		n = out + 1
	case v1.LengthsExponential:
		n = 64*out + 1
		if out > 1 {
			// above·r^(l−1) falls below 1e-9 by l = 1 + ln(1e-9)/ln r (rounded, and a margin)
			n = min(n, int(math.Log(1e-9)/math.Log1p(-1/float64(out)))+4)
		}
	}
	ls, ps := make([]float64, 0, max(n, 1)), make([]float64, 0, max(n, 1))
	add := func(l int, p float64) {
		if q.maxCtx > 1 {
			l = min(l, q.maxCtx-1)
		}
		if n := len(ls); n > 0 && ls[n-1] == float64(l) {
			ps[n-1] += p
			return
		}
		ls, ps = append(ls, float64(l)), append(ps, p)
	}
	switch {
	case q.lengths == v1.LengthsUniform:
		for j := 0; j <= out; j++ {
			add(max(1, out/2+j), 1/float64(out+1))
		}
	case q.lengths == v1.LengthsExponential && out > 1:
		r := 1 - 1/float64(out)
		above := 1.0 // P(L ≥ l)
		for l := 1; ; l++ {
			if above*r < 1e-9 || l >= 64*out+1 {
				add(l, above)
				break
			}
			add(l, above*(1-r))
			above *= r
		}
	default:
		add(max(out, 1), 1)
	}
	return ls, ps
}

// predictE2E is the plan's e2e p99 for tn on q at lam req/s over n replicas, whose p99 TTFT and
// TPOT there are ttft and tpot: TTFT + TPOT × (O − 1) for fixed lengths, and for varying
// lengths e2eP99Varying at the mean step (the TPOT p99 where the replicas cannot keep up, or
// where no load is given), whether or not the tenant has an e2e target.
func predictE2E(tn *tenant, q *qmodel, lam float64, n int, ttft, tpot time.Duration) time.Duration {
	out := tn.work.OutputTokens
	if q == nil || q.lengths == "" {
		return ttft + tpot*timeDur(out-1)
	}
	step := tpot.Seconds()
	if lam > 0 && n > 0 {
		if t, ok := q.meanStep(lam / float64(n)); ok {
			step = t
		}
	}
	return seconds(q.e2eP99Varying(ttft.Seconds(), step))
}

// e2eSplitShares are the TTFT shares of an e2e target, in eighths, that the sizing tries for a
// tenant of varying lengths with no TTFT target of its own (evaluate): E/4, the split of fixed
// lengths, first.
var e2eSplitShares = []int{2, 1, 3, 4}

// e2eSplits are the SLO targets that the sizing tries for tn, the first one tn's own
// (sloTargets); only tn's own for fixed lengths, a TTFT target given, no e2e target, or a
// measured profile.
func e2eSplits(tn *tenant) []perf.SLO {
	s := tn.t.SLO
	if tn.measured != nil || s.E2EP99 == nil || s.TTFTP99 != nil || lengthLaw(tn.t.Traffic) == "" {
		return nil
	}
	var r []perf.SLO
	for _, d := range e2eSplitShares {
		r = append(r, splitE2E(s, d, tn.work.OutputTokens, lengthLaw(tn.t.Traffic), tn.t.MaxContext))
	}
	return r
}

// evalSplits evaluates tn again at each of its other e2e splits (e2eSplits; splits[0] is tn.slo,
// already evaluated) and keeps the split whose cheapest feasible candidate costs least, the first
// one on a tie: a candidate that meets any split's TTFT and TPOT targets meets the e2e target
// by sloTargets' argument (TTFT ≤ E/s and TPOT ≤ (E − E/s)/(L − 1) bound TTFT + TPOT × (L − 1)
// by E for every request no longer than L), so E/4's plan is replaced only by a cheaper one.
func (p *planner) evalSplits(tn *tenant, splits []perf.SLO) {
	type state struct {
		slo                                   perf.SLO
		cands, feasible, boundExtra, fallback []*cand
	}
	save := func() state {
		return state{tn.slo, tn.cands, tn.feasible, tn.boundExtra, tn.fixedFallback}
	}
	cheapest := func(s state) float64 {
		if len(s.feasible) == 0 {
			return math.Inf(1)
		}
		return s.feasible[0].cost
	}
	best := save()
	for _, s := range splits[1:] {
		if s == best.slo || p.stopped() {
			continue
		}
		tn.slo, tn.cands, tn.feasible, tn.boundExtra, tn.fixedFallback = s, nil, nil, nil, nil
		tn.shapeIn = nil // the shape's number holds the SLO
		p.evalTenant(tn)
		if now := save(); cheapest(now) < cheapest(best)-1e-12 {
			best = now
		}
	}
	if tn.slo != best.slo {
		tn.shapeIn = nil
	}
	tn.slo, tn.cands, tn.feasible, tn.boundExtra, tn.fixedFallback = best.slo, best.cands, best.feasible, best.boundExtra, best.fallback
	if best.slo != splits[0] {
		for i, n := range tn.notes {
			if n == splitNote(tn.t, splits[0], tn.work.OutputTokens) {
				tn.notes[i] = splitNote(tn.t, best.slo, tn.work.OutputTokens) +
					fmt.Sprintf(" (E/4 for the TTFT would take a costlier slice: TTFT ≤ %s, TPOT ≤ %s)", splits[0].TTFT, roundDur(splits[0].TPOT))
			}
		}
	}
}

// splitNote is the tenant's first reason's note on the split of its e2e target into slo for
// varying lengths.
func splitNote(t v1.Tenant, slo perf.SLO, out int) string {
	return fmt.Sprintf("the e2e target %s is split for the 99th-percentile output of the %s lengths, %d tokens (not the mean %d): TTFT ≤ %s, TPOT ≤ %s",
		t.SLO.E2EP99.Std(), t.Traffic.Lengths, outputP99(out, lengthLaw(t.Traffic), t.MaxContext), out, slo.TTFT, roundDur(slo.TPOT))
}
