package plan

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestChoiceDominatedSkipped checks the search candidates another one dominates (markDominated):
// every mark names an earlier unshared candidate of the same board that dominates, marks of each
// kind are made (an exclusive GPU count over a smaller one, a MIG instance over a smaller one, an
// exclusive GPU over a MIG instance), and a marked candidate is not weighed while its dominating
// one is: made to pay for joining, the weighing of every candidate moves to it and weighMoves does not.
// Then, on both objectives with and without the boards' limits, with forbidden kinds and MIG
// sharing settings fixed partway, weighMoves, forced or not, names at every step of the local
// search the candidate the weighing of every candidate names.
func TestChoiceDominatedSkipped(t *testing.T) {
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 300, GPUs: 300, Varied: true}, rand.New(rand.NewPCG(300, 7))))
	p.keep = map[string]migUse{}
	p.searchCands()
	kinds := map[string]int{}
	free := 0
	for _, tn := range p.tenants {
		sc := p.searchOf(tn)
		for i := range sc {
			e := &sc[i]
			for _, d := range e.dom {
				if d == 0 {
					continue
				}
				o := &sc[d-1]
				if int(d-1) >= i || !dominates(o, e) || o.board != e.board || o.c.share != 1 || e.c.share != 1 {
					t.Fatalf("%s: %s marked as dominated by %s", tn.t.Name, e.c.label(), o.c.label())
				}
				kinds[string(o.c.kind)+" over "+string(e.c.kind)]++
				// What each adds to a bucket's value (the vector objective and the boards'
				// loads), from totals that are whole-GPU, memory or compute bound, and to the sum.
				v := newVectorObjective()
				for _, tot := range [][4]float64{{}, {3, 0, 0, 0}, {0, 2.5, 0.5, 1}, {0, 0.5, 2.5, 1}, {1, 1, 1, 3}, {0, 1.25, 1.3, 0}} {
					oa, ea := tot, tot
					oc, ec := partsOf(o), partsOf(e)
					oc.apply(&oa)
					ec.apply(&ea)
					if v.value(ea) < v.value(oa) {
						t.Fatalf("%s: %s adds %v to the bucket %v, less than %s dominating it (%v)", tn.t.Name, e.c.label(), v.value(ea)-v.value(tot), tot, o.c.label(), v.value(oa)-v.value(tot))
					}
				}
				if float64(e.replicas)*e.unitFrac <= float64(o.replicas)*o.unitFrac {
					t.Fatalf("%s: %s costs no more than %s dominating it", tn.t.Name, e.c.label(), o.c.label())
				}
			}
		}
		// The first marked entry, made to pay for joining, with its dominating entry weighable: the
		// weighing of every candidate takes it, weighMoves passes it over.
		i := slices.IndexFunc(sc, func(e searchCand) bool { return e.dom[0] > 0 })
		if i < 0 || free >= 20 {
			continue
		}
		tn.choice = sc[len(sc)-1].c // neither entry nor its dominating one
		if tn.choice == sc[i].c || tn.choice == sc[sc[i].dom[0]-1].c {
			continue
		}
		f := p.newFractional(false)
		for _, u := range p.tenants {
			if u.choice != nil {
				f.move(p.ids.of(u, u.choice), u.choice, u.choice.replicas)
			}
		}
		was := sc[i]
		sc[i].tpf, sc[i].memFrac, sc[i].compFrac, sc[i].unitFrac = -10, -10, -10, -10
		every, got := p.weighEvery(f, tn, false), p.weighMoves(f, tn, false)
		sc[i] = was
		if every != sc[i].c {
			t.Fatalf("%s: every candidate names %s, not the free %s", tn.t.Name, every.label(), sc[i].c.label())
		}
		if got == sc[i].c {
			t.Fatalf("%s: weighMoves weighed %s, which %s dominates", tn.t.Name, got.label(), sc[sc[i].dom[0]-1].c.label())
		}
		free++
		tn.choice = tn.feasible[0]
	}
	t.Logf("marks %v, %d made free", kinds, free)
	for _, k := range []string{"exclusive over exclusive", "mig over mig", "mig over exclusive"} {
		if kinds[k] == 0 {
			t.Errorf("no mark of %s: %v", k, kinds)
		}
	}
	if free == 0 {
		t.Error("no marked candidate was made free")
	}

	rng := rand.New(rand.NewPCG(5, 3))
	for _, caps := range []map[string]float64{nil, capsOf(p, 0.2)} {
		for _, vector := range []bool{false, true} {
			p.caps = caps
			p.forbid = map[*tenant]map[forbidKey]string{}
			f := p.newFractional(vector)
			p.keep = map[string]migUse{}
			p.searchCands()
			startFirstAllowed(p, f)
			moves, forced := 0, 0
			for round := 0; round < 3; round++ {
				switch round {
				case 1: // forbid exclusive GPUs on the first board of every third tenant
					for i, tn := range p.tenants {
						if i%3 == 0 && len(tn.feasible) > 0 {
							p.forbid[tn] = map[forbidKey]string{{tn.feasible[0].board.Name, v1.SliceExclusive}: "test"}
						}
					}
					p.searchCands()
				case 2: // fix some MIG profiles' sharing to MIG+MPS 1/2, ruling out their unshared instances
					var fixed []string
					for _, tn := range p.tenants {
						for _, c := range tn.feasible {
							if c.profile != nil && rng.IntN(4) == 0 {
								if _, ok := p.keep[useKey(c)]; !ok {
									p.keep[useKey(c)] = migUse{kind: v1.SliceMIGMPS, share: 2}
									fixed = append(fixed, useKey(c))
								}
							}
						}
					}
					p.fixedUses(fixed)
				}
				for pass := 0; pass < 8; pass++ {
					moved := false
					for _, tn := range p.tenants {
						if tn.choice == nil || len(tn.feasible) < 2 {
							continue
						}
						if got, want := p.weighMoves(f, tn, true), p.weighEvery(f, tn, true); got != want {
							t.Fatalf("caps %v, vector %v, round %d: %s: forced weighMoves %s, every candidate %s", caps != nil, vector, round, tn.t.Name, got.label(), want.label())
						}
						got, want := p.weighMoves(f, tn, false), p.weighEvery(f, tn, false)
						if got != want {
							t.Fatalf("caps %v, vector %v, round %d: %s: weighMoves %s, every candidate %s", caps != nil, vector, round, tn.t.Name, got.label(), want.label())
						}
						if !p.allowed(tn.choice) || p.forbidden(tn, tn.choice) {
							got = p.weighMoves(f, tn, true)
							forced++
						}
						if got != tn.choice {
							p.switchTo(f, tn, got)
							moved, moves = true, moves+1
						}
					}
					if !moved {
						break
					}
				}
			}
			if moves == 0 || forced == 0 {
				t.Errorf("caps %v, vector %v: %d moves, %d forced: want both above 0", caps != nil, vector, moves, forced)
			}
		}
	}
	p.caps, p.forbid, p.keep = nil, nil, nil
}

// TestChoiceDominatedSamePlan plans a small varied pool with and without passing over the
// dominated candidates: the plans are the same.
func TestChoiceDominatedSamePlan(t *testing.T) {
	pool := Synthetic(SyntheticOptions{Tenants: 60, GPUs: 60, Varied: true}, rand.New(rand.NewPCG(60, 7)))
	plan := func(o Options) []byte {
		pl, err := Build(context.Background(), pool, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(pl)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	with, without := plan(Options{ConfirmRequests: -1}), plan(Options{ConfirmRequests: -1, noDominance: true})
	if string(with) != string(without) {
		t.Errorf("the plans differ with and without the dominated candidates:\n%s\n%s", with, without)
	}
}

// partsOf is what e's replicas add to a bucket's totals (changeOf for as many units).
func partsOf(e *searchCand) unitChange {
	f := &fractional{ids: &keyIDs{bucket: []int{0}}}
	return f.changeOf(0, float64(e.replicas), e)
}
