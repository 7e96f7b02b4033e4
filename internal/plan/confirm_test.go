package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// simRun is internal/plansim.Run (which this package's tests cannot import, plansim importing
// plan): the simulator gpupool plan confirms its plans with.
func simRun(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
	s, err := sim.New(sim.Input{Pool: in.Pool, Plan: in.Plan, Models: in.Models, Profiles: in.Profiles},
		sim.Config{Duration: in.Duration, Seed: in.Seed, Perf: in.Perf})
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]SimTenant{}
	for _, tr := range res.Report.Tenants {
		out[tr.Name] = SimTenant{Judged: tr.SLOJudged, Attainment: tr.SLOAttainment,
			TTFTP99: time.Duration(tr.TTFT.P99 * float64(time.Millisecond)), TPOTP99: time.Duration(tr.TPOT.P99 * float64(time.Millisecond))}
	}
	return out, nil
}

// confirmed are the options gpupool plan builds with: the plan confirmed by simulation.
var confirmed = Options{Simulate: simRun}

func buildWith(t testing.TB, pool *v1.Pool, o Options) *v1.Plan {
	t.Helper()
	pl, err := Build(context.Background(), pool, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	return pl
}

// simReasonOf is tenant name's Simulated reason in pl ("" when none).
func simReasonOf(pl *v1.Plan, name string) string {
	for _, pt := range pl.Tenants {
		if r, ok := pt.Reason(v1.ReasonSimulated); ok && pt.Name == name {
			return r.Message
		}
	}
	return ""
}

// worstRuns simulates pl with seeds 3–7 (the planner's own runs use 0, 1 and 2), each for at least
// 2,200 requests of the slowest tenant, and returns the served tenants below 99 % in some run.
func worstRuns(t *testing.T, pool *v1.Pool, pl *v1.Plan) map[string]float64 {
	t.Helper()
	slowest := 1e9
	for _, tn := range pool.Tenants {
		slowest = min(slowest, tn.Traffic.RPS)
	}
	d := time.Duration(2200/slowest*1e9) + 30*time.Second
	miss := map[string]float64{}
	for seed := uint64(3); seed <= 7; seed++ {
		for j, tr := range simulate(t, pool, pl, d, seed).Report.Tenants {
			if pl.Tenants[j].Infeasible || tr.SLOAttainment >= 0.99 {
				continue
			}
			if a, ok := miss[tr.Name]; !ok || tr.SLOAttainment < a {
				miss[tr.Name] = tr.SLOAttainment
			}
		}
	}
	return miss
}

// A pool of the agreement suite's generator on a stream it was not fitted on (seed 32, pool 27:
// 36 tenants). Planned by the queueing model alone, a tenant misses its SLO in simulation: first
// t11 (llama-3.1-8b at 6.77 req/s, 98.07 % of requests in the worst of five runs), since ADR
// 0047's node counting t14 (98.9 %, one replica on a mig 2g.35gb). Confirmed by simulation, the
// planner's runs find every such tenant short on the slice it had (t14: 98.87 % in the worst of
// its runs on the 2g.35gb), raise it (t14 runs 2 replicas), and no tenant then misses in five
// runs with seeds the planner did not use; both plans take 19 GPUs. Which tenant the model
// leaves short moves with the planner's placement; the test follows whichever it is. (The
// suite's former fixture, testdata/confirm-pool.yaml, no longer misses without simulation since
// the KV cache's hold counts tokens, ADR 0037: its short tenant sits on another GPU of the same
// board.)
func TestConfirmRaisesShortTenants(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates a 36-tenant pool 14 times")
	}
	pool := loadPool(t, "testdata/confirm-pool-2.yaml")
	off := buildWith(t, pool, Options{})
	on := buildWith(t, pool, confirmed)
	for _, pt := range off.Tenants {
		if r, ok := pt.Reason(v1.ReasonSimulated); ok {
			t.Errorf("plan without simulation: %s has a Simulated reason %q", pt.Name, r.Message)
		}
	}
	missOff, missOn := worstRuns(t, pool, off), worstRuns(t, pool, on)
	t.Logf("below 99 %% in some run: without simulation %v (%d GPUs), with %v (%d GPUs)", missOff, off.Summary.GPUsUsed, missOn, on.Summary.GPUsUsed)
	if len(missOff) == 0 {
		t.Errorf("without simulation every tenant meets its SLO in every run: the test checks nothing")
	}
	for name := range missOff {
		r := simReasonOf(on, name)
		if !strings.Contains(r, "found short before on ") {
			t.Errorf("%s misses without simulation, but its Simulated reason does not name the short slice: %q", name, r)
		}
		t.Logf("%s: %s", name, r)
	}
	if len(missOn) > 0 {
		t.Errorf("confirmed plan: tenants below 99 %% in some run: %v", missOn)
	}
}

// A pool of the agreement suite's generator on a stream it was not fitted on (seed 27, pool 30:
// 23 tenants on the DRA path, two of them short of GPUs): the planner's runs find tenant t0
// (llama-3.1-8b at 6.64 req/s, 512 + 64 tokens, TPOT 66 ms, one replica on an H200 3g.71gb
// instance shared by MPS three ways) short of its SLO, 98.50 % of its requests within it over
// three runs, and the fleet has no room to raise it. The plan keeps its replica but calls it
// short (NoCapacity first among its reasons, Infeasible) instead of served: the suite's own run
// had it at 98.77 %. With maxReplicas 1 the same tenant is short by its bound (OverCap).
//
// The fixture's fleet had room after all: the plan left 71 of its 88 GPUs idle (every A100 and
// all H100s but one), and since short tenants try their other candidates on idle GPUs, t0 runs
// on an H100 1g.20gb there (100 % of its requests within the SLO in the planner's runs). Those
// GPUs are canaries here, so that the fleet has no room and the plan is the one described.
//
// Since short tenants give up their placements where that serves more tenants in full (ADR
// 0041), tenant t13 (36 of its 47 replicas placed) gives way there and t0 finds room on another
// slice; so the checks plan the pool without releases, as it was planned when the pool was
// found, and the plan with them must serve at least as many tenants in full.
func TestConfirmShortWithoutRoomIsShort(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates a 23-tenant pool up to 24 times")
	}
	before := confirmed
	before.noRelease = true
	served := func(pl *v1.Plan) int {
		n := 0
		for _, pt := range pl.Tenants {
			if !pt.Infeasible {
				n++
			}
		}
		return n
	}
	check := func(pool *v1.Pool, code v1.ReasonCode, why string) *v1.Plan {
		t.Helper()
		pl := buildWith(t, pool, before)
		if err := v1.ValidatePlan(pl, pool); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == "t0" })
		pt := pl.Tenants[i]
		if !pt.Infeasible || len(pt.Reasons) == 0 || pt.Reasons[0].Code != code || !strings.Contains(pt.Reasons[0].Message, why) {
			t.Errorf("t0: infeasible %v, reasons %+v; want %s first, saying %q", pt.Infeasible, pt.Reasons, code, why)
		}
		if len(pt.Replicas) == 0 {
			t.Error("t0 lost its replicas")
		}
		t.Logf("t0: %s: %s", pt.Reasons[0].Code, pt.Reasons[0].Message)
		return pl
	}
	pool := loadPool(t, "testdata/confirm-pool-fleet.yaml")
	for _, n := range pool.Fleet.Nodes {
		for i := range n.GPUs[0].Count {
			if n.Name != "n4" && n.Name != "n6" && (n.Name != "n2" || i > 0) {
				pool.Policy.CanaryGPUs = append(pool.Policy.CanaryGPUs, v1.GPURef{Node: n.Name, Index: i})
			}
		}
	}
	old := check(pool, v1.ReasonNoCapacity, "the fleet has no room")
	n, m := served(buildWith(t, pool, confirmed)), served(old)
	if n < m {
		t.Errorf("with releases %d tenants served, %d without", n, m)
	}
	t.Logf("%d tenants served with releases, %d without", n, m)
	one := 1
	pool.Tenants[0].MaxReplicas = &one
	check(pool, v1.ReasonOverCap, "maxReplicas 1 allows no more")
}

// The confirmation is a function of the pool, the options and the seed; it touches only
// tenants the queueing model sized, never lowers their counts, and is off without a simulator,
// with a negative budget and on pools of more than confirmMaxTenants tenants, whose served
// tenants say so.
func TestConfirmScope(t *testing.T) {
	pool := loadPool(t, "testdata/confirm-single.yaml")
	a, b := buildWith(t, pool, confirmed), buildWith(t, pool, confirmed)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Error("two builds of the same pool and options differ")
	}
	off := buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: -1})
	if n, m := len(a.Tenants[0].Replicas), len(off.Tenants[0].Replicas); n < m {
		t.Errorf("confirmed count %d below the queueing model's %d", n, m)
	}
	if r := simReasonOf(a, "t0"); !strings.Contains(r, "simulated runs of the plan") {
		t.Errorf("t0's Simulated reason: %q", r)
	}
	if r := simReasonOf(off, "t0"); r != "" {
		t.Errorf("ConfirmRequests -1: t0 has a Simulated reason %q", r)
	}
	if r := simReasonOf(buildWith(t, pool, Options{}), "t0"); r != "" {
		t.Errorf("no simulator: t0 has a Simulated reason %q", r)
	}

	fixed := loadPool(t, "testdata/confirm-single.yaml")
	three := 3
	fixed.Tenants[0].Replicas = &three
	fp := buildWith(t, fixed, confirmed)
	if r := simReasonOf(fp, "t0"); !strings.Contains(r, "the pool's fixed count") {
		t.Errorf("fixed replicas: t0's Simulated reason %q does not name the pool's fixed count", r)
	}
	if n := len(fp.Tenants[0].Replicas); n != 3 {
		t.Errorf("fixed replicas: t0 has %d replicas, want the pool's 3", n)
	}

	big := synthPool(confirmMaxTenants + 1)
	want := fmt.Sprintf("not simulated: the pool has %d tenants, more than the %d", confirmMaxTenants+1, confirmMaxTenants)
	for _, pt := range buildWith(t, big, confirmed).Tenants {
		r := simReasonOf(&v1.Plan{Tenants: []v1.PlanTenant{pt}}, pt.Name)
		if served := !pt.Infeasible || len(pt.Replicas) > 0; served != strings.HasPrefix(r, want) {
			t.Fatalf("%d tenants: %s (served %t) has the Simulated reason %q", len(big.Tenants), pt.Name, served, r)
		}
	}
}

// TestConfirmJudgesFixedCount: a count the pool fixes is judged by the simulation but never
// raised. short-150-on-60's t00033 alone (testdata/confirm-fixed-short.yaml) is served by the
// queueing model at its fixed two replicas; a simulator that finds it short (97 %) makes the plan
// keep two and call it SLOUnmet, saying the pool fixes its count; without the runs it is served.
// (The runs found it far short on two 1g.10gb instances until the model counted the first-chunk
// admission of a KV-bound replica of long prompts, firstChunkThrash; it now takes 1g.20gb
// instances, which the simulator finds met, TestLongPromptKVThrash.)
func TestConfirmJudgesFixedCount(t *testing.T) {
	pool := loadPool(t, "testdata/confirm-fixed-short.yaml")
	off := buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: -1})
	if off.Tenants[0].Infeasible {
		t.Fatalf("without the runs the fixed count is infeasible: %v", off.Tenants[0].Reasons)
	}
	pl := buildWith(t, pool, Options{Simulate: t00033Short})
	tn := pl.Tenants[0]
	if n := len(tn.Replicas); n != 2 {
		t.Errorf("%d replicas, want the pool's fixed 2", n)
	}
	if !tn.Infeasible || len(tn.Reasons) == 0 || tn.Reasons[0].Code != v1.ReasonSLOUnmet ||
		!strings.Contains(tn.Reasons[0].Message, "the pool fixes its count at 2") {
		t.Fatalf("a fixed count the runs find short: infeasible %t, reasons %v", tn.Infeasible, tn.Reasons)
	}
	if r := simReasonOf(pl, tn.Name); !strings.Contains(r, "not raised (replicas 2)") || !strings.Contains(r, "the pool's fixed count is 2") {
		t.Errorf("Simulated reason %q", r)
	}
}

// BenchmarkConfirmRuns plans testdata/confirm-pool.yaml (19 tenants) with its confirming
// simulations, the three runs of a round at once (as Build runs them) and one at a time (the same
// simulator behind a lock), side by side: the ratio is what running them at once saves on the
// machine's cores.
func BenchmarkConfirmRuns(b *testing.B) {
	pool := loadPool(b, "testdata/confirm-pool.yaml")
	var mu sync.Mutex
	oneAtATime := func(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
		mu.Lock()
		defer mu.Unlock()
		return simRun(ctx, in)
	}
	for _, c := range []struct {
		name string
		sim  Simulator
	}{{"at-once", simRun}, {"one-at-a-time", oneAtATime}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(context.Background(), pool, Options{Simulate: c.sim}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Two tenants of the review pool c5 (testdata/confirm-component.yaml): t0 (0.088 req/s,
// 3000-token prompts, TPOT 50 ms) beside t4 (20 req/s) gets too few requests in the pool-wide
// runs to be judged (135 in three runs of a 10,000-request budget). It is judged in runs of its
// sharing component instead (about 2,500 requests a run). With a simulator that finds t0's first
// slice short (as the simulator found its A100 1g.10gb replica before the queueing model counted
// long prompts whole, TestTPOTTailLongPrompts: 97.6 %), the component's verdict raises it
// exactly as the pool-wide runs' would. Without the component runs t0 stays "not judged".
func TestConfirmJudgesInComponent(t *testing.T) {
	if raceEnabled {
		t.Skip("simulates t0 for hours")
	}
	pool := loadPool(t, "testdata/confirm-component.yaml")
	t0 := func(pl *v1.Plan) v1.PlanTenant {
		return pl.Tenants[slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == "t0" })]
	}
	pl := buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: 10_000})
	r := simReasonOf(pl, "t0")
	t.Logf("t0: %s", r)
	if !strings.Contains(r, "of its sharing component of the plan (t0)") || !strings.Contains(r, "the pool-wide runs gave it") || t0(pl).Infeasible {
		t.Errorf("t0 not judged, or judged short, in runs of its sharing component: %q", r)
	}

	// strict finds t0 short (97 %) while it has one replica on the slice it first had.
	var mu sync.Mutex
	var first string
	strict := func(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
		out, err := simRun(ctx, in)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(in.Plan.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == "t0" })
		if i < 0 || len(in.Plan.Tenants[i].Replicas) != 1 {
			return out, nil
		}
		on := string(in.Plan.Tenants[i].Replicas[0].Slice) + " " + in.Plan.Tenants[i].Replicas[0].Instance.Profile
		mu.Lock()
		defer mu.Unlock()
		if first == "" {
			first = on
		}
		if tr := out["t0"]; on == first && tr.Judged > 0 {
			tr.Attainment = min(tr.Attainment, 0.97)
			out["t0"] = tr
		}
		return out, nil
	}
	pl = buildWith(t, pool, Options{Simulate: strict, ConfirmRequests: 10_000})
	r = simReasonOf(pl, "t0")
	t.Logf("t0 with a strict simulator (first on %s): %s", first, r)
	if !strings.Contains(r, "of its sharing component of the plan (t0)") || !strings.Contains(r, "found short before on "+first+" × 1 (97.00 %") {
		t.Errorf("t0 not raised from its first slice %s by its component's runs: %q", first, r)
	}

	// At 0.0005 req/s seven simulated days give t0 about 900 requests over the runs: not judged.
	pool.Tenants[0].Traffic.RPS = 0.0005
	r = simReasonOf(buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: 10_000}), "t0")
	t.Logf("t0 at 0.0005 req/s: %s", r)
	if !strings.HasPrefix(r, "not judged by the plan's simulation: ") || !strings.Contains(r, "requests in 3 runs of its sharing component of the plan (t0)") || !strings.Contains(r, "in the pool-wide runs, fewer than 1500") {
		t.Errorf("t0 at 0.0005 req/s: %q", r)
	}
}

// A sharing component joins the tenants of one GPU in modes exclusive, mps and timeslice, and of
// one MIG instance; by board it also joins the MIG instances of one GPU. restrict cuts a plan
// to a component's tenants into one the simulator accepts.
func TestConfirmComponents(t *testing.T) {
	rep := func(names ...string) []v1.PlanReplica {
		var out []v1.PlanReplica
		for _, n := range names {
			out = append(out, v1.PlanReplica{Tenant: n})
		}
		return out
	}
	pl := &v1.Plan{GPUs: []v1.PlanGPU{
		{Node: "n", Index: 0, Mode: v1.ModeMIG, Instances: []v1.PlanInstance{{Replicas: rep("a")}, {Replicas: rep("b", "c")}}},
		{Node: "n", Index: 1, Mode: v1.ModeMPS, Replicas: rep("c", "d")},
		{Node: "n", Index: 2, Mode: v1.ModeExclusive, Replicas: rep("e")},
		{Node: "n", Index: 3, Mode: v1.ModeMIG, Instances: []v1.PlanInstance{{Replicas: rep("f")}, {}}},
	}}
	group := func(of map[string]string) string {
		by := map[string][]string{}
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			by[of[n]] = append(by[of[n]], n)
		}
		var out []string
		for _, g := range by {
			out = append(out, strings.Join(g, ""))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got, want := group(components(pl, true)), "abcd e f"; got != want {
		t.Errorf("by board: %s, want %s", got, want)
	}
	if got, want := group(components(pl, false)), "a bcd e f"; got != want {
		t.Errorf("by instance: %s, want %s", got, want)
	}

	pool := loadPool(t, "testdata/confirm-component.yaml")
	full := buildWith(t, pool, Options{})
	sp, spl := restrict(pool, full, map[string]bool{"t0": true})
	if err := v1.ValidatePlan(spl, sp); err != nil {
		t.Fatalf("restricted plan: %v", err)
	}
	if len(sp.Tenants) != 1 || len(spl.Tenants) != 1 || spl.Summary.GPUsUsed != 1 || len(spl.GPUs) != len(full.GPUs) {
		t.Errorf("restricted to t0: %d pool tenants, %d plan tenants, %d of %d GPUs used", len(sp.Tenants), len(spl.Tenants), spl.Summary.GPUsUsed, len(spl.GPUs))
	}
	if len(pool.Tenants) != 2 || full.Summary.GPUsUsed < 2 {
		t.Error("restrict changed the pool or the plan it cut")
	}
}

// t00033Short is simRun with t00033 (testdata/confirm-fixed-short.yaml's tenant) found short:
// at most 97 % of its requests within the SLO in every run that judges it. The real simulator
// finds the fixed count met since the queueing model counts the first-chunk admission of a
// KV-bound replica of long prompts (ADR 0084), so the tests of what the confirmation does with a
// short fixed count say so themselves.
func t00033Short(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
	out, err := simRun(ctx, in)
	if err != nil {
		return nil, err
	}
	if tr, ok := out["t00033"]; ok && tr.Judged > 0 {
		tr.Attainment = min(tr.Attainment, 0.97)
		out["t00033"] = tr
	}
	return out, nil
}
