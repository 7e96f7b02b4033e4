package plan

import (
	"testing"
	"time"
)

// Long prompts on tensor-parallel replicas (the third review's pools, whose prompts' prefill
// takes most of the TTFT target): the planned count is within max(k + 1, 1.25 k) of k, the fewest
// of the plan's own replicas the simulator is satisfied with (99 % of the requests, found by
// search as in the agreement suite), and every tenant is feasible and met in simulation. Before
// the queueing model priced a long prompt's chunks at their real sizes and let the least-loaded
// router spare it the wait for other prompts' prefills, llama-3.1-70b fp8 at 0.5 req/s of
// 12,000 + 400 tokens was planned on 10 replicas of TP 4 where 2 suffice, llama-3.1-8b at
// 0.05 req/s of 100,000 + 500 tokens on 5 where 2 suffice, and that tenant on one 8-GPU node was
// NoCapacity.
func TestLongPromptTensorParallelSizing(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates each pool several times")
	}
	for _, name := range []string{"r1-70b-longprompt-tp4", "r2-100k-prompt-tp4", "r3-100k-prompt-8gpu"} {
		pool := loadPool(t, "../../cmd/gpupool/testdata/review3/"+name+".yaml")
		pl := buildWith(t, pool, confirmed)
		tn := pl.Tenants[0]
		if tn.Infeasible {
			t.Errorf("%s: infeasible: %v", name, tn.Reasons)
			continue
		}
		rate := pool.Tenants[0].Traffic.RPS
		d := time.Duration(2200/rate*1e9) + 30*time.Second
		res := simulate(t, pool, pl, d, 1)
		if a := res.Report.Tenants[0].SLOAttainment; a < 0.99 {
			t.Errorf("%s: planned %d replicas meet the SLO for %.2f %% of requests in simulation", name, len(tn.Replicas), 100*a)
			continue
		}
		planned := len(tn.Replicas)
		k := fewestOfPlan(t, pool, pl, d, 1)
		lim := max(float64(k+1), 1.25*float64(k))
		t.Logf("%s: planned %d × %s (%d GPUs), predicted TTFT p99 %s; simulator's fewest %d", name, planned,
			tn.Replicas[0].Slice, pl.Summary.GPUsUsed, tn.Predicted.TTFTP99.Std(), k)
		if float64(planned) > lim {
			t.Errorf("%s: planned %d replicas > max(k+1, 1.25k) = %g with k = %d", name, planned, lim, k)
		}
	}
}
