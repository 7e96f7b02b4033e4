package plan

import (
	"context"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// planWith plans pool step by step as Build does (from scratch), after set has adjusted the
// planner, and returns the planner with its plan.
func planWith(t *testing.T, pool *v1.Pool, set func(*planner)) (*planner, *v1.Plan) {
	t.Helper()
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx = context.Background()
	set(p)
	p.evaluate()
	if err := p.optimise(); err != nil {
		t.Fatal(err)
	}
	pl, err := p.result()
	if err != nil {
		t.Fatal(err)
	}
	return p, pl
}

// buildCompact plans pool with or without the compaction after packing. With nodeRules the
// planner keeps the device plugin's per-node rules on the DRA path too (as it did on both paths
// before perClaim), and the plan is checked against them; without, only on the device-plugin
// path.
func buildCompact(t *testing.T, pool *v1.Pool, on, nodeRules bool) *v1.Plan {
	t.Helper()
	_, pl := planWith(t, pool, func(p *planner) {
		p.noCompact = !on
		if nodeRules {
			p.perClaim = false
		}
	})
	if err := checkPlan(pool, pl); err != nil {
		t.Fatalf("compaction %v: %v", on, err)
	}
	if nodeRules || pool.Policy.DeviceAPI() != v1.DeviceAPIDRA {
		if c := pathConflicts(pool, pl); c != "" {
			t.Fatalf("compaction %v: %s", on, c)
		}
	}
	return pl
}

// pathConflicts names a node and MIG profile whose used instances are shared two ways — sharing
// mode, or for shared instances the trust path (shared-tier tenants count as one) — or a node
// whose shared MIG instances mix MPS with time-slicing; "" when there is none. It reads the plan
// only, not the planner's bookkeeping.
func pathConflicts(pool *v1.Pool, pl *v1.Plan) string {
	tenants := map[string]v1.Tenant{}
	for _, t := range pool.Tenants {
		tenants[t.Name] = t
	}
	uses := map[string]string{}
	for _, g := range pl.GPUs {
		for _, in := range g.Instances {
			if len(in.Replicas) == 0 {
				continue
			}
			use := string(in.Sharing.Mode)
			if use != "" {
				use += "/" + sharingGroup(tenants[in.Replicas[0].Tenant])
			}
			k := g.Node + " " + in.Profile
			if old, ok := uses[k]; ok && old != use {
				return k + " used as " + old + " and " + use
			}
			uses[k] = use
		}
	}
	return ""
}

// The compaction frees GPUs the class-by-class packing leaves part-empty, and never adds one.
// The pools take the DRA path's candidates (shared MIG instances) under the device plugin's
// node rules, as the packer applied them on both paths before perClaim: on the DRA path itself
// the packer covers all ways at once and leaves the compaction nothing to free on these pools
// (22 and 220 GPUs with and without it). On the 100-tenant synthetic pool the packer leaves
// three GPUs each holding one shared 3g.40gb
// (three trust paths, so three nodes) with room for two 1g.20gb each; the compaction moves a
// GPU's worth of unshared 1g.20gb there: 24 GPUs before, 23 after (the same plan's memory, 171
// of 8 slices a GPU, needs at least 22). At 1,000 tenants: 230 before, 223 after, two of them
// freed by moving a target's instances to an idle GPU on a node that takes the moved instance's
// trust path.
func TestCompactFreesGPUs(t *testing.T) {
	sizes := []int{100, 1000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		pool := synthPool(n)
		pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA // shared MIG instances, as the text above says
		off, on := buildCompact(t, pool, false, true), buildCompact(t, pool, true, true)
		t.Logf("%d tenants: %d GPUs without compaction, %d with (bound %d)", n, off.Summary.GPUsUsed, on.Summary.GPUsUsed, on.Summary.LowerBound)
		if on.Summary.GPUsUsed >= off.Summary.GPUsUsed {
			t.Errorf("%d tenants: %d GPUs with compaction, %d without: nothing freed", n, on.Summary.GPUsUsed, off.Summary.GPUsUsed)
		}
		served := func(pl *v1.Plan) (s int) {
			for _, tn := range pl.Tenants {
				if !tn.Infeasible {
					s++
				}
			}
			return s
		}
		if served(on) < served(off) {
			t.Errorf("%d tenants: %d served with compaction, %d without", n, served(on), served(off))
		}
	}
}

// On random pools with redundant tenants and mixed tiers, the compacted plan passes the plan
// checks (layouts, isolation, a redundant tenant on more than one GPU) and the one-way-per-node
// rule where it applies (on the device-plugin path, and on DRA pools planned with the node rules
// kept), and never uses more GPUs than the plan without it.
func TestCompactKeepsRules(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	freed := 0
	for i := range rounds {
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		pool := Synthetic(SyntheticOptions{Tenants: 40 + rng.IntN(80), GPUs: 64, MeanRPS: 0.3 + rng.Float64(),
			DeviceAPI: []v1.KubernetesDeviceAPI{"", v1.DeviceAPIDRA}[i%2]}, rng)
		for j := range pool.Tenants {
			pool.Tenants[j].Redundancy = rng.IntN(2) == 0
		}
		rules := i%4 != 3 // every other DRA pool per claim, without the node rules
		off, on := buildCompact(t, pool, false, rules), buildCompact(t, pool, true, rules)
		if on.Summary.GPUsUsed > off.Summary.GPUsUsed {
			t.Errorf("pool %d: %d GPUs with compaction, %d without", i, on.Summary.GPUsUsed, off.Summary.GPUsUsed)
		}
		freed += off.Summary.GPUsUsed - on.Summary.GPUsUsed
	}
	t.Logf("%d GPUs freed over %d pools", freed, rounds)
	if freed == 0 {
		t.Error("the compaction freed no GPU on any pool: the test no longer exercises it")
	}
}

// A move that would put all of a redundant tenant's units on one GPU is refused: single says so
// only when the tenant is on several GPUs now and one after the moves.
func TestCompactSingle(t *testing.T) {
	tn := &tenant{}
	a, b := &unit{reps: []replica{{tn}}}, &unit{reps: []replica{{tn}}}
	g1, g2, g3 := &gpuPlan{}, &gpuPlan{}, &gpuPlan{}
	c := &compactor{where: map[*unit]*gpuPlan{a: g1, b: g2}, units: map[*tenant][]*unit{tn: {a, b}}}
	if !c.single(tn, map[*unit]*gpuPlan{a: g2}) {
		t.Error("a onto b's GPU: the tenant ends on one GPU, want refused")
	}
	if !c.single(tn, map[*unit]*gpuPlan{a: g3, b: g3}) {
		t.Error("both onto one third GPU: want refused")
	}
	if c.single(tn, map[*unit]*gpuPlan{a: g3}) {
		t.Error("a onto a third GPU: still two GPUs, want allowed")
	}
	c.where[b] = g1
	if c.single(tn, map[*unit]*gpuPlan{a: g3, b: g3}) {
		t.Error("already on one GPU: moving both keeps it as it was, want allowed")
	}
}
