package plan

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// singleTenantPool is one tenant on gpus H100 SXM5 GPUs, exclusive GPUs only (so that replicas
// and GPUs are the same count), no burst pool.
func singleTenantPool(t testing.TB, model string, conc int, rps float64, in, out int, ttft, tpot string, gpus int) *v1.Pool {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: single}
fleet:
  nodes:
%spolicy:
  burstPoolPercent: 0
  allowedModes: [exclusive]
tenants:
- name: t
  model: {name: %s}
  concurrency: %d
  traffic: {rps: %g, inputTokens: %d, outputTokens: %d}
  slo: {ttftP99: %s, tpotP99: %s}
`, nodes(gpus), model, conc, rps, in, out, ttft, tpot)
	pool, err := v1.LoadPool([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func nodes(gpus int) string {
	s := ""
	for i := 0; gpus > 0; i++ {
		n := min(gpus, 8)
		s += fmt.Sprintf("  - name: n%d\n    gpus: [{board: H100-SXM5-80GB, count: %d}]\n", i, n)
		gpus -= n
	}
	return s
}

// simAttain simulates m exclusive replicas of pool's single tenant long enough for about
// requests arrivals and returns its SLO attainment and completed requests.
func simAttain(t testing.TB, pool *v1.Pool, m, requests int) (float64, int64) {
	t.Helper()
	p := *pool
	p.Tenants = append([]v1.Tenant(nil), pool.Tenants...)
	p.Tenants[0].Replicas = &m
	pl, err := sim.UniformPlan(&p, v1.ModeExclusive)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Duration(float64(requests)/p.Tenants[0].Traffic.RPS*1e9) + time.Minute
	s, err := sim.New(sim.Input{Pool: &p, Plan: pl}, sim.Config{Duration: d, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Report.Tenants[0]
	return tr.SLOAttainment, tr.Completed
}

// fewestSimulated is the fewest exclusive replicas (≤ hi) whose simulation meets the SLO for
// 99 % of requests, by binary search (attainment grows with replicas); hi+1 when none does.
func fewestSimulated(t testing.TB, pool *v1.Pool, hi, requests int) int {
	ok := func(m int) bool { a, _ := simAttain(t, pool, m, requests); return a >= 0.99 }
	if !ok(hi) {
		return hi + 1
	}
	lo := 0
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// boundCount is the replica count the lower bound gives pool's single tenant on the slice kind
// the planner chooses (lbReplicas: the saturation count or the TTFT floor).
func boundCount(t *testing.T, pool *v1.Pool) int {
	t.Helper()
	p, _ := planWith(t, pool, func(*planner) {})
	c := p.tenants[0].choice
	if c == nil {
		t.Fatal("the tenant has no choice")
	}
	return c.lbReplicas
}

// The single-tenant sweep, on a grid: qwen2.5-7b on H100 SXM5, 512 + 256 tokens,
// TTFT 2 s, TPOT 100 ms, concurrency 1 to 32, 0.1 to 8 req/s. For every point the planner's
// replica count n is feasible (no concurrency-only infeasibility), meets the SLO in simulation
// (≥ 99 % over ≥ 2,000 requests), and is at most max(k + 1, 1.25 k) where k is the fewest
// replicas the simulator is satisfied with; and the lower bound's count is at most k.
func TestQueueSizingAgainstSimulator(t *testing.T) {
	concs := []int{1, 2, 8, 32}
	rates := []float64{0.1, 1, 4, 8}
	requests := 2000
	if testing.Short() || raceEnabled {
		concs, rates, requests = []int{1, 8}, []float64{1, 4}, 1000
	}
	var ratios []float64
	for _, c := range concs {
		for _, r := range rates {
			pool := singleTenantPool(t, "qwen2.5-7b", c, r, 512, 256, "2s", "100ms", 128)
			pl := build(t, pool)
			tn := pl.Tenants[0]
			if tn.Infeasible {
				t.Errorf("concurrency %d, %g req/s: infeasible: %v", c, r, tn.Reasons)
				continue
			}
			n := len(tn.Replicas)
			a, done := simAttain(t, pool, n, requests)
			if a < 0.99 || done < int64(requests)*9/10 {
				t.Errorf("concurrency %d, %g req/s: %d planned replicas attain %.2f %% over %d requests", c, r, n, 100*a, done)
			}
			k := fewestSimulated(t, pool, n, requests)
			ratios = append(ratios, float64(n)/float64(k))
			lb := boundCount(t, pool)
			if lb > k {
				t.Errorf("concurrency %d, %g req/s: the lower bound's count %d is above the simulator's fewest %d", c, r, lb, k)
			}
			t.Logf("concurrency %2d, %4g req/s: planned %3d, simulator's fewest %3d (%.2fx), bound's count %3d, planned attains %.2f %%", c, r, n, k, float64(n)/float64(k), lb, 100*a)
			if lim := max(float64(k+1), 1.25*float64(k)); float64(n) > lim {
				t.Errorf("concurrency %d, %g req/s: planned %d > max(k+1, 1.25k) = %g with k = %d", c, r, n, lim, k)
			}
		}
	}
	t.Logf("planned / k: %v", ratios)
}
