package plan

import (
	"context"
	"testing"
)

// Review 12's m1 (testdata/review12/m1-mixed-boards.yaml, nine GPUs of three boards on the
// device-plugin path): capped (qwen2.5-3b, maxReplicas 1) runs on one exclusive H100 or on a
// tensor-parallel pair of A100s, and its exclusive H100 keeps chat-bursty's MPS off the H100
// node. With one-at-a-time's whole-GPU MPS on an A100 the node a80 refuses capped's pair; that
// refusal is recorded as a blocked kind like a one-GPU unit's (noteBlockedGroup, ADR 0107), so
// the blocked-kind retries withhold the MPS that set the rule and choose again: all six tenants
// are served in full on the nine GPUs, without the rescue's move of served tenants.
func TestTensorParallelBlockedByNodeRule(t *testing.T) {
	pool := loadPool(t, "../../testdata/review12/m1-mixed-boards.yaml")
	p, pl := planWith(t, pool, func(p *planner) { p.noMoveServed = true })
	for _, tn := range p.tenants {
		if !servedInFull(tn) {
			t.Errorf("%s short (choice %v): %v", tn.t.Name, tn.choice != nil, tn.infeas)
		}
		if tn.t.Name == "capped" && tn.choice != nil && (tn.choice.tp != 2 || tn.choice.board.Name != "A100-SXM4-80GB") {
			t.Errorf("capped on %s, tensor-parallel %d; want a pair of A100s", tn.choice.label(), tn.choice.tp)
		}
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	if c := pathConflicts(pool, pl); c != "" {
		t.Fatal(c)
	}
	if pl.Summary.GPUsUsed > 9 {
		t.Errorf("%d GPUs used of 9", pl.Summary.GPUsUsed)
	}
	// the whole plan, from the queueing model alone, with the rescue as it is
	full, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range full.Tenants {
		if tp.Infeasible {
			t.Errorf("Build: %s infeasible", tp.Name)
		}
	}
	if err := checkPlan(pool, full); err != nil {
		t.Fatal(err)
	}
}
