package plan

import (
	"bytes"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// effortPlan plans pool as Build does, with set applied to the planner first, and returns the
// planner and the plan's JSON.
func effortPlan(t *testing.T, pool *v1.Pool, set func(*planner)) (*planner, []byte) {
	t.Helper()
	p := chosenPlannerWith(t, pool, Options{ConfirmRequests: -1}, set)
	pl, err := p.result()
	if err != nil {
		t.Fatal(err)
	}
	markEstimated(pl)
	out, err := v1.EncodeJSON(pl)
	if err != nil {
		t.Fatal(err)
	}
	return p, out
}

// TestReplanEffort pins the bounds on optimise's re-plans (ADR 0103) on two pools whose blocked
// retries keep their best plan before their last retry and count boards in nodes (review 13's
// d1, where withholdNodeMPS runs the retries twice, and a five-tenant pool held off time-slicing
// by a node rule): a retry loop makes no new choice and packing after a retry that kept the best
// plan as it was, so fewer are made than without the bound, for the same plan to the byte; and
// no plan without counting in nodes (withoutCounting) starts once optimise's packings have
// packed more tenants than the budget allows.
func TestReplanEffort(t *testing.T) {
	for _, path := range []string{"../../testdata/review13/d1-deviceplugin-mps-node-idle.yaml", "testdata/timeslice-hard-blocker.yaml"} {
		pool := loadPool(t, path)
		full, fullJSON := effortPlan(t, pool, func(p *planner) { p.fullEffort = true })
		bounded, boundedJSON := effortPlan(t, pool, func(*planner) {})
		t.Logf("%s: choices and packings (optimiseOnce) %d → %d, tenant-packings %d → %d, plans without counting %d → %d",
			pool.Metadata.Name, full.onces, bounded.onces, full.packedWork, bounded.packedWork, full.altPlans, bounded.altPlans)
		if bounded.onces >= full.onces {
			t.Errorf("%s: %d choices and packings with the bound, %d without: a retry after one that gained nothing still re-planned", pool.Metadata.Name, bounded.onces, full.onces)
		}
		if !bytes.Equal(fullJSON, boundedJSON) {
			t.Errorf("%s: the bound changed the plan", pool.Metadata.Name)
		}
		if bounded.altPlans == 0 {
			t.Fatalf("%s: no plan without counting in nodes: the pool no longer exercises the budget", pool.Metadata.Name)
		}
		// A budget of one packing of the pool's tenants: spent by the first choice's packings.
		tight, _ := effortPlan(t, pool, func(p *planner) { p.altWork = len(pool.Tenants) })
		if tight.altPlans >= bounded.altPlans || tight.altStart > tight.altWork {
			t.Errorf("%s: %d plans without counting at a budget of %d tenant-packings (the last started at %d), %d at the default",
				pool.Metadata.Name, tight.altPlans, tight.altWork, tight.altStart, bounded.altPlans)
		}
	}
}
