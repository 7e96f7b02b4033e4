package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/store"
)

// migInv is a node of H100s each cut into one 7g.80gb instance, as an agent reports it.
func migInv(node string, gpus int) Inventory {
	in := inv(gpus, 1, node)
	for i := range in.GPUs {
		in.GPUs[i].Slices, in.GPUs[i].MIG = []string{"7g.80gb"}, "7g.80gb@0"
	}
	return in
}

func lastCode(e *Engine, code Code) (Event, bool) {
	for i := len(e.events) - 1; i >= 0; i-- {
		if e.events[i].Code == code {
			return e.events[i], true
		}
	}
	return Event{}, false
}

func TestGateOperationsFollowPolicy(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour, Gate: GatePolicy{MaxUnavailable: 1, Cooldown: 10 * time.Minute, MaxAttempts: 2}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	in := migInv("node-a", 3)
	if _, err := e.Register(t0, "node-a", in); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutTenant(t0, Tenant{Name: "alpha", Demand: 1}); err != nil {
		t.Fatal(err)
	}
	g0, g1 := in.GPUs[0].UUID, in.GPUs[1].UUID
	// alpha's one replica sits on GPU 0 (lowest slice id).
	if gs := e.grants; len(gs) != 1 || e.grants["g1"].Slice != sliceID("node-a", g0, 0) {
		t.Fatalf("grants %+v, want g1 on GPU 0", e.grants)
	}
	bad := []string{"7g.80gb@1", "9g.80gb@0", ""}
	for _, l := range bad {
		if _, err := e.RequestLayout(t0, "node-a", g0, l); err == nil {
			t.Errorf("layout %q accepted", l)
		}
	}
	op0, err := e.RequestLayout(t0, "node-a", g0, "3g.40gb@4 3g.40gb@0")
	if err != nil {
		t.Fatal(err)
	}
	if op0.State != GateDraining || op0.Layout != "3g.40gb@0 3g.40gb@4" {
		t.Fatalf("first operation %+v, want draining to the sorted layout", op0)
	}
	checkInvariants(t, e)
	// Drain: alpha's replica keeps running on GPU 0 while its standby starts elsewhere; the agent
	// is not handed the layout yet.
	sb := e.standbyOf("g1")
	if sb == nil || e.grants["g1"].Slice != sliceID("node-a", g0, 0) || sb.Node != "node-a" || strings.Contains(sb.Slice, g0) {
		t.Fatalf("grants %+v, want g1 on GPU 0 and a standby on another GPU", e.grants)
	}
	l, _ := e.View(1).Layout("node-a")
	if len(l.GPUs) != 0 {
		t.Fatalf("agent handed %+v while the GPU drains", l.GPUs)
	}
	marks := map[string]string{}
	for _, s := range l.Slices {
		if s.Grant != "" {
			marks[s.Grant] = fmt.Sprintf("draining=%t standby=%t", s.Draining, s.Standby)
		}
	}
	if marks["g1"] != "draining=true standby=false" || marks[sb.ID] != "draining=false standby=true" {
		t.Fatalf("layout marks %v, want g1 draining and %s standby", marks, sb.ID)
	}
	if e.granted("alpha") != 1 {
		t.Fatalf("alpha counts %d replicas with its standby, want 1", e.granted("alpha"))
	}
	// The agent reports the standby ready: g1 stops, the standby is alpha's replica, and the
	// layout goes to the agent.
	in.Ready = []string{sb.ID}
	if _, err := e.Register(t0.Add(time.Second), "node-a", in); err != nil {
		t.Fatal(err)
	}
	in.Ready = nil
	checkInvariants(t, e)
	if _, ok := e.grants["g1"]; ok || e.grants[sb.ID].Replaces != "" {
		t.Fatalf("grants %+v after the standby was ready, want only %s, promoted", e.grants, sb.ID)
	}
	if gs := e.nodes["node-a"].Gates; len(gs) != 1 || gs[0].State != GateApplying {
		t.Fatalf("gates %+v, want applying", gs)
	}
	l, _ = e.View(2).Layout("node-a")
	if len(l.GPUs) != 1 || l.GPUs[0].UUID != g0 || l.GPUs[0].Op != op0.ID {
		t.Fatalf("agent's layout GPUs %+v, want GPU 0 with op %d", l.GPUs, op0.ID)
	}
	// maxUnavailable 1: the second waits, and says why.
	op1, err := e.RequestLayout(t0, "node-a", g1, "3g.40gb@0 3g.40gb@4")
	if err != nil {
		t.Fatal(err)
	}
	if op1.State != GateWaiting || op1.Reason != waitMaxUnavailable {
		t.Fatalf("second operation %+v, want waiting for GateMaxUnavailable", op1)
	}
	var inv *InvalidError
	if _, err := e.RequestLayout(t0, "node-a", g0, "7g.80gb@0"); !errors.Is(err, ErrConflict) ||
		!errors.As(err, &inv) || len(inv.Fields) != 1 || inv.Fields[0].Path != "layout" {
		t.Fatalf("changing an applying operation: %v, want a conflict naming the layout", err)
	}
	// The agent reports GPU 0 done: its two slices rejoin, and GPU 1's operation starts.
	in.GPUs[0].MIG, in.GPUs[0].Slices = "3g.40gb@0 3g.40gb@4", []string{"3g.40gb", "3g.40gb"}
	if _, err := e.Register(t0.Add(10*time.Second), "node-a", in); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	if _, ok := lastCode(e, CodeGateDone); !ok {
		t.Fatal("no GateDone event")
	}
	// alpha's replica (the promoted standby) sits on GPU 1, so GPU 1 drains first.
	if gs := e.nodes["node-a"].Gates; len(gs) != 1 || gs[0].State != GateDraining || gs[0].GPU != g1 {
		t.Fatalf("gates %+v, want GPU 1 draining", gs)
	}
	if len(e.slices) != 3 { // GPU 0's two, GPU 2's one; GPU 1 is out
		t.Fatalf("%d live slices, want 3", len(e.slices))
	}
	// Its standby is never reported ready: past the drain timeout the old replica stops anyway.
	if err := e.Tick(t0.Add(10*time.Second + 5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	if gs := e.nodes["node-a"].Gates; gs[0].State != GateApplying || e.granted("alpha") != 1 {
		t.Fatalf("GPU 1's operation %+v (alpha %d replicas), want applying after the drain timeout", gs[0], e.granted("alpha"))
	}
	// GPU 0 again within the cooldown: it waits for the cooldown.
	op, err := e.RequestLayout(t0.Add(5*time.Minute+11*time.Second), "node-a", g0, "7g.80gb@0")
	if err != nil || op.Reason != waitCooldown {
		t.Fatalf("operation %+v, %v; want waiting for GateCooldown", op, err)
	}
	if _, err := e.RequestLayout(t0.Add(5*time.Minute+11*time.Second), "node-a", g0, ""); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	// GPU 1's gate rolls back twice: retried once after the cooldown, then given up.
	fail := func(at time.Time, id uint64, attempt int) {
		t.Helper()
		in.GPUs[1].Gate = &GateReport{Op: id, Attempt: attempt, Code: "GateRolledBack", Message: "smoke failed"}
		if _, err := e.Register(at, "node-a", in); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, e)
	}
	fail(t0.Add(5*time.Minute+20*time.Second), op1.ID, 1)
	if gs := e.nodes["node-a"].Gates; len(gs) != 1 || gs[0].State != GateWaiting || gs[0].Reason != waitCooldown {
		t.Fatalf("after a failure %+v, want waiting for the cooldown", gs)
	}
	if len(e.slices) != 4 {
		t.Fatalf("%d live slices after the rollback, want 4", len(e.slices))
	}
	if err := e.Tick(t0.Add(15*time.Minute + 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if gs := e.nodes["node-a"].Gates; len(gs) != 1 || gs[0].State != GateApplying || gs[0].Attempts != 2 {
		t.Fatalf("after the cooldown %+v, want attempt 2 applying", gs)
	}
	fail(t0.Add(15*time.Minute+40*time.Second), op1.ID, 2)
	if gs := e.nodes["node-a"].Gates; len(gs) != 0 {
		t.Fatalf("gates %+v after the last attempt failed, want none", gs)
	}
	if _, ok := lastCode(e, CodeGateGaveUp); !ok {
		t.Fatal("no GateGaveUp event")
	}
}

func TestMaintenanceWindow(t *testing.T) {
	w := Window{Start: 22 * time.Hour, Length: 4 * time.Hour} // 22:00-02:00 UTC
	for _, c := range []struct {
		h    int
		open bool
	}{{21, false}, {22, true}, {23, true}, {1, true}, {2, false}, {12, false}} {
		if got := w.Open(time.Date(2026, 1, 1, c.h, 30, 0, 0, time.UTC)); got != c.open {
			t.Errorf("%02d:30 open=%t, want %t", c.h, got, c.open)
		}
	}
	if !(Window{}).Open(t0) {
		t.Error("a zero window is closed")
	}
}

// A plan's MIG layouts become gate operations for the GPUs whose layout differs; a plan naming
// an unknown node or GPU changes nothing and says every problem.
func TestApplyPlan(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(t0, "node-a", migInv("node-a", 2)); err != nil {
		t.Fatal(err)
	}
	mig := func(node string, i int, board string, ins ...v1.PlanInstance) v1.PlanGPU {
		return v1.PlanGPU{Node: node, Index: i, Board: board, Role: v1.RolePool, Mode: v1.ModeMIG, Instances: ins}
	}
	full := v1.PlanInstance{Profile: "7g.80gb"}
	half := []v1.PlanInstance{{Profile: "3g.40gb", Start: 4}, {Profile: "3g.40gb"}}
	_, err = e.ApplyPlan(t0, &v1.Pool{}, &v1.Plan{GPUs: []v1.PlanGPU{mig("node-a", 0, "H100-SXM5-80GB", half...),
		mig("node-z", 0, "H100-SXM5-80GB", full), mig("node-a", 5, "H100-SXM5-80GB", full), mig("node-a", 1, "A100-SXM4-40GB", full)}})
	for _, want := range []string{"gpus[1].node", "gpus[2].index", "gpus[3].board"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if len(e.nodes["node-a"].Gates) != 0 {
		t.Fatalf("a refused plan left gate operations: %+v", e.nodes["node-a"].Gates)
	}
	p := &v1.Plan{Pool: "p", GPUs: []v1.PlanGPU{mig("node-a", 0, "H100-SXM5-80GB", half...), mig("node-a", 1, "H100-SXM5-80GB", full)}}
	ops, err := e.ApplyPlan(t0, &v1.Pool{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].GPU != "GPU-node-a-0" || ops[0].Layout != "3g.40gb@0 3g.40gb@4" || ops[0].State != GateApplying {
		t.Fatalf("operations %+v, want GPU 0 to 3g.40gb@0 3g.40gb@4, applying", ops)
	}
	if e.View(1).Plan != p {
		t.Error("the applied plan is not the view's current plan")
	}
}

// TestReplanOnRateAndFleet: once a plan is applied, a tenant's new demand rate and a new node
// make the Replanner plan again (off the engine's goroutine) and apply the result.
func TestReplanOnRateAndFleet(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.startReplanner(t)
	h.settleGates(t) // the nodes' agents: apply and re-plans change their GPUs
	h100 := func(node string) Inventory {
		return Inventory{GPUs: []GPU{{UUID: "GPU-" + node, Board: "H100-SXM5-80GB", MIG: "7g.80gb@0", Slices: []string{"7g.80gb"}}}}
	}
	h.must("operator", "PUT", "/v1/nodes/node-a", h100("node-a"), 200)
	h.must("operator", "PUT", "/v1/tenants/chat", Tenant{Demand: 1, RatePerReplica: 10}, 200)
	h.must("operator", "POST", "/v1/plans/apply", readFile(t, "../../examples/h100-7b-exclusive.yaml"), 200)
	waitEvent := func(code Code, text string) {
		t.Helper()
		end := time.Now().Add(20 * time.Second)
		for time.Now().Before(end) {
			for _, ev := range h.loop.View().Events {
				if ev.Code == code && strings.Contains(ev.Message, text) {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no %s event with %q; events: %+v", code, text, h.loop.View().Events)
	}
	h.must("operator", "PUT", "/v1/tenants/chat/demand", RateDemand(40), 200)
	waitEvent(CodeReplanned, "tenant chat asks 40 requests/s")
	h.must("operator", "PUT", "/v1/nodes/node-b", h100("node-b"), 200)
	waitEvent(CodeReplanned, "node node-b reports 1 GPUs")
	if v := h.loop.View(); v.Plan == nil || len(v.Plan.GPUs) != 2 {
		t.Fatalf("the plan in force does not cover the two nodes: %+v", v.Plan)
	}
}

// runLoopOn runs a loop on the store file at path (a start of the control plane without its
// HTTP server); the function returned stops it and closes the store, as a shutdown does.
func runLoopOn(t *testing.T, path string, log *slog.Logger) (*Loop, func()) {
	t.Helper()
	st, err := store.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	loop, err := NewLoop(context.Background(), LoopConfig{}, st, SystemClock{}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop.Run(ctx); close(done) }()
	return loop, func() { cancel(); <-done; st.Close() }
}

// The applied plan and its pool are acknowledged state: they survive a restart from the store.
func TestAppliedPlanSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() (*Loop, func()) { return runLoopOn(t, path, log) }
	loop, stop := open()
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "p1"}}
	p := &v1.Plan{Pool: "p1", GPUs: []v1.PlanGPU{{Node: "n", Index: 0, Board: "H100-SXM5-80GB", Mode: v1.ModeExclusive}}}
	if _, err := loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) { return e.ApplyPlan(now, pool, p) }); err != nil {
		t.Fatal(err)
	}
	stop()
	loop, stop = open()
	defer stop()
	if v := loop.View(); v.Plan == nil || v.Pool == nil || v.Plan.Pool != "p1" || v.Pool.Metadata.Name != "p1" || len(v.Plan.GPUs) != 1 {
		t.Fatalf("after a restart the plan is %+v and the pool %+v, want p1's", v.Plan, v.Pool)
	}
}

// TestApplyPlanRunsGPUsWhole: a GPU the plan runs whole (exclusive, MPS, time-sliced) with a tenant
// on it while the node reports MIG instances gets a gate operation to no instance with MIG mode
// off, and so does a GPU the plan leaves idle (its old instances go: it is left clean), and one in
// MIG mode with no instance (before, it got none: its layout "" matched, and it offered no slice
// for ever); a canary GPU the plan runs nothing on and one already out of MIG mode get none. The
// agent's report of the GPU out of MIG mode ends the operation.
func TestApplyPlanRunsGPUsWhole(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	in := migInv("node-a", 5)
	in.GPUs[2].Slices, in.GPUs[2].MIG = []string{}, ""            // MIG mode on, no instance
	in.GPUs[3].Slices, in.GPUs[3].MIG = []string{"exclusive"}, "" // MIG mode off
	if _, err := e.Register(t0, "node-a", in); err != nil {
		t.Fatal(err)
	}
	whole := func(i int, mode v1.Mode, tenant string) v1.PlanGPU {
		g := v1.PlanGPU{Node: "node-a", Index: i, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: mode}
		if tenant != "" {
			g.Replicas = []v1.PlanReplica{{Tenant: tenant}}
		} else {
			g.Role = v1.RoleIdle
		}
		return g
	}
	canary := whole(4, v1.ModeExclusive, "")
	canary.Role = v1.RoleCanary
	p := &v1.Plan{Pool: "p", GPUs: []v1.PlanGPU{whole(0, v1.ModeExclusive, "rag"), whole(1, v1.ModeExclusive, ""),
		whole(2, v1.ModeExclusive, "chat"), whole(3, v1.ModeMPS, "idle"), canary}}
	ops, err := e.ApplyPlan(t0, &v1.Pool{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 {
		t.Fatalf("operations %+v, want three: GPUs 0, 1 and 2 to no instance, MIG mode off", ops)
	}
	for i, op := range ops {
		from := "7g.80gb@0"
		if i == 2 {
			from = ""
		}
		if op.GPU != fmt.Sprintf("GPU-node-a-%d", i) || op.Layout != "" || !op.MIGOff || op.From != from {
			t.Fatalf("operation %+v, want GPU %d from %q to no instance, MIG mode off", op, i, from)
		}
	}
	idleAsked := false
	for _, ev := range e.events {
		idleAsked = idleAsked || ev.Code == CodeGateRequested && strings.Contains(ev.Message, "GPU-node-a-1") && strings.Contains(ev.Message, "idle")
	}
	if !idleAsked {
		t.Fatal("no GateRequested of GPU 1 says the plan leaves it idle")
	}
	for _, code := range []Code{CodeGateDraining, CodeGateStarted} {
		if ev, ok := lastCode(e, code); !ok || !strings.Contains(ev.Message, "applies no MIG instance and MIG mode off") {
			t.Errorf("%s %v %q, want it to say the agent applies no MIG instance and MIG mode off", code, ok, ev.Message)
		}
	}
	// One GPU out at a time (maxUnavailable 1): GPU 0 is handed over, GPUs 1 and 2 wait.
	for i, at := range []time.Duration{0, time.Second, 2 * time.Second} {
		l, _ := e.View(uint64(i + 1)).Layout("node-a")
		if len(l.GPUs) != 1 || l.GPUs[0].UUID != fmt.Sprintf("GPU-node-a-%d", i) || !l.GPUs[0].MIGOff || l.GPUs[0].MIG != "" {
			t.Fatalf("node layout GPUs %+v, want GPU %d handed over with migOff", l.GPUs, i)
		}
		in.GPUs[i].Slices, in.GPUs[i].MIG = []string{"exclusive"}, ""
		if _, err := e.Register(t0.Add(at+time.Second), "node-a", in); err != nil {
			t.Fatal(err)
		}
		if ev, ok := lastCode(e, CodeGateDone); !ok || !strings.Contains(ev.Message, "MIG mode off") || !strings.Contains(ev.Message, l.GPUs[0].UUID) ||
			!strings.HasSuffix(ev.Message, "; its one slice rejoins the pool") {
			t.Fatalf("GateDone %v %q, want one saying GPU %d's MIG mode is off and its one slice rejoins the pool", ok, ev.Message, i)
		}
	}
	if len(e.nodes["node-a"].Gates) != 0 {
		t.Fatalf("operations left: %+v", e.nodes["node-a"].Gates)
	}
	if g := e.nodes["node-a"].Inventory.GPUs[4]; g.MIG != "7g.80gb@0" {
		t.Fatalf("canary GPU %+v, want its 7g.80gb@0 kept", g)
	}
}

// TestApplyPlanListsEachOperationOnce: two GPUs of one node changed by one plan are two
// operations in the answer, not four.
func TestApplyPlanListsEachOperationOnce(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(t0, "node-a", migInv("node-a", 2)); err != nil {
		t.Fatal(err)
	}
	half := []v1.PlanInstance{{Profile: "3g.40gb", Start: 4}, {Profile: "3g.40gb"}}
	var gs []v1.PlanGPU
	for i := range 2 {
		gs = append(gs, v1.PlanGPU{Node: "node-a", Index: i, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeMIG, Instances: half})
	}
	ops, err := e.ApplyPlan(t0, &v1.Pool{}, &v1.Plan{Pool: "p", GPUs: gs})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].GPU != "GPU-node-a-0" || ops[1].GPU != "GPU-node-a-1" {
		t.Fatalf("operations %+v, want GPU 0's and GPU 1's, once each", ops)
	}
}

// TestApplyPlanOnGPUBeingChangedIsConflict: a plan that asks a GPU in another gate operation for
// a layout is refused as a conflict (409, its field path named), as an operator's request for that
// GPU is; a plan that also names an unknown node is a bad request (400).
func TestApplyPlanOnGPUBeingChangedIsConflict(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.must("operator", "PUT", "/v1/nodes/node-a", migInv("node-a", 2), 200)
	h.must("operator", "PUT", "/v1/nodes/node-a/gpus/GPU-node-a-0/layout", map[string]string{"layout": "3g.40gb@0 3g.40gb@4"}, 200)
	plan := func(gpus ...v1.PlanGPU) *v1.Plan { return &v1.Plan{Pool: "p", GPUs: gpus} }
	mig := func(node string, i int) v1.PlanGPU {
		return v1.PlanGPU{Node: node, Index: i, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeMIG,
			Instances: []v1.PlanInstance{{Profile: "2g.20gb"}, {Profile: "2g.20gb", Start: 2}}}
	}
	_, err := h.loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) {
		return e.ApplyPlan(now, &v1.Pool{}, plan(mig("node-a", 0)))
	})
	var inv *InvalidError
	if !errors.As(err, &inv) || !inv.conflict || !strings.Contains(err.Error(), "gpus[0]: GPU 0 of node node-a is being changed") {
		t.Fatalf("a plan changing a GPU in another gate operation: %v, want a conflict naming gpus[0]", err)
	}
	_, err = h.loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) {
		return e.ApplyPlan(now, &v1.Pool{}, plan(mig("node-a", 0), mig("node-z", 0)))
	})
	if !errors.As(err, &inv) || inv.conflict || !strings.Contains(err.Error(), "gpus[1].node") {
		t.Fatalf("a plan naming an unknown node too: %v, want a bad request naming gpus[1].node", err)
	}
}

// TestReplanDoesNotRetryGivenUpChange: a change given up after its attempts is not asked again
// by a re-plan that wants the same layout (before, every fleet change started it again, drained
// the GPU and failed the same way); an operator's apply asks again, and a finished change of the
// GPU forgets it.
func TestReplanDoesNotRetryGivenUpChange(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour, Gate: GatePolicy{MaxAttempts: 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(t0, "node-a", migInv("node-a", 1)); err != nil {
		t.Fatal(err)
	}
	half := []v1.PlanInstance{{Profile: "3g.40gb"}, {Profile: "3g.40gb", Start: 4}}
	p := &v1.Plan{Pool: "p", GPUs: []v1.PlanGPU{{Node: "node-a", Index: 0, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeMIG, Instances: half}}}
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "p"}}
	if !e.Replanned(t0, 1, pool, p, nil) || len(e.nodes["node-a"].Gates) != 1 {
		t.Fatalf("the first plan asked %+v, want one operation", e.nodes["node-a"].Gates)
	}
	op := e.nodes["node-a"].Gates[0]
	failed := migInv("node-a", 1)
	failed.GPUs[0].Gate = &v1.GateReport{Op: op.ID, Attempt: op.Attempts, Code: "GateRolledBack", Message: "smoke failed"}
	if _, err := e.Register(t0.Add(time.Second), "node-a", failed); err != nil {
		t.Fatal(err)
	}
	if ev, ok := lastCode(e, CodeGateGaveUp); !ok || len(e.nodes["node-a"].Gates) != 0 {
		t.Fatalf("the failed change was not given up: %+v", e.nodes["node-a"].Gates)
	} else if !strings.Contains(ev.Message, "given up after 1 attempt (GateRolledBack)") {
		t.Fatalf("GateGaveUp %q, want \"after 1 attempt\" (L8: was \"after 1 attempts\")", ev.Message)
	}
	if !e.Replanned(t0.Add(time.Minute), 2, pool, p, nil) {
		t.Fatal("the re-plan was not applied")
	}
	if g := e.nodes["node-a"].Gates; len(g) != 0 {
		t.Fatalf("a re-plan asked again for the given-up change: %+v", g)
	}
	if ev, _ := lastCode(e, CodeReplanned); !strings.Contains(ev.Message, "1 changes given up before not asked again") {
		t.Errorf("the re-plan does not say what it left out: %q", ev.Message)
	}
	ops, err := e.ApplyPlan(t0.Add(2*time.Minute), pool, p)
	if err != nil || len(ops) != 1 {
		t.Fatalf("an operator's apply did not ask again: %+v %v", ops, err)
	}
	done := migInv("node-a", 1)
	done.GPUs[0].MIG, done.GPUs[0].Slices = "3g.40gb@0 3g.40gb@4", []string{"3g.40gb", "3g.40gb"}
	if _, err := e.Register(t0.Add(3*time.Minute), "node-a", done); err != nil {
		t.Fatal(err)
	}
	if n := e.nodes["node-a"]; len(n.Gates) != 0 || len(n.GaveUp) != 0 {
		t.Fatalf("after the change was done: operations %+v, given up %v", n.Gates, n.GaveUp)
	}
}

// A lost node's applying operation does not hold the pool's maxUnavailable budget, is settled by
// the node's report when it is back, and an operator can remove a lost node (its operations are
// given up) but not a live, uncordoned one or one that still runs a replica.
func TestLostNodeOperationFreesBudget(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Minute, Gate: GatePolicy{MaxUnavailable: 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := migInv("node-a", 1), migInv("node-b", 1)
	for n, in := range map[string]Inventory{"node-a": a, "node-b": b} {
		if _, err := e.Register(t0, n, in); err != nil {
			t.Fatal(err)
		}
	}
	half := "3g.40gb@0 3g.40gb@4"
	if op, err := e.RequestLayout(t0, "node-b", b.GPUs[0].UUID, half); err != nil || op.State != GateApplying {
		t.Fatalf("node-b's operation %+v %v, want applying", op, err)
	}
	// node-a keeps reporting; node-b goes silent and is lost.
	t1 := t0.Add(90 * time.Second)
	if _, err := e.Register(t1.Add(-time.Second), "node-a", a); err != nil {
		t.Fatal(err)
	}
	if err := e.Tick(t1); err != nil {
		t.Fatal(err)
	}
	if !e.nodes["node-b"].Lost {
		t.Fatal("node-b not lost")
	}
	if ev, _ := lastCode(e, CodeNodeLost); !strings.Contains(ev.Message, "no longer counts against maxUnavailable") {
		t.Errorf("NodeLost does not say the operation stops counting: %q", ev.Message)
	}
	opA, err := e.RequestLayout(t1, "node-a", a.GPUs[0].UUID, half)
	if err != nil {
		t.Fatal(err)
	}
	if opA.State == GateWaiting {
		t.Fatalf("node-a's operation waits (%s) behind the lost node's", opA.Reason)
	}
	// node-a is live and not cordoned: it cannot be removed.
	if err := e.RemoveNode(t1, "node-a"); !isConflict(err) {
		t.Fatalf("removing a live node: %v, want a conflict", err)
	}
	// node-b is back with the new layout (its agent's journal finished the change): done.
	back := migInv("node-b", 1)
	back.Epoch = e.nodes["node-b"].Epoch
	back.GPUs[0].MIG, back.GPUs[0].Slices = half, []string{"3g.40gb", "3g.40gb"}
	if _, err := e.Register(t1.Add(time.Second), "node-b", back); err != nil {
		t.Fatal(err)
	}
	if g := e.nodes["node-b"].Gates; len(g) != 0 {
		t.Fatalf("node-b's operation not settled by its report: %+v", g)
	}
	if ev, _ := lastCode(e, CodeGateDone); !strings.Contains(ev.Message, "node-b") {
		t.Errorf("last GateDone %q, want node-b's", ev.Message)
	}
	checkInvariants(t, e)
}

func isConflict(err error) bool {
	var inv *InvalidError
	return errors.As(err, &inv) && inv.conflict
}

// Removing a lost node gives its operations up, deletes its record from the store, and frees the
// budget; a cordoned node is removed once no grant is left on it.
func TestRemoveNode(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Minute, Gate: GatePolicy{MaxUnavailable: 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	save := func() {
		t.Helper()
		b, err := e.batchFor(e.Take())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Commit(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	a, b := migInv("node-a", 1), migInv("node-b", 1)
	for n, in := range map[string]Inventory{"node-a": a, "node-b": b} {
		if _, err := e.Register(t0, n, in); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.PutTenant(t0, Tenant{Name: "alpha", Demand: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RequestLayout(t0, "node-b", b.GPUs[0].UUID, "3g.40gb@0 3g.40gb@4"); err != nil {
		t.Fatal(err)
	}
	save()
	if err := e.RemoveNode(t0, "node-x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing an unknown node: %v", err)
	}
	// alpha runs on node-a (first slice by id); cordoned, its replica runs until its standby on
	// node-c is ready, so node-a cannot be removed yet.
	if _, err := e.Register(t0, "node-c", inv(1, 1, "node-c")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cordon(t0, "node-a", true); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveNode(t0, "node-a"); !isConflict(err) || !strings.Contains(err.Error(), "still run on node node-a") {
		t.Fatalf("removing a cordoned node with a grant: %v, want a conflict naming the grant", err)
	}
	if _, err := e.Cordon(t0, "node-a", false); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(90 * time.Second)
	for n, in := range map[string]Inventory{"node-a": a, "node-c": inv(1, 1, "node-c")} {
		if _, err := e.Register(t1.Add(-time.Second), n, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Tick(t1); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveNode(t1, "node-b"); err != nil {
		t.Fatalf("removing a lost node: %v", err)
	}
	if _, ok := e.nodes["node-b"]; ok {
		t.Fatal("node-b still there")
	}
	if ev, _ := lastCode(e, CodeGateGaveUp); !strings.Contains(ev.Message, "node node-b was removed") {
		t.Errorf("GateGaveUp %q", ev.Message)
	}
	if _, ok := lastCode(e, CodeNodeRemoved); !ok {
		t.Error("no NodeRemoved event")
	}
	save()
	snap, err := st.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stt, err := stateFrom(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range stt.Nodes {
		if n.Name == "node-b" {
			t.Fatal("the store still holds node-b")
		}
	}
	checkInvariants(t, e)
	// The removal leaves a tombstone: node-b's agent, still running, is refused (before, its next
	// report registered the node again and brought it back into the pool), also by an engine
	// restored from the store, until an operator re-admits the node.
	if _, ok := stt.Removed["node-b"]; !ok {
		t.Fatalf("the store holds no tombstone for node-b: %+v", stt.Removed)
	}
	r, err := restoreEngine(e.cfg, t1, stt)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range []*Engine{e, r} {
		if _, err := en.Register(t1, "node-b", b); !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "gpupool node admit node-b") {
			t.Fatalf("report of the removed node: %v, want ErrRemoved saying how to re-admit it", err)
		}
		if err := en.Heartbeat(t1, "node-b"); !errors.Is(err, ErrRemoved) {
			t.Fatalf("heartbeat of the removed node: %v, want ErrRemoved", err)
		}
		if _, ok := en.nodes["node-b"]; ok {
			t.Fatal("the refused report registered node-b")
		}
	}
	if err := e.AdmitNode(t1, "node-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("admitting a node that was not removed: %v, want not found", err)
	}
	if err := e.AdmitNode(t1, "node-b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := lastCode(e, CodeNodeAdmitted); !ok {
		t.Error("no NodeAdmitted event")
	}
	if ch := e.Take(); ch.Removed["node-b"] {
		t.Fatalf("admission leaves the tombstone stored: %+v", ch.Removed)
	}
	if _, err := e.Register(t1, "node-b", b); err != nil {
		t.Fatalf("report of the re-admitted node: %v", err)
	}
	if n := e.nodes["node-b"]; n == nil || n.Epoch != 0 || n.Lost {
		t.Fatalf("node-b after re-admission: %+v, want a new live node", n)
	}
}

// A standby does not start on a GPU whose own gate operation waits, while another free slice
// exists: it would move a second time when that operation starts.
func TestStandbyAvoidsGPUWithPendingChange(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour, Gate: GatePolicy{MaxUnavailable: 1, Cooldown: 10 * time.Minute}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	in := migInv("node-a", 3)
	if _, err := e.Register(t0, "node-a", in); err != nil {
		t.Fatal(err)
	}
	g0, g1 := in.GPUs[0].UUID, in.GPUs[1].UUID
	half := "3g.40gb@0 3g.40gb@4"
	// GPU 1 is cut in two (nothing runs there), then asked back: that waits for the cooldown.
	if _, err := e.RequestLayout(t0, "node-a", g1, half); err != nil {
		t.Fatal(err)
	}
	done := migInv("node-a", 3)
	done.GPUs[1].MIG, done.GPUs[1].Slices = half, []string{"3g.40gb", "3g.40gb"}
	if _, err := e.Register(t0.Add(time.Second), "node-a", done); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutTenant(t0.Add(time.Second), Tenant{Name: "chat", Demand: 1}); err != nil {
		t.Fatal(err)
	}
	if g := e.grants["g1"]; g == nil || !strings.Contains(g.Slice, g0) {
		t.Fatalf("grants %+v, want chat's g1 on GPU 0", e.grants)
	}
	if op, err := e.RequestLayout(t0.Add(2*time.Second), "node-a", g1, "7g.80gb@0"); err != nil || op.State != GateWaiting {
		t.Fatalf("GPU 1's second change %+v %v, want waiting", op, err)
	}
	// GPU 0, where chat runs, is changed: the standby goes to GPU 2, not to GPU 1.
	if _, err := e.RequestLayout(t0.Add(3*time.Second), "node-a", g0, half); err != nil {
		t.Fatal(err)
	}
	sb := e.standbyOf("g1")
	if sb == nil {
		t.Fatal("no standby for g1")
	}
	if strings.Contains(sb.Slice, g1) {
		t.Fatalf("standby %s on GPU 1, whose own change waits", sb.Slice)
	}
	checkInvariants(t, e)
}

// TestOperatorAsksGPUWhole: `{"migOff": true}` asks for a GPU run whole, a gate operation with
// migOff, also of a GPU left in MIG mode with no instance, which no layout could ask for before
// (`{"layout": ""}` cancels, and its layout "" already matched); a GPU already whole, or a body
// with a layout too, is a 400 naming migOff.
func TestOperatorAsksGPUWhole(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	in := inv(3, 1, "n1")
	in.GPUs[0].Slices, in.GPUs[0].MIG = []string{}, ""                   // MIG mode on, no instance
	in.GPUs[1].Slices, in.GPUs[1].MIG = []string{"exclusive"}, ""        // whole
	in.GPUs[2].Slices, in.GPUs[2].MIG = []string{"7g.80gb"}, "7g.80gb@0" // one instance
	h.must("agent-n1", "PUT", "/v1/nodes/n1", in, 200)
	var op GateOp
	json.Unmarshal(h.must("operator", "PUT", "/v1/nodes/n1/gpus/GPU-n1-0/layout", map[string]any{"migOff": true}, 200), &op)
	if !op.MIGOff || op.Layout != "" || op.From != "" || op.GPU != "GPU-n1-0" {
		t.Fatalf("operation %+v, want GPU-n1-0 to no instance, MIG mode off", op)
	}
	var l Layout
	json.Unmarshal(h.must("agent-n1", "GET", "/v1/nodes/n1/layout", nil, 200), &l)
	if op.State == GateApplying && (len(l.GPUs) != 1 || !l.GPUs[0].MIGOff) {
		t.Fatalf("node layout GPUs %+v, want GPU-n1-0 handed over with migOff", l.GPUs)
	}
	for _, c := range []struct {
		gpu  string
		body map[string]any
	}{
		{"GPU-n1-1", map[string]any{"migOff": true}},
		{"GPU-n1-2", map[string]any{"migOff": true, "layout": "3g.40gb@0"}},
	} {
		code, out := h.do("operator", "PUT", "/v1/nodes/n1/gpus/"+c.gpu+"/layout", c.body)
		var p struct {
			Errors []FieldError `json:"errors"`
		}
		json.Unmarshal(out, &p)
		if code != 400 || len(p.Errors) != 1 || p.Errors[0].Path != "migOff" {
			t.Errorf("%s %v: %d %s, want 400 naming migOff", c.gpu, c.body, code, out)
		}
	}
	json.Unmarshal(h.must("operator", "PUT", "/v1/nodes/n1/gpus/GPU-n1-2/layout", map[string]any{"migOff": true}, 200), &op)
	if !op.MIGOff || op.From != "7g.80gb@0" {
		t.Fatalf("operation %+v, want GPU-n1-2 from 7g.80gb@0 to no instance, MIG mode off", op)
	}
}

// TestApplySamePlanAgainKeepsOperations: applying a plan again (a client's retry of an apply
// whose answer it lost when the server died after committing it) keeps the operations it asked
// for, waiting or started, with their ids and attempts, and answers 200 with them. Before, a GPU
// whose operation had started made the retry a 409 ("being changed by another gate operation")
// and a waiting one was replaced by a new operation with a new id.
func TestApplySamePlanAgainKeepsOperations(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.must("operator", "PUT", "/v1/nodes/node-a", migInv("node-a", 2), 200)
	half := []v1.PlanInstance{{Profile: "3g.40gb"}, {Profile: "3g.40gb", Start: 4}}
	gpu := func(i int) v1.PlanGPU {
		return v1.PlanGPU{Node: "node-a", Index: i, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeMIG, Instances: half}
	}
	p := &v1.Plan{Pool: "p", GPUs: []v1.PlanGPU{gpu(0), gpu(1)}}
	apply := func() ([]GateOp, error) {
		v, err := h.loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) {
			return e.ApplyPlan(now, &v1.Pool{}, p)
		})
		ops, _ := v.([]GateOp)
		return ops, err
	}
	first, err := apply()
	if err != nil || len(first) != 2 {
		t.Fatalf("first apply: %v, %+v; want two operations", err, first)
	}
	states := map[GateState]int{}
	for _, o := range first {
		states[o.State]++
	}
	// --max-unavailable 1: one started, the other waits.
	if states[GateWaiting] != 1 || states[GateWaiting]+states[GateDraining]+states[GateApplying] != 2 {
		t.Fatalf("first apply: states %v, want one started and one waiting", states)
	}
	again, err := apply()
	if err != nil {
		t.Fatalf("the same plan again: %v, want the operations it asked for", err)
	}
	ids := func(ops []GateOp) []uint64 {
		var out []uint64
		for _, o := range ops {
			out = append(out, o.ID)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(ids(first), ids(again)) {
		t.Fatalf("the same plan again: operations %v, want the first apply's %v", ids(again), ids(first))
	}
	for _, n := range h.loop.View().Nodes {
		if n.Name == "node-a" && !slices.Equal(ids(n.Gates), ids(first)) {
			t.Fatalf("node-a's operations after the retry: %v, want %v", ids(n.Gates), ids(first))
		}
	}
}
