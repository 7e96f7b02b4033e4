package plan

import (
	"context"
	"encoding/json"
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
// 36 tenants): planned by the queueing model alone, tenant t11 (llama-3.1-8b at 6.77 req/s,
// max-num-seqs 40, 512 + 64 tokens, TTFT 1.416 s and TPOT 61 ms, shared tier) misses its SLO
// in simulation (98.07 % of requests in the worst of five runs). Confirmed by simulation, the
// planner's runs find its one replica on an MPS 1/6 share short (97.2 % of its requests), raise
// it, and the tenant moves to a slice where one replica meets the SLO; no tenant then misses in
// five runs with seeds the planner did not use (and the plan takes 18 GPUs, the model's 20). (The suite's former fixture, testdata/confirm-pool.yaml, no
// longer misses without simulation since the KV cache's hold counts tokens, ADR 0037: its short
// tenant sits on another GPU of the same board.)
func TestConfirmRaisesShortTenants(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates a 36-tenant pool 14 times")
	}
	pool := loadPool(t, "testdata/confirm-pool-2.yaml")
	off := buildWith(t, pool, Options{})
	on := buildWith(t, pool, confirmed)
	if r := simReasonOf(off, "t11"); r != "" {
		t.Errorf("plan without simulation: t11 has a Simulated reason %q", r)
	}
	r := simReasonOf(on, "t11")
	if !strings.Contains(r, "found short before on ") {
		t.Errorf("t11's Simulated reason does not name the short slice: %q", r)
	}
	t.Logf("t11: %s", r)
	missOff, missOn := worstRuns(t, pool, off), worstRuns(t, pool, on)
	t.Logf("below 99 %% in some run: without simulation %v (%d GPUs), with %v (%d GPUs)", missOff, off.Summary.GPUsUsed, missOn, on.Summary.GPUsUsed)
	if _, ok := missOff["t11"]; !ok {
		t.Errorf("without simulation t11 meets its SLO in every run: the test checks nothing")
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
func TestConfirmShortWithoutRoomIsShort(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates a 23-tenant pool up to 24 times")
	}
	check := func(pool *v1.Pool, code v1.ReasonCode, why string) {
		t.Helper()
		pl := buildWith(t, pool, confirmed)
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
	}
	pool := loadPool(t, "testdata/confirm-pool-fleet.yaml")
	for _, n := range pool.Fleet.Nodes {
		for i := range n.GPUs[0].Count {
			if n.Name != "n4" && n.Name != "n6" && (n.Name != "n2" || i > 0) {
				pool.Policy.CanaryGPUs = append(pool.Policy.CanaryGPUs, v1.GPURef{Node: n.Name, Index: i})
			}
		}
	}
	check(pool, v1.ReasonNoCapacity, "the fleet has no room")
	one := 1
	pool.Tenants[0].MaxReplicas = &one
	check(pool, v1.ReasonOverCap, "maxReplicas 1 allows no more")
}

// The confirmation is a function of the pool, the options and the seed; it touches only
// tenants the queueing model sized, never lowers their counts, and is off without a simulator,
// with a negative budget and on pools of more than confirmMaxTenants tenants.
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
	if r := simReasonOf(buildWith(t, fixed, confirmed), "t0"); r != "" {
		t.Errorf("fixed replicas: t0 has a Simulated reason %q", r)
	}

	big := synthPool(confirmMaxTenants + 1)
	for _, pt := range buildWith(t, big, confirmed).Tenants {
		if r := simReasonOf(&v1.Plan{Tenants: []v1.PlanTenant{pt}}, pt.Name); r != "" {
			t.Fatalf("%d tenants: %s has a Simulated reason %q", len(big.Tenants), pt.Name, r)
		}
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
