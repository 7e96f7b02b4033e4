package plan

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// irwinHallTail against sums of uniforms drawn by a seeded generator, and its known values:
// P(U₁ + U₂ > 1.5) = 0.125, P(U₁ + U₂ + U₃ > 2.5) = (0.5)³/6.
func TestIrwinHallTail(t *testing.T) {
	for _, tc := range []struct {
		n    int
		x    float64
		want float64
	}{
		{1, 0.3, 0.7}, {2, 1.5, 0.125}, {2, 0.5, 0.875}, {3, 2.5, 0.125 / 6}, {3, 1.5, 0.5},
		{5, -1, 1}, {5, 5, 0},
	} {
		if got := irwinHallTail(tc.n, tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("irwinHallTail(%d, %v) = %v, want %v", tc.n, tc.x, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{4, 8, 12, 13, 20, 40} {
		for _, z := range []float64{0.5, 1.5, 2.5} {
			x := float64(n)/2 + z*math.Sqrt(float64(n)/12)
			const draws = 400_000
			over := 0
			for range draws {
				s := 0.0
				for range n {
					s += rng.Float64()
				}
				if s > x {
					over++
				}
			}
			emp, got := float64(over)/draws, irwinHallTail(n, x)
			se := math.Sqrt(emp*(1-emp)/draws) + 1e-5
			switch {
			case n <= 12 && math.Abs(got-emp) > 5*se:
				t.Errorf("n %d x %.3f: %.5f, sampled %.5f", n, x, got, emp)
			case n > 12 && (got < emp-5*se || got > 1.6*emp+5*se): // the normal law overstates, a little
				t.Errorf("n %d x %.3f: normal %.5f, sampled %.5f", n, x, got, emp)
			}
		}
	}
}

// kvHoldExceeds against a simulation of what it models: a Poisson count of requests in flight,
// at most slots of them running, each holding in + U·out tokens. At the largest mean it accepts,
// the sampled overflow is at most about 0.1 %; a little above it, more.
func TestKVHoldExceedsAgainstSampling(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	overflow := func(m, in, out, capTokens float64, slots int) float64 {
		const draws = 300_000
		over := 0
		for range draws {
			n := min(poissonDraw(rng, m), slots)
			held := 0.0
			for range n {
				held += in + rng.Float64()*out
			}
			if held > capTokens {
				over++
			}
		}
		return float64(over) / draws
	}
	for _, tc := range []struct {
		in, out, capTokens float64
		slots              int
	}{
		{1000, 250, 41264, 36}, // qwen2.5-14b on MPS 1/3 of an H100
		{800, 200, 6032, 6},    // llama-2-13b on MPS 1/4
		{512, 256, 100_000, 256},
		{128, 1024, 30_000, 64}, // output-heavy: the uniforms' law matters
		{1000, 0, 7328, 8},
	} {
		// The largest mean it accepts, by bisection.
		lo, hi := 0.0, float64(tc.slots)
		for range 60 {
			mid := (lo + hi) / 2
			if kvHoldExceeds(mid, tc.in, tc.out, tc.capTokens, tc.slots) {
				hi = mid
			} else {
				lo = mid
			}
		}
		if lo == float64(tc.slots) {
			continue
		}
		at, above := overflow(lo, tc.in, tc.out, tc.capTokens, tc.slots), overflow(lo*1.15+0.3, tc.in, tc.out, tc.capTokens, tc.slots)
		if at > 0.0013 {
			t.Errorf("%+v: at the mean it accepts, %.3f, the cache overflows %.4f of the time", tc, lo, at)
		}
		if above <= 0.001 {
			t.Errorf("%+v: 15 %% above the mean it accepts (%.3f) the cache overflows only %.4f of the time", tc, lo, above)
		}
		// The rule it replaced: the 99.9th percentile of the count at every request's full length.
		old := 0.0
		for m := 0.0; m+3.090*math.Sqrt(m) <= tc.capTokens/(tc.in+tc.out); m += 0.001 {
			old = m
		}
		t.Logf("%+v: accepts a mean of %.2f in flight (overflow %.5f sampled); the former rule %.2f", tc, lo, at, old)
	}
}

// Few requests in flight: the answer against the Poisson law computed here by hand, where a
// normal shortcut would say the cache fits (a review found these).
func TestKVHoldExceedsFewInFlight(t *testing.T) {
	for _, tc := range []struct {
		m, in, out, capTokens float64
		slots                 int
		p                     float64 // the overflow probability
	}{
		// Two requests of 1,000 prompt tokens do not fit 1,839 tokens: P(N ≥ 2) = 1 − e^−m(1 + m).
		{0.05, 1000, 0, 1839, 8, 1 - math.Exp(-0.05)*1.05},
		{0.0585, 1000, 0, 1993.44, 8, 1 - math.Exp(-0.0585)*1.0585},
		{0.04, 1000, 0, 1839, 8, 1 - math.Exp(-0.04)*1.04},
		// One slot, a cache of 1,100 tokens for requests of 1,000 + U·250: P(N ≥ 1)·P(U > 0.4).
		{0.002, 1000, 250, 1100, 1, (1 - math.Exp(-0.002)) * 0.6},
		{0.0015, 1000, 250, 1100, 1, (1 - math.Exp(-0.0015)) * 0.6},
		// A cache smaller than any request: P(N ≥ 1).
		{0.0005, 1000, 0, 0.5, 1, 1 - math.Exp(-0.0005)},
		{0.0136, 0, 1000, 559.2, 20, 0}, // p filled in below: P(Σ of N uniforms × 1,000 > 559.2)
	} {
		p := tc.p
		if p == 0 { // N Poisson(m), each holding U·1,000 tokens: Σₙ P(N = n)·P(Sₙ > 0.5592)
			for n := 1; n < 40; n++ {
				lg, _ := math.Lgamma(float64(n) + 1)
				p += math.Exp(float64(n)*math.Log(tc.m)-tc.m-lg) * irwinHallTail(n, 0.5592)
			}
		}
		if got, want := kvHoldExceeds(tc.m, tc.in, tc.out, tc.capTokens, tc.slots), p > kvHoldMiss; got != want {
			t.Errorf("%+v: overflows with probability %.5f, kvHoldExceeds says %v", tc, p, got)
		}
	}
}

// More requests in flight, or a smaller cache, never turn an overflow into a fit.
func TestKVHoldExceedsMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := float64(rapid.IntRange(0, 4096).Draw(t, "in"))
		out := float64(rapid.IntRange(0, 4096).Draw(t, "out"))
		slots := rapid.IntRange(1, 1024).Draw(t, "slots")
		capTokens := rapid.Float64Range(0, 2e6).Draw(t, "cap")
		m := rapid.Float64Range(0, 2000).Draw(t, "m")
		more := m + rapid.Float64Range(0, 100).Draw(t, "more")
		less := capTokens * rapid.Float64Range(0, 1).Draw(t, "less")
		if kvHoldExceeds(m, in, out, capTokens, slots) {
			if !kvHoldExceeds(more, in, out, capTokens, slots) {
				t.Fatalf("overflows at %v in flight, fits at %v", m, more)
			}
			if !kvHoldExceeds(m, in, out, less, slots) {
				t.Fatalf("overflows a cache of %v tokens, fits in %v", capTokens, less)
			}
		}
	})
}

// BenchmarkKVHold times the hold near a replica's limit, where it sums the Poisson mixture, and
// the rule it replaced, side by side.
func BenchmarkKVHold(b *testing.B) {
	const in, out, capTokens, slots = 512.0, 256.0, 100_000.0, 256
	b.Run("tokens", func(b *testing.B) {
		for i := range b.N {
			kvHoldExceeds(110+float64(i%20), in, out, capTokens, slots)
		}
	})
	b.Run("former", func(b *testing.B) {
		kvSeqs := capTokens / (in + out)
		for i := range b.N {
			m := 110 + float64(i%20)
			_ = math.Min(slots, m+3.090*math.Sqrt(m)) > kvSeqs
		}
	})
}

// poissonDraw is a Poisson variate of mean m by inversion (m below a few hundred).
func poissonDraw(rng *rand.Rand, m float64) int {
	u, p, n := rng.Float64(), math.Exp(-m), 0
	c := p
	for u > c && n < 10_000 {
		n++
		p *= m / float64(n)
		c += p
	}
	return n
}

// On the articles' node a 13B replica on a 20 GB MPS share of a 3g.40gb instance holds 7,328
// KV tokens: 7.328 requests of 1,000 tokens. The queueing model sizes the candidate so that the
// 99.9th percentile of the requests holding a slot fits in that cache, and the plan's replicas
// carry the 0.5 req/s every product tenant offers.
func TestKVHoldBoundsSmallShares(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	setKV(pool, "llama-2-13b", "")                    // bf16 KV: the case where a half 3g.40gb share is small
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA // MIG+MPS is a candidate on the DRA path only
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	tn := p.tenants[4]
	if tn.t.Name != "product-0" {
		t.Fatalf("tenant 4 is %s", tn.t.Name)
	}
	var share *cand
	for _, c := range tn.cands {
		if c.kind == v1.SliceMIGMPS && c.profile.Name == "3g.40gb" && c.share == 2 {
			share = c
		}
	}
	if share == nil || share.reject != "" {
		t.Fatalf("3g.40gb + mps 1/2 missing or rejected: %+v", share)
	}
	q := share.ev.q
	if math.Abs(q.kvSeqs-7.328) > 1e-9 {
		t.Errorf("kv holds %.4f requests, want 7.328 (7,328 tokens / 1,000)", q.kvSeqs)
	}
	if kvHoldExceeds(share.sz.state().inFlight, q.in, q.out, q.kvSeqs*(q.in+q.out), q.slots) {
		t.Errorf("%.2f in flight at %d replicas overflow the cache of %.2f requests more than 0.1 %% of the time", share.sz.state().inFlight, share.replicas, q.kvSeqs)
	}
	// One replica fewer would put more in flight than the cache holds, or miss the SLO.
	if share.sz.n > 1 && meets(q.state(peakRate(tn.t.Traffic), share.sz.n-1), tn.slo) == "" {
		t.Errorf("%d replicas also meet the SLO: the search is not the fewest", share.sz.n-1)
	}
	pl := build(t, pool)
	for _, pt := range pl.Tenants {
		if !strings.HasPrefix(pt.Name, "product-") || pt.Infeasible {
			continue
		}
		if pt.Predicted.MaxRPS < 0.5 {
			t.Errorf("%s: max rps %.3f below its 0.5 req/s", pt.Name, pt.Predicted.MaxRPS)
		}
	}
}

// engine2023 are the performance model's constants for the vLLM of 2023 that some planner cases
// were built on: 4 ms of host time per step, a paged-attention KV read at 0.65 of the bandwidth
// and 256 sequences.
func engine2023() perf.Options {
	o := perf.DefaultOptions()
	o.StepOverhead = 4 * time.Millisecond
	o.KVBWEfficiency = 0.65
	o.MaxSeqs = 256
	return o
}
