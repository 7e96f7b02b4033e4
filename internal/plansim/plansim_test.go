package plansim

import (
	"context"
	"os"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// Run reports every tenant of a planned pool, and the planner given it confirms the counts: a
// Simulated reason on the tenant, none without it.
func TestRunConfirmsThePlan(t *testing.T) {
	doc, err := os.ReadFile("../plan/testdata/confirm-single.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := v1.LoadPool(doc)
	if err != nil {
		t.Fatal(err)
	}
	simulated := func(o plan.Options) string {
		pl, err := plan.Build(context.Background(), pool, o)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := pl.Tenants[0].Reason(v1.ReasonSimulated)
		return r.Message
	}
	if r := simulated(plan.Options{Simulate: Run}); !strings.Contains(r, "simulated runs of the plan at 14 replica(s)") {
		t.Errorf("with Run: Simulated reason %q", r)
	}
	if r := simulated(plan.Options{}); r != "" {
		t.Errorf("without a simulator: Simulated reason %q", r)
	}
	pl, err := plan.Build(context.Background(), pool, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), plan.SimInput{Pool: pool, Plan: pl, Duration: 600e9, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := got["t0"]; !ok || tr.Judged < 1000 || tr.Attainment < 0.99 || tr.TTFTP99 <= 0 || tr.TPOTP99 <= 0 {
		t.Errorf("t0 over ten minutes at 10.3 req/s: %+v", got["t0"])
	}
}
