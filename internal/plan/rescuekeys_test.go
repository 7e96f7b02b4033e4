package plan

import (
	"math"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// holdsAloneByScan is holdsAlone as it was: every pool GPU's units listed, and whether tn holds
// a GPU counted apart (heldGPUs).
func holdsAloneByScan(p *planner, tn *tenant) (map[string][]*gpuPlan, bool) {
	own := map[string][]*gpuPlan{}
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		us := g.units()
		if len(us) == 0 {
			continue
		}
		alone := true
		for _, u := range us {
			if slices.ContainsFunc(u.reps, func(r replica) bool { return r.tn != tn }) {
				alone = false
				break
			}
		}
		if alone {
			own[g.fg.board.Name] = append(own[g.fg.board.Name], g)
		}
	}
	return own, p.heldGPUs(tn) > 0
}

// rescueEstimateByMaps is the estimate as it was: the picks of the tenants not skipped summed
// in maps by group key.
func rescueEstimateByMaps(ts []*tenant, skip map[*tenant]bool, picks map[*tenant]*cand) float64 {
	reps := map[groupKey]int{}
	unit := map[groupKey]*cand{}
	for _, t := range ts {
		c := picks[t]
		if skip[t] || c == nil {
			continue
		}
		k := keyOf(t, c)
		reps[k] += c.replicas
		unit[k] = c
	}
	sum := 0.0
	for k, r := range reps {
		sum += unitsOf(r, k.share) * unit[k].unitFrac
	}
	return sum
}

// The rescue's look-ups by numbered key and marked unit (placedOf), its single pass for the
// GPUs a tenant holds (holdsAlone) and its estimate kept in slices (rescueEst, rescuePicks)
// find what scans of the fleet and maps by key find, on a short fleet as packed, after a pass
// of the rescue (which moves, joins, trial placements and undoes), after a snapshot's restore
// and after a packing again: the units' numbers and marks and the keys' numbers outlive each.
func TestRescueLookupsMatchScans(t *testing.T) {
	p := shortFleet(t, rkN, rkG)
	checked := map[string]int{}
	check := func(stage string) {
		t.Helper()
		for _, g := range p.gpus {
			for u := range g.eachUnit {
				got, want := p.placedOf(u.key), placedByScan(p, u.key)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: placedOf(%v) is %d units, a scan of the fleet %d", stage, u.key, len(got), len(want))
				}
				if got2 := p.placedOf(u.key); !slices.Equal(got2, got) {
					t.Fatalf("%s: placedOf(%v) asked again is %d units, first %d", stage, u.key, len(got2), len(got))
				}
				checked[stage+" placedOf"]++
			}
		}
		for _, tn := range p.tenants {
			own, held := p.holdsAlone(tn)
			wantOwn, wantHeld := holdsAloneByScan(p, tn)
			if held != wantHeld || len(own) != len(wantOwn) {
				t.Fatalf("%s: %s holds alone %d board(s), any %v; a scan finds %d, %v", stage, tn.t.Name, len(own), held, len(wantOwn), wantHeld)
			}
			for b, gs := range wantOwn {
				if !slices.Equal(own[b], gs) {
					t.Fatalf("%s: %s holds alone %d GPU(s) of %s, a scan finds %d", stage, tn.t.Name, len(own[b]), b, len(gs))
				}
			}
			if held {
				checked[stage+" held"]++
			}
		}
		free := p.freeGPUs()
		byGroup := map[string][]*tenant{}
		for _, tn := range p.tenants {
			if tn.choice != nil && tn.group != "" {
				byGroup[tn.group] = append(byGroup[tn.group], tn)
			}
		}
		idle := idleCounts(free)
		for _, ts := range byGroup {
			picks := p.rescuePicks(ts, free, newIdleBoards(free))
			byTenant := map[*tenant]*cand{}
			for i, tn := range ts {
				want := p.firstInRescueOrder(tn, free, func(c *cand) bool { return c != tn.choice && idle[c.board.Name] > 0 })
				if picks[i] != want {
					t.Fatalf("%s: %s picks %v, rescueOrder's first on an idle board %v", stage, tn.t.Name, picks[i], want)
				}
				if want != nil {
					byTenant[tn] = want
				}
			}
			est := p.newRescueEst(ts, picks)
			skips := [][]int{nil, {0}}
			var third, half []int
			for i := range ts {
				if i%3 == 1 {
					third = append(third, i)
				}
				if i < len(ts)/2 {
					half = append(half, i)
				}
			}
			skips = append(skips, third, half)
			for _, skip := range skips {
				in := map[*tenant]bool{}
				for _, i := range skip {
					in[ts[i]] = true
				}
				got, want := est.without(skip), rescueEstimateByMaps(ts, in, byTenant)
				if math.Abs(got-want) > 1e-9 {
					t.Fatalf("%s: the estimate of %d tenants of group %s without %d is %g, summed in maps %g", stage, len(ts), ts[0].group, len(skip), got, want)
				}
				if want > 0 {
					checked[stage+" estimate"]++
				}
			}
		}
	}
	check("packed")
	before := p.snapshot()
	for _, tn := range p.tenants {
		tn.infeas = nil
	}
	if err := p.pack(); err != nil {
		t.Fatal(err)
	}
	if len(p.unplaced) == 0 {
		t.Fatal("the packing left no unit unplaced: nothing to rescue")
	}
	// half the served tenants taken off leave GPUs idle for the rescue to move onto
	var off []*tenant
	for i, tn := range p.tenants {
		if i%2 == 0 && p.heldGPUs(tn) > 0 && !slices.ContainsFunc(p.unplaced, func(u *unit) bool {
			return slices.ContainsFunc(u.reps, func(r replica) bool { return r.tn == tn })
		}) {
			off = append(off, tn)
		}
	}
	p.dropAll(off)
	check("dropped")
	// during the pass, every answer placedOf reads off its index is what a scan finds
	indexed := 0
	placedOfCheck = func(p *planner, k groupKey, got []*unit) {
		indexed++
		if want := placedByScan(p, k); !slices.Equal(got, want) {
			t.Errorf("during the rescue: placedOf(%v) off the index is %d units, a scan of the fleet %d", k, len(got), len(want))
		}
	}
	defer func() { placedOfCheck = nil }()
	// and every answer holdsAlone reads off it (the GPUs of the short tenant's choice's key)
	ownIndexed := 0
	holdsAloneCheck = func(p *planner, tn *tenant, own map[string][]*gpuPlan, held bool) {
		ownIndexed++
		wantOwn, wantHeld := holdsAloneByScan(p, tn)
		if held != wantHeld || len(own) != len(wantOwn) {
			t.Errorf("during the rescue: %s holds alone %d board(s), any %v off the index; a scan finds %d, %v", tn.t.Name, len(own), held, len(wantOwn), wantHeld)
		}
		for b, gs := range wantOwn {
			if !slices.Equal(own[b], gs) {
				t.Errorf("during the rescue: %s holds alone %d GPU(s) of %s off the index, a scan finds %d", tn.t.Name, len(own[b]), b, len(gs))
			}
		}
	}
	defer func() { holdsAloneCheck = nil }()
	if err := p.rescueShort(p.unplaced); err != nil {
		t.Fatal(err)
	}
	placedOfCheck, holdsAloneCheck = nil, nil
	if indexed == 0 {
		t.Fatal("the rescue read no placed units off its index")
	}
	if ownIndexed == 0 {
		t.Fatal("the rescue asked holdsAlone nothing off its index") // TestRescueOnOwnGPUs: a tenant holding GPUs alone
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("moved %d unmoved %d own %d served %d free %d off %d indexed %d", len(p.moved), len(p.unmoved), len(p.unmovedOwn), len(p.unmovedServed), countIdle(p.freeGPUs()), len(off), indexed)
	if len(p.moved) == 0 {
		t.Fatal("the rescue moved no tenant")
	}
	check("rescued")
	before.restore(p)
	check("restored")
	for _, tn := range p.tenants {
		tn.infeas = nil
	}
	if err := p.pack(); err != nil {
		t.Fatal(err)
	}
	check("packed again")
	for _, stage := range []string{"packed", "dropped", "rescued", "restored", "packed again"} {
		for _, what := range []string{"placedOf", "held"} {
			if checked[stage+" "+what] == 0 {
				t.Fatalf("%s: no %s checked", stage, what)
			}
		}
	}
	if checked["dropped estimate"] == 0 {
		t.Fatal("no estimate checked with GPUs idle")
	}
}

var rkN, rkG = 400, 96

// The index of placed units by key (placedIndex) follows what a pass of the rescue does to the
// GPUs: trial placements of whole-GPU and MIG units on idle GPUs (packBucket, fillMIG), their
// undoing (undoTrial), a tenant's replicas taken off (dropReplicas) and put back (restoreHeld).
// After each, placedOf off the index finds what a scan of the fleet finds, for the keys of the
// units placed and of those taken off.
func TestPlacedIndexFollowsTrials(t *testing.T) {
	p := shortFleet(t, 400, 96)
	var off []*tenant
	for i, tn := range p.tenants {
		if i%2 == 0 && p.heldGPUs(tn) > 0 {
			off = append(off, tn)
		}
	}
	p.dropAll(off)
	free := p.freeGPUs()
	if countIdle(free) == 0 {
		t.Fatal("no GPU idle")
	}
	p.pidx = p.newPlacedIndex()
	defer func() { p.pidx = nil }()
	indexed := 0
	placedOfCheck = func(*planner, groupKey, []*unit) { indexed++ }
	defer func() { placedOfCheck = nil }()
	check := func(stage string, k groupKey) {
		t.Helper()
		if got, want := p.placedOf(k), placedByScan(p, k); !slices.Equal(got, want) {
			t.Fatalf("%s: placedOf(%v) off the index is %d units, a scan of the fleet %d", stage, k, len(got), len(want))
		}
	}
	pc := newPatternCache()
	placed := map[string]int{}
	for _, tn := range p.tenants[:120] {
		for _, c := range tn.feasible {
			b := c.board.Name
			if countFree(free[b]) == 0 {
				continue
			}
			k := keyOf(tn, c)
			check("before "+c.label(), k)
			units := soloUnits(tn, c)
			was := slices.Clone(free[b])
			left, err := p.packBucket(units, free, pc)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range units {
				delete(p.blocked, u)
			}
			if len(left) < len(units) {
				placed[string(c.kind)]++
			}
			check("placed "+c.label(), k)
			p.undoTrial(was, units, free, b)
			check("undone "+c.label(), k)
		}
		if p.heldGPUs(tn) == 0 {
			continue
		}
		k := keyOf(tn, tn.choice)
		saved := p.holding(tn)
		p.dropReplicas(tn, nil)
		check("dropped "+tn.t.Name, k)
		p.restoreHeld(saved)
		check("restored "+tn.t.Name, k)
		placed["restored"]++
	}
	t.Logf("placed %v, %d answers off the index", placed, indexed)
	if placed[string(v1.SliceMIG)] == 0 || placed["restored"] == 0 || placed[string(v1.SliceMPS)]+placed[string(v1.SliceExclusive)] == 0 || indexed == 0 {
		t.Fatalf("placed %v, %d answers off the index: not every way of placing was tried", placed, indexed)
	}
}
