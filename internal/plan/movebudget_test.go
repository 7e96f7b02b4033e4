package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

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

// mpsPool is one node of eight H100s, MPS only, with a shared qwen2.5-1.5b tenant per name at a
// light load (eight of them share a GPU).
func mpsPool(t *testing.T, names []string) *v1.Pool {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: mps}\nfleet:\n  nodes:\n  - name: n0\n    gpus: [{board: H100-SXM5-80GB, count: 8}]\npolicy: {burstPoolPercent: 0, allowedModes: [mps]}\ntenants:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "- name: %s\n  model: {name: qwen2.5-1.5b}\n  isolation: shared\n  concurrency: 8\n  traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}\n  slo: {ttftP99: 2s, tpotP99: 100ms}\n", n)
	}
	pool, err := v1.LoadPool([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// A move budget below what re-packing needs re-packs part of the pool: 32 tenants on four MPS
// GPUs lose half of each GPU's tenants; re-packing moves four tenants from GPU 1 to GPU 0 and four
// from GPU 3 to GPU 2 (two independent changes, each freeing one GPU for four moves). With 4–7
// moves allowed one of them is made (three GPUs), with fewer none (the plan in force, four GPUs,
// only the dropped tenants stop), with 8 both; never more moves than allowed, every plan valid,
// and more budget never uses more GPUs.
func TestMaxMovesPartial(t *testing.T) {
	var names, half []string
	for i := range 32 {
		names = append(names, fmt.Sprintf("t%02d", i))
		if i%8 < 4 {
			half = append(half, names[i])
		}
	}
	first := build(t, mpsPool(t, names))
	if first.Summary.GPUsUsed != 4 {
		t.Fatalf("setup: 32 tenants on %d GPUs, want 4 of 8 each", first.Summary.GPUsUsed)
	}
	pool := mpsPool(t, half)
	free, err := Build(context.Background(), pool, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	if m := countMoves(Migration(first, free, 1)); m != 8 || free.Summary.GPUsUsed != 2 {
		t.Fatalf("setup: re-packing moves %d replicas onto %d GPUs, want 8 onto 2", m, free.Summary.GPUsUsed)
	}
	prev := 5
	for budget := 0; budget <= 8; budget++ {
		pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &budget})
		if err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		steps := Migration(first, pl, 1)
		moves := countMoves(steps)
		want := map[bool]int{true: 4, false: 3}[budget < 4]
		if budget == 8 {
			want = 2
		}
		if pl.Summary.GPUsUsed != want || moves > budget {
			t.Errorf("max-moves %d: %d GPUs with %d moves, want %d GPUs within the budget", budget, pl.Summary.GPUsUsed, moves, want)
		}
		if pl.Summary.GPUsUsed > prev {
			t.Errorf("max-moves %d: %d GPUs, more than with a smaller budget (%d)", budget, pl.Summary.GPUsUsed, prev)
		}
		prev = pl.Summary.GPUsUsed
		if budget >= 4 && budget < 8 {
			r := pl.Tenants[0].Reasons[len(pl.Tenants[0].Reasons)-1]
			if r.Code != v1.ReasonMoveBudget || !strings.Contains(r.Message, "partly re-packed") {
				t.Errorf("max-moves %d: last reason %s: %s", budget, r.Code, r.Message)
			}
			// every tenant's replica list mirrors the GPUs, numbered from 0
			for _, tn := range pl.Tenants {
				for i, r := range tn.Replicas {
					if r.Index != i {
						t.Errorf("max-moves %d: tenant %s replica %d has index %d", budget, tn.Name, i, r.Index)
					}
				}
			}
		}
	}
}

// bestParts is a 0/1 knapsack: within the budget, and as good as every subset (enumerated) for
// up to 10 components.
func TestBestPartsKnapsack(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 10).Draw(rt, "n")
		parts := make([]repackPart, n)
		var optional []int
		for i := range parts {
			parts[i] = repackPart{moves: rapid.IntRange(0, 6).Draw(rt, "moves"), saved: rapid.IntRange(1, 4).Draw(rt, "saved")}
			optional = append(optional, i)
		}
		budget := rapid.IntRange(0, 20).Draw(rt, "budget")
		got, gotMoves := 0, 0
		for _, i := range bestParts(parts, optional, budget) {
			got += parts[i].saved
			gotMoves += parts[i].moves
		}
		if gotMoves > budget {
			rt.Fatalf("%d moves over budget %d", gotMoves, budget)
		}
		best := 0
		for mask := 0; mask < 1<<n; mask++ {
			v, m := 0, 0
			for i := range n {
				if mask>>i&1 == 1 {
					v += parts[i].saved
					m += parts[i].moves
				}
			}
			if m <= budget && v > best {
				best = v
			}
		}
		if got != best {
			rt.Fatalf("saves %d GPUs, the best subset %d", got, best)
		}
	})
}
