package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/control"
)

// TestAgentFollowsControlPlane runs the control plane and a real agent on the NVML fake in this
// process: the agent registers the node with its GPUs read over NVML; a gate operation asked
// through the API drains the GPU (the replica's standby starts on another GPU, the agent reports
// it ready, the old replica stops), reaches the agent by long-poll, passes the gate (cordon,
// drain, destroy, create, verify, smoke, uncordon) on the fake GPU, and the agent's report ends
// the operation with the GPU's new slices back in the pool.
func TestAgentFollowsControlPlane(t *testing.T) {
	url, op, c, out, node := startFakeAgent(t)
	ctx := context.Background()
	n := node()
	g0 := n.Inventory.GPUs[0]
	if g0.MIG != "7g.80gb@0" || len(g0.Slices) != 1 {
		t.Fatalf("GPU 0 reported as %+v, want one 7g.80gb@0 instance", g0)
	}
	must(t, c.call(ctx, "PUT", "/v1/tenants/alpha", control.Tenant{Demand: 1}, nil))
	onGPU0 := func() bool {
		var gs []control.Grant
		must(t, c.call(ctx, "GET", "/v1/grants", nil, &gs))
		return len(gs) == 1 && strings.Contains(gs[0].Slice, "/"+g0.UUID+"/")
	}
	if !onGPU0() {
		t.Fatal("alpha's replica is not on GPU 0 (the lowest slice id)")
	}

	var gop control.GateOp
	must(t, c.call(ctx, "PUT", "/v1/nodes/fake-a/gpus/"+g0.UUID+"/layout", control.LayoutRequest{Layout: "3g.40gb@4 3g.40gb@0"}, &gop))
	if gop.State != control.GateDraining {
		t.Fatalf("gate operation %+v, want draining at once (nothing else changes; a replica runs there)", gop)
	}
	// The replica's standby starts on another GPU; the agent reports it ready, the old one stops,
	// and only then does the agent get the new layout.
	waitFor(t, 20*time.Second, out, "the replica to leave GPU 0", func() bool { return !onGPU0() })
	waitFor(t, 30*time.Second, out, "GPU 0 to have its new layout and the operation to end", func() bool {
		n := node()
		return len(n.Gates) == 0 && n.Inventory.GPUs[0].MIG == "3g.40gb@0 3g.40gb@4"
	})
	for _, want := range []string{"cordon", "destroy 7g.80gb@0", "create 3g.40gb@0", "create 3g.40gb@4", "GateDone", "uncordon"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("agent output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("agent output:\n%s", out.String())
	var evs []control.Event
	must(t, c.call(ctx, "GET", "/v1/events", nil, &evs))
	var codes []string
	for _, ev := range evs {
		if strings.HasPrefix(string(ev.Code), "Gate") {
			codes = append(codes, string(ev.Code))
		}
	}
	if strings.Join(codes, " ") != "GateRequested GateDraining GateStarted GateDone" {
		t.Errorf("gate events %v, want GateRequested GateDraining GateStarted GateDone", codes)
	}
	var moved bool
	for _, ev := range evs {
		moved = moved || (ev.Code == control.CodeMoved && strings.Contains(ev.Message, "standby reported ready"))
	}
	if !moved {
		t.Error("no Moved event for a standby reported ready")
	}
	var pool control.PoolView
	must(t, c.call(ctx, "GET", "/v1/pool", nil, &pool))
	kinds := 0
	for _, s := range pool.Slices {
		if s.GPU == g0.UUID && s.Kind == "3g.40gb" {
			kinds++
		}
	}
	if kinds != 2 {
		t.Errorf("pool has %d 3g.40gb slices on GPU 0, want 2", kinds)
	}
	// The same through the CLI: back to one instance.
	if o, errs, code := runCmd(t, "gate", "set", "fake-a", g0.UUID, "7g.80gb@0", "--server", url, "--token", op); code != 0 || !strings.Contains(o, `"3g.40gb@0 3g.40gb@4" → "7g.80gb@0", applying`) {
		t.Fatalf("gate set: %d %q %q", code, o, errs)
	}
	waitFor(t, 30*time.Second, out, "GPU 0 to be one instance again", func() bool {
		n := node()
		return len(n.Gates) == 0 && n.Inventory.GPUs[0].MIG == "7g.80gb@0"
	})
	if o, _, code := runCmd(t, "gate", "list", "--server", url, "--token", op); code != 0 || strings.Count(o, "\n") != 1 {
		t.Errorf("gate list after both changes: %d %q, want the header only", code, o)
	}
	// And whole: no instance, MIG mode off (gate set --whole, {"migOff": true}).
	if o, errs, code := runCmd(t, "gate", "set", "fake-a", g0.UUID, "--whole", "--server", url, "--token", op); code != 0 || !strings.Contains(o, `"7g.80gb@0" → no instance, MIG mode off`) {
		t.Fatalf("gate set --whole: %d %q %q", code, o, errs)
	}
	waitFor(t, 30*time.Second, out, "GPU 0 to run whole", func() bool {
		n := node()
		g := n.Inventory.GPUs[0]
		return len(n.Gates) == 0 && g.MIG == "" && slices.Equal(g.Slices, []string{"exclusive"})
	})
}

// startFakeAgent runs the control plane and a real agent for node fake-a on the NVML fake (8
// H100s) in this process, and waits until the node registered. It returns the server's URL, the
// operator token, an operator client, the agent's output and a reader of the node's record.
func startFakeAgent(t *testing.T) (string, string, *client, *syncBuffer, func() control.Node) {
	t.Helper()
	url, op := startInProcess(t)
	ctx := context.Background()
	c := &client{base: url, token: op, http: newHTTPClient()}
	var tok control.TokenResponse
	must(t, c.call(ctx, "POST", "/v1/tokens", control.TokenRequest{Role: control.RoleAgent, Node: "fake-a", Name: "test"}, &tok))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("node: fake-a\nstateDir: %s\nlisten: 127.0.0.1:0\npollInterval: 100ms\npolicy: {reconfigCooldown: 0s}\ngpus: []\n", filepath.Join(dir, "state"))), 0o644))
	actx, stop := context.WithCancel(ctx)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(actx, []string{"agent", "--fake", "--config", cfg, "--server", url, "--token", tok.Token}, out, out)
	}()
	t.Cleanup(func() { stop(); <-done })
	node := func() control.Node {
		var ns []control.Node
		must(t, c.call(ctx, "GET", "/v1/nodes", nil, &ns))
		for _, n := range ns {
			if n.Name == "fake-a" {
				return n
			}
		}
		return control.Node{}
	}
	waitFor(t, 20*time.Second, out, "the node to register with 8 GPUs", func() bool { return len(node().Inventory.GPUs) == 8 })
	return url, op, c, out, node
}

func waitFor(t *testing.T, d time.Duration, out *syncBuffer, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s; agent output:\n%s", what, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAgentGateFailureRetried: the agent's smoke check fails, so its gate rolls the GPU back and
// reports it; the control plane retries once (--gate-attempts 2) and then gives the operation up,
// with the GPU in its old layout and its slice back in the pool.
func TestAgentGateFailureRetried(t *testing.T) {
	url, op := startInProcess(t)
	ctx := context.Background()
	c := &client{base: url, token: op, http: newHTTPClient()}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("node: fake-b\nstateDir: %s\nlisten: 127.0.0.1:0\npollInterval: 100ms\npolicy: {reconfigCooldown: 0s}\nsmoke: {command: [\"false\"], timeout: 5s}\ngpus: []\n", filepath.Join(dir, "state"))), 0o644))
	actx, stop := context.WithCancel(ctx)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(actx, []string{"agent", "--fake", "--config", cfg, "--server", url, "--token", op}, out, out)
	}()
	t.Cleanup(func() { stop(); <-done })
	var n control.Node
	waitFor(t, 20*time.Second, out, "the node to register", func() bool {
		var ns []control.Node
		must(t, c.call(ctx, "GET", "/v1/nodes", nil, &ns))
		if len(ns) == 1 && len(ns[0].Inventory.GPUs) == 8 {
			n = ns[0]
			return true
		}
		return false
	})
	g0 := n.Inventory.GPUs[0].UUID
	must(t, c.call(ctx, "PUT", "/v1/nodes/fake-b/gpus/"+g0+"/layout", control.LayoutRequest{Layout: "3g.40gb@0 3g.40gb@4"}, nil))
	var codes []string
	waitFor(t, 30*time.Second, out, "the operation to be given up", func() bool {
		var evs []control.Event
		must(t, c.call(ctx, "GET", "/v1/events", nil, &evs))
		codes = codes[:0]
		for _, ev := range evs {
			if strings.HasPrefix(string(ev.Code), "Gate") {
				codes = append(codes, string(ev.Code))
			}
		}
		return strings.HasSuffix(strings.Join(codes, " "), "GateGaveUp")
	})
	if got := strings.Join(codes, " "); got != "GateRequested GateDraining GateStarted GateFailed GateDraining GateStarted GateFailed GateGaveUp" {
		t.Errorf("gate events %q, want two attempts, each started and failed, then given up", got)
	}
	if strings.Count(out.String(), "GateRolledBack") != 2 {
		t.Errorf("agent output has %d rollbacks, want 2:\n%s", strings.Count(out.String(), "GateRolledBack"), out.String())
	}
	var pool control.PoolView
	must(t, c.call(ctx, "GET", "/v1/pool", nil, &pool))
	back := false
	for _, s := range pool.Slices {
		back = back || (s.GPU == g0 && s.Kind == "7g.80gb")
	}
	if !back {
		t.Error("GPU 0's 7g.80gb slice is not back in the pool after the rollback")
	}
}

// The control-plane flags are checked together, every problem at once.
func TestAgentServerFlags(t *testing.T) {
	_, errs, code := runCmd(t, "agent", "--config", "../../examples/agent-fake.yaml", "--fake", "--once", "--server", "http://127.0.0.1:1", "--client-cert", "c.pem")
	for _, want := range []string{"--server and --token go together", "--once and --reset run without the control plane", "--client-cert and --client-key go together"} {
		if code != exitInvalid || !strings.Contains(errs, want) {
			t.Errorf("exit %d, stderr %q: want exit %d and %q", code, errs, exitInvalid, want)
		}
	}
}

// TestGrantsFollowAppliedPlan runs the control plane and a real agent on the NVML fake (8 H100s,
// each one 7g.80gb instance at first), applies a MIG-only plan of two tenants on one H100
// (2g.20gb@0 for chat-a, 2g.20gb@2 for chat-b), lets the agent's gate re-partition GPU 0, and
// then asks for the replicas in the order that would defeat a lowest-free-slice placement (an
// unplanned tenant first, then chat-b, then chat-a): each planned replica lands on its planned
// instance, and the unplanned tenant on a slice the plan leaves free.
func TestGrantsFollowAppliedPlan(t *testing.T) {
	_, _, c, out, node := startFakeAgent(t)
	ctx := context.Background()
	raw, err := os.ReadFile("../../examples/h100-7b-sharing.yaml")
	must(t, err)
	raw = bytes.Replace(raw, []byte("allowedModes: [exclusive, mig, mps, timeslice]"), []byte("allowedModes: [mig]"), 1)
	raw = bytes.Replace(raw, []byte("name: node-a"), []byte("name: fake-a"), 1)
	var applied control.PlanApplied
	must(t, c.call(ctx, "POST", "/v1/plans/apply", raw, &applied))
	g0 := node().Inventory.GPUs[0].UUID
	want := map[string]string{} // tenant → planned slice id
	for _, pg := range applied.Plan.GPUs {
		for _, in := range pg.Instances {
			for _, r := range in.Replicas {
				if pg.Index != 0 || in.Profile != "2g.20gb" || (in.Start != 0 && in.Start != 2) {
					t.Fatalf("the planner placed %s on GPU %d %s@%d; this test expects 2g.20gb@0 and 2g.20gb@2 on GPU 0", r.Tenant, pg.Index, in.Profile, in.Start)
				}
				want[r.Tenant] = fmt.Sprintf("fake-a/%s/%d", g0, in.Start/2) // the agent reports instances by start
			}
		}
	}
	if len(want) != 2 {
		t.Fatalf("plan replicas %v, want chat-a and chat-b", want)
	}
	waitFor(t, 60*time.Second, out, "GPU 0 re-partitioned as planned", func() bool {
		n := node()
		return len(n.Gates) == 0 && n.Inventory.GPUs[0].MIG == "2g.20gb@0 2g.20gb@2"
	})
	for _, name := range []string{"other", "chat-b", "chat-a"} {
		must(t, c.call(ctx, "PUT", "/v1/tenants/"+name, control.Tenant{Demand: 1}, nil))
	}
	var gs []control.Grant
	must(t, c.call(ctx, "GET", "/v1/grants", nil, &gs))
	for _, g := range gs {
		if w, planned := want[g.Tenant]; planned && g.Slice != w {
			t.Errorf("tenant %s granted %s, the plan placed it on %s", g.Tenant, g.Slice, w)
		}
		if g.Tenant == "other" && strings.Contains(g.Slice, "/"+g0+"/") {
			t.Errorf("the unplanned tenant took %s, a planned instance", g.Slice)
		}
	}
	if len(gs) != 3 {
		t.Fatalf("grants %v, want one per tenant", gs)
	}
	var l control.Layout
	must(t, c.call(ctx, "GET", "/v1/nodes/fake-a/layout", nil, &l))
	for _, s := range l.Slices {
		if w, planned := want[s.Tenant]; planned && (s.ID != w || s.Kind != "2g.20gb") {
			t.Errorf("layout slice %+v for %s, want %s (2g.20gb)", s.Slice, s.Tenant, w)
		}
	}
}

// TestApplyPlanRunsGPUWhole: a plan that runs a GPU whole (exclusive) where the node reports MIG
// instances gets a gate operation for it: the agent's gate removes every instance, then the agent
// turns MIG mode off on the NVML fake, and the planned exclusive slice exists and carries the
// planned tenant. The review's pool (testdata/review2/pool-rn1.yaml) puts rag alone on GPU 0,
// which the node reports cut as 3g.40gb@0 3g.40gb@4.
func TestApplyPlanRunsGPUWhole(t *testing.T) {
	_, _, c, out, node := startFakeAgent(t)
	ctx := context.Background()
	g0 := node().Inventory.GPUs[0].UUID
	must(t, c.call(ctx, "PUT", "/v1/nodes/fake-a/gpus/"+g0+"/layout", control.LayoutRequest{Layout: "3g.40gb@0 3g.40gb@4"}, nil))
	waitFor(t, 30*time.Second, out, "GPU 0 cut in two", func() bool {
		n := node()
		return len(n.Gates) == 0 && n.Inventory.GPUs[0].MIG == "3g.40gb@0 3g.40gb@4"
	})
	raw, err := os.ReadFile("../../testdata/review2/pool-rn1.yaml")
	must(t, err)
	raw = bytes.Replace(raw, []byte("name: rn1"), []byte("name: fake-a"), 1)
	var applied control.PlanApplied
	must(t, c.call(ctx, "POST", "/v1/plans/apply", raw, &applied))
	pg := applied.Plan.GPUs[0]
	if pg.Mode != "exclusive" || len(pg.Replicas) != 1 || pg.Replicas[0].Tenant != "rag" {
		t.Fatalf("the plan runs GPU 0 as %s with %+v; this test expects rag alone, exclusive", pg.Mode, pg.Replicas)
	}
	var op *control.GateOp
	for i, o := range applied.Gates {
		if o.GPU == g0 {
			op = &applied.Gates[i]
		}
	}
	if op == nil {
		t.Fatalf("apply asked gate operations %+v, none for GPU 0 (planned exclusive, reported %q)", applied.Gates, "3g.40gb@0 3g.40gb@4")
	}
	if op.Layout != "" || !op.MIGOff || op.From != "3g.40gb@0 3g.40gb@4" {
		t.Errorf("GPU 0's operation %+v, want from the two 3g instances to none with MIG mode off", *op)
	}
	waitFor(t, 60*time.Second, out, "every gate operation done and GPU 0 out of MIG mode", func() bool {
		n := node()
		g := n.Inventory.GPUs[0]
		return len(n.Gates) == 0 && g.MIG == "" && slices.Equal(g.Slices, []string{"exclusive"})
	})
	for _, want := range []string{"destroy 3g.40gb@0", "destroy 3g.40gb@4"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("agent output lacks %q:\n%s", want, out.String())
		}
	}
	var evs []control.Event
	must(t, c.call(ctx, "GET", "/v1/events", nil, &evs))
	done := false
	for _, ev := range evs {
		done = done || ev.Code == control.CodeGateDone && strings.Contains(ev.Message, g0) && strings.Contains(ev.Message, "MIG mode off")
	}
	if !done {
		t.Errorf("no GateDone event saying GPU 0's MIG mode is off: %+v", evs)
	}
	must(t, c.call(ctx, "PUT", "/v1/tenants/rag", control.Tenant{Demand: 1}, nil))
	var gs []control.Grant
	must(t, c.call(ctx, "GET", "/v1/grants", nil, &gs))
	if want := "fake-a/" + g0 + "/0"; len(gs) != 1 || gs[0].Slice != want {
		t.Errorf("grants %+v, want rag on the exclusive slice %s", gs, want)
	}
	// The reverse: cut the GPU out of MIG mode into one instance again; the agent turns MIG mode
	// on before its gate creates the instance.
	must(t, c.call(ctx, "PUT", "/v1/nodes/fake-a/gpus/"+g0+"/layout", control.LayoutRequest{Layout: "7g.80gb@0"}, nil))
	waitFor(t, 60*time.Second, out, "GPU 0 in MIG mode with one 7g.80gb instance", func() bool {
		n := node()
		return len(n.Gates) == 0 && n.Inventory.GPUs[0].MIG == "7g.80gb@0"
	})
}

// TestApplyPlanCleansIdleGPU: a GPU the plan leaves idle keeps no instance of an older layout.
// The node reports GPU 3 cut 3g.40gb@0 3g.40gb@4; the review's pool (testdata/review2/pool-rn1.yaml)
// leaves GPUs 2-7 idle, so applying it asks GPU 3 to no instance with MIG mode off, and the
// agent's journaled gate on the NVML fake destroys both instances and turns MIG mode off: the GPU
// ends whole (one exclusive slice), and the event says the plan leaves it idle. Before, the old
// instances stayed.
func TestApplyPlanCleansIdleGPU(t *testing.T) {
	_, _, c, out, node := startFakeAgent(t)
	ctx := context.Background()
	g3 := node().Inventory.GPUs[3].UUID
	must(t, c.call(ctx, "PUT", "/v1/nodes/fake-a/gpus/"+g3+"/layout", control.LayoutRequest{Layout: "3g.40gb@0 3g.40gb@4"}, nil))
	waitFor(t, 30*time.Second, out, "GPU 3 cut in two", func() bool {
		n := node()
		return len(n.Gates) == 0 && n.Inventory.GPUs[3].MIG == "3g.40gb@0 3g.40gb@4"
	})
	raw, err := os.ReadFile("../../testdata/review2/pool-rn1.yaml")
	must(t, err)
	raw = bytes.Replace(raw, []byte("name: rn1"), []byte("name: fake-a"), 1)
	var applied control.PlanApplied
	must(t, c.call(ctx, "POST", "/v1/plans/apply", raw, &applied))
	if pg := applied.Plan.GPUs[3]; pg.Role != "idle" || len(pg.Replicas) != 0 {
		t.Fatalf("the plan has GPU 3 as %s with %+v; this test expects it idle", pg.Role, pg.Replicas)
	}
	var op *control.GateOp
	for i, o := range applied.Gates {
		if o.GPU == g3 {
			op = &applied.Gates[i]
		}
	}
	if op == nil || op.Layout != "" || !op.MIGOff || op.From != "3g.40gb@0 3g.40gb@4" {
		t.Fatalf("apply asked gate operations %+v; want GPU 3 from the two 3g instances to none with MIG mode off", applied.Gates)
	}
	waitFor(t, 60*time.Second, out, "every gate operation done and GPU 3 whole", func() bool {
		n := node()
		g := n.Inventory.GPUs[3]
		return len(n.Gates) == 0 && g.MIG == "" && slices.Equal(g.Slices, []string{"exclusive"})
	})
	for _, want := range []string{"destroy 3g.40gb@0", "destroy 3g.40gb@4"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("agent output lacks %q:\n%s", want, out.String())
		}
	}
	var evs []control.Event
	must(t, c.call(ctx, "GET", "/v1/events", nil, &evs))
	asked, done := false, false
	for _, ev := range evs {
		asked = asked || ev.Code == control.CodeGateRequested && strings.Contains(ev.Message, g3) && strings.Contains(ev.Message, "leaves it idle")
		done = done || ev.Code == control.CodeGateDone && strings.Contains(ev.Message, g3) && strings.Contains(ev.Message, "MIG mode off")
	}
	if !asked || !done {
		t.Errorf("events: GateRequested saying GPU 3 is idle %v, GateDone saying its MIG mode is off %v: %+v", asked, done, evs)
	}
}
