package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// --max-moves on the articles' node after dropping two tenants: re-packing moves some replicas;
// with a budget at least that large the re-packed plan stands, with a smaller one the plan in
// force is kept (no replica moves, the dropped tenants' replicas stop), every tenant says how
// many GPUs that gives up, and the kept plan is valid for the smaller pool.
func TestMaxMoves(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	smaller := *pool
	smaller.Tenants = slices.DeleteFunc(slices.Clone(pool.Tenants), func(t v1.Tenant) bool {
		return t.Name == "product-0" || t.Name == "tools-1"
	})
	free, err := Build(context.Background(), &smaller, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	moves := countMoves(Migration(first, free, 1))
	if moves == 0 {
		t.Fatal("re-packing moves nothing; the test needs a pool where it does")
	}
	same, err := Build(context.Background(), &smaller, Options{Current: first, MaxMoves: &moves})
	if err != nil {
		t.Fatal(err)
	}
	if same.Summary.GPUsUsed != free.Summary.GPUsUsed || countMoves(Migration(first, same, 1)) != moves {
		t.Errorf("with max-moves %d = the moves needed: %d GPUs, want the re-packed %d", moves, same.Summary.GPUsUsed, free.Summary.GPUsUsed)
	}
	less := moves - 1
	kept, err := Build(context.Background(), &smaller, Options{Current: first, MaxMoves: &less})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(&smaller, kept); err != nil {
		t.Fatal(err)
	}
	steps := Migration(first, kept, 1)
	if n := countMoves(steps); n > less {
		t.Errorf("%d moves with max-moves %d", n, less)
	}
	for _, s := range steps {
		if s.Kind != StepStop || (s.Tenant != "product-0" && s.Tenant != "tools-1") {
			t.Errorf("step %+v: keeping the plan in force should only stop the dropped tenants", s)
		}
	}
	if kept.Summary.GPUsUsed < free.Summary.GPUsUsed {
		t.Errorf("kept plan uses %d GPUs, fewer than the re-packed %d", kept.Summary.GPUsUsed, free.Summary.GPUsUsed)
	}
	for _, tn := range kept.Tenants {
		r := tn.Reasons[len(tn.Reasons)-1]
		if r.Code != v1.ReasonMoveBudget || !strings.Contains(r.Message, "max-moves") {
			t.Errorf("tenant %s: last reason %s: %s", tn.Name, r.Code, r.Message)
		}
	}
	t.Logf("re-packed: %d GPUs, %d moves; kept: %d GPUs (%s)", free.Summary.GPUsUsed, moves, kept.Summary.GPUsUsed,
		kept.Tenants[0].Reasons[len(kept.Tenants[0].Reasons)-1].Message)
}

// A pool the plan in force cannot serve (a tenant's load doubled) with a budget the re-packing
// exceeds is an error naming the tenant, never a plan with more moves than allowed.
func TestMaxMovesCannotKeep(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	busier := *pool
	busier.Tenants = slices.Clone(pool.Tenants)
	busier.Tenants[0].Traffic.RPS *= 4
	free, err := Build(context.Background(), &busier, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	moves := countMoves(Migration(first, free, 1))
	if moves == 0 {
		t.Skip("re-packing moves nothing here")
	}
	zero := 0
	_, err = Build(context.Background(), &busier, Options{Current: first, MaxMoves: &zero})
	if err == nil || !strings.Contains(err.Error(), "tenant "+busier.Tenants[0].Name) || !strings.Contains(err.Error(), "max-moves 0") {
		t.Errorf("err = %v, want one naming tenant %s and max-moves 0", err, busier.Tenants[0].Name)
	}
}
