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
	with, without := gpuSteps(Migration(first, next, 1)), gpuSteps(Migration(first, fresh, 1))
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

func gpuSteps(steps []Step) []Step {
	return slices.DeleteFunc(slices.Clone(steps), func(s Step) bool { return s.Kind != StepGPU })
}

// Re-planning lists every replica that starts, moves or stops, matched by slot: dropping two
// tenants stops their replicas (and nothing else moves when the GPUs keep their contents);
// moving one replica by hand between two GPUs is one move step from the old slot to the new,
// after the idle GPUs' wave and before the stops; at most maxUnavailable replica steps share a
// wave.
func TestReplanListsReplicaSteps(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	if steps := Migration(first, first, 1); len(steps) != 0 {
		t.Fatalf("a plan against itself: %+v", steps)
	}
	// Move chat-0's replica from its GPU to an idle copy of another GPU: edit a deep copy.
	next := clonePlan(first)
	var from, to int = -1, -1
	for i, g := range next.GPUs {
		if len(g.Replicas) == 1 && g.Replicas[0].Tenant == "chat-0" {
			from = i
		}
		if len(g.Replicas) == 1 && g.Replicas[0].Tenant == "chat-1" {
			to = i
		}
	}
	if from < 0 || to < 0 {
		t.Fatal("chat-0 and chat-1 no longer have a whole GPU each")
	}
	next.GPUs[to].Replicas = append(next.GPUs[to].Replicas, next.GPUs[from].Replicas[0])
	next.GPUs[from].Replicas = nil
	var moves []Step
	for _, s := range Migration(first, next, 1) {
		if s.Kind != StepGPU {
			moves = append(moves, s)
		}
	}
	want := Step{Kind: StepMove, Tenant: "chat-0", GPU: next.GPUs[to].Ref(), From: next.GPUs[from].Ref().String(), To: next.GPUs[to].Ref().String(), Wave: 1}
	if len(moves) != 1 || moves[0] != want {
		t.Errorf("replica steps %+v, want [%+v]", moves, want)
	}

	smaller := *pool
	smaller.Tenants = slices.DeleteFunc(slices.Clone(pool.Tenants), func(t v1.Tenant) bool {
		return t.Name == "product-0" || t.Name == "tools-1"
	})
	again, err := Build(context.Background(), &smaller, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	steps := Migration(first, again, 1)
	stops := map[string]int{}
	lastWave := 0
	for i, s := range steps {
		if s.Kind == StepStop {
			stops[s.Tenant]++
		}
		if s.Wave < lastWave {
			t.Errorf("step %d in wave %d after wave %d", i, s.Wave, lastWave)
		}
		if i > 0 && s.Kind != StepGPU && steps[i-1].Kind != StepGPU && s.Wave == steps[i-1].Wave {
			t.Errorf("two replica steps in wave %d with maxUnavailable 1", s.Wave)
		}
		lastWave = s.Wave
	}
	if stops["product-0"] != 1 || stops["tools-1"] != 1 {
		t.Errorf("stops %v, want product-0 and tools-1 once each", stops)
	}
	kinds := map[string]int{}
	for _, s := range steps {
		kinds[s.Kind]++
	}
	t.Logf("%d steps, %d replica steps: %v", len(steps), Moves(steps), kinds)
}

// clonePlan copies the GPU lists of pl deeply enough to edit replicas.
func clonePlan(pl *v1.Plan) *v1.Plan {
	c := *pl
	c.GPUs = slices.Clone(pl.GPUs)
	for i := range c.GPUs {
		c.GPUs[i].Replicas = slices.Clone(c.GPUs[i].Replicas)
	}
	return &c
}
