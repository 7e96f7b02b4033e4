package plan

import (
	"math"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// Varying request lengths in the queueing model (docs/planner.md, "Queueing-aware sizing").
//
// The model of queue.go takes every request at the tenant's mean lengths (traffic.inputTokens
// and outputTokens). Where the pool states that they vary (traffic.lengths uniform or
// exponential, as the simulator draws them) it adds three terms, each conservative on its own,
// and leaves a tenant of fixed lengths exactly as before (each hook is an identity there):
//
//   - TTFT: a request's own prefill is that of the 99th-percentile prompt, not the mean one
//     (longPromptExtra), also at a trickle, so that a target no count meets is refused as such;
//   - the slot wait: holding times vary with the output length, so a busy slot's residual time
//     is length-biased and a queue of them drains more slowly; the wait's p99 is scaled by
//     1 + cv² of the length (holdSpread: Allen–Cunneen's (1 + cs²) over the fixed lengths' 1);
//   - TPOT: the prompt tokens that share a request's decode are a compound Poisson count (a
//     Poisson number of prompts, each of a random length), whose p99 is computed exactly for
//     the stated law (promptChunksP99) instead of the Poisson count times the mean prompt.
//
// The KV cache's hold (kvhold.go) still counts every request at the mean lengths.

// lengthLaw is the length law the model sizes tn's traffic for: "" for fixed (or unset).
func lengthLaw(t v1.Traffic) v1.Lengths {
	if t.Lengths == v1.LengthsFixed {
		return ""
	}
	return t.Lengths
}

// withLengths sets the length law of q (and of the maximum context that caps a drawn length,
// 0 when none does) and returns q.
func (q *qmodel) withLengths(l v1.Lengths, maxCtx int) *qmodel {
	q.lengths, q.maxCtx = l, maxCtx
	return q
}

// lengthCV2 is the squared coefficient of variation of a length of mean m under the model's law:
// 1/12 for uniform on [m/2, 3m/2], 1 − 1/m for the geometric law with mean m, 0 for fixed.
func (q *qmodel) lengthCV2(m float64) float64 {
	switch q.lengths {
	case v1.LengthsUniform:
		return 1.0 / 12
	case v1.LengthsExponential:
		return math.Max(0, 1-1/math.Max(m, 1))
	}
	return 0
}

// promptP99 is the 99th-percentile prompt length under the model's law, capped by the maximum
// context (a drawn prompt leaves room for one output token).
func (q *qmodel) promptP99() float64 {
	p := q.in
	switch q.lengths {
	case v1.LengthsUniform:
		p = q.in/2 + 0.99*q.in
	case v1.LengthsExponential:
		if q.in > 1 { // geometric on {1, 2, …} with mean in: P(L > x) = (1 − 1/in)^x
			p = math.Ceil(math.Log(0.01) / math.Log1p(-1/q.in))
		}
	}
	if q.maxCtx > 1 {
		p = math.Min(p, float64(q.maxCtx-1))
	}
	return math.Max(p, q.in)
}

// longPromptExtra is what the 99th-percentile prompt's own prefill adds to the mean prompt's,
// with d decode sequences in each step: its chunks of up to the step budget each, against the
// model's k chunks of the mean prompt. 0 for fixed lengths.
func (q *qmodel) longPromptExtra(d float64) float64 {
	if q.lengths == "" {
		return 0
	}
	p := q.promptP99()
	if p <= q.in {
		return 0
	}
	per := math.Max(float64(q.budget)-math.Floor(d), 1) // prompt tokens a step takes beside d decodes
	k := math.Ceil(p / per)
	c := p / k
	long := q.e.StepTime(perf.Batch{DecodeSeqs: int(d), KVTokens: int64(math.Floor(d) * (q.in + q.out/2)),
		PrefillTokens: int(math.Ceil(c)), PrefillSeqs: 1, PrefillPairs: int64(c * (p + 1) / 2)}, q.l).Seconds()
	return math.Max(0, k*long-q.k*q.step(d, 1))
}

// holdSpread scales the slot wait's p99 for holding times that vary with the output length:
// 1 + cv² (exactly 1 for fixed lengths).
func (q *qmodel) holdSpread() float64 {
	if q.lengths == "" {
		return 1
	}
	return 1 + q.lengthCV2(q.out)
}

// promptChunksP99 is the 99th percentile of the prompt chunks (of in/k tokens, the model's mean
// chunk, counted token for token) that m prompts in the mean bring to one of n replicas:
// per·poissonP99(m) for fixed lengths (per is k), per·routedPromptsP99(m, n) for fixed prompts
// longer than a chunk, and for varying lengths the larger of per·poissonP99(m) and the compound
// Poisson p99 of their tokens over the mean chunk.
func (q *qmodel) promptChunksP99(per, m float64, n int) float64 {
	if q.lengths == "" && q.k > 1 {
		return per * routedPromptsP99(m, n)
	}
	fixed := per * poissonP99(m)
	if q.lengths == "" || m <= 0 {
		return fixed
	}
	return math.Max(fixed, compoundP99(q.lengths, q.in, m)/(q.in/q.k))
}

// routedPromptsP99 is the 99th percentile of the prompts that reach one of n replicas behind the
// least-loaded router while the tenant's prompts arrive as a Poisson count of mean m·n: the
// router sends each request to the replica holding the fewest, and with holding times of one
// shape a replica holds what it was sent over the last holding time, so the replicas take turns
// and each receives its share of the tenant's count, rounded up: ⌈poissonP99(m·n)/n⌉, not
// poissonP99(m) as n independent Poisson streams would give (the same for one replica). Counted
// per replica, the TPOT p99 of llama-3.1-8b at 0.8 req/s of 24,000 + 300 tokens over three
// A100-40GB TP-2 replicas was 50.5 ms, where the simulator's is 29.6–32.4 ms
// (TestLongPromptTPOTRouter). Only for prompts longer than a chunk: for the others the per-replica
// count is what the agreement suite was calibrated on.
func routedPromptsP99(m float64, n int) float64 {
	if n <= 1 {
		return poissonP99(m)
	}
	return math.Ceil(poissonP99(m*float64(n)) / float64(n))
}

// compoundP99 is the 99th percentile of S = L₁ + … + L_N, N Poisson of mean m and the L
// independent lengths of mean in under law l (exponential: Gamma(n, in) given N = n; uniform:
// n·in/2 + in·Irwin–Hall(n)). Above a mean of 50 prompts the normal law of S with its moments.
func compoundP99(l v1.Lengths, in, m float64) float64 {
	ex2 := in * in * (1 + 1.0/12) // E[L²]
	if l == v1.LengthsExponential {
		ex2 = 2 * in * in
	}
	if m > 50 {
		return m*in + zP99*math.Sqrt(m*ex2)
	}
	hi := int(math.Ceil(m + 12*math.Sqrt(m) + 20))
	tail := func(x float64) float64 { return compoundTail(l, in, m, x) }
	lo, up := 0.0, in*(float64(hi)*2+10)
	if tail(lo) <= 0.01 {
		return 0
	}
	for range 60 {
		mid := (lo + up) / 2
		if tail(mid) > 0.01 {
			lo = mid
		} else {
			up = mid
		}
		if up-lo <= 0.5 {
			break
		}
	}
	return up
}

// compoundTail is P(S > x) for S as in compoundP99 (the normal law above a mean of 50 prompts).
func compoundTail(l v1.Lengths, in, m, x float64) float64 {
	if m <= 0 {
		if x < 0 {
			return 1
		}
		return 0
	}
	if m > 50 {
		ex2 := in * in * (1 + 1.0/12)
		if l == v1.LengthsExponential {
			ex2 = 2 * in * in
		}
		return 0.5 * math.Erfc((x-m*in)/math.Sqrt(2*m*ex2))
	}
	s := math.Exp(-m) // N = 0: S = 0
	if x >= 0 {
		s = 0
	}
	hi := int(math.Ceil(m + 12*math.Sqrt(m) + 20))
	pn := math.Exp(-m) // P(N = n), from n = 0
	y := x / in
	gt, gterm := 0.0, math.Exp(-y) // exponential: P(Gamma(n, 1) > y) = Σ_{j<n} e^{−y} y^j/j!, by n
	for n := 1; n <= hi; n++ {
		pn *= m / float64(n)
		if s+pn == s && float64(n) > m {
			// Past the mode P(N = n) only falls, and every term is at most it: none of the rest
			// changes s in float64 any more (rounding is monotone), so the sum is final.
			break
		}
		if l == v1.LengthsExponential {
			if y <= 0 {
				s += pn
				continue
			}
			gt += gterm
			gterm *= y / float64(n)
			s += pn * math.Min(gt, 1)
		} else {
			s += pn * irwinHallTail(n, (x-float64(n)*in/2)/in)
		}
	}
	return s
}

// outQuantile is the u-quantile of the output length under the model's law.
func (q *qmodel) outQuantile(u float64) float64 {
	switch q.lengths {
	case v1.LengthsUniform:
		return math.Max(1, math.Floor(q.out/2+u*q.out))
	case v1.LengthsExponential:
		if q.out > 1 {
			return 1 + math.Floor(math.Log1p(-u)/math.Log1p(-1/q.out))
		}
	}
	return q.out
}

// tpotSpread is the TPOT p99 over requests of varying output lengths, at least tpot (the model's
// p99 at the mean length): a request's TPOT is the mean of its O − 1 decode steps, so a short
// one that meets a long prompt's chunks averages them over few steps. With f(x) the prompt
// chunks per step at which a step of d99 decodes lasts x, a request of j decode steps exceeds x
// when the prompt tokens arriving over its decode (compound Poisson of mean λ·j·x prompts) exceed
// j·chunk·f(x); the p99 is the least x at which that chance, averaged over the output law
// (requests of one output token have no TPOT), is 1 %. tpot itself for fixed lengths.
func (q *qmodel) tpotSpread(lr, d99, tpot float64) float64 {
	if q.lengths == "" || q.out < 2 || lr <= 0 {
		return tpot
	}
	const grid = 100
	var steps []float64
	for i := range grid {
		if j := q.outQuantile((float64(i)+0.5)/grid) - 1; j >= 1 {
			steps = append(steps, j)
		}
	}
	base := q.step(d99, 0)
	fAt := func(x float64) float64 { // chunks per step at which step(d99, ·) reaches x
		lo, hi := 0.0, 1.0
		for q.step(d99, hi) < x {
			if hi > 1e4 {
				return hi
			}
			lo, hi = hi, 2*hi
		}
		for range 30 {
			mid := (lo + hi) / 2
			if q.step(d99, mid) < x {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi
	}
	// miss is only compared with 1 %: the terms are chances (≥ 0), so once the partial sum is
	// above it the whole sum is too, and the rest need not be computed (the answer is the same).
	miss := func(x float64) float64 {
		fx := fAt(x)
		s := 0.0
		for _, j := range steps {
			s += compoundTail(q.lengths, q.in, lr*j*x, j*(q.in/q.k)*fx)
			if s/grid > 0.01 {
				break
			}
		}
		return s / grid
	}
	if miss(tpot) <= 0.01 {
		return tpot
	}
	lo, hi := tpot, math.Max(tpot, base)*2
	for miss(hi) > 0.01 {
		if hi > 1e3 {
			return math.Inf(1)
		}
		lo, hi = hi, 2*hi
	}
	for range 25 {
		mid := (lo + hi) / 2
		if miss(mid) > 0.01 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// lengthsNeed is the prompt + output tokens that a --max-model-len must admit for all but 0.1 %
// of a tenant's requests under its length law (a longer request is refused with an error, and
// counts against the SLO): the means' sum for fixed lengths, 1.5 × it for uniform lengths (their
// longest), ln(1000) ≈ 6.91 × it for exponential ones (the sum of two independent exponential
// lengths exceeds ln(1000) times the sum of their means less than 0.1 % of the time).
func lengthsNeed(t v1.Traffic) int {
	sum := float64(t.InputTokens + t.OutputTokens)
	switch lengthLaw(t) {
	case v1.LengthsUniform:
		return int(math.Ceil(1.5 * sum))
	case v1.LengthsExponential:
		return int(math.Ceil(math.Log(1000) * sum))
	}
	return t.InputTokens + t.OutputTokens
}
