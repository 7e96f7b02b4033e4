package plan

import "math"

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
