package plan

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
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
	replayMigration(t, first, again, steps, 1)
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

// occupants names, per occupant of a plan (a tenant's replica, or a shared LoRA engine as
// "lora:NAME"), the slot it runs on ("OCCUPANT@SLOT"), with how many run there; an engine holds
// its whole GPU's slot.
func occupants(pl *v1.Plan) map[string]int {
	out := map[string]int{}
	for tn, ss := range replicaSlots(pl) {
		for _, s := range ss {
			out[tn+"@"+s.String()]++
		}
	}
	for _, e := range pl.LoRAEngines {
		out["lora:"+e.Name+"@"+e.GPU.String()]++
	}
	return out
}

// stepSlots are the occupant keys (as occupants names them) a replica or engine step leaves and
// takes ("" for none), as the step's public fields give them: a replica's From and To; an engine
// start's GPU, a stop's GPU, a move's From and To (its GPUs); an engine restarting in place
// leaves and takes nothing.
func stepSlots(s Step) (from, to string) {
	if s.LoRAEngine == "" {
		if s.From != "none" {
			from = s.Tenant + "@" + s.From
		}
		if s.To != "none" {
			to = s.Tenant + "@" + s.To
		}
		return from, to
	}
	k := "lora:" + s.LoRAEngine + "@"
	switch s.Kind {
	case StepStart:
		return "", k + s.GPU.String()
	case StepStop:
		return k + s.GPU.String(), ""
	case StepMove:
		return k + s.From, k + s.To
	}
	return "", ""
}

// replayMigration runs steps wave by wave over the occupants of cur's slots (replicas, and shared
// LoRA engines on their whole GPUs; by their names, as the steps give them) and fails the test
// when a replica or engine starts on a slot fuller than either plan holds it, when a GPU is
// reconfigured without a drain while something runs on it or before the last arrival onto it
// listed after it, when a wave runs more than maxUnavailable replica and engine steps, or when the
// end differs from next. A drain evicts what still runs on its GPU; a move holds both slots
// during its wave (the new one runs before the old one stops).
func replayMigration(t *testing.T, cur, next *v1.Plan, steps []Step, maxUnavailable int) {
	t.Helper()
	occ, want, most := occupants(cur), occupants(next), map[string]int{}
	slotOf := func(k string) string { return k[strings.Index(k, "@")+1:] }
	for k, n := range occ {
		most[slotOf(k)] += n
	}
	after := map[string]int{}
	for k, n := range want {
		after[slotOf(k)] += n
	}
	for k, n := range after {
		most[k] = max(most[k], n)
	}
	on := func(slotName string) int {
		n := 0
		for k, c := range occ {
			if slotOf(k) == slotName {
				n += c
			}
		}
		return n
	}
	onGPU := func(k string, g v1.GPURef) bool {
		sl := slotOf(k)
		return sl == g.String() || strings.HasPrefix(sl, g.String()+" ")
	}
	reconfigured := map[v1.GPURef]int{} // the wave each GPU step runs in
	for _, s := range steps {
		if s.Kind == StepGPU {
			reconfigured[s.GPU] = s.Wave
		}
	}
	drained := map[string]bool{}
	dec := func(k string) {
		if occ[k]--; occ[k] < 0 && drained[k] {
			occ[k] = 0
		}
	}
	for i := 0; i < len(steps); {
		j := i
		var leave []string
		moving := 0
		for ; j < len(steps) && steps[j].Wave == steps[i].Wave; j++ {
			s := steps[j]
			if s.Kind == StepGPU {
				for k, n := range occ {
					if n <= 0 || !onGPU(k, s.GPU) {
						continue
					}
					if !s.Drain {
						t.Errorf("wave %d: GPU %s is reconfigured without a drain while %s runs there", s.Wave, s.GPU, k)
					}
					occ[k], drained[k] = 0, true // what still runs on the GPU is evicted
				}
				continue
			}
			moving++
			from, to := stepSlots(s)
			if w, ok := reconfigured[s.GPU]; ok && to != "" && w > s.Wave {
				t.Errorf("wave %d: %s %s%s onto %s before the GPU is reconfigured in wave %d", s.Wave, s.Kind, s.Tenant, s.LoRAEngine, s.GPU, w)
			}
			if from != "" && s.Kind != StepMove {
				dec(from)
			}
			if to != "" {
				occ[to]++
				if n := on(slotOf(to)); n > most[slotOf(to)] {
					t.Errorf("wave %d: %s %s%s onto %s, which then runs %d replicas or engines (at most %d in either plan)",
						s.Wave, s.Kind, s.Tenant, s.LoRAEngine, slotOf(to), n, most[slotOf(to)])
				}
			}
			if from != "" && s.Kind == StepMove {
				leave = append(leave, from)
			}
		}
		if moving > maxUnavailable {
			t.Errorf("wave %d runs %d replica and engine steps, more than %d", steps[i].Wave, moving, maxUnavailable)
		}
		for _, k := range leave {
			dec(k)
		}
		i = j
	}
	for k, n := range occ {
		if n < 0 || n != want[k] {
			t.Errorf("after the migration %s runs %d, the plan %d", k, n, want[k])
		}
	}
	for k, n := range want {
		if occ[k] != n {
			t.Errorf("after the migration %s runs %d, the plan %d", k, occ[k], n)
		}
	}
}

// A replica does not start on a GPU another replica still runs on: it waits for that replica's
// move away (a chain of moves runs from its end), or for its stop, which comes forward; two
// tenants trading exclusive GPUs (a cycle) stop one replica first and start it once its new GPU
// is free. Each migration replays without a GPU over-full, within maxUnavailable, to the new plan.
func TestMigrationWaitsForSlots(t *testing.T) {
	wave := func(steps []Step, tenant, kind string) int {
		for _, s := range steps {
			if s.Tenant == tenant && s.Kind == kind {
				return s.Wave
			}
		}
		t.Fatalf("no %s step of %s in %+v", kind, tenant, steps)
		return 0
	}
	for _, mu := range []int{1, 2, 4} {
		// A chain: A moves onto B's GPU, B onto an idle one.
		cur, next := tpPlan(map[string][][]int{"a": {{0}}, "b": {{1}}}), tpPlan(map[string][][]int{"a": {{1}}, "b": {{2}}})
		steps := Migration(cur, next, mu)
		if wave(steps, "b", StepMove) >= wave(steps, "a", StepMove) {
			t.Errorf("maxUnavailable %d: a moves onto b's GPU before b leaves it: %+v", mu, steps)
		}
		replayMigration(t, cur, next, steps, mu)

		// A tenant leaves; a new one takes its GPU: the stop comes first.
		cur, next = tpPlan(map[string][][]int{"a": {{0}}, "d": {{1}}}), tpPlan(map[string][][]int{"c": {{0}}, "d": {{1}}})
		steps = Migration(cur, next, mu)
		if wave(steps, "a", StepStop) >= wave(steps, "c", StepStart) {
			t.Errorf("maxUnavailable %d: c starts on a's GPU before a stops: %+v", mu, steps)
		}
		replayMigration(t, cur, next, steps, mu)

		// Two tenants trade GPUs.
		cur, next = tpPlan(map[string][][]int{"a": {{0}}, "b": {{1}}}), tpPlan(map[string][][]int{"a": {{1}}, "b": {{0}}})
		steps = Migration(cur, next, mu)
		kinds := map[string]int{}
		for _, s := range steps {
			kinds[s.Kind]++
		}
		if kinds[StepStop] != 1 || kinds[StepMove] != 1 || kinds[StepStart] != 1 {
			t.Errorf("maxUnavailable %d: a trade of GPUs is %v, want a stop, a move and a start: %+v", mu, kinds, steps)
		}
		replayMigration(t, cur, next, steps, mu)

		// Without a conflict the waves are as before: moves in order, maxUnavailable a wave.
		cur, next = tpPlan(map[string][][]int{"a": {{0}}, "b": {{1}}, "c": {{2}}}), tpPlan(map[string][][]int{"a": {{3}}, "b": {{4}}, "c": {{5}}})
		steps = Migration(cur, next, mu)
		for i, s := range steps {
			if w := 1 + i/mu; s.Wave != w || s.Kind != StepMove {
				t.Errorf("maxUnavailable %d: step %d %+v, want a move in wave %d", mu, i, s, w)
			}
		}
	}
}

// Re-plans of synthetic pools whose tenants change (rates doubled or halved, some dropped, some
// added) replay wave by wave without a slot fuller than either plan holds it: the migration the
// planner lists can be carried out as listed, for the plan Build returns and for the re-pack.
func TestMigrationReplaysOnReplans(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 17))
		pool := Synthetic(SyntheticOptions{Tenants: 40, GPUs: 24, Varied: seed%2 == 1}, rng)
		first := build(t, pool)
		changed := *pool
		changed.Tenants = nil
		for i, tn := range pool.Tenants {
			switch rng.IntN(6) {
			case 0:
				continue // dropped
			case 1:
				tn.Traffic.RPS *= 2
			case 2:
				tn.Traffic.RPS /= 2
			}
			if i%7 == 0 {
				extra := tn
				extra.Name += "-new"
				changed.Tenants = append(changed.Tenants, extra)
			}
			changed.Tenants = append(changed.Tenants, tn)
		}
		// the plan Build returns, and the re-pack it weighed against the plan in force
		for _, only := range []bool{false, true} {
			again, err := Build(context.Background(), &changed, Options{Current: first, repackOnly: only})
			if err != nil {
				t.Fatal(err)
			}
			for _, mu := range []int{1, 3} {
				steps := Migration(first, again, mu)
				replayMigration(t, first, again, steps, mu)
				if t.Failed() {
					t.Fatalf("seed %d (re-pack: %v), maxUnavailable %d: %d steps", seed, only, mu, len(steps))
				}
				if mu == 1 {
					t.Logf("seed %d (re-pack: %v): %d steps, %d moves, %d GPUs (plan in force %d)", seed, only, len(steps), countMoves(steps), again.Summary.GPUsUsed, first.Summary.GPUsUsed)
				}
			}
		}
	}
}
