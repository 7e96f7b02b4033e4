package plan

import (
	"slices"
	"testing"
)

// TestSearchCandsKeptMatchFilled checks that the search candidates searchCands keeps from an
// earlier filling (kept) are what filling them from the candidates afresh gives, through the
// changes a planning run makes between choices: a board-wide search fixing sharing settings and
// the next one starting without them, settings left fixed, kinds forbidden and allowed again, a
// candidate's replicas raised, the lower bound's counts, and feasible candidates swapped for a
// copy or reordered in place.
func TestSearchCandsKeptMatchFilled(t *testing.T) {
	p := evaluatedDRAShapes(t)
	p.keep = map[string]migUse{}
	check := func(step string) {
		t.Helper()
		p.searchCands()
		for _, tn := range p.tenants {
			inc := slices.Clone(tn.sc)
			numbered := tn.scNumbered
			saved := *tn
			tn.sc, tn.scFrom, tn.scSet = nil, nil, 0
			p.fillSearch(tn, p.replicasSet.Load())
			if len(tn.sc) != len(inc) {
				t.Fatalf("%s: %s: %d search candidates kept, %d filled", step, tn.t.Name, len(inc), len(tn.sc))
			}
			all := true
			for i, want := range tn.sc {
				got := inc[i]
				all = all && got.kid >= 0
				if got.kid < 0 || want.kid < 0 { // numbered when the search first asks
					got.kid, want.kid = 0, 0
				}
				if got != want {
					t.Fatalf("%s: %s: search candidate %d kept as %+v, filled as %+v", step, tn.t.Name, i, got, want)
				}
			}
			if numbered != all {
				t.Fatalf("%s: %s: numbered %v, every entry numbered %v", step, tn.t.Name, numbered, all)
			}
			*tn = saved
		}
	}
	check("first filling")
	p.chooseFrom(true, false, nil)
	if len(p.keep) == 0 {
		t.Fatal("the board-wide search fixed no sharing setting; the steps below would not clear a flag")
	}
	ruled := 0
	for _, tn := range p.tenants {
		if tn.scRuled {
			ruled++
		}
	}
	p.keep = map[string]migUse{} // the next search starts without them
	set, kept := p.replicasSet.Load(), 0
	for _, tn := range p.tenants {
		if p.kept(tn, set) {
			kept++
		}
	}
	if ruled == 0 || kept < len(p.tenants)/2 {
		t.Fatalf("%d tenant(s) with a disallowed entry, %d of %d kept: the check below holds trivially", ruled, kept, len(p.tenants))
	}
	check("settings dropped")
	p.chooseFrom(true, false, nil)
	check("settings fixed")
	p.keep = map[string]migUse{}
	check("settings dropped again") // the flags as filled with settings fixed, not as fixedUses set them

	first := p.tenants[0].feasible[0]
	p.forbid = map[*tenant]map[forbidKey]string{p.tenants[0]: {{first.board.Name, first.kind}: "a node rule"}}
	check("a kind forbidden")
	if !slices.ContainsFunc(p.tenants[0].sc, func(e searchCand) bool { return e.forbidden }) {
		t.Fatal("no search candidate of the first tenant is forbidden: the steps below hold trivially")
	}
	p.forbid[p.tenants[0]][forbidKey{first.board.Name, first.kind}] = "another rule"
	check("a rule reworded")
	p.forbid = nil
	check("the kind allowed again")

	var tn *tenant
	for _, x := range p.tenants {
		if len(x.feasible) > 2 {
			tn = x
			break
		}
	}
	c := tn.feasible[1]
	p.setCandReplicas(c, c.replicas+1)
	check("replicas raised")
	p.setCandReplicas(c, c.replicas-1)
	check("replicas lowered")
	p.atBoundCounts(func() { check("the lower bound's counts") })
	check("the counts restored")

	orig := tn.feasible
	tn.feasible = slices.Clone(orig)
	check("feasible copied")
	tn.feasible[0], tn.feasible[1] = tn.feasible[1], tn.feasible[0]
	check("feasible reordered in place")
	tn.feasible = orig
	check("feasible restored")
}
