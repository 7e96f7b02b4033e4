package plan

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/sim"
)

// overContextPool is one qwen2.5-0.5b tenant (the model's maximum context 32,768 tokens) at rps
// req/s of in + 20 tokens of the given length law on one H100, maxContext as given (0: unset).
func overContextPool(t *testing.T, law v1.Lengths, in int, rps float64, maxContext int) *v1.Pool {
	t.Helper()
	mc := ""
	if maxContext > 0 {
		mc = fmt.Sprintf("  maxContext: %d\n", maxContext)
	}
	y := fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: overctx}
fleet:
  nodes:
  - name: node-0
    gpus:
    - {board: H100, count: 2}
policy: {burstPoolPercent: 0}
tenants:
- name: a
  isolation: hard
  model: {name: qwen2.5-0.5b}
%s  traffic: {rps: %g, inputTokens: %d, outputTokens: 20, lengths: %s}
  slo: {ttftP99: 20s, tpotP99: 200ms}
`, mc, rps, in, law)
	pool, err := v1.LoadPool([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestOverContextShare: a tenant whose length law puts more than 1 % of its requests above the
// --max-model-len the model's maximum allows is infeasible (SLOUnmet, saying so): vLLM answers
// those requests with an error, and the simulator counts them as misses. Below 1 % it is served
// and told the share. overContextShare agrees with the share of requests the simulator drops for
// their length on the planner's own replicas, and a tenant that sets maxContext has its lengths
// capped at it (no share).
func TestOverContextShare(t *testing.T) {
	// 8,000-token exponential prompts: e^(−32768/8000) ≈ 1.7 % longer than the context.
	pl := buildWith(t, overContextPool(t, v1.LengthsExponential, 8000, 0.5, 0), Options{})
	a := pl.Tenants[0]
	if !a.Infeasible || len(a.Replicas) > 0 {
		t.Fatalf("8,000-token exponential prompts: served on %d replicas, want infeasible", len(a.Replicas))
	}
	if !hasReason(a, v1.ReasonSLOUnmet, "longer than --max-model-len 32768") {
		t.Errorf("8,000-token exponential prompts: no SLOUnmet reason naming the context: %v", a.Reasons)
	}
	if sh := overContextShare(v1.Traffic{InputTokens: 8000, OutputTokens: 20, Lengths: v1.LengthsExponential}, 0, 32768); sh < 0.016 || sh > 0.018 {
		t.Errorf("overContextShare(8,000 + 20 exponential, 32768) = %.4f, want about 0.017", sh)
	}
	// Uniform lengths never exceed 1.5 × the means: the context admits them all.
	if sh := overContextShare(v1.Traffic{InputTokens: 20000, OutputTokens: 20, Lengths: v1.LengthsUniform}, 0, 32768); sh != 0 {
		t.Errorf("overContextShare(20,000 + 20 uniform, 32768) = %v, want 0", sh)
	}

	// 6,000-token prompts: about 0.43 %, served, told so; the simulator drops that share.
	for _, c := range []struct {
		law v1.Lengths
		in  int
	}{{v1.LengthsExponential, 6000}, {v1.LengthsUniform, 21900}} {
		pool := overContextPool(t, c.law, c.in, 4, 0)
		pl := buildWith(t, pool, Options{})
		a := pl.Tenants[0]
		want := overContextShare(pool.Tenants[0].Traffic, 0, 32768)
		if a.Infeasible || want <= 0 || want > overContextMiss {
			t.Fatalf("%s %d-token prompts: infeasible %v at a share of %.4f, want served below 1 %%: %v", c.law, c.in, a.Infeasible, want, a.Reasons)
		}
		if !anyReason(a, fmt.Sprintf("%.2f %% of its requests are longer than --max-model-len 32768", 100*want)) {
			t.Errorf("%s %d-token prompts: no reason tells the share %.2f %%: %v", c.law, c.in, 100*want, a.Reasons)
		}
		s, err := sim.New(sim.Input{Pool: pool, Plan: pl}, sim.Config{Duration: 5000 * time.Second, Seed: 1, Perf: perf.DefaultOptions()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tr := res.Report.Tenants[0]
		got := float64(tr.DroppedOverContext) / float64(tr.Arrived)
		t.Logf("%s %d-token prompts: the simulator dropped %d of %d (%.4f), the model says %.4f", c.law, c.in, tr.DroppedOverContext, tr.Arrived, got, want)
		// A binomial share of ~20,000 requests: within four standard deviations.
		if sd := math.Sqrt(want * (1 - want) / float64(tr.Arrived)); math.Abs(got-want) > 4*sd {
			t.Errorf("%s %d-token prompts: the simulator dropped %d of %d for their length (%.4f), the model says %.4f (sd %.4f)",
				c.law, c.in, tr.DroppedOverContext, tr.Arrived, got, want, sd)
		}
	}

	// maxContext set: the lengths are capped at it, nothing is refused and nothing is said.
	pl = buildWith(t, overContextPool(t, v1.LengthsExponential, 8000, 0.5, 32768), Options{})
	if a := pl.Tenants[0]; a.Infeasible || anyReason(a, "longer than --max-model-len") {
		t.Errorf("maxContext 32768: infeasible %v, reasons %v", a.Infeasible, a.Reasons)
	}
}

// anyReason reports whether one of tn's reasons, of whatever code, holds text.
func anyReason(tn v1.PlanTenant, text string) bool {
	for _, r := range tn.Reasons {
		if strings.Contains(r.Message, text) {
			return true
		}
	}
	return false
}
