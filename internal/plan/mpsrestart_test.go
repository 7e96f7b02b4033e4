package plan

import (
	"context"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// NodeConfigRestarts counts what the migration shows: for f-mpsadd1's layout against a-mps0's
// plan (new-1 and new-2 on n2/0 beside its eight clients, n2 going mps 8 → 10) the eight clients
// restart, as the node-config change OrderDevicePluginChanges orders says; a plan with no change
// of a node's setting restarts nobody.
func TestNodeConfigRestartsCountsTheMigrations(t *testing.T) {
	first, pool := loadReplan(t, "../../testdata/review8/a-mps0-pool.yaml", "../../testdata/review8/f-mpsadd1-pool.yaml")
	next, err := Build(context.Background(), pool, Options{}) // the fresh packing: all ten on one GPU
	if err != nil {
		t.Fatal(err)
	}
	n, changes := NodeConfigRestarts(pool, first, next)
	mu := pool.Policy.MaxUnavailable.Resolve(next.Summary.GPUsTotal)
	_, ordered := OrderDevicePluginChanges(first, next, Migration(first, next, mu), DevicePluginChanges(pool, first, next), mu)
	sum := 0
	for _, c := range ordered {
		sum += c.Restarts
	}
	if n != sum || len(changes) != len(ordered) {
		t.Errorf("NodeConfigRestarts %d (%d changes), the migration's node-config changes restart %d (%d changes)", n, len(changes), sum, len(ordered))
	}
	if n != 8 || restartsText(changes) != "8 on n2 (mps 8 to mps 10)" {
		t.Errorf("restarts %d (%q), want n2's 8 clients", n, restartsText(changes))
	}
	if n, ch := NodeConfigRestarts(pool, first, first); n != 0 || len(ch) != 0 {
		t.Errorf("the plan in force against itself restarts %d (%v)", n, ch)
	}
}

// g-mpsbig1 against a-mps0's plan (testdata/review8): a qwen2.5-0.5b newcomer fits n2/0's MPS
// room beside its eight clients and a llama-3.1-8b newcomer needs an idle GPU. Starting the small
// one in that room takes n2 from mps 8 to 9 and restarts the eight clients; planning both on the
// idle GPU restarts none, on as many GPUs (2) with as many moves (0). With max-moves 0 and without
// a budget, the plan taken restarts nobody, and its reasons say what the room would have
// restarted. Before, both started the small one in the room: 8 clients restarted.
func TestKeptPlanAvoidsMPSRestarts(t *testing.T) {
	first, pool := loadReplan(t, "../../testdata/review8/a-mps0-pool.yaml", "../../testdata/review8/g-mpsbig1-pool.yaml")
	zero := 0
	for _, mm := range []*int{&zero, nil} {
		pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: mm})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatal(err)
		}
		name := "no budget"
		if mm != nil {
			name = "max-moves 0"
		}
		if n, ch := NodeConfigRestarts(pool, first, pl); n != 0 {
			t.Errorf("%s: the plan restarts %d MPS clients (%s)", name, n, restartsText(ch))
		}
		if m := CountMoves(Migration(first, pl, 1)); m != 0 || pl.Summary.GPUsUsed != 2 || shortTenants(pl) != 0 {
			t.Errorf("%s: %d moves, %d GPUs, %d short; want 0, 2, 0", name, m, pl.Summary.GPUsUsed, shortTenants(pl))
		}
		for _, g := range pl.GPUs {
			if g.Ref() == (v1.GPURef{Node: "n2", Index: 0}) && len(g.Replicas) != 8 {
				t.Errorf("%s: n2/0 runs %d replicas, want its 8", name, len(g.Replicas))
			}
		}
		var msgs []string
		for _, r := range pl.Tenants[0].Reasons {
			if r.Code == v1.ReasonMoveBudget {
				msgs = append(msgs, r.Message)
			}
		}
		all := strings.Join(msgs, "\n")
		for _, want := range []string{
			"not started in the room of its busy GPUs: that would restart 8 MPS clients in place (8 on n2 (mps 8 to mps 9)",
			"where this plan restarts 0, for no GPU or move saved",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: s0's MoveBudget reasons lack %q:\n%s", name, want, all)
			}
		}
	}
}
