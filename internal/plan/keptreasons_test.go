package plan

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// keptEGrow is e-grow1 re-planned against e-grow0's plan with max-moves 0: the kept plan, g0
// grown from 1 to 15 replicas on n2/0's mps 1/32 room.
func keptEGrow(t *testing.T) (*v1.Plan, *v1.Pool) {
	t.Helper()
	first, pool := loadEGrow(t)
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return pl, pool
}

// sizingRate reads the load and replica count a fresh-planner ComputeBound reason sizes for
// ("60 req/s over 15 replica(s)"); ok false when the reason has none.
var sizingRate = regexp.MustCompile(`; ([0-9.]+) req/s over ([0-9]+) replica\(s\) with`)

func poolRate(t *testing.T, pool *v1.Pool, name string) float64 {
	t.Helper()
	at := slices.IndexFunc(pool.Tenants, func(x v1.Tenant) bool { return x.Name == name })
	if at < 0 {
		t.Fatalf("no tenant %s in the pool", name)
	}
	return pool.Tenants[at].Traffic.RPS
}

// Review 8, L1: a tenant the kept plan keeps where it runs is sized in its reasons at its load
// now on the slice kind it runs on, over the replicas it runs there, not at the plan in force's
// load. e-grow: g0 (1 → 60 req/s) grows to 15 replicas of mps 1/32; the re-pack runs it on
// another share, so the reasons are made again for mps 1/32. Before, its ComputeBound reason read
// "1 req/s over 1 replica(s)" and the simulation's verdict "at 1 replica(s)" of the plan in force.
func TestKeptPlanSizingReasonsAtLoadNow(t *testing.T) {
	pl, pool := keptEGrow(t)
	for _, name := range []string{"g0", "g4"} {
		tp := planTenantOf(t, pl, name)
		want := fmt.Sprintf("; %.3g req/s over %d replica(s) with", poolRate(t, pool, name), len(tp.Replicas))
		var sized []string
		for _, r := range tp.Reasons {
			if r.Code == v1.ReasonComputeBound && sizingRate.MatchString(r.Message) {
				sized = append(sized, r.Message)
			}
			if r.Code == v1.ReasonSimulated {
				t.Errorf("%s: the kept plan is not simulated, yet it carries %q", name, r.Message)
			}
		}
		if len(sized) != 1 || !strings.Contains(sized[0], want) {
			t.Errorf("%s: sizing reasons %q, want one with %q", name, sized, want)
		}
		if !strings.Contains(sized[0], "mps 1/32") {
			t.Errorf("%s: sizing reason %q does not name the slice kind it runs on (mps 1/32)", name, sized[0])
		}
	}
	g0 := planTenantOf(t, pl, "g0")
	if len(g0.Replicas) != 15 {
		t.Fatalf("setup: g0 runs %d replicas, want 15", len(g0.Replicas))
	}
	for _, r := range g0.Reasons {
		if strings.Contains(r.Message, "1 req/s over 1 replica(s)") || strings.Contains(r.Message, "the plan in force's") {
			t.Errorf("g0 still carries the plan in force's sizing: %q", r.Message)
		}
	}
	if !slices.ContainsFunc(g0.Reasons, func(r v1.Reason) bool {
		return strings.HasPrefix(r.Message, "kept where it runs: 60 req/s now over 15 replicas on mps 1/32 of A100-SXM4-80GB") &&
			strings.HasSuffix(r.Message, "the sizing above is for its load now on that slice kind, not simulated in this plan")
	}) {
		t.Errorf("g0's reasons lack the kept-load reason: %v", g0.Reasons)
	}
}

// A kept plan taken again as the plan in force (the pool unchanged, max-moves 0) does not pile
// up the reasons of the re-plans before it: each tenant kept where it runs says so once, and
// sizes once.
func TestKeptPlanReasonsDoNotPileUp(t *testing.T) {
	pl, pool := keptEGrow(t)
	zero := 0
	again, err := Build(context.Background(), pool, Options{Current: pl, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range again.Tenants {
		kept, sized := 0, 0
		for _, r := range tp.Reasons {
			if strings.HasPrefix(r.Message, "kept where it runs:") {
				kept++
			}
			if r.Code == v1.ReasonComputeBound && sizingRate.MatchString(r.Message) {
				sized++
			}
		}
		if kept > 1 || sized != 1 {
			t.Errorf("%s: %d kept-load and %d sizing reasons, want at most 1 and 1: %v", tp.Name, kept, sized, tp.Reasons)
		}
	}
}

// d-mig1 against d-mig0's plan with max-moves 0: m0 (0.5 → 2.5 req/s) keeps its one mig 1g.10gb,
// the kind and count the re-pack gives it, so its reasons are the re-pack's (at 2.5 req/s). The
// kept plan's MIG GPUs list what runs on each instance now: m1, m2 and m5 left n2/0, whose
// instances they ran on are free. Before, m0's sizing read "0.5 req/s" and n2/0's layout named
// m1, m2 and m5.
func TestKeptPlanMIGReasonsListWhatRuns(t *testing.T) {
	first, pool := loadReplan(t, "../../testdata/review8/d-mig0-pool.yaml", "../../testdata/review8/d-mig1-pool.yaml")
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	m0 := planTenantOf(t, pl, "m0")
	want := fmt.Sprintf("; %.3g req/s over %d replica(s) with", poolRate(t, pool, "m0"), len(m0.Replicas))
	if want != "; 2.5 req/s over 1 replica(s) with" {
		t.Fatalf("setup: m0 sized as %q, want 2.5 req/s on 1 replica", want)
	}
	if !slices.ContainsFunc(m0.Reasons, func(r v1.Reason) bool { return r.Code == v1.ReasonComputeBound && strings.Contains(r.Message, want) }) ||
		slices.ContainsFunc(m0.Reasons, func(r v1.Reason) bool { return strings.Contains(r.Message, "0.5 req/s over") }) {
		t.Errorf("m0's reasons are not sized at 2.5 req/s: %v", m0.Reasons)
	}
	inPool := map[string]bool{}
	for _, x := range pool.Tenants {
		inPool[x.Name] = true
	}
	migs := 0
	for _, g := range pl.GPUs {
		if g.Mode != v1.ModeMIG || g.Role != v1.RolePool {
			continue
		}
		migs++
		var parts []string
		for _, in := range g.Instances {
			var who []string
			for _, r := range in.Replicas {
				who = append(who, r.Tenant)
			}
			if len(who) == 0 {
				who = []string{"free"}
			}
			parts = append(parts, in.Ref().String()+" "+strings.Join(who, "+"))
		}
		layout := "MIG layout " + strings.Join(parts, ", ") + ": "
		if !slices.ContainsFunc(g.Reasons, func(r v1.Reason) bool { return strings.HasPrefix(r.Message, layout) }) {
			t.Errorf("%s: reasons %v, want one beginning %q", g.Ref(), g.Reasons, layout)
		}
		for _, r := range g.Reasons {
			for _, gone := range []string{"m1", "m2", "m5"} {
				if !inPool[gone] && strings.Contains(r.Message, " "+gone+",") {
					t.Errorf("%s: reason %q names %s, which left the pool", g.Ref(), r.Message, gone)
				}
			}
		}
	}
	if migs == 0 {
		t.Fatal("setup: no MIG pool GPU in the kept plan")
	}
	n20 := slices.IndexFunc(pl.GPUs, func(g v1.PlanGPU) bool { return g.Ref().String() == "n2/0" })
	if n20 < 0 || !strings.Contains(pl.GPUs[n20].Reasons[0].Message, "1g.10gb@1 free, 1g.10gb@2 free") {
		t.Errorf("n2/0's reasons do not show the departed tenants' instances free")
	}
}
