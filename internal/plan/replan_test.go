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

// tpPlan is a plan of node n0 whose GPUs run the given replicas: tenant → GPU groups (one index:
// an exclusive GPU; more: a tensor-parallel group).
func tpPlan(reps map[string][][]int) *v1.Plan {
	pl := &v1.Plan{}
	byGPU := map[int][]v1.PlanReplica{}
	for tn, groups := range reps {
		for i, g := range groups {
			r := v1.PlanReplica{Tenant: tn, Index: i}
			if len(g) > 1 {
				r.TensorParallel = v1.TensorParallel{Size: len(g), GPUs: g}
			}
			for _, x := range g {
				byGPU[x] = append(byGPU[x], r)
			}
		}
	}
	for i := range 8 {
		g := v1.PlanGPU{Node: "n0", Index: i, Board: "H100-SXM5-80GB", Role: v1.RoleIdle, Mode: v1.ModeExclusive}
		if rs := byGPU[i]; len(rs) > 0 {
			g.Role, g.Replicas = v1.RolePool, rs
		}
		pl.GPUs = append(pl.GPUs, g)
	}
	return pl
}

// A tensor-parallel group that grows over GPUs its tenant's old groups hold cannot start before
// they stop: two TP-2 replicas on GPUs 0–1 and 2–3 becoming one TP-4 on 0–3 is a stop of one
// (in an earlier wave) and a restart of the other, not a move that starts first. A group moving
// to GPUs nobody of its tenant holds stays a move (start, wait, stop), and a replica move budget
// counts restarts.
func TestTensorParallelOverlapSteps(t *testing.T) {
	cur := tpPlan(map[string][][]int{"t": {{0, 1}, {2, 3}}, "u": {{4, 5}}})
	next := tpPlan(map[string][][]int{"t": {{0, 1, 2, 3}}, "u": {{6, 7}}})
	steps := Migration(cur, next, 1)
	var stop, restart, move *Step
	for i, s := range steps {
		t.Logf("wave %d %s %s: %s -> %s", s.Wave, s.Kind, s.Tenant, s.From, s.To)
		switch {
		case s.Tenant == "t" && s.Kind == StepStop:
			stop = &steps[i]
		case s.Tenant == "t" && s.Kind == StepRestart:
			restart = &steps[i]
		case s.Tenant == "u" && s.Kind == StepMove:
			move = &steps[i]
		}
	}
	if len(steps) != 3 || stop == nil || restart == nil || move == nil {
		t.Fatalf("want a stop and a restart of t and a move of u, got %+v", steps)
	}
	if stop.From != "n0/2,3" || restart.From != "n0/0,1" || restart.To != "n0/0,1,2,3" {
		t.Errorf("stop %s, restart %s -> %s; want stop n0/2,3 and restart n0/0,1 -> n0/0,1,2,3", stop.From, restart.From, restart.To)
	}
	if stop.Wave >= restart.Wave {
		t.Errorf("the clearing stop is in wave %d, the restart in wave %d: it must come first", stop.Wave, restart.Wave)
	}
	if n := countMoves(replicaSteps(cur, next)); n != 2 {
		t.Errorf("countMoves = %d, want 2 (the restart and the move)", n)
	}
}
