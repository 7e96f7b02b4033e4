package plan

import (
	"math"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// TestOutputP99IsTheLawsQuantile: outputP99 is the least n with P(L > n) ≤ 1 % for the laws as
// the simulator draws them (uniform: out/2 + a uniform j in {0, …, out}; exponential: geometric
// on {1, 2, …} of mean out, P(L > n) = (1 − 1/out)^n), the mean for fixed lengths, and at most
// maxContext − 1 where a maxContext caps the drawn lengths.
func TestOutputP99IsTheLawsQuantile(t *testing.T) {
	tail := func(law v1.Lengths, out, n int) float64 {
		switch law {
		case v1.LengthsUniform:
			above := 0
			for j := 0; j <= out; j++ {
				if max(1, out/2+j) > n {
					above++
				}
			}
			return float64(above) / float64(out+1)
		case v1.LengthsExponential:
			return math.Pow(1-1/float64(out), float64(n))
		}
		return 0
	}
	for _, law := range []v1.Lengths{v1.LengthsUniform, v1.LengthsExponential} {
		for _, out := range []int{2, 3, 50, 99, 100, 101, 256, 512, 4000} {
			n := outputP99(out, law, 0)
			if tail(law, out, n) > 0.01 || tail(law, out, n-1) <= 0.01 {
				t.Errorf("%s, mean %d: p99 %d, but P(L > %d) = %.5f and P(L > %d) = %.5f", law, out, n, n, tail(law, out, n), n-1, tail(law, out, n-1))
			}
		}
	}
	for _, c := range []struct {
		law            v1.Lengths
		out, ctx, want int
	}{
		{"", 256, 0, 256},
		{"", 256, 100, 256}, // fixed lengths are left as they were
		{v1.LengthsExponential, 256, 0, 1177},
		{v1.LengthsUniform, 512, 0, 763},
		{v1.LengthsExponential, 256, 801, 800},
		{v1.LengthsExponential, 1, 0, 1},
	} {
		if got := outputP99(c.out, c.law, c.ctx); got != c.want {
			t.Errorf("%q, mean %d, maxContext %d: %d, want %d", c.law, c.out, c.ctx, got, c.want)
		}
	}
}

// TestE2ESplitForTheLongRequests: an e2e target is split for the 99th-percentile output, not the
// mean (review 13's M2): split by the mean, 256 exponential output tokens under e2eP99 10s gave
// TPOT ≤ 7.5s/255 = 29.4ms, and a request of 1,177 tokens (1 % of them are longer) at that TPOT
// takes 37 s.
func TestE2ESplitForTheLongRequests(t *testing.T) {
	d := func(s string) *v1.Duration {
		x, err := v1.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &x
	}
	for _, c := range []struct {
		name string
		slo  v1.SLO
		out  int
		law  v1.Lengths
		want perf.SLO
	}{
		// 7.5s/(1177 − 1) = 6.377551ms.
		{"exponential", v1.SLO{E2EP99: d("10s")}, 256, v1.LengthsExponential, perf.SLO{TTFT: 2500 * time.Millisecond, TPOT: 7500 * time.Millisecond / 1176}},
		// 15s/(763 − 1) = 19.685039ms.
		{"uniform", v1.SLO{E2EP99: d("20s")}, 512, v1.LengthsUniform, perf.SLO{TTFT: 5 * time.Second, TPOT: 15 * time.Second / 762}},
		// A stated TTFT target takes its share; a tighter stated TPOT stays.
		{"ttft given", v1.SLO{TTFTP99: d("1s"), E2EP99: d("10s")}, 256, v1.LengthsExponential, perf.SLO{TTFT: time.Second, TPOT: 9 * time.Second / 1176}},
		{"tpot tighter", v1.SLO{TPOTP99: d("5ms"), E2EP99: d("10s")}, 256, v1.LengthsExponential, perf.SLO{TTFT: 2500 * time.Millisecond, TPOT: 5 * time.Millisecond}},
		{"fixed", v1.SLO{E2EP99: d("10s")}, 256, "", perf.SLO{TTFT: 2500 * time.Millisecond, TPOT: 7500 * time.Millisecond / 255}},
	} {
		if got := sloTargets(c.slo, c.out, c.law, 0); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestE2EExponentialMeetsE2EInSimulation: review 13's M2 pool (qwen2.5-14b int4-awq, bursty
// 0.928 req/s, 1,000 + 256 exponential tokens, e2eP99 10s), planned by the model (a bursty tenant
// is not confirmed by simulation), meets its e2e p99 over an hour's simulation. Split by the mean
// output it got 2 × 1g.45gb of a B200 and missed: e2e p99 10.16 s and 10.22 s at seeds 13 and 14
// (98.90 % and 98.82 % within the SLO). Planning and both runs take a fraction of a second.
func TestE2EExponentialMeetsE2EInSimulation(t *testing.T) {
	pool := loadPool(t, "../../testdata/review13/b1-bursty-e2e-exponential.yaml")
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible {
		t.Fatalf("infeasible: %v", tn.Reasons)
	}
	// The split is for the 99th-percentile output (its TTFT share, E/4 or less, is the
	// planner's choice of the cheaper slice).
	const why = "the e2e target 10s is split for the 99th-percentile output of the exponential lengths, 1177 tokens (not the mean 256): TTFT ≤ "
	said := false
	for _, r := range tn.Reasons {
		said = said || strings.Contains(r.Message, why)
	}
	if !said {
		t.Errorf("no reason says %q: %v", why, tn.Reasons)
	}
	for _, seed := range []uint64{13, 14} {
		tr := simulatePlan(t, pool, pl, time.Hour, seed)[tn.Name]
		t.Logf("seed %d: %d replica(s): e2e p99 %v ms, %.2f %% within the SLO (%d requests)", seed, len(tn.Replicas), tr.E2E.P99, 100*tr.SLOAttainment, tr.Completed)
		if tr.E2E.P99 > 10000 || tr.SLOAttainment < 0.99 {
			t.Errorf("seed %d: e2e p99 %v ms against 10 s, %.2f %% within the SLO", seed, tr.E2E.P99, 100*tr.SLOAttainment)
		}
	}
}
