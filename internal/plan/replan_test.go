package plan

import (
	"context"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Re-planning an unchanged pool against a plan whose GPUs were shuffled changes no GPU: every
// configuration is found where it already runs.
func TestReplanKeepsShuffledLayouts(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	cur := *first
	cur.GPUs = slices.Clone(first.GPUs)
	slices.Reverse(cur.GPUs)
	for i := range cur.GPUs { // the contents move, the GPU names stay in fleet order
		cur.GPUs[i].Node, cur.GPUs[i].Index = first.GPUs[i].Node, first.GPUs[i].Index
	}
	next, err := Build(context.Background(), pool, Options{Current: &cur})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, next); err != nil {
		t.Fatal(err)
	}
	if steps := Migration(&cur, next, 1); len(steps) != 0 {
		t.Errorf("%d steps, want none: %+v", len(steps), steps)
	}
	if steps := Migration(first, next, 1); len(steps) == 0 {
		t.Error("the shuffled plan differs from the first, but no step was listed")
	}
}

// Dropping tenants changes fewer GPUs with --current than without; busy GPUs are drained at
// most maxUnavailable per wave, after the GPUs that run nothing.
func TestReplanChangesFewGPUs(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	smaller := *pool
	smaller.Tenants = slices.DeleteFunc(slices.Clone(pool.Tenants), func(t v1.Tenant) bool {
		return t.Name == "product-0" || t.Name == "tools-1"
	})
	fresh := build(t, &smaller)
	next, err := Build(context.Background(), &smaller, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(&smaller, next); err != nil {
		t.Fatal(err)
	}
	with, without := Migration(first, next, 1), Migration(first, fresh, 1)
	t.Logf("%d GPU changes with the current plan, %d without", len(with), len(without))
	if len(with) > len(without) {
		t.Errorf("%d changes with the current plan, %d without", len(with), len(without))
	}
	for i, s := range with {
		if i > 0 && s.Drain && with[i-1].Drain && s.Wave == with[i-1].Wave {
			t.Errorf("two drains in wave %d with maxUnavailable 1", s.Wave)
		}
		if i > 0 && !s.Drain && with[i-1].Drain {
			t.Errorf("idle GPU %s after a drain", s.GPU)
		}
	}
}
