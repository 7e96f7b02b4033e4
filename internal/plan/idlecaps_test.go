package plan

import (
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Review 12's r1 (testdata/review12/r1-replan-pool.yaml): the first choice put five tenants on
// the H100s, whose packing left units short, and capBoards limited every board, the A100s to
// 3 − 0.857: the first packing had used a whole A100 for fixed-two's 1g.10gb. Under that limit
// `capped` (20 req/s, qwen2.5-3b) took two exclusive A30s (2 GPU-equivalents) where two MPS
// halves of one A100 (1) serve it, and the A100 the limit held back stayed idle: 8 GPUs. The
// limits are raised by the idle GPUs a limited plan keeps on a board (raiseIdleCaps) and the
// choice runs once more: 7 GPUs, the plan the same pool takes without its A30s.
func TestBoardLimitRaisedWhereIdle(t *testing.T) {
	pool := loadPool(t, "../../testdata/review12/r1-replan-pool.yaml")
	pl := build(t, pool)
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	for _, tn := range pl.Tenants {
		if tn.Infeasible {
			t.Errorf("%s infeasible: %v", tn.Name, tn.Reasons)
		}
	}
	idle := map[string]int{}
	for _, g := range pl.GPUs {
		if g.Role == v1.RoleIdle {
			idle[g.Board]++
		}
	}
	if pl.Summary.GPUsUsed > 7 || idle["A100-SXM4-80GB"] > 0 {
		t.Errorf("%d GPUs used, idle by board %v; want at most 7, no A100 idle", pl.Summary.GPUsUsed, idle)
	}
}

// raiseIdleCaps raises only limited boards that keep idle pool GPUs, by those GPUs and up to the
// board's pool GPUs, and reports nothing to do for an unlimited plan or one with tenants short.
func TestRaiseIdleCaps(t *testing.T) {
	pool := loadPool(t, "../../testdata/review12/r1-replan-pool.yaml")
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.raiseIdleCaps(&packed{}) {
		t.Error("raised the limits of a plan without limits")
	}
	best := &packed{
		caps: map[string]float64{"A100-SXM4-80GB": 2 + 1.0/7, "A30-24GB": 2, "H100-SXM5-80GB": 3.5},
		used: map[string]int{"A100-SXM4-80GB": 2, "A30-24GB": 2, "H100-SXM5-80GB": 3},
	}
	short := *best
	short.score[0] = 1
	if p.raiseIdleCaps(&short) || p.caps != nil {
		t.Fatalf("raised the limits of a plan with a tenant short: %v", p.caps)
	}
	if !p.raiseIdleCaps(best) {
		t.Fatal("no limit raised")
	}
	want := map[string]float64{"A100-SXM4-80GB": 3, "A30-24GB": 2, "H100-SXM5-80GB": 4}
	for b, w := range want {
		if p.caps[b] != w {
			t.Errorf("%s: limit %v, want %v (all %v)", b, p.caps[b], w, p.caps)
		}
	}
	if best.caps["A100-SXM4-80GB"] != 2+1.0/7 {
		t.Errorf("the limited plan's own limits changed: %v", best.caps)
	}
	p.caps = nil
	full := &packed{caps: map[string]float64{"A100-SXM4-80GB": 3, "A30-24GB": 1.5}, used: map[string]int{"A100-SXM4-80GB": 3, "A30-24GB": 2}}
	if p.raiseIdleCaps(full) || p.caps != nil {
		t.Errorf("raised limits with no idle GPU or at the pool's GPUs: %v", p.caps)
	}
}
