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
	pl, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
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
	first, err := Build(context.Background(), loadPool(t, "../../testdata/review8/d-mig0-pool.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool := loadPool(t, "../../testdata/review8/d-mig1-pool.yaml")
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
