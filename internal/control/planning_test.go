package control

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// countingSim is a plan.Simulator that counts its runs and reports every tenant of the pool as
// meeting its objectives (enough requests to be judged), so a confirmed plan keeps the model's
// counts and carries the Simulated reason.
type countingSim struct{ runs atomic.Int32 }

func (s *countingSim) run(_ context.Context, in plan.SimInput) (map[string]plan.SimTenant, error) {
	s.runs.Add(1)
	out := map[string]plan.SimTenant{}
	for _, t := range in.Pool.Tenants {
		out[t.Name] = plan.SimTenant{Judged: 5000, Attainment: 1, TTFTP99: 10 * time.Millisecond, TPOTP99: 5 * time.Millisecond}
	}
	return out, nil
}

// simulated says whether tenant name of p carries the Simulated reason.
func simulated(p *v1.Plan, name string) bool {
	for _, t := range p.Tenants {
		if _, ok := t.Reason(v1.ReasonSimulated); ok && t.Name == name {
			return true
		}
	}
	return false
}

// The control plane plans as `gpupool plan` does when given the simulator: a dry run, an apply
// and the Replanner's re-plan all confirm the plan by simulation (Planning), and without it
// (the zero Planning) none does.
func TestPlanningConfirmsBySimulation(t *testing.T) {
	sim := &countingSim{}
	h := newHarness(t, ServerConfig{Planning: Planning{Simulate: sim.run}})
	h.startReplanner(t)
	h.settleGates(t) // the node's agent: apply and re-plans change GPU 0
	pool := readFile(t, "../../examples/h100-7b-exclusive.yaml")
	var p v1.Plan
	if err := json.Unmarshal(h.must("operator", "POST", "/v1/plans/dry-run", pool, 200), &p); err != nil {
		t.Fatal(err)
	}
	if !simulated(&p, "chat") || sim.runs.Load() == 0 {
		t.Fatalf("dry run: %d simulations, chat's reasons %+v; want the plan confirmed", sim.runs.Load(), p.Tenants)
	}
	h.must("operator", "PUT", "/v1/nodes/node-a", Inventory{GPUs: []GPU{{UUID: "GPU-a", Board: "H100-SXM5-80GB", MIG: "7g.80gb@0", Slices: []string{"7g.80gb"}}}}, 200)
	h.must("operator", "PUT", "/v1/tenants/chat", Tenant{Demand: 1, RatePerReplica: 10}, 200)
	h.must("operator", "POST", "/v1/plans/apply", pool, 200)
	before := sim.runs.Load()
	h.must("operator", "PUT", "/v1/tenants/chat/demand", RateDemand(40), 200)
	end := time.Now().Add(20 * time.Second)
	for replanned := false; !replanned; {
		for _, ev := range h.loop.View().Events {
			replanned = replanned || ev.Code == CodeReplanned && strings.Contains(ev.Message, "tenant chat asks 40 requests/s")
		}
		if time.Now().After(end) {
			t.Fatalf("no re-plan within 20 s; events %+v", h.loop.View().Events)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := h.loop.View(); v.Plan == nil || !simulated(v.Plan, "chat") || sim.runs.Load() <= before {
		t.Fatalf("re-plan in force after %d more simulations: %+v; want it confirmed", sim.runs.Load()-before, v.Plan)
	}

	plain := newHarness(t, ServerConfig{})
	var q v1.Plan
	if err := json.Unmarshal(plain.must("operator", "POST", "/v1/plans/dry-run", pool, 200), &q); err != nil {
		t.Fatal(err)
	}
	if simulated(&q, "chat") {
		t.Fatal("the zero Planning simulated the plan")
	}
	for _, tn := range q.Tenants {
		for _, r := range tn.Reasons {
			if strings.Contains(r.Message, "simulated") {
				t.Fatalf("reason %q without a simulator", r.Message)
			}
		}
	}
}

// A re-plan the engine refuses (here: GPU 0 is in a gate operation no agent finishes) is tried
// again with a pause that doubles up to MaxBackoff, not every Every: over 1.5 s with Every 20 ms
// and MaxBackoff 200 ms that is about ten tries (pauses 20, 40, 80, 160, then 200 ms), where a
// fixed pause would make some seventy.
func TestReplannerBacksOffAfterFailures(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Replanner{Loop: h.loop, Every: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	h.must("operator", "PUT", "/v1/nodes/node-a", Inventory{GPUs: []GPU{{UUID: "GPU-a", Board: "H100-SXM5-80GB", MIG: "7g.80gb@0", Slices: []string{"7g.80gb"}}}}, 200)
	h.must("operator", "PUT", "/v1/tenants/chat", Tenant{Demand: 1, RatePerReplica: 10}, 200)
	h.must("operator", "POST", "/v1/plans/apply", readFile(t, "../../examples/h100-7b-exclusive.yaml"), 200)
	h.must("operator", "PUT", "/v1/tenants/chat/demand", RateDemand(2), 200)
	time.Sleep(1500 * time.Millisecond)
	failed := 0
	for _, ev := range h.loop.View().Events {
		if ev.Code == CodeReplanFailed && strings.Contains(ev.Message, "another gate operation") {
			failed++
		}
	}
	t.Logf("%d failed re-plans", failed)
	if failed < 3 || failed > 20 {
		t.Fatalf("%d failed re-plans in 1.5 s, want about ten (it keeps trying, with a doubling pause)", failed)
	}
}
