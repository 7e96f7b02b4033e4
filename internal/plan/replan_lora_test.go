package plan

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// withEngine puts shared LoRA engine name on GPU idx of pl (a tpPlan): the whole GPU, mode
// exclusive, role pool, no replicas.
func withEngine(pl *v1.Plan, name string, idx int) *v1.Plan {
	pl.GPUs[idx].Role, pl.GPUs[idx].Mode, pl.GPUs[idx].Replicas, pl.GPUs[idx].LoRAEngine = v1.RolePool, v1.ModeExclusive, nil, name
	pl.LoRAEngines = append(pl.LoRAEngines, v1.PlanLoRAEngine{Name: name, GPU: pl.GPUs[idx].Ref(), Model: "m", MaxLoRAs: 2, MaxLoRARank: 16, MaxCPULoRAs: 2,
		Adapters: []v1.PlanLoRAAdapter{{Tenant: name + "-ad", Adapter: name + "-ad-lora", RPS: 1}}})
	return pl
}

// withMIG makes GPU idx of pl a MIG GPU of two 3g.40gb instances, the first running a replica of
// tenant tn.
func withMIG(pl *v1.Plan, idx int, tn string) *v1.Plan {
	g := &pl.GPUs[idx]
	g.Role, g.Mode, g.Replicas, g.LoRAEngine = v1.RolePool, v1.ModeMIG, nil, ""
	g.Instances = []v1.PlanInstance{{Profile: "3g.40gb", Start: 0, Replicas: []v1.PlanReplica{{Tenant: tn}}}, {Profile: "3g.40gb", Start: 4}}
	return pl
}

// Shared LoRA engines take part in a migration's room and order: a replica that takes the GPU an
// engine leaves waits for the engine's move away or stop; an engine that moves or starts onto a
// GPU a replica leaves waits for that replica; an engine and a replica, or two engines, trading
// GPUs are a cycle (one stops first; an engine's stop and start name the engine); a GPU that runs an engine now and becomes MIG is drained. Each migration
// replays without a GPU over-full or reconfigured under a running engine, within maxUnavailable
// replica and engine steps a wave, to the new plan. Without a conflict the waves are as the
// replica steps alone give them, the engines' steps after.
func TestMigrationOrdersLoRAEngines(t *testing.T) {
	type tpReps = map[string][][]int
	find := func(steps []Step, who, kind string) *Step {
		for i, s := range steps {
			if (s.Tenant == who || s.LoRAEngine == who) && s.Kind == kind {
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
		{name: "a replica moves onto the GPU an engine moves away from",
			cur:    withEngine(tpPlan(tpReps{"a": {{0}}}), "e", 1),
			next:   withEngine(tpPlan(tpReps{"a": {{1}}}), "e", 2),
			before: [][4]string{{"e", StepMove, "a", StepMove}}},
		{name: "a replica moves onto the GPU of an engine that stops",
			cur:    withEngine(tpPlan(tpReps{"a": {{0}}}), "e", 1),
			next:   tpPlan(tpReps{"a": {{1}}}),
			before: [][4]string{{"e", StepStop, "a", StepMove}}},
		{name: "a new replica starts on the GPU of an engine that stops",
			cur:    withEngine(tpPlan(tpReps{"a": {{0}}}), "e", 1),
			next:   tpPlan(tpReps{"a": {{0}}, "c": {{1}}}),
			before: [][4]string{{"e", StepStop, "c", StepStart}}},
		{name: "an engine moves onto the GPU a replica moves away from",
			cur:    withEngine(tpPlan(tpReps{"a": {{1}}}), "e", 0),
			next:   withEngine(tpPlan(tpReps{"a": {{2}}}), "e", 1),
			before: [][4]string{{"a", StepMove, "e", StepMove}}},
		{name: "an engine starts on the GPU of a replica that stops",
			cur:    tpPlan(tpReps{"a": {{1}}, "b": {{0}}}),
			next:   withEngine(tpPlan(tpReps{"b": {{0}}}), "e", 1),
			before: [][4]string{{"a", StepStop, "e", StepStart}}},
		{name: "an engine and a replica trade GPUs",
			cur:  withEngine(tpPlan(tpReps{"a": {{0}}}), "e", 1),
			next: withEngine(tpPlan(tpReps{"a": {{1}}}), "e", 0),
			check: func(t *testing.T, steps []Step) {
				kinds := map[string]int{}
				for _, s := range steps {
					kinds[s.Kind]++
				}
				if kinds[StepStop] != 1 || kinds[StepMove] != 1 || kinds[StepStart] != 1 {
					t.Errorf("a trade of GPUs is %v, want a stop, a move and a start", kinds)
				}
			}},
		{name: "two engines trade GPUs",
			cur:  withEngine(withEngine(tpPlan(tpReps{}), "e", 0), "f", 1),
			next: withEngine(withEngine(tpPlan(tpReps{}), "e", 1), "f", 0),
			check: func(t *testing.T, steps []Step) {
				// the stop and start of the split move name the engine, as an engine's stop and start do
				stop, start := find(steps, "e", StepStop), find(steps, "e", StepStart)
				if stop == nil || start == nil || stop.From != "lora engine (1 adapters, max_loras 2)" || stop.To != "none" ||
					start.From != "none" || start.To != stop.From || stop.GPU.Index != 0 || start.GPU.Index != 1 {
					t.Errorf("stop %+v, start %+v: want e stopped on n0/0 and started on n0/1, named as an engine", stop, start)
				}
			}},
		{name: "the GPU of an engine that moves away becomes MIG",
			cur:  withEngine(tpPlan(tpReps{"a": {{2}}}), "e", 0),
			next: withMIG(withEngine(tpPlan(tpReps{"a": {{2}}}), "e", 1), 0, "b"),
			check: func(t *testing.T, steps []Step) {
				g := find(steps, "", StepGPU)
				if g == nil || g.GPU.Index != 0 || !g.Drain {
					t.Errorf("GPU step %+v, want n0/0 drained", g)
				}
			}},
		{name: "the GPU of an engine that stops becomes MIG",
			cur:  withEngine(tpPlan(tpReps{"a": {{2}}}), "e", 0),
			next: withMIG(tpPlan(tpReps{"a": {{2}}}), 0, "b"),
			check: func(t *testing.T, steps []Step) {
				if g := find(steps, "", StepGPU); g == nil || !g.Drain {
					t.Errorf("GPU step %+v, want a drain", g)
				}
			}},
	}
	for _, mu := range []int{1, 2, 3} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/maxUnavailable %d", c.name, mu), func(t *testing.T) {
				steps := Migration(c.cur, c.next, mu)
				for _, s := range steps {
					t.Logf("wave %d %s %s%s on %s drain %v: %s -> %s", s.Wave, s.Kind, s.Tenant, s.LoRAEngine, s.GPU, s.Drain, s.From, s.To)
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

	// Without a conflict the waves are as the replica steps alone give them: moves in order,
	// replicas then engines, maxUnavailable a wave; an engine restarting in place comes after.
	cur := withEngine(withEngine(tpPlan(tpReps{"a": {{0}}, "b": {{1}}}), "e", 2), "f", 3)
	next := withEngine(withEngine(tpPlan(tpReps{"a": {{4}}, "b": {{5}}}), "e", 6), "f", 3)
	next.LoRAEngines[1].MaxLoRAs = 4
	for _, mu := range []int{1, 2, 3} {
		steps := Migration(cur, next, mu)
		var got []string
		for _, s := range steps {
			got = append(got, fmt.Sprintf("%d %s %s%s", s.Wave, s.Kind, s.Tenant, s.LoRAEngine))
		}
		w := func(i int) int { return 1 + i/mu }
		want := []string{fmt.Sprintf("%d move a", w(0)), fmt.Sprintf("%d move b", w(1)), fmt.Sprintf("%d move e", w(2)), fmt.Sprintf("%d restart f", w(2)+1)}
		if !slices.Equal(got, want) {
			t.Errorf("maxUnavailable %d: steps %v, want %v", mu, got, want)
		}
		replayMigration(t, cur, next, steps, mu)
	}
}

// Re-plans of a pool with shared LoRA engines (BuildWithLoRA, against the plan in force) whose
// tenants change — ordinary tenants added (three, with GPUs left idle: the engines keep theirs;
// twelve, filling the fleet: an engine's GPU becomes a MIG GPU and that engine stops), half the
// adapter tenants dropped, adapter rates doubled or cut to a third, a tensor-parallel tenant
// added (the plan in force still serves every other tenant, so the group starts on GPUs that run
// nothing and no engine moves; the re-pack, replayed too, puts it on an engine's GPU and that
// engine alone moves) — replay wave by wave
// without a GPU over-full or reconfigured under a running engine, within maxUnavailable, to the
// new plan. Between them they move, start, restart and stop engines and drain GPUs that run one
// now.
func TestMigrationReplaysLoRARePlans(t *testing.T) {
	pairs := loraReplanPairs(t)
	cur := pairs[0][0]
	if len(cur.LoRAEngines) < 2 {
		t.Fatalf("%d engines in the first plan, want at least 2", len(cur.LoRAEngines))
	}
	engineGPU := map[v1.GPURef]bool{}
	for _, e := range cur.LoRAEngines {
		engineGPU[e.GPU] = true
	}
	seen := map[string]int{}
	for v, pr := range pairs {
		next := pr[1]
		moved := 0
		for _, e := range next.LoRAEngines {
			for _, c := range cur.LoRAEngines {
				if c.Name == e.Name && c.GPU != e.GPU {
					moved++
				}
			}
		}
		// Variant 4 keeps the engines where they are (the plan in force still serves the adapter
		// tenants); its plain re-pack (the last pair) lands the 70B group on an engine's GPU and
		// moves that engine alone.
		if want, ok := map[int]int{0: 0, 4: 0, 6: 1}[v]; ok && want != moved {
			t.Errorf("variant %d: %d engines move, want %d", v, moved, want)
		}
		for _, mu := range []int{1, 2, 3} {
			steps := Migration(cur, next, mu)
			for _, s := range steps {
				switch {
				case s.LoRAEngine != "":
					seen["engine "+s.Kind]++
				case s.Kind == StepGPU && engineGPU[s.GPU]:
					seen["engine GPU reconfigured"]++
					if !s.Drain {
						t.Errorf("variant %d: GPU %s runs an engine and is reconfigured without a drain", v, s.GPU)
					}
				}
			}
			replayMigration(t, cur, next, steps, mu)
			if t.Failed() {
				for _, s := range steps {
					t.Logf("wave %d %s %s%s on %s drain %v: %s -> %s", s.Wave, s.Kind, s.Tenant, s.LoRAEngine, s.GPU, s.Drain, s.From, s.To)
				}
				t.Fatalf("variant %d, maxUnavailable %d: %d steps", v, mu, len(steps))
			}
		}
	}
	t.Logf("steps over the variants: %v", seen)
	for _, k := range []string{"engine move", "engine start", "engine restart", "engine stop", "engine GPU reconfigured"} {
		if seen[k] == 0 {
			t.Errorf("no %s in any variant: %v", k, seen)
		}
	}
}

// loraReplanPairs are the plan of an 8-GPU pool with six adapter tenants on shared LoRA engines
// and its re-plans against it (BuildWithLoRA) after the tenants changed, one pair per variant:
// 0, 1, 2 and 5 add 3, 2, 1 and 12 ordinary tenants; 1 drops every other tenant; 2 doubles the
// rates (all but the first tenant's), 3 cuts them to a third; 4 adds a 70B tenant. A seventh
// pair, last, is variant 4's plain re-pack (Options.repackOnly), not weighed against the plan in
// force, so that the migration's ordering of a re-pack that moves an engine stays covered.
func loraReplanPairs(t *testing.T) [][2]*v1.Plan {
	t.Helper()
	pool := loraFleetPool(t, 8, 6)
	cur, _ := planWithLoRA(t, pool, nil)
	var out [][2]*v1.Plan
	var repacked *v1.Plan
	for v := range 6 {
		changed := *pool
		changed.Tenants = nil
		for i, tn := range pool.Tenants {
			switch {
			case v == 1 && i%2 == 1:
				continue // dropped
			case v == 2 && i > 0:
				tn.Traffic.RPS *= 2
			case v == 3 && i > 0:
				tn.Traffic.RPS /= 3
			}
			changed.Tenants = append(changed.Tenants, tn)
			if i != 0 {
				continue
			}
			more := map[int]int{0: 3, 1: 2, 2: 1, 5: 12}[v]
			for k := range more {
				m := tn
				m.Name, m.Traffic.RPS = fmt.Sprintf("chat-%d", k), 20
				changed.Tenants = append(changed.Tenants, m)
			}
			if v == 4 {
				big := tn
				big.Name, big.Model, big.Traffic.RPS = "big", v1.Model{Name: "llama-3.1-70b"}, 1
				changed.Tenants = append(changed.Tenants, big)
			}
		}
		next, _ := planWithLoRA(t, &changed, cur)
		if err := v1.ValidatePlan(next, &changed); err != nil {
			t.Fatalf("variant %d: %v", v, err)
		}
		out = append(out, [2]*v1.Plan{cur, next})
		if v == 4 {
			var err error
			if repacked, _, err = BuildWithLoRA(context.Background(), &changed, Options{Current: cur, repackOnly: true}, nil); err != nil {
				t.Fatal(err)
			}
			if err := v1.ValidatePlan(repacked, &changed); err != nil {
				t.Fatalf("variant 4's re-pack: %v", err)
			}
		}
	}
	out = append(out, [2]*v1.Plan{cur, repacked})
	return out
}
