package plan

import (
	"math"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestE2EP99VaryingLaw: e2eP99Varying is the 99th percentile of T + step·(L − 1), T exponential
// with p99 ttft: for fixed lengths ttft + step·(O − 1); with no TTFT, step times the output p99
// less one (outputP99); and in between the two for both.
func TestE2EP99VaryingLaw(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 2e-6 }
	q := &qmodel{out: 256}
	if got := q.e2eP99Varying(0.5, 0.004); !near(got, 0.5+0.004*255) {
		t.Errorf("fixed: %v, want %v", got, 0.5+0.004*255)
	}
	for _, law := range []v1.Lengths{v1.LengthsExponential, v1.LengthsUniform} {
		q := (&qmodel{out: 256}).withLengths(law, 0)
		l99 := float64(outputP99(256, law, 0))
		if got, want := q.e2eP99Varying(0, 0.004), 0.004*(l99-1); got < want-2e-6 || got > 0.004*l99+2e-6 {
			t.Errorf("%s, no TTFT: %v, want %v", law, got, want)
		}
		got := q.e2eP99Varying(0.5, 0.004)
		if got <= 0.004*(l99-1) || got >= 0.5+0.004*(l99-1) {
			t.Errorf("%s: %v, not between %v and %v", law, got, 0.004*(l99-1), 0.5+0.004*(l99-1))
		}
	}
	// A maximum context caps the drawn lengths, and the quantile with them.
	q = (&qmodel{out: 256}).withLengths(v1.LengthsExponential, 301)
	if got := q.e2eP99Varying(0, 0.004); got > 0.004*299+2e-6 {
		t.Errorf("capped at 300 tokens: %v, above %v", got, 0.004*299)
	}
}

// e2eP99Varying's sum stops once above 1 % and skips terms that are 0 in float64: the same
// answer, bit for bit, as the whole sum in the same order (e2eP99Full, the sum as it was), over
// both laws, capped and uncapped, at TTFTs and steps from short to long; and 100^−e2eZeroTail
// is 0.
func TestE2EP99VaryingStopsEarly(t *testing.T) {
	if v := math.Pow(100, -e2eZeroTail); v != 0 {
		t.Fatalf("100^-%d = %g, not 0", e2eZeroTail, v)
	}
	e2eP99Full := func(q *qmodel, ttft, step float64) float64 {
		ls, ps := q.outLaw()
		lo, hi := 0.0, ttft+step*(ls[len(ls)-1]-1)+1e-6
		for hi-lo > 1e-6 {
			mid := (lo + hi) / 2
			if e2eMissSum(ls, ps, ttft, step, mid) > 0.01 {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi
	}
	n := 0
	for _, law := range []v1.Lengths{"", v1.LengthsExponential, v1.LengthsUniform} {
		for _, out := range []float64{2, 20, 150, 800} {
			for _, maxCtx := range []int{0, 600} {
				q := (&qmodel{out: out}).withLengths(law, maxCtx)
				for _, ttft := range []float64{0, 0.001, 0.3, 2.5, 40} {
					for _, step := range []float64{0.0001, 0.004, 0.03, 0.2} {
						n++
						if got, want := q.e2eP99Varying(ttft, step), e2eP99Full(q, ttft, step); got != want {
							t.Errorf("%q out %v maxCtx %d ttft %v step %v: %v, the whole sum's %v", law, out, maxCtx, ttft, step, got, want)
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}

// e2eMissSum is the chance that an e2e latency exceeds x, as e2eP99Varying's sum was before it
// stopped early or took a running product: every term of the output law ls, ps, a power each,
// summed in order.
func e2eMissSum(ls, ps []float64, ttft, step, x float64) float64 {
	s := 0.0
	for i, l := range ls {
		y := x - step*(l-1)
		switch {
		case y <= 0:
			s += ps[i]
		case ttft > 0:
			s += ps[i] * math.Pow(100, -y/ttft)
		}
	}
	return s
}

// e2eP99Varying on an exponential law of 800 output tokens (about 16,000 lengths), as the plan's
// prediction asks it for each tenant of varying lengths.
func BenchmarkE2EP99Varying(b *testing.B) {
	q := (&qmodel{out: 800}).withLengths(v1.LengthsExponential, 0)
	for b.Loop() {
		q.e2eP99Varying(1.5, 0.03)
	}
}

// TestE2EPredictionVaryingLengthsMatchesSimulation: review 13's M2 pools (qwen2.5-14b int4-awq,
// 0.928 req/s of 1,000 + 256 exponential tokens, e2eP99 10s; bursty and Poisson) are predicted
// an e2e p99 within 10 % of what an hour's simulation of the plan measures at seeds 13 and 14.
// At the mean output (TTFT p99 + TPOT p99 × 255) the prediction was 2.48 s and 1.29 s where the
// simulator measured 4.8–5.1 s and 4.6–4.8 s: the e2e tail is the long requests'.
func TestE2EPredictionVaryingLengthsMatchesSimulation(t *testing.T) {
	for _, f := range []string{"b1-bursty-e2e-exponential.yaml", "b1p-poisson-e2e-exponential.yaml"} {
		pool := loadPool(t, "../../testdata/review13/"+f)
		pl := build(t, pool)
		tn := pl.Tenants[0]
		pred := tn.Predicted.E2EP99.Std()
		for _, seed := range []uint64{13, 14} {
			tr := simulatePlan(t, pool, pl, time.Hour, seed)[tn.Name]
			sim := time.Duration(tr.E2E.P99 * float64(time.Millisecond))
			t.Logf("%s seed %d: predicted e2e p99 %v, simulated %v (%d requests)", f, seed, pred, sim, tr.Completed)
			if r := pred.Seconds() / sim.Seconds(); r < 0.9 || r > 1.1 {
				t.Errorf("%s seed %d: predicted e2e p99 %v, simulated %v (ratio %.3f, want within 10 %%)", f, seed, pred, sim, r)
			}
		}
	}
}

// TestE2EPredictionWithoutE2ETarget: a tenant of varying lengths with no e2e target is predicted
// its e2e p99 over the length law too (review 12's s2, 20 req/s of 400 + 200 exponential tokens
// on an H200; review 7's f-one-exponential, one long-prompt tenant), within 10 % of what a
// simulation of the plan measures at seed 13. At the mean output the prediction was 5.83 s and
// 4.42 s where the simulator measures about 17.0 s and 2.7 s. Since ADR 0109 s2's tenant is
// placed on two MPS 1/3 shares of the GPU (three 2g.35gb instances before), where the model's
// mean step is above the simulator's: 14.1 s predicted against 10.2 s measured, on the safe
// side, which this test bounds at 1.4 times (under-prediction stays bounded at 0.9).
func TestE2EPredictionWithoutE2ETarget(t *testing.T) {
	for _, c := range []struct {
		file string
		d    time.Duration
		over float64 // the highest ratio of prediction to simulation allowed
	}{{"../../testdata/review12/s2-h200-7b-20rps.yaml", 10 * time.Minute, 1.4}, {"../../testdata/review7/f-one-exponential-pool.yaml", 2 * time.Hour, 1.1}} {
		pool := loadPool(t, c.file)
		pl := build(t, pool)
		tn := pl.Tenants[0]
		if pool.Tenants[0].SLO.E2EP99 != nil {
			t.Fatalf("%s: the tenant has an e2e target; this test is for tenants without one", c.file)
		}
		pred := tn.Predicted.E2EP99.Std()
		tr := simulatePlan(t, pool, pl, c.d, 13)[tn.Name]
		sim := time.Duration(tr.E2E.P99 * float64(time.Millisecond))
		t.Logf("%s: predicted e2e p99 %v, simulated %v (%d requests)", c.file, pred, sim, tr.Completed)
		if r := pred.Seconds() / sim.Seconds(); r < 0.9 || r > c.over {
			t.Errorf("%s: predicted e2e p99 %v, simulated %v (ratio %.3f, want 0.9 to %.1f)", c.file, pred, sim, r, c.over)
		}
	}
}

// TestE2ESplitTighterMeetsInSimulation: the Poisson twin of review 13's M2 meets its e2e target
// by the split with TTFT ≤ E/8 (TTFT ≤ 1.25s, TPOT ≤ 8.75s/1176 = 7.4ms) on a 4g.90gb MIG
// instance of a B200 (4/7 of the GPU), where E/4 (TPOT ≤ 6.4ms) took the whole B200, and it meets
// its e2e p99 in an hour's simulation at seeds 13 and 14.
func TestE2ESplitTighterMeetsInSimulation(t *testing.T) {
	pool := loadPool(t, "../../testdata/review13/b1p-poisson-e2e-exponential.yaml")
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible || len(tn.Replicas) != 1 {
		t.Fatalf("infeasible or not one replica: %d, %v", len(tn.Replicas), tn.Reasons)
	}
	if r := tn.Replicas[0]; r.Slice != v1.SliceMIG || r.Instance.Profile != "4g.90gb" {
		t.Errorf("replica on %s %s, want a 4g.90gb MIG instance", r.Slice, r.Instance.Profile)
	}
	const why = "TTFT ≤ 1.25s, TPOT ≤ 7.4ms (E/4 for the TTFT would take a costlier slice: TTFT ≤ 2.5s, TPOT ≤ 6.4ms)"
	said := false
	for _, r := range tn.Reasons {
		said = said || strings.Contains(r.Message, why)
	}
	if !said {
		t.Errorf("no reason says %q: %v", why, tn.Reasons)
	}
	for _, seed := range []uint64{13, 14} {
		tr := simulatePlan(t, pool, pl, time.Hour, seed)[tn.Name]
		t.Logf("seed %d: e2e p99 %v ms, %.2f %% within the SLO (%d requests)", seed, tr.E2E.P99, 100*tr.SLOAttainment, tr.Completed)
		if tr.E2E.P99 > 10000 || tr.SLOAttainment < 0.99 || tr.Completed < 2000 {
			t.Errorf("seed %d: e2e p99 %v ms against 10 s, %.2f %% within the SLO over %d requests", seed, tr.E2E.P99, 100*tr.SLOAttainment, tr.Completed)
		}
	}
}

// e2eFast's running product answers e2eP99Varying's question as the exact sum does wherever
// it answers: at the bisection's probes and at points packed around the answer (down to 1e-12 s
// from it, where the chance is within e2eFastSlack of 1 %), over both laws, capped and
// uncapped, at TTFTs and steps from short to long; and it answers most probes.
func TestE2EFastAgreesWithSum(t *testing.T) {
	exact := func(ls, ps []float64, ttft, step, x float64) bool {
		return e2eMissSum(ls, ps, ttft, step, x) > 0.01
	}
	known, asked, cases := 0, 0, 0
	for _, law := range []v1.Lengths{"", v1.LengthsExponential, v1.LengthsUniform} {
		for _, out := range []float64{2, 20, 150, 800, 3000} {
			for _, maxCtx := range []int{0, 600} {
				q := (&qmodel{out: out}).withLengths(law, maxCtx)
				ls, ps := q.outLaw()
				for _, ttft := range []float64{0, 0.001, 0.05, 0.3, 2.5, 40} {
					for _, step := range []float64{0.0001, 0.004, 0.03, 0.2} {
						cases++
						lo, hi := 0.0, ttft+step*(ls[len(ls)-1]-1)+1e-6
						f := newE2EFast(ls, ttft, step, hi)
						check := func(x float64) bool {
							want := exact(ls, ps, ttft, step, x)
							asked++
							if got, ok := f.above(ls, ps, x); ok {
								known++
								if got != want {
									t.Errorf("%q out %v maxCtx %d ttft %v step %v x %v: fast %v, the sum %v", law, out, maxCtx, ttft, step, x, got, want)
								}
							}
							return want
						}
						for hi-lo > 1e-6 {
							mid := (lo + hi) / 2
							if check(mid) {
								lo = mid
							} else {
								hi = mid
							}
						}
						for _, d := range []float64{1e-5, 1e-7, 1e-9, 1e-10, 1e-11, 1e-12, 0} {
							check(hi + d)
							check(lo - d)
							check(math.Nextafter(lo, math.Inf(1)) + d)
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases: %d of %d probes answered by the product", cases, known, asked)
	if known < asked/2 {
		t.Errorf("the product answered %d of %d probes, fewer than half", known, asked)
	}
}

// e2eFast's run of products stays within its allowance of the powers it replaces: over
// e2eFastRun steps from exponents between −e2eFastSkip and 0, at ratios from 1e-4 to 20 TTFTs a
// step, the product differs from 100^z (z taken exactly as the sum takes it) by less than
// e2eFastRun·e2eFastPow relative, what the bound allows a run.
func TestE2EFastRunWithinItsBound(t *testing.T) {
	worst := 0.0
	for _, ttft := range []float64{0.001, 0.05, 0.3, 2.5} {
		for _, ratio := range []float64{1e-4, 3e-3, 0.07, 0.9, 4, 20} {
			step := ratio * ttft
			r := math.Pow(100, step/ttft)
			for z0 := -e2eFastSkip; z0 < 0; z0 += 0.37 {
				x := -z0 * ttft // the first length's y, with l = 1
				g := math.Pow(100, -x/ttft)
				for k := 1; k <= e2eFastRun; k++ {
					y := x - step*float64(k)
					if y <= 0 {
						break
					}
					g *= r
					exact := math.Pow(100, -y/ttft)
					if d := math.Abs(g/exact - 1); d > worst {
						worst = d
					}
				}
			}
		}
	}
	t.Logf("largest relative difference over a run: %.3g (allowance %.3g)", worst, e2eFastRun*e2eFastPow)
	if worst >= e2eFastRun*e2eFastPow {
		t.Errorf("a run's product differs from the power by %g, beyond %g", worst, e2eFastRun*e2eFastPow)
	}
}
