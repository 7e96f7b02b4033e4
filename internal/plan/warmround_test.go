package plan

import (
	"bytes"
	"testing"
)

// TestChooseWarmStart: a choice started warm (chooseWarm, the first start of a warm withholding
// round's choices and of its retries, ADR 0117) begins at the choice it is given. On the 300
// standard synthetic tenants the board-wide search from the coarse ladders ends at a choice the
// one-tenant moves cannot leave, other than the one the search from each tenant's cheapest
// reaches; started from it, the search stays there, and a tenant's forbidden candidate in it is
// not taken.
func TestChooseWarmStart(t *testing.T) {
	p := chosenPlanner(t, synthPool(300))
	seed := p.coarseSeed()
	if seed == nil {
		t.Fatal("no coarse start: the pool no longer has a tenant finer than the coarse ladders")
	}
	p.chooseFrom(true, false, seed)
	warm, warmValue := p.choices().choice, p.chosenValue(false)
	p.choose(false, false)
	cold := p.chosenValue(false)
	p.chooseWarm(false, false, warm)
	got := p.chosenValue(false)
	t.Logf("objective %.4f from each tenant's cheapest, %.4f at the warm choice, %.4f started from it", cold, warmValue, got)
	if cold > warmValue-1e-9 && cold < warmValue+1e-9 {
		t.Fatalf("the cold search ends at the warm choice's objective %.4f: the test checks nothing", cold)
	}
	for i, tn := range p.tenants {
		if tn.choice != warm[i] {
			t.Errorf("%s: started from %v, ends at %v", tn.t.Name, warm[i].label(), tn.choice.label())
		}
	}
	// A kind forbidden since the warm choice is not taken from it.
	tn := p.tenants[0]
	p.forbid = map[*tenant]map[forbidKey]string{tn: {{warm[0].board.Name, warm[0].kind}: "test"}}
	p.chooseWarm(false, false, warm)
	if tn.choice != nil && p.forbidden(tn, tn.choice) {
		t.Errorf("%s: started warm on a forbidden kind, ends at %s", tn.t.Name, tn.choice.label())
	}
}

// TestWithholdWarmRound: a withholding round that keeps the kinds forbidden before and starts
// from the plan it improves (ADR 0117) reaches review 12's m1 plan, every tenant served, in
// fewer choices and packings than the round started afresh, and the plan is the same to the
// byte. On review 13's d1 the warm round gains nothing and the round runs again from cold:
// the same plan for one choice and packing more.
func TestWithholdWarmRound(t *testing.T) {
	for _, c := range []struct {
		path  string
		fewer bool
	}{{"../../testdata/review12/m1-mixed-boards.yaml", true}, {"../../testdata/review13/d1-deviceplugin-mps-node-idle.yaml", false}} {
		pool := loadPool(t, c.path)
		cold, coldJSON := effortPlan(t, pool, func(p *planner) { p.coldRounds = true })
		warm, warmJSON := effortPlan(t, pool, func(*planner) {})
		t.Logf("%s: choices and packings %d cold, %d warm", pool.Metadata.Name, cold.onces, warm.onces)
		if !bytes.Equal(coldJSON, warmJSON) {
			t.Errorf("%s: the warm round changed the plan", pool.Metadata.Name)
		}
		if c.fewer && warm.onces >= cold.onces {
			t.Errorf("%s: %d choices and packings warm, %d cold: the warm round saved nothing", pool.Metadata.Name, warm.onces, cold.onces)
		}
		if !c.fewer && warm.onces != cold.onces+1 {
			t.Errorf("%s: %d choices and packings warm, %d cold: a warm round that gains nothing runs the round again from cold", pool.Metadata.Name, warm.onces, cold.onces)
		}
	}
}
