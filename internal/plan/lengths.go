package plan

import (
	"math"
	"sync"
	"sync/atomic"

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
//     the stated law (promptChunksP99) instead of the Poisson count times the mean prompt;
//     over the output law (tpotSpread) exponential prompts are priced at their step cost,
//     which is convex in their tokens (promptCost), not at the mean chunk's cost a token.
//
// The KV cache's hold and the step's attention count a request in flight at its length-biased
// hold (kvhold.go, heldMoments).

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
	long := q.e.StepTime(perf.Batch{DecodeSeqs: int(d), KVTokens: int64(math.Floor(d) * q.heldPerSeq()),
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
//
// Up to 50 it is in times the p99 of S/in, which depends on m alone, at the least point of a
// geometric grid of m (ratio 2^(1/256), 0.27 %) not below m: the p99 grows with m, so that is
// the p99 of prompts arriving at most 0.27 % faster, never less than the exact one (tabulated
// once per grid point for all tenants, p99Grid).
func compoundP99(l v1.Lengths, in, m float64) float64 {
	ex2 := in * in * (1 + 1.0/12) // E[L²]
	if l == v1.LengthsExponential {
		ex2 = 2 * in * in
	}
	if m > 50 {
		return m*in + zP99*math.Sqrt(m*ex2)
	}
	if -math.Expm1(-m) <= 0.01 { // S = 0 (no prompt) at least 99 % of the time
		return 0
	}
	i, mg := p99GridPoint(m)
	t := &p99Grid[0]
	if l == v1.LengthsExponential {
		t = &p99Grid[1]
	}
	if v := t[i].Load(); v != 0 {
		return in * math.Float64frombits(v)
	}
	v := normalizedP99(l, mg)
	t[i].Store(math.Float64bits(v))
	return in * v
}

// p99GridPoints is the size of the grid of means on which compoundP99 is tabulated: from
// 2^−7 (below about 0.01 S is 0 at the 99th percentile) up to 50 by factors of 2^(1/256).
const p99GridPoints = 256*13 + 1

// p99Grid holds, per law (uniform, exponential), the p99 of S/in at each grid point as float64
// bits, 0 until computed. Each entry is a pure function of its index, so concurrent planners
// that compute one store the same bits.
var p99Grid [2][p99GridPoints]atomic.Uint64

// p99GridPoint is the index and mean of the least grid point not below m (0 < m ≤ 50), the
// mean capped at 50 (the grid's last point).
func p99GridPoint(m float64) (int, float64) {
	i := max(0, int(math.Ceil(256*math.Log2(128*m))))
	mg := math.Exp2(float64(i)/256) / 128
	for mg < m {
		i++
		mg = math.Exp2(float64(i)/256) / 128
	}
	return i, math.Min(mg, 50)
}

// normalizedP99 is the p99 of S/in for mean m ≤ 50, bracketed by bisection to a relative 1e-5
// and rounded up (the upper end of the bracket).
func normalizedP99(l v1.Lengths, m float64) float64 {
	lo, up := 0.0, math.Ceil(m+12*math.Sqrt(m)+20)*2+10
	for range 80 {
		mid := (lo + up) / 2
		if compoundTail(l, 1, m, mid) > 0.01 {
			lo = mid
		} else {
			up = mid
		}
		if up-lo <= 1e-5*up {
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
	hi := int(math.Ceil(m + 12*math.Sqrt(m) + 20))
	y := x / in
	// The law, compared once rather than at each term.
	expo := l == v1.LengthsExponential
	s, pn, first := 0.0, 0.0, 1 // pn: P(N = n), from n = first − 1
	if l == v1.LengthsUniform && y > 0 {
		// (y − n)/√(n/12) falls with n and is 8.3 at n = r²: below it every term's Irwin–Hall
		// tail is under 1e-16 (irwinHallTail's normal law above 12, 0 at or below, where y is
		// beyond the support), and so is their sum, which is counted as 1e-16.
		const a = 8.3 / 3.4641016151377544 // 8.3/√12
		r := (math.Sqrt(a*a+4*y) - a) / 2
		if k := int(r * r); k > 13 {
			first = k
			lg, _ := math.Lgamma(float64(k))
			pn = math.Exp(float64(k-1)*math.Log(m) - m - lg) // P(N = k − 1)
			s = 1e-16                                        // x > 0: S = 0 does not count
		}
	}
	if first == 1 || x < 0 {
		e := math.Exp(-m) // P(N = 0), once for both uses
		if x < 0 {
			s = e // N = 0: S = 0 > x
		}
		if first == 1 {
			pn = e
		}
	}
	gt, gterm := 0.0, 0.0 // exponential: P(Gamma(n, 1) > y) = Σ_{j<n} e^{−y} y^j/j!, by n
	if expo && y > 0 {
		gterm = math.Exp(-y)
	}
	for n := first; n <= hi; n++ {
		fn := float64(n)
		pn *= m / fn
		// Past the mode P(N = n) only falls, by at least r = m/(n+1) a step: the rest of the
		// sum is at most P(N ≥ n) ≤ P(N = n)/(1 − r), which is added once it is below tailSlack
		// (so the sum never falls below the full one), or once it no longer changes s in
		// float64 (rounding is monotone), when the sum is final. That rest is never below
		// P(N = n) (divided by 1 − r ≤ 1, rounded), so while P(N = n) is above tailSlack and
		// still changes s neither holds, and the rest is not computed (the same decisions).
		if fn > m && (pn <= tailSlack || s+pn == s) {
			rest := pn / (1 - m/(fn+1))
			if s+rest == s {
				break
			}
			if rest <= tailSlack {
				s += rest
				break
			}
		}
		if expo {
			if y <= 0 {
				s += pn
				continue
			}
			gt += gterm
			gterm *= y / fn
			if gt < 1 { // math.Min(gt, 1): gt is a sum of non-negative terms, never NaN or −0
				s += pn * gt
			} else {
				s += pn
			}
			continue
		}
		z := (x - fn*in/2) / in
		if n > 12 && z > 0 && z < fn {
			// irwinHallTail's normal law, from normalTail's table (never below it).
			s += pn * normalTail((z-fn/2)/math.Sqrt(fn/6))
			continue
		}
		s += pn * irwinHallTail(n, z)
	}
	return s
}

// tailSlack is the most compoundTail adds for the Poisson mass it leaves unsummed.
const tailSlack = 1e-14

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
// when the prompt tokens arriving over its decode and its own last prefill step (compound
// Poisson of mean λ·(j·x + s1) prompts, s1 the step of d99 decodes and one mean chunk: a prompt
// that arrives while its last chunk runs is prefilled in its first decode step; ADR 0109) exceed
// j·chunk·f(x) (for exponential prompts: when their summed step cost exceeds j·(x − base),
// promptCost); the p99 is the least x at which that chance, averaged over the output law
// (requests of one output token have no TPOT), is 1 %. tpot itself for fixed lengths. held is
// what the spread of the held KV tokens adds to the p99 batch's step (heldTailStep), in every
// step of the search.
//
// The search returns the upper end of a bracket [lo, hi] with miss(lo) > 1 % ≥ miss(hi) and
// hi − lo ≤ spreadTol·hi (Illinois' false position on log miss), so never less than the least
// such x and at most spreadTol above it; output quantiles of equal length are summed once, times
// their count, and each tail comes from tailAt's table, an upper bound within a step of it.
//
// With bound above 0 only the side of bound on which that answer lies is asked for (whether a
// TPOT target is met): the search stops as soon as its bracket, which always holds the answer,
// lies on one side (lo ≥ bound, or hi ≤ bound), and returns its end on that side, above bound
// or at most it as the full search's answer is. The probes are the full search's, so the
// decision is the same, bit for bit.
//
// The sum at tpot is finished only where the false position reads its value: the same bits as
// summing it whole (TestTPOTSpreadShortcuts). Where a miss of at most 1 % decides (at tpot, and
// at or below bound), only the terms whose bounds can still stop the sum are bounded: the same
// answers as the search that sums every such probe whole (TestTPOTSpreadSameBits).
func (q *qmodel) tpotSpread(lr, d99, held, tpot, bound float64) float64 {
	if q.lengths == "" || q.out < 2 || lr <= 0 {
		return tpot
	}
	if bound > 0 && (tpot > bound || math.IsInf(bound, 1)) {
		return tpot // the answer is at least tpot; an infinite bound asks nothing
	}
	decided := func(lo, hi float64) bool { return bound > 0 && (lo >= bound || hi <= bound) }
	// At or above bound a miss above 1 % decides (the answer is above x), whatever its value:
	// the sum stops there. Summed in the same order, a sum that does not stop is the full one.
	whole := func(x float64) bool { return bound <= 0 || x < bound }
	// At or below bound a miss of at most 1 % decides (the answer is at most x), whatever its
	// value, and so does one at tpot whatever the bound (the answer is tpot itself).
	below := func(x float64) bool { return bound > 0 && x <= bound }
	const grid = spreadGrid
	sp := q.spreadSteps()
	steps, count := sp.steps, sp.count // distinct decode steps of the output quantiles, and how many
	base := q.step(d99, 0) + held
	chunk := q.in / q.k
	pre := q.step(d99, 1) // its own last prefill step, whose arrivals its first decode step takes
	cv := q.convexCost(d99, base)
	// Where a miss of at most 1 % decides whatever its value (below, and at tpot), the sum
	// stops once the terms left are bounded (tailBound) below what is left of 1 %, and returns
	// at most 1 % (the sum with the bounds).
	var restBuf [spreadGrid + 1]float64 // the law has at most spreadGrid steps
	var rest []float64
	// miss is the miss at x, and where its sum stopped: the next term and the sum so far when it
	// stopped above 1 % with terms left (part), the steps' count otherwise.
	miss := func(x float64, full, prune bool) (m float64, next int, part float64) { // full: the whole sum, not only until above 1 %; prune: a miss of at most 1 % decides
		fx := q.chunksAt(d99, x-held)
		from := len(steps) // the first term at which the sum may stop
		if prune {
			if rest == nil {
				rest = restBuf[:len(steps)+1]
			}
			// rest only grows towards the first term, and s + rest[i] with it: once rest[i] is
			// above what stops the sum, no earlier term stops it, and their rest is not needed.
			for from = len(steps) - 1; from >= 0; from-- {
				j := steps[from]
				rest[from] = rest[from+1] + count[from]*cv.bound(lr, j, x, pre, chunk, fx, q.in)
				if rest[from] > pruneBelow*grid {
					break
				}
			}
			from++
		}
		s := 0.0
		var tb tailTerms
		for b := 0; b < len(steps); b += tailBlock {
			e := tb.look(q.lengths, &cv, steps, b, lr, x, pre, chunk, fx, q.in)
			for i := b; i < e; i++ {
				if i >= from && s+rest[i] <= pruneBelow*grid {
					return (s + rest[i]) / grid, len(steps), 0
				}
				s += count[i] * tb.at(q.lengths, i-b)
				if !full && s/grid > 0.01 {
					return s / grid, i + 1, s
				}
			}
		}
		return s / grid, len(steps), s
	}
	// rest of a sum that miss(x, false) stopped above 1 % at next with part: the whole sum's
	// miss, the same bits as miss(x, true), whose terms are the same and summed in the same
	// order (its pruning never applies above 1 %: s + rest[i] ≥ s there).
	finish := func(x float64, next int, part float64) float64 {
		fx := q.chunksAt(d99, x-held)
		s := part
		var tb tailTerms
		for b := next; b < len(steps); b += tailBlock {
			e := tb.look(q.lengths, &cv, steps, b, lr, x, pre, chunk, fx, q.in)
			for i := b; i < e; i++ {
				s += count[i] * tb.at(q.lengths, i-b)
			}
		}
		return s / grid
	}
	// The miss at tpot is only needed whole where the false position starts from it: it is
	// summed until above 1 % first, and the rest of its sum only then (most searches are
	// decided by their first doubling, or move their lower end up).
	mlo, next, part := miss(tpot, false, true)
	if mlo <= 0.01 {
		return tpot
	}
	pending := next < len(steps)
	lo, hi := tpot, math.Max(tpot, base)*2
	mhi, _, _ := miss(hi, whole(hi), below(hi))
	for mhi > 0.01 {
		if hi > 1e3 {
			return math.Inf(1)
		}
		lo, hi, mlo, pending = hi, 2*hi, mhi, false
		if decided(lo, math.Inf(1)) {
			return hi
		}
		mhi, _, _ = miss(hi, whole(hi), below(hi))
	}
	if decided(lo, hi) {
		return hi
	}
	if pending {
		mlo = finish(tpot, next, part)
	}
	// Illinois' false position on log(miss/1 %), which the tails make nearly linear near the
	// answer (an end kept twice in a row has its value halved); a bisection step while the
	// upper end's miss is 0, and every fourth step, so that the bracket at least halves every
	// four steps whatever the values.
	gap := func(m float64) float64 { return math.Log(m / 0.01) }
	glo, ghi := gap(mlo), gap(mhi)
	side := 0
	for it := range 60 {
		w := hi - lo
		if w <= spreadTol*hi {
			break
		}
		x := (lo + hi) / 2
		if it%4 != 3 && !math.IsInf(ghi, 0) && glo > ghi {
			x = hi - ghi*w/(ghi-glo)
			x = math.Min(math.Max(x, lo+w*spreadTol/4), hi-w*spreadTol/4)
		}
		mx, _, _ := miss(x, whole(x), below(x))
		if gx := gap(mx); mx > 0.01 {
			lo, glo = x, gx
			if side == -1 {
				ghi /= 2
			}
			side = -1
		} else {
			hi, ghi = x, gx
			if side == 1 {
				glo /= 2
			}
			side = 1
		}
		if decided(lo, hi) {
			break
		}
	}
	return hi
}

// promptCost is what tpotSpread's sum counts of the prompts that arrive during a request's
// decode: their tokens in chunks of the mean (linear, the count for every law), and for
// exponential prompts also their step time, which is convex in a prompt's tokens (flat while
// the weights' reads bind a step, then steep once the prompt's compute does), taken as two
// lines: a prompt of L tokens costs a·L up to the ridge r and a·r + b·(L − r) beyond it. The
// prompts longer than r are a Poisson share p = P(L > r) of them and (memoryless) their excesses
// over r are exponential of the mean prompt, so the steep part, b times those excesses, is a
// compound Poisson sum of mean p·λt that tailAt tables; the flat part, a times the tokens below
// the ridge (in·(1 − p) a prompt in the mean), is counted at its mean. Each term is the larger
// of the two chances: the convex cost prices one prompt's tail, the linear count the steps that
// take several prompts' chunks at once (a step's cost is convex in all its prompt tokens).
type promptCost struct {
	convex  bool
	a, b, p float64 // the slopes below and above the ridge (seconds a token), and P(L > r)
	base    float64 // tpotSpread's base step (with held)
}

// convexCost is q's promptCost with d99 decodes in each step and base tpotSpread's base step: a
// from the first 16 tokens (or the mean prompt, if shorter), b the slope from half the
// 99th-percentile prompt to it, r where the line through it meets a·L (one line, r = 0, where
// b ≤ a). Linear alone where the 99th-percentile prompt takes more than one chunk beside d99
// decodes (each later chunk attends to the ones before it, so its steep part is not a line).
func (q *qmodel) convexCost(d99, base float64) promptCost {
	if q.lengths != v1.LengthsExponential || q.in <= 1 {
		return promptCost{}
	}
	d := math.Floor(d99)
	p1 := q.promptP99()
	if p1 > math.Max(float64(q.budget)-d, 1) {
		return promptCost{}
	}
	kv := int64(d * q.heldPerSeq())
	at := func(c float64) float64 { // one prompt of c tokens in one chunk
		b := perf.Batch{DecodeSeqs: int(d), KVTokens: kv}
		if c > 0 {
			b.PrefillTokens, b.PrefillSeqs, b.PrefillPairs = int(math.Ceil(c)), 1, int64(c*(c+1)/2)
		}
		return q.e.StepTime(b, q.l).Seconds()
	}
	b0 := at(0)
	cost := func(n float64) float64 { return at(n) - b0 }
	l0, p2 := math.Min(16, q.in), p1/2
	a := cost(l0) / l0
	c1 := cost(p1)
	b := (c1 - cost(p2)) / (p1 - p2)
	r := 0.0
	if b > a {
		r = math.Max(0, (b*p1-c1)/(b-a))
	} else {
		a, b = 0, math.Max(c1/p1, 1e-12)
	}
	return promptCost{convex: true, a: a, b: b, p: math.Exp(r * math.Log1p(-1/q.in)), base: base}
}

// term is a request's linear compound Poisson sum for j decode steps at x, fx prompt chunks a
// step there (chunksAt): its mean count and the threshold over which it misses, for prompts
// of mean 1 (tailAt).
func (c *promptCost) term(lr, j, x, pre, chunk, fx, in float64) (float64, float64) {
	return lr * (j*x + pre), j * chunk * fx / in
}

// steep is term's convex sum (convex only): the excesses over the ridge, whose mean count is a
// share p of the prompts, over what their steep cost may add to the j steps' (x − base each)
// beside the flat part's mean.
func (c *promptCost) steep(lr, j, x, pre, in float64) (float64, float64) {
	m := lr * (j*x + pre)
	return c.p * m, (j*(x-c.base) - c.a*in*(1-c.p)*m) / (c.b * in)
}

// bound is tailBound of the term: the larger of its sums' bounds.
func (c *promptCost) bound(lr, j, x, pre, chunk, fx, in float64) float64 {
	v := tailBound(c.term(lr, j, x, pre, chunk, fx, in))
	if c.convex {
		v = math.Max(v, tailBound(c.steep(lr, j, x, pre, in)))
	}
	return v
}

// tail is the term's chance, tailAt's answers: the larger of its sums'.
func (c *promptCost) tail(l v1.Lengths, lr, j, x, pre, chunk, fx, in float64) float64 {
	m, y := c.term(lr, j, x, pre, chunk, fx, in)
	v := tailAt(l, m, y)
	if c.convex {
		m, y = c.steep(lr, j, x, pre, in)
		v = math.Max(v, tailAt(l, m, y))
	}
	return v
}

// spreadGrid is the output quantiles tpotSpread averages over.
const spreadGrid = 100

// spreadLaw is tpotSpread's distinct decode steps of the output quantiles, ascending, and how
// many quantiles each stands for: a function of the law and the mean output alone, kept on the
// model for them (spreadSteps).
type spreadLaw struct {
	lengths      v1.Lengths
	out          float64
	steps, count []float64
}

// spreadSteps is the model's spreadLaw, computed on first use and again if its law or mean
// output has changed since. Models of one law and mean output (a tenant's on every slice, and
// tenants of the same output) share it through spreadLaws.
func (q *qmodel) spreadSteps() *spreadLaw {
	if sp := q.spread; sp != nil && sp.lengths == q.lengths && sp.out == q.out {
		return sp
	}
	key := spreadKey{q.lengths, q.out}
	if sp, ok := spreadLaws.Load(key); ok {
		q.spread = sp.(*spreadLaw)
		return q.spread
	}
	sp := spreadLawOf(q)
	if spreadLawsHeld.Add(1) <= spreadLawsMax {
		spreadLaws.Store(key, sp) // the same steps whoever stores them first
	}
	q.spread = sp
	return sp
}

// spreadLawOf is q's spreadLaw, computed.
func spreadLawOf(q *qmodel) *spreadLaw {
	sp := &spreadLaw{lengths: q.lengths, out: q.out, steps: make([]float64, 0, spreadGrid), count: make([]float64, 0, spreadGrid)}
	for i := range spreadGrid {
		if j := q.outQuantile((float64(i)+0.5)/spreadGrid) - 1; j >= 1 {
			if n := len(sp.steps); n > 0 && sp.steps[n-1] == j {
				sp.count[n-1]++
			} else {
				sp.steps, sp.count = append(sp.steps, j), append(sp.count, 1)
			}
		}
	}
	return sp
}

// spreadKey is what a spreadLaw is a function of.
type spreadKey struct {
	lengths v1.Lengths
	out     float64
}

// spreadLaws holds the spreadLaw of each law and mean output asked for, up to spreadLawsMax of
// them (spreadLawsHeld counts the stores; past it a model computes its own, as before).
var (
	spreadLaws     sync.Map
	spreadLawsHeld atomic.Int64
)

// spreadLawsMax bounds spreadLaws: a few hundred bytes to 1.6 kB each.
const spreadLawsMax = 1 << 12

// pruneBelow is the miss below which tpotSpread's sum may stop: 1 % less a margin far above
// the sum's rounding (a hundred terms at 1e-16 each).
const pruneBelow = 0.01 * (1 - 1e-9)

// tailBound is an upper bound on tailAt(l, m, y) for either law, a few operations where
// tailAt may sum a Poisson series: Chernoff's bound for a compound Poisson sum of mean m of
// exponential lengths of mean 1, P(S > y) ≤ exp(−(√y − √m)²) for y ≥ m, at the mean 2^(1/128)
// higher (0.55 % here) and the threshold √(2m)/64 lower that tailAt's table may read, plus 1e-7
// for what the sums round up (normalTail's 6e-8, tailSlack, 1e-16). It bounds the other laws
// compoundTail takes as well, since their moment generating functions are smaller than the
// exponential one's: uniform lengths on [½, 3/2] (below Exp(1) in the convex order), the
// normal law of n > 12 of them (N(n, n/12): e^{θ+θ²/24} ≤ 1/(1 − θ)), and the normal law of S
// above a mean of 50 (½·erfc(z/√2) ≤ e^{−z²/2}, and z²/2 is at least the exponent here).
func tailBound(m, y float64) float64 {
	mp := m * 1.0055
	yp := y - math.Sqrt(2*mp)/64
	if yp <= mp {
		return 1
	}
	d := math.Sqrt(yp) - math.Sqrt(mp)
	if d*d > tailBoundFar {
		return 1e-7 // what exp(−d²) + 1e-7 rounds to, without the exponential
	}
	return math.Exp(-d*d) + 1e-7
}

// tailBoundFar is the exponent beyond which tailBound's e^(−d²) + 1e-7 is 1e-7 in float64:
// e^−60 is 8.8e-27, far below half an ulp of 1e-7 (6.6e-24).
const tailBoundFar = 60

// spreadTol is the relative width to which tpotSpread brackets its answer (rounded up).
const spreadTol = 1e-4

// chunksAt is the prompt chunks per step at which step(d, ·) reaches x (up to 1e4 chunks): the
// step time is linear in the chunks between whole counts, so it is solved exactly there.
func (q *qmodel) chunksAt(d, x float64) float64 {
	lo, hi := 0, 1
	for q.step(d, float64(hi)) < x {
		if hi > 1e4 {
			return float64(hi)
		}
		lo, hi = hi, 2*hi
	}
	if q.step(d, float64(lo)) >= x {
		return float64(lo)
	}
	for hi-lo > 1 { // step(d, lo) < x ≤ step(d, hi)
		mid := (lo + hi) / 2
		if q.step(d, float64(mid)) < x {
			lo = mid
		} else {
			hi = mid
		}
	}
	a, b := q.step(d, float64(lo)), q.step(d, float64(hi))
	return float64(lo) + (x-a)/(b-a)
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

// overContextMiss is the share of a tenant's requests that may be longer than its replicas'
// --max-model-len: vLLM answers them with an error, a miss of the p99 target each, so above 1 %
// no replica count meets the SLO.
const overContextMiss = 0.01

// overContextShare is the share of requests of traffic t, drawn as the simulator draws them
// (uniform: ⌊m/2⌋ + j with j uniform on {0, …, m}, at least 1; exponential: geometric on
// {1, 2, …} of mean m; prompt and output independent), whose prompt + output tokens exceed ctx,
// the --max-model-len its replicas get. Only where the tenant sets no maxContext: one that does
// has its lengths capped at it (the simulator draws no longer request, and the replicas admit
// it). contextFor raises the context to what all but 0.1 % need (lengthsNeed), up to the model's
// maximum; this is what that maximum leaves out.
func overContextShare(t v1.Traffic, maxContext, ctx int) float64 {
	in, out := t.InputTokens, t.OutputTokens
	if maxContext > 0 || ctx <= 0 || in <= 0 || out <= 0 {
		return 0
	}
	switch lengthLaw(t) {
	case v1.LengthsUniform:
		if in/2+in+out/2+out <= ctx {
			return 0
		}
		// P(out > ctx − i) for each prompt length i, the output uniform on {⌊out/2⌋ … ⌊out/2⌋+out}.
		share := 0.0
		for j := 0; j <= in; j++ {
			i := max(1, in/2+j)
			lo, n := out/2, out+1 // outputs lo … lo+out, each 1/n (lo ≥ 1 unless out is 1: max(1, ·))
			need := ctx - i       // longest output that fits
			var over float64
			switch {
			case need < max(1, lo):
				over = 1
			case need >= lo+out:
				over = 0
			default:
				over = float64(lo+out-need) / float64(n)
			}
			share += over / float64(in+1)
		}
		return share
	case v1.LengthsExponential:
		// Geometric prompt I and output O of means in and out: P(I + O > ctx) =
		// P(I ≥ ctx) + Σ_{i<ctx} P(I = i)·P(O > ctx − i), P(L > n) = (1 − 1/m)^n.
		if in <= 1 && out <= 1 {
			if 2 > ctx {
				return 1
			}
			return 0
		}
		// P(L > n) = e^{n·ln(1 − 1/m)}, L ≥ 1 of mean m (the logarithm taken once per mean,
		// the same bits as taken at each n).
		logIn, logOut := survLog(in), survLog(out)
		surv := func(m int, lg float64, n int) float64 {
			if m <= 1 {
				if n < 1 {
					return 1
				}
				return 0
			}
			return math.Exp(float64(n) * lg)
		}
		share := surv(in, logIn, ctx-1) // I ≥ ctx: over whatever the output
		prev := surv(in, logIn, 0)      // P(I > i − 1), carried from the step before
		for i := 1; i < ctx; i++ {
			cur := surv(in, logIn, i)
			pi := prev - cur
			if pi < 1e-18 && i > in {
				break
			}
			share += pi * surv(out, logOut, ctx-i)
			prev = cur
		}
		return math.Min(share, 1)
	}
	if in+out > ctx {
		return 1
	}
	return 0
}

// survLog is ln(1 − 1/m), the exponent per token of overContextShare's geometric survival for
// a mean of m > 1 (0, unused, otherwise).
func survLog(m int) float64 {
	if m <= 1 {
		return 0
	}
	return math.Log1p(-1 / float64(m))
}

// normalTail is an upper bound on ½·erfc(u), the normal tail that irwinHallTail takes above 12
// terms, within 6e-8 of it, from a table at steps of h = 1/1024 on [−6, 6]: the chord between
// the two points around u, which lies above ½·erfc where it is convex (u ≥ 0), plus the most a
// chord can fall below it where it is concave (h²/8 times the largest |(½·erfc)″|, 0.484), and
// beyond the table 1e-16 or 1 (½·erfc(6) is 1.1e-17).
func normalTail(u float64) float64 {
	normalTable.once.Do(func() {
		for i := range normalTable.v {
			normalTable.v[i] = 0.5 * math.Erfc(float64(i-normalSteps*6)/normalSteps)
		}
	})
	if u <= -6 {
		return 1
	}
	if u >= 6 {
		return 1e-16
	}
	t := (u + 6) * normalSteps
	i := min(int(t), len(normalTable.v)-2)
	f := t - float64(i)
	v := normalTable.v[i] + f*(normalTable.v[i+1]-normalTable.v[i])
	if u < 0 {
		v += 0.484 / (8 * normalSteps * normalSteps)
	}
	return math.Min(v, 1)
}

// normalSteps is the table's points per unit of normalTail's argument.
const normalSteps = 1024

var normalTable struct {
	once sync.Once
	v    [12*normalSteps + 1]float64
}

// tailAt is compoundTail(l, 1, m, y) (prompt lengths of mean 1), or an upper bound on it within
// a table's step: for 2^−7 ≤ m ≤ 50 the exact tail at the least point m⁺ of a geometric grid
// (ratio 2^(1/128), 0.54 %) not below m, and at the greatest point y⁻ not above y of the grid
// m⁺ + (k/64 − 8)·σ(m⁺), σ the standard deviation of the sum (1/64 of it a step, from 8 below
// the mean to 10 above). The tail grows with m and falls with y, so that is the chance for
// prompts arriving at most 0.54 % faster over a threshold at most σ/64 lower, never less than
// the exact one. Computed once per grid point for all tenants (tailGrid); outside the grid (and
// below a threshold of 0, where S's atom at 0 would count), the tail itself.
func tailAt(l v1.Lengths, m, y float64) float64 {
	c := tailCellOf(l, m, y)
	c.read()
	if c.bits != 0 {
		return math.Float64frombits(c.bits &^ (1 << 63))
	}
	return c.value(l, m, y)
}

// tailCell is where tailAt reads its answer for one (law, m, y): the table's row and column, and
// the grid's point there (mg, yk), grid false where tailAt computes the tail itself (outside the
// grid); row is nil there and where the row is not yet allocated. bits is the table's entry as
// read (read), 0 where not read or not yet computed.
type tailCell struct {
	row    *tailRow
	law, i int
	k      int
	mg, yk float64
	grid   bool // on the grid: the answer is the table's entry at (law, i, k)
	bits   uint64
}

// tailCellOf is tailAt's cell for (l, m, y), its entry not yet read (read): the index
// arithmetic alone, so that a sum of terms can look them all up, then read their entries one
// after another, the loads overlapping (tailTerms).
func tailCellOf(l v1.Lengths, m, y float64) (c tailCell) {
	c.locate(l, m, y)
	return c
}

// locate sets c to tailCellOf(l, m, y), in place.
func (c *tailCell) locate(l v1.Lengths, m, y float64) {
	*c = tailCell{}
	if m > 50 || m < 1.0/128 {
		return
	}
	i := tailPoint(m)
	if i >= len(tailPoints) {
		return // not reached: m ≤ 50 lies below the grid's last point
	}
	law := 0
	if l == v1.LengthsExponential {
		law = 1
	}
	mg, sd := tailPoints[i].mg, tailPoints[i].sd[law]
	k := int(math.Floor(64 * ((y-mg)/sd + 8)))
	if k < 0 || k >= tailCols {
		return
	}
	yk := mg + (float64(k)/64-8)*sd
	for yk > y && k > 0 {
		k--
		yk = mg + (float64(k)/64-8)*sd
	}
	if yk > y || yk < 0 {
		return
	}
	*c = tailCell{row: tailGrid[law][i].Load(), law: law, i: i, k: k, mg: mg, yk: yk, grid: true}
}

// read reads c's table entry into bits, where its row is allocated.
func (c *tailCell) read() {
	if c.row != nil {
		c.bits = c.row[c.k].Load()
	}
}

// value is tailAt's answer at a cell whose entry was not read (bits 0): the tail itself off the
// grid; on it the table's entry, computed and stored if no planner has yet.
func (c *tailCell) value(l v1.Lengths, m, y float64) float64 {
	if !c.grid {
		return compoundTail(l, 1, m, y)
	}
	row := c.row
	if row == nil {
		tailGrid[c.law][c.i].CompareAndSwap(nil, new(tailRow))
		row = tailGrid[c.law][c.i].Load()
	}
	if b := row[c.k].Load(); b != 0 {
		return math.Float64frombits(b &^ (1 << 63))
	}
	v := compoundTail(l, 1, c.mg, c.yk)
	row[c.k].Store(math.Float64bits(v) | 1<<63) // the sign bit marks a value as computed
	return v
}

// tailBlock is how many of tpotSpread's terms tailTerms looks up before they are summed.
const tailBlock = 8

// tailTerms is up to tailBlock of tpotSpread's terms, tailAt(l, λ(j·x + pre), j·chunk·f(x)/in)
// for decode steps j, looked up in tailAt's table one after another before any is summed, so
// that the table's reads (a large table, read at scattered places) overlap rather than wait
// on one another; the terms are then summed in their order, as tailAt's answers, the same bits.
type tailTerms struct {
	m, y   [tailBlock]float64
	c      [tailBlock]tailCell
	convex bool // each term the larger of it and its steep sum (promptCost)
	m2, y2 [tailBlock]float64
	c2     [tailBlock]tailCell
}

// look looks up the terms of steps[b:], up to tailBlock of them, and returns the end of those.
func (t *tailTerms) look(l v1.Lengths, cv *promptCost, steps []float64, b int, lr, x, pre, chunk, fx, in float64) int {
	e := min(b+tailBlock, len(steps))
	t.convex = cv.convex
	for i := b; i < e; i++ {
		m, y := cv.term(lr, steps[i], x, pre, chunk, fx, in)
		t.m[i-b], t.y[i-b] = m, y
		t.c[i-b].locate(l, m, y)
		if t.convex {
			m, y = cv.steep(lr, steps[i], x, pre, in)
			t.m2[i-b], t.y2[i-b] = m, y
			t.c2[i-b].locate(l, m, y)
		}
	}
	for i := range e - b { // the loads alone, one after another: they overlap
		t.c[i].read()
		if t.convex {
			t.c2[i].read()
		}
	}
	return e
}

// at is the i-th term looked up: tailAt's answer (the larger of the two, convex).
func (t *tailTerms) at(l v1.Lengths, i int) float64 {
	v := cellValue(l, &t.c[i], t.m[i], t.y[i])
	if t.convex {
		v = math.Max(v, cellValue(l, &t.c2[i], t.m2[i], t.y2[i]))
	}
	return v
}

// cellValue is tailAt's answer at a cell looked up for (m, y).
func cellValue(l v1.Lengths, c *tailCell, m, y float64) float64 {
	if c.bits != 0 {
		return math.Float64frombits(c.bits &^ (1 << 63))
	}
	return c.value(l, m, y)
}

// tailPoint is the grid point tailAt reads for 2^−7 ≤ m ≤ 50: the least i not below
// tailPointLog(m) with tailPoints[i].m ≥ m. The least i at all with tailPoints[i].m ≥ m (j)
// comes from m's exponent and the top 10 bits of its mantissa (tailStart, a point below it)
// and at most a few steps up; it is that point unless m lies within 1e-12 of tailPoints[j].m,
// where the logarithm's rounding could put tailPointLog(m) above j: 128·log2(128m) is then
// more than 1.8e-10 below j, a hundred times the logarithm's error, so its ceiling is at most
// j. There tailPointLog decides, as before: the grid rises, so the answer is the larger.
func tailPoint(m float64) int {
	b := math.Float64bits(m)
	e := int(b>>52&0x7ff) - 1023 // m is normal: 2^−7 ≤ m
	j := max(0, 128*(e+7)+tailStart[b>>42&0x3ff])
	for j < len(tailPoints) && tailPoints[j].m < m {
		j++
	}
	if j < len(tailPoints) && m < tailPoints[j].m*(1-1e-12) {
		return j
	}
	return max(j, tailPointLog(m))
}

// tailPointLog is tailAt's grid point as first computed: from the logarithm, then up to the
// first point not below m.
func tailPointLog(m float64) int {
	i := max(0, int(math.Ceil(128*math.Log2(128*m))))
	for i < len(tailPoints) && tailPoints[i].m < m {
		i++
	}
	return i
}

// tailStart holds, per top 10 bits f of a mantissa, a grid step below the first point of an
// octave's grid (128 points a doubling) not below 1 + f/1024: ⌊128·log2(1 + f/1024)⌋ − 1, so
// that tailPoints[128(e+7) + tailStart[f]].m lies below any m of exponent e with those bits
// (by at least 0.54 % less the rounding of 2^(i/128)).
var tailStart = func() (t [1024]int) {
	for f := range t {
		t[f] = int(math.Floor(128*math.Log2(1+float64(f)/1024))) - 1
	}
	return t
}()

// tailPoints holds tailAt's grid of means, 2^(i/128)/128, and the sums' standard deviations
// there by law (uniform, exponential), at the mean capped at 50: computed once, the same values
// as computed at each read (an exponential and a square root a read otherwise).
var tailPoints = func() (p [len(tailGrid[0])]struct {
	m, mg float64 // the grid's mean, and it capped at 50
	sd    [2]float64
}) {
	for i := range p {
		p[i].m = math.Exp2(float64(i)/128) / 128
		p[i].mg = math.Min(p[i].m, 50)
		p[i].sd = [2]float64{math.Sqrt(p[i].mg * 13 / 12), math.Sqrt(p[i].mg * 2)}
	}
	return p
}()

// tailCols is the points of a row of tailGrid: y from 8 standard deviations below the mean to
// 10 above, 64 a deviation.
const tailCols = 18*64 + 1

type tailRow [tailCols]atomic.Uint64

// tailGrid holds tailAt's rows per law (uniform, exponential) and mean's grid point, allocated
// when first used; each value is a pure function of its place.
var tailGrid [2][128*13 + 2]atomic.Pointer[tailRow]

// totalP99 is a request's total length (prompt + output) that the law leaves at most 1 % of
// requests above: the 99th-percentile prompt plus the 99th-percentile output (the sum of the
// percentiles, not below the percentile of the sum), capped by the maximum context.
func (q *qmodel) totalP99() float64 {
	return q.totalAt(99)
}

// totalAt is totalP99 at the pct-th percentile of each length in place of the 99th: the
// pct-th-percentile prompt (below the maximum context) plus the pct-th-percentile output, within
// the maximum context and not below the mean total.
func (q *qmodel) totalAt(pct int) float64 {
	in := lawPercentile(q.lengths, q.in, pct)
	if q.maxCtx > 1 {
		in = math.Min(in, float64(q.maxCtx-1))
	}
	t := math.Max(in, q.in) + lawPercentile(q.lengths, q.out, pct)
	if q.maxCtx > 1 {
		t = math.Min(t, float64(q.maxCtx))
	}
	return math.Max(t, q.in+q.out)
}

// lawP99 is the 99th percentile of a length of mean m under law l (m itself for fixed).
func lawP99(l v1.Lengths, m float64) float64 {
	return lawPercentile(l, m, 99)
}

// lawPercentile is the pct-th percentile (0 < pct < 100) of a length of mean m under law l (m
// itself for fixed): uniform on [m/2, 3m/2], or geometric on {1, 2, …} with
// P(L > x) = (1 − 1/m)^x.
func lawPercentile(l v1.Lengths, m float64, pct int) float64 {
	switch l {
	case v1.LengthsUniform:
		return m/2 + float64(pct)/100*m
	case v1.LengthsExponential:
		if m > 1 {
			return math.Ceil(math.Log(float64(100-pct)/100) / math.Log1p(-1/m))
		}
	}
	return m
}
