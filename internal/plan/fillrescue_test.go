package plan

import (
	"context"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestFillPlanWeighedAfterRescue plans testdata/fill-rescue-9.yaml (the review's random pool
// rnd-205: 9 tenants on four boards, 48 GPUs). The limited choice serves all 9 tenants on 43
// GPUs. The fill plan leaves a tenant short of GPUs before the rescue and is refused there;
// weighed after the rescue and the steps after it (weighFill) it serves the same 9 tenants on 41,
// and is kept. Without the weighing the test fails.
func TestFillPlanWeighedAfterRescue(t *testing.T) {
	plan := func(o Options) *v1.Plan {
		pool := loadPool(t, "testdata/fill-rescue-9.yaml")
		pl, err := Build(context.Background(), pool, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatal(err)
		}
		return pl
	}
	served := func(pl *v1.Plan) []string {
		var s []string
		for _, tn := range pl.Tenants {
			if !tn.Infeasible {
				s = append(s, tn.Name)
			}
		}
		return s
	}
	before, after := plan(Options{noWeighFill: true}), plan(Options{})
	t.Logf("GPUs used %d, without weighing the fill plan after the rescue %d; served %d, %d",
		after.Summary.GPUsUsed, before.Summary.GPUsUsed, len(served(after)), len(served(before)))
	for _, name := range served(before) {
		if !slices.Contains(served(after), name) {
			t.Errorf("%s served without the weighing, not with it", name)
		}
	}
	if len(served(after)) != len(after.Tenants) {
		t.Errorf("served %v of %d tenants, want all", served(after), len(after.Tenants))
	}
	if after.Summary.GPUsUsed > 41 || after.Summary.GPUsUsed >= before.Summary.GPUsUsed {
		t.Errorf("%d GPUs used (without the weighing %d), want at most 41 and fewer", after.Summary.GPUsUsed, before.Summary.GPUsUsed)
	}
}
