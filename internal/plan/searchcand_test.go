package plan

import (
	"math"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestSearchDeltaMatchesObjective checks the local search's weighing of a move (searchCand,
// leave, joinDelta) against the objective recomputed from scratch with the move made: for the
// sum and the vector objective, with and without board limits, every candidate of every tenant
// of the distinct-shapes pool.
func TestSearchDeltaMatchesObjective(t *testing.T) {
	pool := distinctShapesPool(t, 32)
	for _, vector := range []bool{false, true} {
		for _, capped := range []bool{false, true} {
			p, f := searchAtFirstChoices(t, pool, vector, capped)
			weighed := 0
			for _, tn := range p.tenants {
				if tn.choice == nil {
					continue
				}
				was := tn.choice
				base := p.chosenValue(vector)
				old := p.ids.of(tn, was)
				l := f.leave(old, was, -was.replicas)
				for i := range tn.sc {
					e := &tn.sc[i]
					if e.c != tn.feasible[i] || int(e.replicas) != e.c.replicas {
						t.Fatalf("%s: search candidate %d is not feasible candidate %d", tn.t.Name, i, i)
					}
					k := p.kidOf(tn, e)
					if k == old {
						continue
					}
					d := f.joinDelta(&l, k, e)
					tn.choice = e.c
					want := p.chosenValue(vector) - base
					tn.choice = was
					if math.Abs(d-want) > 1e-6*max(1, math.Abs(want)) {
						t.Errorf("vector %v, capped %v: %s to %s: the search weighs %.9f, the objective changes by %.9f", vector, capped, tn.t.Name, e.c.label(), d, want)
					}
					weighed++
				}
				// a move made is weighed the same way afterwards
				if len(tn.sc) > 1 {
					p.switchTo(f, tn, tn.sc[len(tn.sc)-1].c)
				}
			}
			if weighed < 100 {
				t.Fatalf("vector %v, capped %v: only %d moves weighed", vector, capped, weighed)
			}
		}
	}
}

// TestSearchFlagsFollowSettings checks that the search's forbidden and disallowed flags agree
// with the planner's forbidden kinds and fixed sharing settings after a board-wide search, which
// fixes settings as it goes (consistent), with one kind forbidden to the first tenant.
func TestSearchFlagsFollowSettings(t *testing.T) {
	p := evaluatedDRAShapes(t)
	first := p.tenants[0].feasible[0] // an earlier packing's forbidden kind, as retryBlocked sets them
	p.forbid = map[*tenant]map[forbidKey]string{p.tenants[0]: {{first.board.Name, first.kind}: "a node rule"}}
	p.chooseFrom(true, false, nil)
	if len(p.keep) == 0 {
		t.Fatal("the board-wide search fixed no sharing setting; the check below would hold trivially")
	}
	ruled, forbidden := 0, 0
	for _, tn := range p.tenants {
		for i := range tn.sc {
			e := &tn.sc[i]
			if e.disallowed != !p.allowed(e.c) || e.forbidden != p.forbidden(tn, e.c) {
				t.Errorf("%s %s: flags disallowed %v forbidden %v, planner says allowed %v forbidden %v",
					tn.t.Name, e.c.label(), e.disallowed, e.forbidden, p.allowed(e.c), p.forbidden(tn, e.c))
			}
			if e.disallowed {
				ruled++
			}
			if e.forbidden {
				forbidden++
			}
		}
	}
	if ruled == 0 || forbidden == 0 {
		t.Errorf("%d candidate(s) ruled out by a fixed sharing setting, %d forbidden: the check held trivially", ruled, forbidden)
	}
}

// refJoinDelta is joinDelta as it read before it computed the joining units once and before
// the leaving kept its board's penalty part (capOver): changeBy, boardCap.deltaFrom's terms in
// full and deltaBy, in that order.
func refJoinDelta(f *fractional, l *leaving, k int, e *searchCand) float64 {
	r := int(e.replicas)
	pen := func(b unitChange) float64 {
		bc := f.cap
		a := l.ch
		ia, ib := l.capB, bc.boardOf(b.b)
		if math.IsInf(bc.limit[ia], 1) && math.IsInf(bc.limit[ib], 1) {
			return 0
		}
		var da, db float64
		if a.b == b.b {
			ta := bc.load.get(a.b)
			va := bc.load.value(ta)
			a.apply(&ta)
			b.apply(&ta)
			da = bc.load.value(ta) - va
		} else {
			da = l.capA
			tb := bc.load.get(b.b)
			vb := bc.load.value(tb)
			b.apply(&tb)
			db = bc.load.value(tb) - vb
		}
		la, lb := bc.byBoard[ia], bc.byBoard[ib]
		if ia == ib {
			return capPenalty * (bc.over(ia, la+da+db) - bc.over(ia, la))
		}
		return capPenalty * (bc.over(ia, la+da) - bc.over(ia, la) + bc.over(ib, lb+db) - bc.over(ib, lb))
	}
	if f.cap != nil {
		b := f.changeBy(k, r, e)
		p := pen(b)
		if f.vec != nil {
			return f.vec.deltaFrom(l, b) + p
		}
		return l.d + f.deltaBy(k, e.unitFrac, r) + p
	}
	if f.vec != nil {
		return f.vec.deltaFrom(l, f.changeBy(k, r, e))
	}
	return l.d + f.deltaBy(k, e.unitFrac, r)
}

// TestJoinDeltaBitForBit checks joinDelta against refJoinDelta to the bit, for the sum and the
// vector objective, with and without board limits (two boards held below what they take, so
// that moves cross limits both ways), over every candidate of every tenant as the choice moves
// them.
func TestJoinDeltaBitForBit(t *testing.T) {
	pool := distinctShapesPool(t, 48)
	for _, vector := range []bool{false, true} {
		for _, capped := range []bool{false, true} {
			p, f := searchAtFirstChoices(t, pool, vector, capped)
			weighed, crossed := 0, 0
			for pass := 0; pass < 2; pass++ {
				for _, tn := range p.tenants {
					if tn.choice == nil {
						continue
					}
					old := p.ids.of(tn, tn.choice)
					l := f.leave(old, tn.choice, -tn.choice.replicas)
					for i := range tn.sc {
						e := &tn.sc[i]
						k := p.kidOf(tn, e)
						if k == old {
							continue
						}
						d, want := f.joinDelta(&l, k, e), refJoinDelta(f, &l, k, e)
						if math.Float64bits(d) != math.Float64bits(want) {
							t.Errorf("vector %v, capped %v: %s to %s: joinDelta %v (%#x), before %v (%#x)", vector, capped, tn.t.Name, e.c.label(), d, math.Float64bits(d), want, math.Float64bits(want))
						}
						if capped && l.capB != f.cap.boardOf(f.ids.bucket[k]) && d >= capPenalty/2 {
							crossed++
						}
						weighed++
					}
					if len(tn.sc) > 1 {
						p.switchTo(f, tn, tn.sc[(pass+len(tn.t.Name))%len(tn.sc)].c)
					}
				}
			}
			if weighed < 100 || (capped && crossed == 0) {
				t.Fatalf("vector %v, capped %v: %d moves weighed, %d across a limit", vector, capped, weighed, crossed)
			}
		}
	}
}

// searchAtFirstChoices is a planner of pool as the choice's local search starts it: evaluated,
// its search's candidates filled, every tenant at its first allowed candidate and moved there in
// the fractional objective f (the vector objective where vector); where capped, the H100s are
// held to one GPU and the A100s to two, below what they take, so that moves cross the limits.
func searchAtFirstChoices(t *testing.T, pool *v1.Pool, vector, capped bool) (*planner, *fractional) {
	t.Helper()
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	if capped {
		p.caps = map[string]float64{"H100": 1, "A100-SXM4-80GB": 2}
	}
	f := p.newFractional(vector)
	p.keep = map[string]migUse{}
	p.searchCands()
	startFirstAllowed(p, f)
	return p, f
}

// evaluatedDRAShapes is a planner of distinctShapesPool's 64 tenants on the DRA path (MIG
// instances shared by MPS too: more ways to use a profile), evaluated and not yet chosen.
func evaluatedDRAShapes(t *testing.T) *planner {
	t.Helper()
	pool := distinctShapesPool(t, 64)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	return p
}

// startFirstAllowed puts each tenant with a feasible candidate on its first allowed one in f
// and every other tenant on none, as the choice's searches start.
func startFirstAllowed(p *planner, f *fractional) {
	for _, tn := range p.tenants {
		tn.choice = nil
		if len(tn.feasible) > 0 {
			tn.choice = p.firstAllowed(tn)
			f.move(p.ids.of(tn, tn.choice), tn.choice, tn.choice.replicas)
		}
	}
}
