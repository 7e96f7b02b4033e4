package plan

import (
	"context"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// replicaGPUs is the distinct GPUs tenant pt's replicas run on.
func replicaGPUs(pt v1.PlanTenant) map[v1.GPURef]bool {
	out := map[v1.GPURef]bool{}
	for _, r := range pt.Replicas {
		out[r.GPU] = true
	}
	return out
}

// On the DRA path, red (redundancy, A100 MPS 1/32 beside s0) has no other A100 with room: the
// other runs eff (energy class efficiency) alone, while an H100 stays idle. eff moves to the idle
// H100 and red's second replica takes the A100 it frees: the spread the pool asks for costs that
// GPU. Before, both of red's replicas ran on n2/0 and the H100 stayed idle.
func TestRedundancySpreadFreesGPUOfBoard(t *testing.T) {
	pool := loadPool(t, "testdata/spread-dra-pool.yaml")
	pl := buildWith(t, pool, Options{})
	red := planTenantOf(t, pl, "red")
	if len(red.Replicas) != 2 || len(replicaGPUs(red)) != 2 || red.Infeasible {
		t.Fatalf("red: want 2 replicas on 2 GPUs, got %+v", red.Replicas)
	}
	if hasReason(red, v1.ReasonRedundancy, "all 2 replicas") || !hasReason(red, v1.ReasonRedundancy, "kept on another GPU") {
		t.Errorf("red's Redundancy reasons: %v", red.Reasons)
	}
	eff := planTenantOf(t, pl, "eff")
	if eff.Infeasible || len(eff.Replicas) != 1 {
		t.Fatalf("eff: want served on 1 replica, got %+v", eff)
	}
	var board string
	for _, g := range pl.GPUs {
		if g.Ref() == eff.Replicas[0].GPU {
			board = g.Board
		}
		if g.Board == "A100-SXM4-80GB" && g.ReplicaCount() == 0 {
			t.Errorf("A100 %s is left without replicas", g.Ref())
		}
	}
	if board != "H100-SXM5-80GB" {
		t.Errorf("eff runs on %s, want the H100 that was idle", board)
	}
	if !hasReason(eff, v1.ReasonComputeBound, "which was freed for a replica of red") {
		t.Errorf("eff's reasons do not say why it left the cheaper A100: %v", eff.Reasons)
	}
}

// With no GPU idle there is nothing to free one with: red stays on one GPU, and its reasons say
// so instead of "kept on another GPU", naming what was considered.
func TestRedundancyUnspreadSaysWhy(t *testing.T) {
	pool := loadPool(t, "testdata/spread-dra-pool.yaml")
	pool.Fleet.Nodes[0].GPUs[0].Count = 1 // one H100, for other
	pl, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	red := planTenantOf(t, pl, "red")
	if len(replicaGPUs(red)) != 1 {
		t.Skipf("red spread without a GPU freed: %+v", red.Replicas)
	}
	if hasReason(red, v1.ReasonRedundancy, "kept on another GPU") {
		t.Errorf("red runs on one GPU, yet a reason says its replica is kept on another: %v", red.Reasons)
	}
	if !hasReason(red, v1.ReasonRedundancy, "meant for another GPU, but all run on one") ||
		!hasReason(red, v1.ReasonRedundancy, "all 2 replicas run on n2/0") ||
		!hasReason(red, v1.ReasonRedundancy, "no pool GPU is left idle") {
		t.Errorf("red's Redundancy reasons: %v", red.Reasons)
	}
}

// d-mig1 against d-mig0's plan with max-moves 0 (testdata/review8, M2): new-hard-red's replicas
// are planned on the GPUs the plan in force leaves idle, both on one; n2/0 keeps three empty
// 1g.10gb instances of the kind the re-pack gives it, on one GPU only. Before, the reason said
// "no other GPU has a mig 1g.10gb slot", which n2/0 contradicts; now it names the idle GPUs it
// was planned on and the room on the busy ones.
func TestRedundancyKeptRoomReasonIsTrue(t *testing.T) {
	first, pool := loadReplan(t, "../../testdata/review8/d-mig0-pool.yaml", "../../testdata/review8/d-mig1-pool.yaml")
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	red := planTenantOf(t, pl, "new-hard-red")
	if len(replicaGPUs(red)) != 1 {
		t.Skipf("new-hard-red spread: %+v", red.Replicas)
	}
	var why string
	for _, r := range red.Reasons {
		if r.Code == v1.ReasonRedundancy && strings.HasPrefix(r.Message, "all ") {
			why = r.Message
		}
	}
	for _, want := range []string{"planned on the GPUs the plan in force leaves idle (", "among them, no other GPU",
		"on 1 GPU(s) only (n2/0: 3 free)", "on distinct GPUs"} {
		if !strings.Contains(why, want) {
			t.Errorf("new-hard-red's reason lacks %q: %q", want, why)
		}
	}
	if strings.Contains(why, ": no other GPU has") {
		t.Errorf("new-hard-red's reason claims no other GPU has a slot, unqualified: %q", why)
	}
}

// red's cheapest candidate, two mig 1g.23gb, lands both on the one B200, and no other B200 can be
// freed for it, while both A100s stay idle. red itself moves to its candidate on A100 (mig
// 3g.20gb), one replica on each A100; its reasons say why it left the cheaper B200. Before, both
// replicas shared the B200 and a Redundancy reason said so.
func TestRedundancySpreadMovesTenantItself(t *testing.T) {
	pool := loadPool(t, "testdata/spread-self-pool.yaml")
	pl := buildWith(t, pool, Options{})
	red := planTenantOf(t, pl, "red")
	if red.Infeasible || len(red.Replicas) != 2 || len(replicaGPUs(red)) != 2 {
		t.Fatalf("red: want 2 replicas on 2 GPUs, got %+v", red.Replicas)
	}
	boards := map[v1.GPURef]string{}
	for _, g := range pl.GPUs {
		boards[g.Ref()] = g.Board
	}
	for _, r := range red.Replicas {
		if boards[r.GPU] != "A100-SXM4-40GB" {
			t.Errorf("red's replica %d runs on %s (%s), want an A100 that was idle", r.Index, r.GPU, boards[r.GPU])
		}
	}
	if hasReason(red, v1.ReasonRedundancy, "all 2 replicas") || !hasReason(red, v1.ReasonRedundancy, "kept on another GPU") {
		t.Errorf("red's Redundancy reasons: %v", red.Reasons)
	}
	if !hasReason(red, v1.ReasonComputeBound, "mig 1g.23gb on B200-180GB, cheaper, held all its replicas on n1/0, and no other B200-180GB GPU had room for one or could be freed for it (redundancy: a replica on another GPU), so it moved to A100-SXM4-40GB") {
		t.Errorf("red's reasons do not say why it left the cheaper B200: %v", red.Reasons)
	}
	small := planTenantOf(t, pl, "small")
	if small.Infeasible || len(small.Replicas) != 1 || boards[small.Replicas[0].GPU] != "B200-180GB" {
		t.Errorf("small: want its one replica on the B200, got %+v", small)
	}
}

// With one A100 only, red's A100 candidate cannot put its replicas on distinct GPUs either: the
// trial is undone (the A100 stays idle), red stays on the B200, and its reason names the candidate
// considered.
func TestRedundancyUnspreadNamesOwnCandidates(t *testing.T) {
	pool := loadPool(t, "testdata/spread-self-pool.yaml")
	pool.Fleet.Nodes[0].GPUs[0].Count = 1
	pl, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	red := planTenantOf(t, pl, "red")
	if len(replicaGPUs(red)) != 1 {
		t.Fatalf("red spread on one A100: %+v", red.Replicas)
	}
	if !hasReason(red, v1.ReasonRedundancy, "none of its other candidates on boards with idle pool GPUs (2 × mig 3g.20gb on A100-SXM4-40GB, ") {
		t.Errorf("red's Redundancy reasons: %v", red.Reasons)
	}
	for _, g := range pl.GPUs {
		if g.Board == "A100-SXM4-40GB" && g.Role != v1.RoleIdle {
			t.Errorf("the A100 %s is %s after the undone trial, want idle", g.Ref(), g.Role)
		}
	}
}
