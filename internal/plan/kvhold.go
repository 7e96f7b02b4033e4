package plan

import (
	"math"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// kvHoldMiss is the share of time a replica's KV cache may be too small for the requests it
// runs: 0.1 %. With 1 %, about 1 % of arrivals would find a full cache (and wait, or preempt a
// running request for recompute), which is the whole budget of a p99 target.
const kvHoldMiss = 0.001

// kvHoldExceeds reports whether the KV tokens that the requests holding a replica's slots keep
// in its cache exceed capTokens more than kvHoldMiss of the time. The requests in flight are a
// Poisson count of mean m (M/G/∞: Poisson arrivals, independent holding times; by Little's law m
// is the rate × the holding time), at most slots of them run (the rest wait in the queue and hold
// no cache), and each holds its prompt and the part of its output decoded so far: in + U·out
// tokens with U uniform on [0, 1], since a request in flight is anywhere in its decode (during
// its prefill it holds less, which this counts as its whole prompt). The cache therefore
// overflows with probability Σₙ P(N = n)·P(n·in + out·Sₙ > capTokens), Sₙ the sum of n
// uniforms (Irwin–Hall: exact up to 12 terms, the normal law above, whose tail is the heavier
// beyond about 1.7 standard deviations, where these decisions fall; nearer the mean it is up to
// about 2 % lighter).
//
// It replaces the rule that the 99.9th percentile of the count (normal approximation) fit at
// every request's full length in + out: no request holds its full length for more than its
// last step, and the slots' own rule (perf.Engine.Running) already counts in + out/2.
func kvHoldExceeds(m, in, out, capTokens float64, slots int) bool {
	if math.IsInf(capTokens, 1) || float64(slots)*(in+out) <= capTokens {
		return false // even every slot at its full length fits
	}
	if in+out <= 0 {
		return false
	}
	nFits := int(math.Floor(capTokens / (in + out))) // n requests at their full length fit
	if m <= 0 {
		return false // no load (a cache too small for one request is refused before, in size)
	}
	// Far from the cache either way, the normal law of the tokens decides at once — from a mean
	// of one request in flight: below it the Poisson count is too skewed for eight standard
	// deviations to leave less than 0.1 % (at a mean of 0.05, two or more requests come 0.12 %
	// of the time), and the sum below has few terms.
	mean, sd := m*(in+out/2), math.Sqrt(m*(in*in+in*out+out*out/3))
	if m >= 1 && mean+8*sd <= capTokens {
		return false
	}
	if m >= 1 && mean >= capTokens && m+4*math.Sqrt(m) < float64(slots) {
		return true
	}
	hi := int(math.Ceil(m + 12*math.Sqrt(m) + 20)) // the Poisson mass beyond is negligible
	lgm := math.Log(m)
	pmf := func(n int) float64 {
		lg := lnFact(n)
		return math.Exp(float64(n)*lgm - m - lg)
	}
	tail := func(n int) float64 { // P(n requests in flight overflow the cache)
		if out <= 0 {
			if float64(n)*in > capTokens {
				return 1
			}
			return 0
		}
		return irwinHallTail(n, (capTokens-float64(n)*in)/out)
	}
	p := 0.0
	for n := nFits + 1; n < slots && n <= hi; n++ {
		p += pmf(n) * tail(n)
		if p > kvHoldMiss {
			return true
		}
	}
	if slots <= hi && slots > nFits { // P(N ≥ slots): slots of them run
		atLeast := 0.0
		for n := slots; n <= hi; n++ {
			atLeast += pmf(n)
		}
		p += atLeast * tail(slots)
	}
	return p > kvHoldMiss
}

// irwinHallTail is P(U₁ + … + Uₙ > x) for n independent uniforms on [0, 1]: exact for n ≤ 12
// (from the smaller side, where the alternating sum has few terms), the normal law N(n/2, n/12)
// above, which overstates the tail beyond about 1.7 standard deviations and understates it by
// up to about 2 % between 1 and 1.7.
func irwinHallTail(n int, x float64) float64 {
	fn := float64(n)
	switch {
	case x <= 0:
		return 1
	case x >= fn:
		return 0
	case n > 12:
		return 0.5 * math.Erfc((x-fn/2)/math.Sqrt(fn/6))
	}
	// F(y) = (1/n!) Σ_{k ≤ y} (−1)^k C(n, k) (y − k)^n; P(S > x) = F(n − x) by symmetry.
	cdf := func(y float64) float64 {
		s, c, fact := 0.0, 1.0, 1.0
		for k := 0; float64(k) <= y && k <= n; k++ {
			term := c * math.Pow(y-float64(k), fn)
			if k%2 == 1 {
				term = -term
			}
			s += term
			c = c * float64(n-k) / float64(k+1)
		}
		for i := 2; i <= n; i++ {
			fact *= float64(i)
		}
		return min(max(s/fact, 0), 1)
	}
	if y := fn - x; y <= fn/2 {
		return cdf(y)
	}
	return 1 - cdf(x)
}

// kvHoldExceeds is kvHoldExceeds for q's replica at a mean of m requests in flight: at the
// tenant's lengths when fixed, and by the length law's own hold when they vary (kvHoldVaried).
func (q *qmodel) kvHoldExceeds(m float64) bool {
	capTokens := q.kvSeqs * (q.in + q.out)
	if q.lengths == "" {
		return kvHoldExceeds(m, q.in, q.out, capTokens, q.slots)
	}
	mu, ex2 := q.heldMoments()
	return kvHoldVaried(m, mu, ex2, capTokens, q.slots)
}

// heldPerSeq is the mean KV tokens a running request holds: in + out/2 for fixed lengths (its
// prompt and half its output, decoded at a uniform pace), and for varying ones the mean of
// heldMoments. The step time's attention reads them.
func (q *qmodel) heldPerSeq() float64 {
	if q.lengths == "" {
		return q.in + q.out/2
	}
	mu, _ := q.heldMoments()
	return mu
}

// heldMoments are the mean and second moment of the KV tokens one request in flight holds
// when its lengths vary: its prompt P (of the law, mean in) plus the part A of its output
// decoded so far. A request in flight is length-biased — one of twice the output stays twice as
// long — so A is not half the mean output but the equilibrium (age) law of the output L, of
// density P(L > x)/E[L]: E[A] = E[L²]/(2E[L]), E[A²] = E[L³]/(3E[L]). Exponential (of mean
// out, continuous): A is itself exponential of mean out, twice the fixed lengths' out/2, and
// E[P²] = 2in². Uniform on [out/2, 3out/2]: E[A] = 13/24·out, E[A²] = 5/12·out², and
// E[P²] = 13/12·in². (Prompts are counted at their whole length, uncapped by the context: a
// little above the real hold.)
func (q *qmodel) heldMoments() (mu, ex2 float64) {
	in, out := q.in, q.out
	var ea, ea2, ep2 float64
	switch q.lengths {
	case v1.LengthsExponential:
		ea, ea2, ep2 = out, 2*out*out, 2*in*in
	default: // uniform
		ea, ea2, ep2 = 13.0/24*out, 5.0/12*out*out, 13.0/12*in*in
	}
	return in + ea, ep2 + 2*in*ea + ea2
}

// kvHoldVaried is kvHoldExceeds for requests whose held tokens vary with their lengths: each of
// the Poisson count (mean m, at most slots running) holds a random X of mean mu and second
// moment ex2 (heldMoments), and the cache overflows with probability
// Σₙ P(N = n)·P(X₁ + … + Xₙ > capTokens). The sum of n is taken as the Gamma law of its mean
// and variance (n·mu, n·(ex2 − mu²)), whose tail comes from Wilson and Hilferty's cube-root
// normal approximation: skewed as the sum of exponential lengths is, where the normal law would
// understate the overflow of a few long requests.
func kvHoldVaried(m, mu, ex2, capTokens float64, slots int) bool {
	if math.IsInf(capTokens, 1) || m <= 0 || mu <= 0 {
		return false
	}
	v := ex2 - mu*mu
	if v <= 0 {
		return kvHoldExceeds(m, mu, 0, capTokens, slots)
	}
	mean, sd := m*mu, math.Sqrt(m*ex2)
	if m >= 1 && mean+8*sd <= capTokens {
		return false
	}
	if m >= 1 && mean >= capTokens && m+4*math.Sqrt(m) < float64(slots) {
		return true
	}
	hi := int(math.Ceil(m + 12*math.Sqrt(m) + 20))
	lo := max(1, int(math.Floor(m-12*math.Sqrt(m)-20)))
	lgm := math.Log(m)
	pmf := func(n int) float64 { return math.Exp(float64(n)*lgm - m - lnFact(n)) }
	shape, scale := mu*mu/v, v/mu // per request
	tail := func(n int) float64 { return gammaTailWH(float64(n)*shape, scale, capTokens) }
	p := 0.0
	for n := lo; n < slots && n <= hi; n++ {
		p += pmf(n) * tail(n)
		if p > kvHoldMiss {
			return true
		}
	}
	if slots <= hi {
		atLeast := 0.0
		for n := max(slots, lo); n <= hi; n++ {
			atLeast += pmf(n)
		}
		p += atLeast * tail(slots)
	}
	return p > kvHoldMiss
}

// gammaTailWH is P(G > x) for G of the Gamma law of shape k and scale theta, by Wilson and
// Hilferty: (G/(kθ))^(1/3) is close to normal with mean 1 − 1/(9k) and variance 1/(9k).
func gammaTailWH(k, theta, x float64) float64 {
	if x <= 0 {
		return 1
	}
	s2 := 1 / (9 * k)
	z := (math.Cbrt(x/(k*theta)) - (1 - s2)) / math.Sqrt(s2)
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// heldTailStep is what the KV tokens held by the p99 decode batch add to its step beyond
// d99 requests at the mean hold, for varying lengths (0 for fixed): the tokens that the
// requests decoding (a Poisson count of mean d) hold are a compound Poisson sum, whose 99th
// percentile, d·mu + z·√(d·E[X²]) by the normal law (heldMoments), exceeds the p99 count
// times the mean hold where a few long requests hold much of the cache; the difference is
// priced at the p99 batch, the cache's capacity its ceiling.
func (q *qmodel) heldTailStep(d, d99 float64) float64 {
	if q.lengths == "" || d <= 0 {
		return 0
	}
	mu, ex2 := q.heldMoments()
	k99 := d*mu + zP99*math.Sqrt(d*ex2)
	if kv := float64(q.e.KVCapacityTokens()); kv > 0 {
		k99 = math.Min(k99, kv)
	}
	n := math.Floor(d99)
	extra := k99 - n*mu
	if extra < 1 {
		return 0
	}
	b := perf.Batch{DecodeSeqs: int(n), KVTokens: int64(n * mu)}
	more := b
	more.KVTokens += int64(extra)
	return math.Max(0, q.at.StepTime(more).Seconds()-q.at.StepTime(b).Seconds())
}
