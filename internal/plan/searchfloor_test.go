package plan

import (
	"math"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// weighEvery is weighMoves as it was before the penalty's floor: every candidate's joinDelta.
func (p *planner) weighEvery(f *fractional, tn *tenant, force bool) *cand {
	old := p.ids.of(tn, tn.choice)
	best, bestD := tn.choice, -1e-9
	if force {
		best, bestD = tn.choice, 1e300
	}
	sc := p.searchOf(tn)
	l := f.leave(old, tn.choice, -tn.choice.replicas)
	for i := range sc {
		e := &sc[i]
		k := p.kidOf(tn, e)
		if e.c == tn.choice || k == old || e.forbidden || e.disallowed {
			continue
		}
		if d := f.joinDelta(&l, k, e); d < bestD {
			best, bestD = e.c, d
		}
	}
	return best
}

// leaveToEvery is leaveTo as it was before the penalty's floor.
func (p *planner) leaveToEvery(f *fractional, tn *tenant) *cand {
	old := p.ids.of(tn, tn.choice)
	best, bestD := tn.choice, math.Inf(1)
	sc := p.searchOf(tn)
	l := f.leave(old, tn.choice, -tn.choice.replicas)
	for i := range sc {
		e := &sc[i]
		k := p.kidOf(tn, e)
		if k == old || e.forbidden || e.disallowed || e.board != tn.choice.board {
			continue
		}
		if d := f.joinDelta(&l, k, e); d < bestD {
			best, bestD = e.c, d
		}
	}
	return best
}

// TestJoinBelowFloor runs the local search on a varied pool with tight board limits, on both
// objectives, and at every step checks each candidate of the moving tenant: where joinBelow
// skips it, joinDelta is not below the bound it was given (random bounds around the change, and
// the search's own); where it does not, the two agree to the bit. weighMoves and leaveTo must
// name the candidates the weighing of every candidate names, and the floor must have skipped
// candidates and let others through.
func TestJoinBelowFloor(t *testing.T) {
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 300, GPUs: 300, Varied: true}, rand.New(rand.NewPCG(300, 7))))
	rng := rand.New(rand.NewPCG(4, 2))
	nodes := map[string]int{} // whole-GPU MPS counted in nodes of 4 on every board
	for _, b := range p.boards {
		nodes[b.Name] = 4
	}
	for _, ns := range []map[string]int{nil, nodes} {
		p.nodeMPS = ns
		testJoinBelowFloor(t, p, rng)
	}
	p.caps, p.nodeMPS = nil, nil
}

func testJoinBelowFloor(t *testing.T, p *planner, rng *rand.Rand) {
	for _, share := range []float64{0.1, 0.2, 0.5} {
		for _, vector := range []bool{false, true} {
			p.caps = capsOf(p, share)
			f := p.newFractional(vector)
			p.keep = map[string]migUse{}
			p.searchCands()
			startFirstAllowed(p, f)
			skipped, through, moves := 0, 0, 0
			for pass := 0; pass < 4; pass++ {
				moved := false
				for _, tn := range p.tenants {
					if tn.choice == nil || len(tn.feasible) < 2 {
						continue
					}
					old := p.ids.of(tn, tn.choice)
					l := f.leave(old, tn.choice, -tn.choice.replicas)
					var pf penFloor
					f.cap.floor(&l, &pf)
					sc := p.searchOf(tn)
					for i := range sc {
						e := &sc[i]
						k := p.kidOf(tn, e)
						if k == old {
							continue
						}
						want := f.joinDelta(&l, k, e)
						for _, bound := range []float64{-1e-9, want, math.Nextafter(want, math.Inf(1)), want - rng.Float64(), want + rng.Float64(), rng.NormFloat64() * 10} {
							got, ok := f.joinBelow(&l, k, e, bound, &pf)
							switch {
							case !ok && want < bound:
								t.Fatalf("caps %.1f, vector %v: %s to %s: skipped at bound %v, but the change is %v", share, vector, tn.t.Name, e.c.label(), bound, want)
							case ok && math.Float64bits(got) != math.Float64bits(want):
								t.Fatalf("caps %.1f, vector %v: %s to %s: %v, joinDelta %v", share, vector, tn.t.Name, e.c.label(), got, want)
							case ok:
								through++
							default:
								skipped++
							}
						}
					}
					if got, d := p.leaveTo(f, tn); got != p.leaveToEvery(f, tn) {
						t.Fatalf("caps %.1f, vector %v: %s: leaveTo %s, every candidate %s", share, vector, tn.t.Name, got.label(), p.leaveToEvery(f, tn).label())
					} else if got != tn.choice {
						// the change emptyLastUnits adds up, as moveDelta weighs it
						if md := f.moveDelta(old, tn.choice, -tn.choice.replicas, p.ids.of(tn, got), got, got.replicas); math.Float64bits(d) != math.Float64bits(md) {
							t.Fatalf("caps %.1f, vector %v: %s to %s: leaveTo's change %v, moveDelta %v", share, vector, tn.t.Name, got.label(), d, md)
						}
					}
					if got, want := p.weighMoves(f, tn, true), p.weighEvery(f, tn, true); got != want {
						t.Fatalf("caps %.1f, vector %v: %s: forced weighMoves %s, every candidate %s", share, vector, tn.t.Name, got.label(), want.label())
					}
					got, want := p.weighMoves(f, tn, false), p.weighEvery(f, tn, false)
					if got != want {
						t.Fatalf("caps %.1f, vector %v: %s: weighMoves %s, every candidate %s", share, vector, tn.t.Name, got.label(), want.label())
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
			// emptyLastUnits leaves its buffer of group members empty, and lists each group's
			// tenants afresh on the next call.
			for range 2 {
				p.emptyLastUnits(f, map[int]int{})
				for k, m := range p.lastMembers {
					if len(m) != 0 {
						t.Fatalf("caps %.1f, vector %v: group %d keeps %d members after emptyLastUnits", share, vector, k, len(m))
					}
				}
			}
			t.Logf("caps %.1f, vector %v, nodes %v: %d skipped, %d through, %d moves", share, vector, p.nodeMPS != nil, skipped, through, moves)
			if skipped == 0 || through == 0 || moves == 0 {
				t.Errorf("caps %.1f, vector %v: %d skipped, %d through, %d moves: want each above 0", share, vector, skipped, through, moves)
			}
		}
	}
}

// boardCapBoundEvery is boardCapBound as it was before capCands: each price reads the
// candidates again.
func (p *planner) boardCapBoundEvery() float64 {
	bidx := map[string]int{}
	var capN []float64
	for _, g := range p.fleet {
		i, ok := bidx[g.board.Name]
		if !ok {
			i = len(capN)
			bidx[g.board.Name] = i
			capN = append(capN, 0)
		}
		capN[i]++
	}
	nb := len(capN)
	if nb < 2 {
		return 0
	}
	var ts []*tenant
	for _, tn := range p.tenants {
		if tn.choice != nil && !shortOfGPUs(tn) {
			ts = append(ts, tn)
		}
	}
	if len(ts) == 0 {
		return 0
	}
	m := make([]float64, len(ts)*nb)
	mu := make([]float64, nb)
	use := make([]float64, nb)
	best := 0.0
	for gi := 0; gi <= 20; gi++ {
		lam := float64(gi) / 20
		for i, tn := range ts {
			row := m[i*nb : (i+1)*nb]
			for b := range row {
				row[b] = math.Inf(1)
			}
			for _, c := range tn.feasible {
				b := bidx[c.board.Name]
				row[b] = min(row[b], float64(c.replicas)/float64(c.share)*unitPrice(c, lam))
			}
		}
		clear(mu)
		for k := range boardCapIters {
			clear(use)
			v := 0.0
			for b := range nb {
				v -= mu[b] * capN[b]
			}
			for i := range ts {
				row := m[i*nb : (i+1)*nb]
				bb, bv := -1, math.Inf(1)
				for b, x := range row {
					if y := (1 + mu[b]) * x; y < bv {
						bb, bv = b, y
					}
				}
				if bb < 0 {
					continue
				}
				v += bv
				use[bb] += row[bb]
			}
			best = max(best, v)
			norm := 0.0
			for b := range nb {
				g := use[b] - capN[b]
				if mu[b] == 0 && g < 0 {
					g = 0
				}
				use[b] = g
				norm += g * g
			}
			if norm == 0 {
				break
			}
			step := 0.5 / math.Sqrt(float64(k+1)) / math.Sqrt(norm)
			for b := range nb {
				mu[b] = max(0, mu[b]+step*use[b])
			}
		}
	}
	return best
}

// TestBoardCapBoundSame checks boardCapBound against the same bound reading the candidates at
// every price, to the bit, on varied pools over fleets of three boards in random proportions.
func TestBoardCapBoundSame(t *testing.T) {
	boards := []string{"H100", "A100-SXM4-80GB", "B200"}
	rng := rand.New(rand.NewPCG(12, 5))
	lifted := 0
	for i := range 6 {
		n := 40 + rng.IntN(160)
		pool := Synthetic(SyntheticOptions{Tenants: n, GPUs: n / 2, Varied: true}, rand.New(rand.NewPCG(uint64(i), 12)))
		for j := range pool.Fleet.Nodes {
			pool.Fleet.Nodes[j].GPUs = []v1.GPUGroup{{Board: boards[rng.IntN(3)], Count: pool.Fleet.Nodes[j].GPUs[0].Count}}
		}
		p := evaluated(t, pool)
		var got, want float64
		p.atBoundCounts(func() { got, want = p.boardCapBound(), p.boardCapBoundEvery() })
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("pool %d (%d tenants): boardCapBound %v, reading the candidates at every price %v", i, n, got, want)
		}
		if got > 0 {
			lifted++
		}
	}
	if lifted == 0 {
		t.Error("no pool had a board-limit term above 0")
	}
}

// TestSearchCandsKept fills the search candidates, changes what their flags read (forbidden
// kinds, fixed sharing settings) and one candidate's replicas, and fills them again: every entry
// must be what a fresh filling gives (the group numbers as kidOf gives them), and fixedUses must
// set each MIG candidate's flag as allowed says.
func TestSearchCandsKept(t *testing.T) {
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 120, GPUs: 120, Varied: true}, rand.New(rand.NewPCG(120, 3))))
	p.keep = map[string]migUse{}
	p.searchCands()
	for _, tn := range p.tenants {
		for i := range tn.sc {
			p.kidOf(tn, &tn.sc[i]) // numbered, as a search numbers them
		}
	}
	// Forbid every tenant's cheapest kind, raise one candidate's replicas.
	p.forbid = map[*tenant]map[forbidKey]string{}
	var raised *cand
	for _, tn := range p.tenants {
		if len(tn.feasible) == 0 {
			continue
		}
		c := tn.feasible[0]
		p.forbid[tn] = map[forbidKey]string{{c.board.Name, c.kind}: "test"}
		if raised == nil && len(tn.feasible) > 1 {
			raised = tn.feasible[1]
		}
	}
	was := raised.replicas
	p.setCandReplicas(raised, was+1)
	defer p.setCandReplicas(raised, was)
	var fixed []string
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			if c.profile != nil && len(fixed) < 3 && !slicesContains(fixed, useKey(c)) {
				fixed = append(fixed, useKey(c))
				p.keep[useKey(c)] = migUse{kind: v1.SliceTimeSlice, share: 99} // no candidate's
			}
		}
	}
	p.searchCands()
	kept, fresh := 0, 0
	for _, tn := range p.tenants {
		if len(tn.sc) != len(tn.feasible) {
			t.Fatalf("%s: %d search candidates, %d feasible", tn.t.Name, len(tn.sc), len(tn.feasible))
		}
		wants := make([]searchCand, len(tn.feasible))
		for i, c := range tn.feasible {
			want := searchCand{c: c, board: c.board, kid: int32(p.ids.of(tn, c)), replicas: int32(c.replicas), tpf: unitGPUs(c), memFrac: c.memFrac, compFrac: c.compFrac,
				unitFrac: c.unitFrac, whole: c.whole(), mig: c.profile != nil, forbidden: p.forbidden(tn, c), disallowed: !p.allowed(c), use: -1}
			if want.mig {
				want.use, want.way = p.ids.useOf(c), p.ids.wayOf(migUse{kind: c.kind, share: c.share})
			}
			wants[i] = want
		}
		markDominated(wants, false)
		for i, c := range tn.feasible {
			e, want := tn.sc[i], wants[i]
			if e.kid < 0 {
				e.kid = int32(p.kidOf(tn, &tn.sc[i]))
			} else {
				kept++
			}
			if e != want {
				t.Fatalf("%s: search candidate %d is %+v, want %+v", tn.t.Name, i, e, want)
			}
			if c == raised {
				fresh++
			}
		}
	}
	if kept == 0 || fresh == 0 {
		t.Errorf("%d entries kept their group numbers, %d filled afresh: want both above 0", kept, fresh)
	}
	// fixedUses after more settings are fixed: the flags are allowed's.
	var more []string
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			if c.profile != nil && len(more) == 0 && !slicesContains(fixed, useKey(c)) {
				more = append(more, useKey(c))
				p.keep[useKey(c)] = migUse{kind: v1.SliceTimeSlice, share: 99}
			}
		}
	}
	p.fixedUses(append(more, "no/such"))
	n := 0
	for _, tn := range p.tenants {
		for _, e := range tn.sc {
			if e.disallowed != !p.allowed(e.c) {
				t.Fatalf("%s: %s disallowed %v, allowed says %v", tn.t.Name, e.c.label(), e.disallowed, p.allowed(e.c))
			}
			if e.disallowed {
				n++
			}
		}
	}
	if n == 0 {
		t.Error("no candidate disallowed")
	}
	p.keep, p.forbid = nil, nil
}

func slicesContains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// TestSearchOfRefills swaps a tenant's feasible candidates for another slice (a copy, then a
// shorter one) and checks that searchOf fills the search candidates again from it, and that
// numberAll numbers every entry, as the weighing would.
func TestSearchOfRefills(t *testing.T) {
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 40, GPUs: 40, Varied: true}, rand.New(rand.NewPCG(40, 3))))
	p.keep = map[string]migUse{}
	p.searchCands()
	var tn *tenant
	for _, x := range p.tenants {
		if len(x.feasible) > 2 {
			tn = x
			break
		}
	}
	gen := p.scGen
	if p.searchOf(tn); p.scGen != gen {
		t.Fatal("searchOf filled the search candidates again with the same feasible slice")
	}
	orig := tn.feasible
	defer func() { tn.feasible = orig }()
	for _, fs := range [][]*cand{append([]*cand(nil), orig...), orig[1:], orig[:len(orig)-1]} {
		tn.feasible = fs
		gen := p.scGen
		sc := p.searchOf(tn)
		if p.scGen == gen {
			t.Fatalf("%d feasible candidates in another slice: searchOf did not fill them again", len(fs))
		}
		if len(sc) != len(fs) {
			t.Fatalf("%d search candidates for %d feasible", len(sc), len(fs))
		}
		for i, c := range fs {
			if sc[i].c != c {
				t.Fatalf("search candidate %d is %s, want %s", i, sc[i].c.label(), c.label())
			}
		}
		p.numberAll(tn, sc)
		for i := range sc {
			if sc[i].kid < 0 || int(sc[i].kid) != p.ids.of(tn, sc[i].c) {
				t.Fatalf("search candidate %d: group %d, want %d", i, sc[i].kid, p.ids.of(tn, sc[i].c))
			}
		}
	}
	p.keep = nil
}
