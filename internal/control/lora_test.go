package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// loraPool is a Pool of three soft adapter tenants of one base model in one trust group on one
// node of two H100s: one shared engine serves them.
const loraPool = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: lora-cp}
fleet:
  nodes:
  - name: node-a
    gpus: [{board: H100-SXM5-80GB, count: 2}]
tenants:
%s`

func loraTenant(name string, rps float64) string {
	return fmt.Sprintf(`- name: %s
  path: acme/assistants
  isolation: soft
  model: {name: llama-3.1-8b, quantization: bf16, adapter: {name: %s-lora, repo: acme/%s-lora, rank: 16}}
  traffic: {rps: %g, inputTokens: 512, outputTokens: 128}
  slo: {ttftP99: 1s, tpotP99: 50ms}
`, name, name, name, rps)
}

// TestLoRAEngineThroughControlPlane: a pool of adapter tenants is planned through the control
// plane's API onto one shared LoRA engine; the engine is granted once, on the GPU the plan gives
// it, and runs on the node's simulated agent; the adapter tenants hold no slices of their own
// (the ones they held before the plan are released) and the API shows each one's share of the
// engine, which the fair allocator splits by weight when they want more than the engine.
func TestLoRAEngineThroughControlPlane(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	secret := NewSecret()
	if _, err := h.loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) {
		e.AddToken(now, HashToken(secret), Principal{Role: RoleAgent, Node: "node-a", Name: "node-a"})
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.tokens["agent-node-a"] = secret
	h100 := Inventory{GPUs: []GPU{{UUID: "GPU-a0", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}},
		{UUID: "GPU-a1", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}}}}
	var started []LayoutSlice // what the agent starts, by the layout it follows
	var mu sync.Mutex
	run := SimReplicas(func(LayoutSlice) time.Duration { return 0 })
	agent := h.simAgent(t, "node-a", func(a *SimAgent) {
		a.Inventory = h100
		a.Replicas = func(ctx context.Context, s LayoutSlice) (string, func(), error) {
			mu.Lock()
			started = append(started, s)
			mu.Unlock()
			return run(ctx, s)
		}
	})
	waitForView(t, h, "node-a registered", func(v *View) bool { return v.Capacity == 2 })

	weights := map[string]float64{"ad-1": 1, "ad-2": 1, "ad-3": 2}
	rates := map[string]float64{"ad-1": 6, "ad-2": 3, "ad-3": 1}
	for _, n := range []string{"ad-1", "ad-2", "ad-3"} {
		h.must("operator", "PUT", "/v1/tenants/"+n, Tenant{Path: "acme", Weight: weights[n], Demand: 1, RatePerReplica: 20}, 200)
	}
	// Before any plan each adapter tenant asks for a replica of its own: two get the two GPUs.
	waitForView(t, h, "two replicas before the plan", func(v *View) bool { return len(v.Grants) == 2 })

	body := fmt.Sprintf(loraPool, loraTenant("ad-1", rates["ad-1"])+loraTenant("ad-2", rates["ad-2"])+loraTenant("ad-3", rates["ad-3"]))
	var dry v1.Plan
	if err := json.Unmarshal(h.must("operator", "POST", "/v1/plans/dry-run", []byte(body), 200), &dry); err != nil {
		t.Fatal(err)
	}
	if len(dry.LoRAEngines) != 1 || len(dry.LoRAEngines[0].Adapters) != 3 {
		t.Fatalf("dry run: loraEngines %+v, want one engine of the three adapters", dry.LoRAEngines)
	}
	var applied PlanApplied
	if err := json.Unmarshal(h.must("operator", "POST", "/v1/plans/apply", []byte(body), 200), &applied); err != nil {
		t.Fatal(err)
	}
	eng := applied.Plan.LoRAEngines[0]
	for _, pt := range applied.Plan.Tenants {
		if len(pt.Replicas) > 0 || len(pt.LoRAEngines) != 1 {
			t.Errorf("plan tenant %s: replicas %v, engines %v; want the engine only", pt.Name, pt.Replicas, pt.LoRAEngines)
		}
	}
	wantSlice := fmt.Sprintf("node-a/GPU-a%d/0", eng.GPU.Index)
	waitForView(t, h, "the engine granted on its GPU and running", func(v *View) bool {
		if len(v.Grants) != 1 || v.Grants[0].Tenant != loraKey(eng.Name) || v.Grants[0].Slice != wantSlice {
			return false
		}
		for _, r := range agent.Running() {
			if r == v.Grants[0].ID {
				return true
			}
		}
		return false
	})
	engineGrant := h.loop.View().Grants[0].ID
	mu.Lock()
	if s := started[len(started)-1]; s.Tenant != loraKey(eng.Name) || s.Grant != engineGrant || s.ID != wantSlice {
		t.Errorf("the agent started %+v last, want the engine's replica on %s", s, wantSlice)
	}
	mu.Unlock()

	statuses := func() map[string]TenantStatus {
		var list []TenantStatus
		if err := json.Unmarshal(h.must("operator", "GET", "/v1/tenants", nil, 200), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]TenantStatus{}
		for _, s := range list {
			out[s.Name] = s
		}
		return out
	}
	total := rates["ad-1"] + rates["ad-2"] + rates["ad-3"]
	for n, s := range statuses() {
		if s.Granted != 0 || len(s.LoRAEngines) != 1 {
			t.Fatalf("tenant %s: granted %d, loraEngines %+v; want no slices and one engine", n, s.Granted, s.LoRAEngines)
		}
		l := s.LoRAEngines[0]
		part := rates[n] / total
		if l.Engine != eng.Name || l.Grant != engineGrant || l.PlannedRPS != rates[n] ||
			l.Wanted < part || l.Wanted > part+1e-3 || l.Share != l.Wanted {
			t.Errorf("tenant %s: %+v; want engine %s, grant %s, planned %g req/s, wanted and share ≈ %.3f",
				n, l, eng.Name, engineGrant, rates[n], part)
		}
	}

	// ad-1 asks for five times its planned rate: the three want more than the engine, and the
	// weights split it; the engine is still granted once, where it was.
	h.must("operator", "PUT", "/v1/tenants/ad-1/demand", RateDemand(5*rates["ad-1"]), 200)
	st := statuses()
	var sum float64
	for n, s := range st {
		l := s.LoRAEngines[0]
		sum += l.Share
		if l.Grant != engineGrant {
			t.Errorf("tenant %s: engine grant %q after a demand change, want %s", n, l.Grant, engineGrant)
		}
	}
	a1, a2, a3 := st["ad-1"].LoRAEngines[0], st["ad-2"].LoRAEngines[0], st["ad-3"].LoRAEngines[0]
	if sum > 1+1e-9 || a1.Wanted <= 1 || a1.Share >= a1.Wanted || a2.Share != a2.Wanted || a3.Share != a3.Wanted || a1.Share < 0.5 {
		t.Errorf("after ad-1 asks 5×: shares %+v %+v %+v (sum %.3f); want ad-2 and ad-3 served what they want and ad-1 the rest", a1, a2, a3, sum)
	}
	if v := h.loop.View(); len(v.Grants) != 1 || v.Grants[0].ID != engineGrant {
		t.Errorf("grants after the demand change: %+v, want the engine's only", v.Grants)
	}

	// Without demand the engine's adapters leave it nothing to serve: its slice is released.
	for _, n := range []string{"ad-1", "ad-2", "ad-3"} {
		h.must("operator", "PUT", "/v1/tenants/"+n+"/demand", ReplicasDemand(0), 200)
	}
	if v := h.loop.View(); len(v.Grants) != 0 {
		t.Errorf("grants without demand: %+v, want none", v.Grants)
	}
}

// waitForView polls the harness's view until ok holds (10 s at most).
func waitForView(t *testing.T, h *harness, what string, ok func(*View) bool) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		if ok(h.loop.View()) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	v := h.loop.View()
	t.Fatalf("%s: not reached; plan %+v; grants %+v, events %s", what, v.Plan.LoRAEngines, v.Grants, lastEvents(v, 8))
}

func lastEvents(v *View, n int) string {
	var b strings.Builder
	for _, ev := range v.Events[max(len(v.Events)-n, 0):] {
		b.WriteString(ev.Message + "; ")
	}
	return b.String()
}

// TestLoRAEngineGrantSurvivesRestart: an engine's grant is stored like a replica's and a restart
// from the stored state takes it over (same grant, same slice); an adapter tenant no longer on an
// engine of a newly applied plan asks for slices of its own again.
func TestLoRAEngineGrantSurvivesRestart(t *testing.T) {
	e, _ := NewEngine(EngineConfig{}, t0)
	inv := Inventory{GPUs: []GPU{{UUID: "G0", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}},
		{UUID: "G1", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}}}}
	if _, err := e.Register(t0, "n", inv); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := e.PutTenant(t0, Tenant{Name: n, Demand: 2, Reservation: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ref := v1.GPURef{Node: "n", Index: 1}
	p := &v1.Plan{Pool: "p", GPUs: []v1.PlanGPU{{Node: "n", Index: 0, Board: "H100-SXM5-80GB"},
		{Node: "n", Index: 1, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeExclusive, LoRAEngine: "e0"}},
		LoRAEngines: []v1.PlanLoRAEngine{{Name: "e0", GPU: ref, Adapters: []v1.PlanLoRAAdapter{{Tenant: "a", RPS: 1}, {Tenant: "b", RPS: 3}}}}}
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "p"}}
	if _, err := e.ApplyPlan(t0, pool, p); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	only := func(e *Engine) Grant {
		t.Helper()
		v := e.View(1)
		if len(v.Grants) != 1 || v.Grants[0].Tenant != "lora:e0" || v.Grants[0].Slice != "n/G1/0" {
			t.Fatalf("grants %+v, want the engine's only, on n/G1/0", v.Grants)
		}
		return v.Grants[0]
	}
	g := only(e)
	// Each adapter asking for replicas wants its planned part of the engine: b, 3 of its 4 req/s.
	if sh := e.View(1).Tenants[1].LoRAEngines; len(sh) != 1 || sh[0].Share != 0.75 {
		t.Fatalf("tenant b's share: %+v, want 0.75 of e0", sh)
	}
	st := stateOf(e)
	st.Plan, st.Pool = p, pool
	r, err := restoreEngine(EngineConfig{}, t0.Add(time.Second), st)
	if err != nil {
		t.Fatal(err)
	}
	if g2 := only(r); g2.ID != g.ID {
		t.Errorf("after a restart the engine's grant is %s, was %s", g2.ID, g.ID)
	}
	// A plan without the engine: its slice is released and a and b ask for their own again.
	if _, err := r.ApplyPlan(t0.Add(2*time.Second), pool, &v1.Plan{Pool: "p"}); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	got := map[string]int{}
	for _, gr := range r.View(2).Grants {
		got[gr.Tenant]++
	}
	if got["lora:e0"] != 0 || got["a"]+got["b"] != 2 {
		t.Errorf("grants after the engine left the plan: %v, want a's and b's own", got)
	}
}

// TestLoRAReplan: a demand rate of an adapter tenant makes the Replanner plan again with that
// rate, and the plan in force still serves the adapters on shared engines.
func TestLoRAReplan(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.startReplanner(t)
	h.must("operator", "PUT", "/v1/nodes/node-a", Inventory{GPUs: []GPU{{UUID: "GPU-a0", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}},
		{UUID: "GPU-a1", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}}}}, 200)
	for _, n := range []string{"ad-1", "ad-2"} {
		h.must("operator", "PUT", "/v1/tenants/"+n, Tenant{Demand: 1, RatePerReplica: 20}, 200)
	}
	h.must("operator", "POST", "/v1/plans/apply", []byte(fmt.Sprintf(loraPool, loraTenant("ad-1", 2)+loraTenant("ad-2", 1))), 200)
	h.must("operator", "PUT", "/v1/tenants/ad-1/demand", RateDemand(7), 200)
	waitForView(t, h, "a re-plan with ad-1 at 7 req/s", func(v *View) bool {
		if v.Replan.Done < v.Replan.Wanted || v.Plan == nil {
			return false
		}
		var rate float64
		for _, e := range v.Plan.LoRAEngines {
			for _, a := range e.Adapters {
				if a.Tenant == "ad-1" {
					rate += a.RPS
				}
			}
		}
		return rate == 7
	})
	v := h.loop.View()
	for _, pt := range v.Plan.Tenants {
		if len(pt.Replicas) > 0 || len(pt.LoRAEngines) == 0 {
			t.Errorf("re-planned tenant %s: replicas %v, engines %v", pt.Name, pt.Replicas, pt.LoRAEngines)
		}
	}
	if n := len(v.Plan.LoRAEngines); len(v.Grants) != n {
		t.Errorf("grants %+v for %d engines", v.Grants, n)
	}
}
