package sim

import (
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestRejectsBadPlans: a plan that does not match its pool is rejected before simulating, with
// every reason.
func TestRejectsBadPlans(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(pool *v1.Pool, plan *v1.Plan)
		wants []string
	}{
		{"unknown tenant", func(_ *v1.Pool, plan *v1.Plan) {
			plan.GPUs[0].Instances[0].Replicas[0].Tenant = "ghost"
		}, []string{`unknown tenant "ghost"`}},
		{"plan for another pool", func(_ *v1.Pool, plan *v1.Plan) { plan.Pool = "other" }, []string{`not "sim-small"`}},
		{"slice too small for the model", func(pool *v1.Pool, _ *v1.Plan) {
			// 70B in bf16 is ~141 GB of weights: it fits no 2g.20gb instance.
			pool.Tenants[2].Model = v1.Model{Name: "llama-3.1-70b"}
		}, []string{"tenant code", "slice too small for model llama-3.1-70b", "weights"}},
		{"KV cache shorter than one request", func(pool *v1.Pool, _ *v1.Plan) {
			// qwen2.5-7b bf16 (15.2 GB) on a 19 GiB MPS share leaves a KV cache of a few
			// thousand tokens, less than one 100000-token request.
			pool.Tenants[0].Model = v1.Model{Name: "qwen2.5-7b"}
			pool.Tenants[0].MaxContext = 131072
			pool.Tenants[0].Traffic.InputTokens = 100000
		}, []string{"tenant chat", "KV cache holds"}},
		{"two problems at once", func(pool *v1.Pool, plan *v1.Plan) {
			plan.GPUs[0].Instances[0].Replicas[0].Tenant = "ghost"
			plan.Pool = "other"
		}, []string{"ghost", `not "sim-small"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool, plan := loadPool(t, "pool-small.yaml"), loadPlan(t, "plan-small.yaml")
			c.edit(pool, plan)
			_, err := New(Input{Pool: pool, Plan: plan}, Config{Duration: time.Second})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestUniformPlan: every strategy gives a plan ValidatePlan accepts, with the expected slices.
func TestUniformPlan(t *testing.T) {
	pool := loadPool(t, "pool-small.yaml")
	cases := []struct {
		mode  v1.Mode
		slice v1.SliceKind
		check func(t *testing.T, g v1.PlanGPU)
	}{
		{v1.ModeMIG, v1.SliceMIG, func(t *testing.T, g v1.PlanGPU) {
			// three replicas on an H100: 3 × 3g.40gb needs 9 compute slices of 7, so 2g.20gb
			// (3 × 2 = 6 ≤ 7) is the largest that fits three times.
			if len(g.Instances) != 3 || g.Instances[0].Profile != "2g.20gb" {
				t.Errorf("instances %+v, want 3 × 2g.20gb", g.Instances)
			}
		}},
		{v1.ModeMPS, v1.SliceMPS, func(t *testing.T, g v1.PlanGPU) {
			// 100 / 3 = 33 % SMs each; 81559 MiB / 3 = 27186 MiB each.
			if r := g.Replicas[0]; r.Limits.SMPercent != 33 || r.Limits.Memory != v1.Bytes(27186<<20) {
				t.Errorf("limits %+v, want 33 %% and 27186 MiB", r.Limits)
			}
		}},
		{v1.ModeTimeSlice, v1.SliceTimeSlice, func(t *testing.T, g v1.PlanGPU) {
			if len(g.Replicas) != 3 {
				t.Errorf("%d replicas, want 3", len(g.Replicas))
			}
		}},
	}
	for _, c := range cases {
		t.Run(string(c.mode), func(t *testing.T) {
			plan, err := UniformPlan(pool, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			if err := v1.ValidatePlan(plan, pool); err != nil {
				t.Fatalf("invalid plan: %v", err)
			}
			if plan.Tenants[0].Replicas[0].Slice != c.slice {
				t.Errorf("slice %q, want %q", plan.Tenants[0].Replicas[0].Slice, c.slice)
			}
			c.check(t, plan.GPUs[0])
		})
	}
	if _, err := UniformPlan(pool, v1.ModeExclusive); err == nil || !strings.Contains(err.Error(), "3 replicas, 1 pool GPUs") {
		t.Errorf("exclusive with 3 tenants on 1 GPU: got %v", err)
	}
	if _, err := UniformPlan(pool, "quantum"); err == nil {
		t.Error("unknown strategy accepted")
	}
}
