package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// sizePoint is one single-tenant pool of the sizing sweep.
type sizePoint struct {
	board, model string
	conc         int
	rps          float64
	in, out      int
	ttft, tpot   string
	modes        string // the policy's allowedModes
	isolation    string
}

func (s sizePoint) String() string {
	return fmt.Sprintf("%s %s conc %d %.4g req/s %d+%d TTFT %s TPOT %s [%s]", s.board, s.model, s.conc, s.rps, s.in, s.out, s.ttft, s.tpot, s.modes)
}

// pool is the point as a pool of four nodes of eight GPUs of its board.
func (s sizePoint) pool(t testing.TB) *v1.Pool {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: sweep}\nfleet:\n  nodes:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - name: n%d\n    gpus: [{board: %s, count: 8}]\n", i, s.board)
	}
	fmt.Fprintf(&b, "policy: {burstPoolPercent: 0, allowedModes: [%s]}\ntenants:\n", s.modes)
	fmt.Fprintf(&b, "- name: t0\n  model: {name: %s}\n  concurrency: %d\n  traffic: {rps: %.4g, inputTokens: %d, outputTokens: %d}\n  slo: {ttftP99: %s, tpotP99: %s}\n",
		s.model, s.conc, s.rps, s.in, s.out, s.ttft, s.tpot)
	if s.isolation != "" {
		fmt.Fprintf(&b, "  isolation: %s\n", s.isolation)
	}
	pool, err := v1.LoadPool([]byte(b.String()))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return pool
}

// checkSizing plans the point, simulates the plan and the fewest of its replicas the simulator
// accepts (fewestOfPlan), and checks both bars: the plan meets the SLO for 99 % of ≥ 2,000
// requests, and its replica count is at most max(k + 1, 1.25 k). It returns the planned count
// (0 when the tenant is not served), k (0 when the plan itself fails) and the slice.
func checkSizing(t *testing.T, s sizePoint, seed uint64) (planned, k int, slice string) {
	t.Helper()
	pool := s.pool(t)
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible {
		return 0, 0, ""
	}
	d := time.Duration(2200/s.rps*1e9) + 30*time.Second
	res := simulate(t, pool, pl, d, seed)
	tr := res.Report.Tenants[0]
	planned = len(tn.Replicas)
	slice = strings.TrimSpace(fmt.Sprintf("%s %s", tn.Replicas[0].Slice, tn.Replicas[0].Instance.Profile))
	if tr.Completed < 2000 || tr.SLOAttainment < 0.99 {
		t.Errorf("%s: %d planned replicas on %s attain %.2f %% over %d requests (TTFT p99 %.0f ms, TPOT p99 %.1f ms; predicted %s, %s)",
			s, planned, slice, 100*tr.SLOAttainment, tr.Completed, tr.TTFT.P99, tr.TPOT.P99, tn.Predicted.TTFTP99.Std(), tn.Predicted.TPOTP99.Std())
		return planned, 0, slice
	}
	k = fewestOfPlan(t, pool, pl, d, seed)
	if lim := max(float64(k+1), 1.25*float64(k)); float64(planned) > lim {
		t.Errorf("%s: planned %d replicas on %s > max(k+1, 1.25k) = %g with k = %d", s, planned, slice, lim, k)
	}
	return planned, k, slice
}

// The outlier of a shifted random stream: one hard-isolated qwen2.5-7b tenant, max-num-seqs 2,
// 12.71 req/s of 256 + 64 tokens, TTFT 3.192 s, TPOT 147 ms, planned on unshared H200 MIG
// 1g.35gb instances, 9 of them under a flat ceiling of 75 % busy slots where the simulator is
// satisfied with 7 (ADR 0031); with the slot wait counted 1.6× above 75 % busy slots, 8.
func TestSizingTwoSlotOutlier(t *testing.T) {
	s := sizePoint{board: "H200-141GB", model: "qwen2.5-7b", conc: 2, rps: 12.71, in: 256, out: 64,
		ttft: "3192ms", tpot: "147ms", modes: "exclusive, mig, mps, timeslice", isolation: "hard"}
	n, k, slice := checkSizing(t, s, 188)
	if n == 0 {
		t.Fatalf("%s: not served", s)
	}
	t.Logf("%s: planned %d on %s, simulator's fewest %d", s, n, slice, k)
}

// A wider single-tenant sweep than the agreement suite's sample, both bars at every point: H100
// SXM5, concurrency 1/2/4/8/32, 0.5–20 req/s, MIG only (1g–7g instances, as the planner
// chooses) or whole GPUs, three request shapes and SLOs — one whose TTFT target is a few
// holding times, two where it is many (where a ceiling on busy slots, not the wait, would bind).
// 150 points, 12–40 s on two busy cores; -short and -race: every fifth.
func TestSizingSweep(t *testing.T) {
	type shape struct {
		model      string
		in, out    int
		ttft, tpot string
	}
	shapes := []shape{{"qwen2.5-7b", 256, 64, "3192ms", "147ms"}, {"llama-3.1-8b", 512, 128, "1200ms", "80ms"},
		{"qwen2.5-7b", 512, 32, "4000ms", "150ms"}}
	concs := []int{1, 2, 4, 8, 32}
	rates := []float64{0.5, 2, 6, 12.71, 20}
	modes := []string{"mig", "exclusive"}
	var ratios []float64
	i := 0
	for _, sh := range shapes {
		for _, c := range concs {
			for _, r := range rates {
				for _, m := range modes {
					i++
					if (testing.Short() || raceEnabled) && i%5 != 0 {
						continue
					}
					s := sizePoint{board: "H100-SXM5-80GB", model: sh.model, conc: c, rps: r, in: sh.in, out: sh.out, ttft: sh.ttft, tpot: sh.tpot, modes: m}
					n, k, slice := checkSizing(t, s, uint64(i))
					if n == 0 {
						t.Logf("%s: not served", s)
						continue
					}
					if k > 0 {
						ratios = append(ratios, float64(n)/float64(k))
					}
					t.Logf("%s: planned %d on %s, simulator's fewest %d", s, n, slice, k)
				}
			}
		}
	}
	t.Logf("planned / k over %d points: %s", len(ratios), ratioSummary(ratios))
}

// One run's p99 spreads between runs near saturation (ADR 0031): the planned counts of the two
// points that set the slot-wait spread meet the SLO in each of 20 runs, and in run 1099, the one
// in which five 3g.40gb instances, planned without the spread, missed it (97.94 %).
func TestSizingAcrossSeeds(t *testing.T) {
	var seeds []uint64
	for i := range 20 {
		seeds = append(seeds, uint64(i+1))
	}
	for _, s := range []sizePoint{
		{board: "H100-SXM5-80GB", model: "llama-3.1-8b", conc: 8, rps: 20, in: 512, out: 128, ttft: "1200ms", tpot: "80ms", modes: "mig"},
		{board: "H200-141GB", model: "qwen2.5-7b", conc: 2, rps: 12.71, in: 256, out: 64, ttft: "3192ms", tpot: "147ms", modes: "mig", isolation: "hard"},
	} {
		pool := s.pool(t)
		pl := build(t, pool)
		if pl.Tenants[0].Infeasible {
			t.Fatalf("%s: not served", s)
		}
		d := time.Duration(2200/s.rps*1e9) + 30*time.Second
		worst := 0.0
		for _, seed := range append(seeds, 1099) {
			tr := simulate(t, pool, pl, d, seed).Report.Tenants[0]
			if tr.SLOAttainment < 0.99 {
				t.Errorf("%s, seed %d: %d planned replicas attain %.2f %% (TTFT p99 %.0f ms)", s, seed, len(pl.Tenants[0].Replicas), 100*tr.SLOAttainment, tr.TTFT.P99)
			}
			worst = max(worst, tr.TTFT.P99)
		}
		t.Logf("%s: %d replicas on %s, worst TTFT p99 over 21 runs %.0f ms", s, len(pl.Tenants[0].Replicas), pl.Tenants[0].Replicas[0].Slice, worst)
	}
}
