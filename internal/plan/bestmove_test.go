package plan

import (
	"math/rand/v2"
	"testing"
)

// capsOf holds every board of p to share of its pool GPUs, so that the choice's objective
// carries the boards' limits as after a packing that left tenants short.
func capsOf(p *planner, share float64) map[string]float64 {
	caps := map[string]float64{}
	for b, n := range p.poolGPUs() {
		caps[b] = share * float64(n)
	}
	return caps
}

// TestBestMoveSkips runs the local search as localSearch does, with and without the boards'
// limits, on both objectives, and asks at every step both bestMove, which skips the weighing
// where it knows the answer, and weighMoves, which weighs every candidate: they must name the
// same candidate, and both ways must have been taken.
func TestBestMoveSkips(t *testing.T) {
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 300, GPUs: 300, Varied: true}, rand.New(rand.NewPCG(300, 7))))
	for _, caps := range []map[string]float64{nil, capsOf(p, 0.2)} {
		for _, vector := range []bool{false, true} {
			p.caps = caps
			f := p.newFractional(vector)
			p.keep = map[string]migUse{}
			p.searchCands()
			startFirstAllowed(p, f)
			skipped, weighed, moves := 0, 0, 0
			failed := map[int]int{}
			for round := 0; round < 3; round++ {
				for pass := 0; pass < 8; pass++ {
					moved := false
					for _, tn := range p.tenants {
						if tn.choice == nil || len(tn.feasible) < 2 {
							continue
						}
						skip := tn.stay == (stayed{f, f.moves, p.scGen}) || f.leavesNothing(p.ids.of(tn, tn.choice), tn.choice.replicas)
						want := p.weighMoves(f, tn, false)
						got := p.bestMove(f, tn, false)
						if got != want {
							t.Fatalf("caps %v, vector %v: %s: bestMove %s, weighing every candidate %s", caps != nil, vector, tn.t.Name, got.label(), want.label())
						}
						if skip {
							skipped++
						} else {
							weighed++
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
				if !p.emptyLastUnits(f, failed) {
					break
				}
			}
			t.Logf("caps %v, vector %v: %d skipped, %d weighed, %d moves", caps != nil, vector, skipped, weighed, moves)
			if skipped == 0 || weighed == 0 || moves == 0 {
				t.Errorf("caps %v, vector %v: %d skipped, %d weighed, %d moves: want each above 0", caps != nil, vector, skipped, weighed, moves)
			}
		}
	}
}

// BenchmarkChooseVaried1000 is the four choices of optimise (board-wide or not, the sum or the
// vector objective) on BenchmarkPlanVaried1000's pool, with every board held to 0.3 of its GPUs
// (boardCap) as after a packing that left tenants short.
func BenchmarkChooseVaried1000(b *testing.B) {
	p := evaluated(b, Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7))))
	p.caps = capsOf(p, 0.3)
	b.ReportAllocs()
	v := 0.0
	for b.Loop() {
		for _, boardWide := range []bool{false, true} {
			for _, vector := range []bool{false, true} {
				p.choose(boardWide, vector)
				v += p.chosenValue(vector)
			}
		}
	}
	b.ReportMetric(v/float64(b.N), "objective")
}

// choiceKid's number and replicas, kept on the tenant, are what the choice's candidate says
// now: after its replicas change (setCandReplicas), after the tenant's choice changes and after
// the groups are numbered afresh; and asking twice with nothing changed answers alike.
func TestChoiceKidFollowsChanges(t *testing.T) {
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 30, GPUs: 30, Varied: true}, rand.New(rand.NewPCG(30, 7))))
	check := func(step string, tn *tenant) {
		t.Helper()
		wk, wr := p.ids.of(tn, tn.choice), tn.choice.replicas
		for range 2 {
			if k, r := p.choiceKid(tn); k != wk || r != wr {
				t.Fatalf("%s: %s: choiceKid %d, %d; want %d, %d", step, tn.t.Name, k, r, wk, wr)
			}
		}
	}
	tried := 0
	for _, tn := range p.tenants {
		if len(tn.feasible) < 2 || p.ids.of(tn, tn.feasible[0]) == p.ids.of(tn, tn.feasible[1]) {
			continue
		}
		tried++
		tn.choice = tn.feasible[0]
		check("first", tn)
		p.setCandReplicas(tn.choice, tn.choice.replicas+1)
		check("replicas raised", tn)
		tn.choice = tn.feasible[1]
		check("choice changed", tn)
		p.ids = newKeyIDs()
		p.ids.of(tn, tn.feasible[0]) // numbered first now, so the choice's group takes another number
		check("numbered afresh", tn)
	}
	if tried == 0 {
		t.Fatal("no tenant with two feasible candidates of different groups")
	}
}
