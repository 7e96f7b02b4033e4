package plan

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// randomPool draws a pool for the planner-simulator agreement test: tenants with catalog models,
// mixed isolation tiers, concurrency 1–64 (log-uniform), request rates log-uniform within a
// factor 4 above a pool-wide floor r0 (so that every tenant gets enough requests in one run of
// a bounded length), TTFT 1–4 s and TPOT 60–150 ms, on nodes of one or two boards.
func randomPool(rng *rand.Rand, tenants int, r0 float64) string {
	boards := []string{"H100-SXM5-80GB", "A100-SXM4-80GB", "H200-141GB"}
	models := []string{"qwen2.5-1.5b", "llama-3.2-3b", "qwen2.5-7b", "llama-3.1-8b"}
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: random}\nfleet:\n  nodes:\n")
	nb := 1 + rng.IntN(2)
	for i := range 4 {
		fmt.Fprintf(&b, "  - name: n%d\n    gpus: [{board: %s, count: 8}]\n", i, boards[(i%nb+rng.IntN(len(boards)))%len(boards)])
	}
	b.WriteString("policy: {burstPoolPercent: 0}\ntenants:\n")
	for i := range tenants {
		conc := int(math.Round(math.Exp(rng.Float64() * math.Log(64))))
		rps := r0 * math.Exp(rng.Float64()*math.Log(4))
		in, out := 128<<rng.IntN(3), 32<<rng.IntN(3)
		fmt.Fprintf(&b, "- name: t%d\n  model: {name: %s}\n  concurrency: %d\n  traffic: {rps: %.4g, inputTokens: %d, outputTokens: %d}\n  slo: {ttftP99: %dms, tpotP99: %dms}\n",
			i, models[rng.IntN(len(models))], max(conc, 1), rps, in, out, 1000+rng.IntN(3000), 60+rng.IntN(91))
		switch rng.IntN(3) {
		case 0:
			b.WriteString("  isolation: hard\n")
		case 1:
			fmt.Fprintf(&b, "  isolation: soft\n  path: org/g%d\n", rng.IntN(3))
		default:
			b.WriteString("  isolation: shared\n")
		}
	}
	return b.String()
}

// Planner-simulator agreement over random pools: every tenant the planner serves meets both p99
// SLOs in simulation for at least 99 % of its requests, each tenant getting at least 2,000
// requests. Sample sizes (kept so that the test runs in about a minute on two cores): 200 pools
// of 1–12 tenants, request rates within 4× of a floor drawn log-uniformly in [0.05, 5] req/s
// (so 0.05–20 req/s over the suite); -short: 20 pools.
func TestPlannerSimulatorAgreement(t *testing.T) {
	pools := 200
	if testing.Short() || raceEnabled {
		pools = 20
	}
	rng := rand.New(rand.NewPCG(8, 200))
	served, checked, infeasible := 0, 0, 0
	for i := range pools {
		r0 := 0.05 * math.Exp(rng.Float64()*math.Log(100))
		doc := randomPool(rng, 1+rng.IntN(12), r0)
		pool, err := v1.LoadPool([]byte(doc))
		if err != nil {
			t.Fatalf("pool %d: %v\n%s", i, err, doc)
		}
		pl := build(t, pool)
		d := time.Duration(2200/r0*1e9) + 30*time.Second
		s, err := sim.New(sim.Input{Pool: pool, Plan: pl}, sim.Config{Duration: d, Seed: uint64(i) + 1})
		if err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		res, err := s.Run(context.Background())
		if err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		for j, tr := range res.Report.Tenants {
			if pl.Tenants[j].Infeasible {
				infeasible++
				continue
			}
			served++
			if tr.Completed < 2000 {
				t.Errorf("pool %d %s: only %d requests completed", i, tr.Name, tr.Completed)
				continue
			}
			checked++
			if tr.SLOAttainment < 0.99 {
				var on []string
				for _, r := range pl.Tenants[j].Replicas {
					on = append(on, fmt.Sprintf("%s %s %s", r.GPU, r.Instance, r.Slice))
				}
				t.Errorf("pool %d %s: attainment %.2f %% (TTFT p99 %.0f ms, TPOT p99 %.1f ms, %d preemptions; predicted TTFT %s, TPOT %s) on %s",
					i, tr.Name, 100*tr.SLOAttainment, tr.TTFT.P99, tr.TPOT.P99, tr.Preemptions,
					pl.Tenants[j].Predicted.TTFTP99.Std(), pl.Tenants[j].Predicted.TPOTP99.Std(), strings.Join(on, ", "))
			}
		}
	}
	t.Logf("%d pools: %d tenants served and checked over ≥ 2,000 requests each (%d), %d infeasible or short of GPUs", pools, served, checked, infeasible)
}
