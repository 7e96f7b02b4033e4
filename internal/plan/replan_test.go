package plan

import (
	"context"
	"fmt"
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

// slotCells are the cells a slot name (as slot.String writes it) occupies: its MIG instance
// ("n0/1 3g.40gb@0"), or each whole GPU it holds ("n0/1"; a tensor-parallel group "n0/0,1"
// holds "n0/0" and "n0/1").
func slotCells(name string) []string {
	if strings.Contains(name, " ") {
		return []string{name}
	}
	i := strings.LastIndexByte(name, '/')
	var out []string
	for _, x := range strings.Split(name[i+1:], ",") {
		out = append(out, name[:i+1]+x)
	}
	return out
}

// cellGPU is the GPU ("node/index") a cell is on.
func cellGPU(cell string) string {
	if i := strings.IndexByte(cell, ' '); i >= 0 {
		return cell[:i]
	}
	return cell
}

// replayMigration runs steps wave by wave over the occupants of cur's slots (replicas, and shared
// LoRA engines on their whole GPUs; by their names, as the steps give them) and fails the test
// when a replica or engine starts on a cell (a MIG instance, or a whole GPU: each GPU of a
// tensor-parallel group) fuller than either plan holds it, or on a whole GPU while a MIG instance
// of it still runs something (or the reverse), when a GPU is reconfigured without a drain while
// something runs on it or before the last arrival onto it listed after it (any GPU of a group),
// when a wave runs more than maxUnavailable replica and engine steps, or when the end differs
// from next. A drain evicts what still runs on its GPU (a group on any of its GPUs); a move holds
// both slots during its wave (the new one runs before the old one stops).
func replayMigration(t *testing.T, cur, next *v1.Plan, steps []Step, maxUnavailable int) {
	t.Helper()
	occ, want, most := occupants(cur), occupants(next), map[string]int{}
	slotOf := func(k string) string { return k[strings.Index(k, "@")+1:] }
	for k, n := range occ {
		for _, x := range slotCells(slotOf(k)) {
			most[x] += n
		}
	}
	after := map[string]int{}
	for k, n := range want {
		for _, x := range slotCells(slotOf(k)) {
			after[x] += n
		}
	}
	for k, n := range after {
		most[k] = max(most[k], n)
	}
	on := func(cell string) (same, other int) {
		for k, c := range occ {
			for _, x := range slotCells(slotOf(k)) {
				switch {
				case x == cell:
					same += c
				case cellGPU(x) == cellGPU(cell) && (x == cellGPU(x)) != (cell == cellGPU(cell)):
					other += c // a whole GPU and a MIG instance of it
				}
			}
		}
		return same, other
	}
	onGPU := func(k string, g v1.GPURef) bool {
		for _, x := range slotCells(slotOf(k)) {
			if cellGPU(x) == g.String() {
				return true
			}
		}
		return false
	}
	reconfigured := map[string]int{} // the wave each GPU step runs in
	for _, s := range steps {
		if s.Kind == StepGPU {
			reconfigured[s.GPU.String()] = s.Wave
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
			if from != "" && s.Kind != StepMove {
				dec(from)
			}
			if to != "" {
				occ[to]++
				for _, x := range slotCells(slotOf(to)) {
					if w, ok := reconfigured[cellGPU(x)]; ok && w > s.Wave {
						t.Errorf("wave %d: %s %s%s onto %s before GPU %s is reconfigured in wave %d", s.Wave, s.Kind, s.Tenant, s.LoRAEngine, slotOf(to), cellGPU(x), w)
					}
					if n, other := on(x); n > most[x] || other > 0 {
						t.Errorf("wave %d: %s %s%s onto %s while %s is still held: it then runs %d replicas or engines (at most %d in either plan), %d more on %s",
							s.Wave, s.Kind, s.Tenant, s.LoRAEngine, slotOf(to), x, n, most[x], other, cellGPU(x))
					}
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
	for seed, pr := range replanPairs(t) {
		first, again := pr[0], pr[1]
		for _, mu := range []int{1, 3} {
			steps := Migration(first, again, mu)
			replayMigration(t, first, again, steps, mu)
			if t.Failed() {
				t.Fatalf("seed %d, maxUnavailable %d: %d steps", seed, mu, len(steps))
			}
		}
	}
}

// fullReplanPairs are as replanPairs, on fleets of 8, 12 and 16 GPUs that the first plans fill
// or nearly fill, so that the re-plans move replicas from GPUs that are drained onto others.
// These are the plain re-packs (Options.repackOnly), whose migrations move the most.
func fullReplanPairs(t *testing.T) [][2]*v1.Plan {
	t.Helper()
	var out [][2]*v1.Plan
	for _, n := range []int{8, 12, 16} {
		_, repacked := changedPairs(t, n)
		out = append(out, repacked...)
	}
	return out
}

// replanPairs are six synthetic pools' plans and their re-plans against them after the tenants
// changed (rates doubled or halved, about a sixth dropped, some added), two pairs per seed: the
// plan Build returns, and the re-pack it weighed against the plan in force (Options.repackOnly).
func replanPairs(t *testing.T) [][2]*v1.Plan {
	weighed, repacked := changedPairs(t, 24)
	return append(weighed, repacked...)
}

// changedPairs are replanPairs for 40 tenants on fleets of n GPUs: the plans Build returns and
// the plain re-packs, one of each per seed.
func changedPairs(t *testing.T, n int) (weighed, repacked [][2]*v1.Plan) {
	t.Helper()
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 17))
		pool := Synthetic(SyntheticOptions{Tenants: 40, GPUs: n, Varied: seed%2 == 1}, rng)
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
		for _, only := range []bool{false, true} {
			again, err := Build(context.Background(), &changed, Options{Current: first, repackOnly: only})
			if err != nil {
				t.Fatal(err)
			}
			if only {
				repacked = append(repacked, [2]*v1.Plan{first, again})
			} else {
				weighed = append(weighed, [2]*v1.Plan{first, again})
			}
		}
	}
	return weighed, repacked
}

// withMPS makes GPU idx of pl an MPS GPU shared by one replica of each of tenants.
func withMPS(pl *v1.Plan, idx int, tenants ...string) *v1.Plan {
	g := &pl.GPUs[idx]
	g.Role, g.Mode, g.Replicas, g.Instances = v1.RolePool, v1.ModeMPS, nil, nil
	for _, tn := range tenants {
		g.Replicas = append(g.Replicas, v1.PlanReplica{Tenant: tn})
	}
	return pl
}

// A tensor-parallel group does not start on a GPU another group, replica or MIG instance still
// holds: a group that shifts on its own tenant's GPUs restarts (stop, then start); another
// tenant's group that takes a GPU of a group leaving waits for its move away or its stop; two
// groups that take each other's GPUs (a cycle) stop one first; a group onto a GPU that is drained
// (MIG or MPS now) starts after the drain, even when its first GPU is not drained. Each migration
// replays with every GPU of a group counted, within maxUnavailable, to the new plan.
func TestMigrationOrdersOverlappingTensorParallelGroups(t *testing.T) {
	type tpReps = map[string][][]int
	find := func(steps []Step, who, kind string) *Step {
		for i, s := range steps {
			if s.Tenant == who && s.Kind == kind {
				return &steps[i]
			}
		}
		return nil
	}
	gpuStep := func(steps []Step, idx int) *Step {
		for i, s := range steps {
			if s.Kind == StepGPU && s.GPU.Index == idx {
				return &steps[i]
			}
		}
		return nil
	}
	cases := []struct {
		name      string
		cur, next *v1.Plan
		// before: pairs of (who, kind) whose step must come in an earlier wave than the next pair's
		before [][4]string
		check  func(t *testing.T, steps []Step)
	}{
		{name: "a group shifts onto a GPU it holds",
			cur:  tpPlan(tpReps{"a": {{0, 1}}}),
			next: tpPlan(tpReps{"a": {{1, 2}}}),
			check: func(t *testing.T, steps []Step) {
				if r := find(steps, "a", StepRestart); len(steps) != 1 || r == nil || r.From != "n0/0,1" || r.To != "n0/1,2" {
					t.Errorf("want one restart of a from n0/0,1 to n0/1,2")
				}
			}},
		{name: "another tenant's group takes a GPU of a group that stops",
			cur:    tpPlan(tpReps{"a": {{0, 1}}}),
			next:   tpPlan(tpReps{"b": {{1, 2}}}),
			before: [][4]string{{"a", StepStop, "b", StepStart}}},
		{name: "another tenant's group takes a GPU of a group that moves away",
			cur:    tpPlan(tpReps{"a": {{0, 1}}, "b": {{6, 7}}}),
			next:   tpPlan(tpReps{"a": {{4, 5}}, "b": {{1, 2}}}),
			before: [][4]string{{"a", StepMove, "b", StepMove}}},
		{name: "a group takes the GPU of an exclusive replica that moves away",
			cur:    tpPlan(tpReps{"a": {{1}}}),
			next:   tpPlan(tpReps{"a": {{5}}, "b": {{0, 1}}}),
			before: [][4]string{{"a", StepMove, "b", StepStart}}},
		{name: "two groups take each other's GPUs",
			cur:  tpPlan(tpReps{"a": {{0, 1}}, "b": {{3, 4}}}),
			next: tpPlan(tpReps{"a": {{3, 4}}, "b": {{1, 2}}}),
			check: func(t *testing.T, steps []Step) {
				kinds := map[string]int{}
				for _, s := range steps {
					kinds[s.Kind]++
				}
				if kinds[StepStop] != 1 || kinds[StepMove] != 1 || kinds[StepStart] != 1 {
					t.Errorf("a cycle of groups is %v, want a stop, a move and a start", kinds)
				}
			}},
		{name: "a group's second GPU is a MIG GPU now",
			cur:  withMIG(tpPlan(tpReps{"a": {{7}}}), 1, "c"),
			next: tpPlan(tpReps{"a": {{7}}, "b": {{0, 1}}}),
			check: func(t *testing.T, steps []Step) {
				g, b := gpuStep(steps, 1), find(steps, "b", StepStart)
				if g == nil || !g.Drain || b == nil || g.Wave >= b.Wave {
					t.Errorf("GPU step %+v, start %+v: want n0/1 drained before b starts", g, b)
				}
			}},
		{name: "a group's second GPU is an MPS GPU now",
			cur:  withMPS(tpPlan(tpReps{"c": {{5}}}), 1, "c", "d"),
			next: tpPlan(tpReps{"c": {{5}, {6}}, "d": {{7}}, "b": {{0, 1}}}),
			check: func(t *testing.T, steps []Step) {
				g, b := gpuStep(steps, 1), find(steps, "b", StepStart)
				if g == nil || !g.Drain || b == nil || g.Wave >= b.Wave {
					t.Errorf("GPU step %+v, start %+v: want n0/1 drained before b starts", g, b)
				}
			}},
	}
	for _, mu := range []int{1, 2, 3} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/maxUnavailable %d", c.name, mu), func(t *testing.T) {
				steps := Migration(c.cur, c.next, mu)
				for _, s := range steps {
					t.Logf("wave %d %s %s on %s drain %v: %s -> %s", s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
				}
				for _, b := range c.before {
					x, y := find(steps, b[0], b[1]), find(steps, b[2], b[3])
					if x == nil || y == nil {
						t.Fatalf("no %s of %s or no %s of %s", b[1], b[0], b[3], b[2])
					}
					if x.Wave >= y.Wave {
						t.Errorf("the %s of %s is in wave %d, the %s of %s in wave %d: it must come first", b[1], b[0], x.Wave, b[3], b[2], y.Wave)
					}
				}
				if c.check != nil {
					c.check(t, steps)
				}
				replayMigration(t, c.cur, c.next, steps, mu)
			})
		}
	}
}

// serviceGaps replays steps over cur's occupants (as replayMigration names them) and counts, per
// tenant and shared LoRA engine ("lora:NAME") that runs in both cur and next, the waves during
// which it runs nothing at some moment (gaps), and over all of them the replica-waves short:
// per wave, how many fewer replicas or engines than the fewer of its two plans' counts it runs at
// its lowest. Within a wave, stops, restarts (the old one stops first), drains' evictions and an
// engine's move (its pod stops before the new one starts) leave first; starts and moves' new
// replicas arrive at its end, and a move's old replica leaves then (if a drain has not evicted
// it).
func serviceGaps(cur, next *v1.Plan, steps []Step) (gaps map[string]int, short int) {
	occ := occupants(cur)
	who := func(k string) string { return k[:strings.Index(k, "@")] }
	slotOf := func(k string) string { return k[strings.Index(k, "@")+1:] }
	running, want := map[string]int{}, map[string]int{}
	for k, n := range occ {
		running[who(k)] += n
	}
	for k, n := range occupants(next) {
		want[who(k)] += n
	}
	floor := map[string]int{}
	for w, n := range running {
		if m := min(n, want[w]); m > 0 {
			floor[w] = m
		}
	}
	gaps = map[string]int{}
	leave := func(k string) {
		if occ[k] > 0 {
			occ[k]--
			running[who(k)]--
		}
	}
	for i := 0; i < len(steps); {
		j := i
		var arrive, late []string
		for ; j < len(steps) && steps[j].Wave == steps[i].Wave; j++ {
			s := steps[j]
			if s.Kind == StepGPU {
				for k, n := range occ {
					for _, x := range slotCells(slotOf(k)) {
						if n > 0 && cellGPU(x) == s.GPU.String() {
							occ[k], running[who(k)] = 0, running[who(k)]-n
							break
						}
					}
				}
				continue
			}
			from, to := stepSlots(s)
			if from != "" {
				if s.Kind == StepMove && s.LoRAEngine == "" {
					late = append(late, from)
				} else {
					leave(from)
				}
			}
			if to != "" {
				arrive = append(arrive, to)
			}
		}
		for w, f := range floor {
			if running[w] <= 0 {
				gaps[w]++
			}
			short += max(f-running[w], 0)
		}
		for _, k := range late {
			leave(k)
		}
		for _, k := range arrive {
			occ[k]++
			running[who(k)]++
		}
		i = j
	}
	return gaps, short
}

// TestMigrationServiceGaps sums serviceGaps over the re-plans that TestMigrationReplaysOnReplans and
// TestMigrationReplaysLoRARePlans replay, and over re-plans of fleets the first plan fills
// (fullReplanPairs, replayed here): the waves some tenant or engine runs nothing, how many
// tenants or engines that happens to, and the replica-waves short. Drained GPUs' replicas that
// move onto other drained GPUs start there before their own GPU is drained, so the drains evict
// few of them.
func TestMigrationServiceGaps(t *testing.T) {
	type total struct{ gaps, who, short, waves int }
	var all [3]total
	add := func(k int, cur, next *v1.Plan, steps []Step) {
		gaps, short := serviceGaps(cur, next, steps)
		for _, n := range gaps {
			all[k].gaps += n
			all[k].who++
		}
		all[k].short += short
		if len(steps) > 0 {
			all[k].waves += steps[len(steps)-1].Wave
		}
	}
	for _, pr := range replanPairs(t) {
		for _, mu := range []int{1, 3} {
			add(0, pr[0], pr[1], Migration(pr[0], pr[1], mu))
		}
	}
	for _, pr := range loraReplanPairs(t) {
		for _, mu := range []int{1, 2, 3} {
			add(1, pr[0], pr[1], Migration(pr[0], pr[1], mu))
		}
	}
	for _, pr := range fullReplanPairs(t) {
		for _, mu := range []int{1, 3} {
			steps := Migration(pr[0], pr[1], mu)
			replayMigration(t, pr[0], pr[1], steps, mu)
			add(2, pr[0], pr[1], steps)
		}
	}
	for k, name := range []string{"synthetic re-plans", "LoRA re-plans", "re-plans of full fleets"} {
		t.Logf("%s: %d waves without service over %d tenants or engines, %d replica-waves short, %d waves", name, all[k].gaps, all[k].who, all[k].short, all[k].waves)
	}
	// Measured: 0, 3 (the engines' moves, stop-then-start) and 48 waves without service over 873
	// waves; with every drain before the moves onto drained GPUs, 0, 3 and 547 over 854. Since
	// tenants short of GPUs on these overloaded fleets try their other candidates on idle GPUs
	// (rescueShort) and give their placements up to others (ADR 0041), both plans of a pair place
	// more tenants and their re-packs differ: 126 over 902 waves with the same ordering. Since
	// a packing left short by a node rule makes the next choices count whole-GPU MPS in whole
	// nodes (countNodes), these fleets' plans serve 1,338 of the pairs' 1,416 tenant plans where
	// they served 919, and more tenants move: 169 over 784 waves.
	if all[0].gaps > 0 || all[1].gaps > 3 {
		t.Errorf("waves without service: %d on the synthetic re-plans (want 0), %d on the LoRA re-plans (want at most 3)", all[0].gaps, all[1].gaps)
	}
	if all[2].gaps > 180 || all[2].waves > 960 {
		t.Errorf("re-plans of full fleets: %d waves without service over %d waves, want at most 180 over at most 960", all[2].gaps, all[2].waves)
	}
}

// A replica that keeps its slot on a GPU that is drained (an MPS GPU that becomes exclusive for
// one of its tenants) is evicted by the drain and restarts in place after it; before, no step
// brought it back.
func TestMigrationRestartsKeptReplicasOnDrainedGPUs(t *testing.T) {
	cur := withMPS(tpPlan(map[string][][]int{}), 0, "a", "b", "c")
	next := tpPlan(map[string][][]int{"c": {{0}}, "a": {{1}}, "b": {{2}}})
	for _, mu := range []int{1, 2} {
		steps := Migration(cur, next, mu)
		var drain, restart *Step
		for i, s := range steps {
			t.Logf("wave %d %s %s on %s drain %v: %s -> %s", s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
			switch {
			case s.Kind == StepGPU:
				drain = &steps[i]
			case s.Tenant == "c":
				restart = &steps[i]
			}
		}
		if drain == nil || !drain.Drain || restart == nil || restart.Kind != StepRestart || restart.From != "n0/0" || restart.To != "n0/0" || restart.Wave <= drain.Wave {
			t.Errorf("maxUnavailable %d: drain %+v, c's step %+v: want c restarted on n0/0 after the drain", mu, drain, restart)
		}
		replayMigration(t, cur, next, steps, mu)
	}
}

// A replica that moves off a GPU that is drained onto another drained GPU starts there once
// that GPU is drained, before its own GPU is drained (make-before-break): it is never evicted.
// GPUs whose replicas move onto each other (a cycle) are drained in one wave when
// maxUnavailable allows, not in the waves the fleet order gives them. Before, every drain came
// first and the moves onto drained GPUs after all of them, so the replica was down from its
// GPU's drain to its move.
func TestMigrationMakesBeforeBreakingDrainedGPUs(t *testing.T) {
	gapsOf := func(cur, next *v1.Plan, steps []Step) map[string]int {
		g, _ := serviceGaps(cur, next, steps)
		return g
	}
	// a (MIG on GPU 0) moves onto GPU 1, which b (exclusive) leaves for idle GPU 5; c takes
	// GPU 0 once a has left it.
	cur := withMIG(tpPlan(map[string][][]int{"b": {{1}}}), 0, "a")
	next := withMIG(tpPlan(map[string][][]int{"b": {{5}}, "c": {{0}}}), 1, "a")
	for _, mu := range []int{1, 2, 3} {
		steps := Migration(cur, next, mu)
		wave := map[string]int{}
		for _, s := range steps {
			t.Logf("maxUnavailable %d: wave %d %s %s on %s drain %v: %s -> %s", mu, s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
			if s.Kind == StepGPU {
				wave[s.GPU.String()] = s.Wave
			} else {
				wave[s.Tenant] = s.Wave
			}
		}
		if !(wave["n0/1"] < wave["a"] && wave["a"] < wave["n0/0"]) {
			t.Errorf("maxUnavailable %d: GPU 1 drained in wave %d, a moves in %d, GPU 0 drained in %d: want them in that order", mu, wave["n0/1"], wave["a"], wave["n0/0"])
		}
		if g := gapsOf(cur, next, steps); len(g) > 0 {
			t.Errorf("maxUnavailable %d: waves without service %v, want none", mu, g)
		}
		replayMigration(t, cur, next, steps, mu)
	}

	// The same with shared LoRA engine e, which moves off GPU 1 (becoming a MIG GPU for b) onto
	// GPU 0, which a (MIG now) leaves for GPU 5: e is down only during its own move's wave (its
	// pod stops before the new one starts).
	cur = withEngine(withMIG(tpPlan(map[string][][]int{}), 0, "a"), "e", 1)
	next = withMIG(withEngine(tpPlan(map[string][][]int{"a": {{5}}}), "e", 0), 1, "b")
	for _, mu := range []int{1, 2, 3} {
		steps := Migration(cur, next, mu)
		wave := map[string]int{}
		for _, s := range steps {
			t.Logf("engine, maxUnavailable %d: wave %d %s %s%s on %s drain %v: %s -> %s", mu, s.Wave, s.Kind, s.Tenant, s.LoRAEngine, s.GPU, s.Drain, s.From, s.To)
			if s.Kind == StepGPU {
				wave[s.GPU.String()] = s.Wave
			} else {
				wave[s.Tenant+s.LoRAEngine] = s.Wave
			}
		}
		if !(wave["n0/0"] < wave["e"] && wave["e"] < wave["n0/1"]) {
			t.Errorf("maxUnavailable %d: GPU 0 drained in wave %d, e moves in %d, GPU 1 drained in %d: want them in that order", mu, wave["n0/0"], wave["e"], wave["n0/1"])
		}
		if g := gapsOf(cur, next, steps); len(g) != 1 || g["lora:e"] != 1 {
			t.Errorf("maxUnavailable %d: waves without service %v, want 1 for e's move alone", mu, g)
		}
		replayMigration(t, cur, next, steps, mu)
	}

	// GPUs 0 and 3 trade their tenants (a cycle); GPUs 1 and 2 are drained too, their replicas
	// moving to idle GPUs. With maxUnavailable 2 the cycle's GPUs are drained in one wave, and
	// a and d are down for two waves each (the drain's and their start's).
	cur = withMIG(withMIG(withMIG(tpPlan(map[string][][]int{"d": {{3}}}), 0, "a"), 1, "b"), 2, "c")
	next = withMIG(tpPlan(map[string][][]int{"d": {{0}}, "b": {{5}}, "c": {{6}}}), 3, "a")
	steps := Migration(cur, next, 2)
	drains := map[int]int{}
	for _, s := range steps {
		t.Logf("cycle: wave %d %s %s on %s drain %v: %s -> %s", s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
		if s.Kind == StepGPU {
			drains[s.GPU.Index] = s.Wave
		}
	}
	if drains[0] == 0 || drains[0] != drains[3] {
		t.Errorf("GPUs 0 and 3 drained in waves %d and %d, want one wave", drains[0], drains[3])
	}
	if g := gapsOf(cur, next, steps); g["a"] > 2 || g["d"] > 2 || len(g) > 2 {
		t.Errorf("waves without service %v, want at most 2 for a and d, none for others", g)
	}
	replayMigration(t, cur, next, steps, 2)
}

// The drains' order copes with what blocks it: a tensor-parallel group that grows onto a
// drained GPU restarts after its clearing stop and the drain; a replica that must leave a
// drained GPU for a GPU held by a chain of moves that comes back to that drained GPU is ordered
// without a deadlock (one move of the chain splits, or the GPU is drained with the replica on
// it). Each replays, within maxUnavailable, to the new plan.
func TestMigrationDrainsWhatBlocks(t *testing.T) {
	for _, mu := range []int{1, 2, 3} {
		// t's TP-2 groups on 0–1 and 3–4 become one TP-4 on 0–3; GPU 2 is a MIG GPU now, its
		// replica moving to GPU 6.
		cur := withMIG(tpPlan(map[string][][]int{"t": {{0, 1}, {3, 4}}}), 2, "c")
		next := tpPlan(map[string][][]int{"t": {{0, 1, 2, 3}}, "c": {{6}}})
		steps := Migration(cur, next, mu)
		wave := map[string]int{}
		for _, s := range steps {
			t.Logf("grow, maxUnavailable %d: wave %d %s %s on %s drain %v: %s -> %s", mu, s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
			wave[s.Kind+" "+s.Tenant] = s.Wave
		}
		if !(wave["stop t"] < wave["restart t"] && wave["gpu "] < wave["restart t"] && wave["move c"] < wave["gpu "]) {
			t.Errorf("maxUnavailable %d: waves %v: want c's move, then the drain and t's clearing stop, then its restart", mu, wave)
		}
		replayMigration(t, cur, next, steps, mu)

		// r leaves drained GPU 0 for GPU 5, which a leaves for GPU 6, which b leaves for GPU 0.
		cur = withMIG(tpPlan(map[string][][]int{"a": {{5}}, "b": {{6}}}), 0, "r")
		next = tpPlan(map[string][][]int{"r": {{5}}, "a": {{6}}, "b": {{0}}})
		steps = Migration(cur, next, mu)
		for _, s := range steps {
			t.Logf("chain, maxUnavailable %d: wave %d %s %s on %s drain %v: %s -> %s", mu, s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
		}
		replayMigration(t, cur, next, steps, mu)

		// t's TP-2 group shifts from 0–1 to 1–2, where u runs; u moves onto GPU 0, which becomes
		// a MIG GPU: nothing waiting is a move to split, so GPU 0 is drained with t on it.
		cur = tpPlan(map[string][][]int{"t": {{0, 1}}, "u": {{2}}})
		next = withMIG(tpPlan(map[string][][]int{"t": {{1, 2}}}), 0, "u")
		steps = Migration(cur, next, mu)
		wave = map[string]int{}
		for _, s := range steps {
			t.Logf("shift, maxUnavailable %d: wave %d %s %s on %s drain %v: %s -> %s", mu, s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
			wave[s.Kind+" "+s.Tenant] = s.Wave
		}
		if !(wave["gpu "] < wave["move u"] && wave["move u"] < wave["restart t"]) {
			t.Errorf("maxUnavailable %d: waves %v: want the drain, u's move, then t's restart", mu, wave)
		}
		replayMigration(t, cur, next, steps, mu)
	}
}

// Once GPUs are drained, the replicas their drains evicted start before other steps onto them:
// z, whose slot changes on its own drained GPU 0, starts in the wave after the drains, before the
// new tenants b and c (tenant order would put it last), so it is down for two waves, not three.
func TestMigrationStartsEvictedReplicasFirst(t *testing.T) {
	cur := withMIG(tpPlan(map[string][][]int{"x": {{2}}}), 0, "z")
	next := withMIG(tpPlan(map[string][][]int{"z": {{0}}, "x": {{5}}}), 2, "b")
	next.GPUs[2].Instances[1].Replicas = []v1.PlanReplica{{Tenant: "c"}}
	steps := Migration(cur, next, 2)
	wave := map[string]int{}
	for _, s := range steps {
		t.Logf("wave %d %s %s on %s drain %v: %s -> %s", s.Wave, s.Kind, s.Tenant, s.GPU, s.Drain, s.From, s.To)
		wave[s.Kind+" "+s.Tenant] = s.Wave
	}
	if wave["move z"] > wave["start b"] || wave["move z"] > wave["start c"] {
		t.Errorf("waves %v: want z's move no later than b's and c's starts", wave)
	}
	if g, _ := serviceGaps(cur, next, steps); g["z"] != 2 {
		t.Errorf("waves without service %v, want 2 for z", g)
	}
	replayMigration(t, cur, next, steps, 2)
}
