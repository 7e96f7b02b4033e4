package plan

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// groupMin's branch and bound finds the same minimum as trying every choice of a small group.
func TestGroupMinMatchesEnumeration(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	profs := migProfiles(b)
	rapid.Check(t, func(rt *rapid.T) {
		lam := rapid.Float64Range(0, 1).Draw(rt, "lambda")
		n := rapid.IntRange(1, 4).Draw(rt, "tenants")
		var ts []*tenant
		for i := range n {
			tn := &tenant{idx: i, group: "soft:g"}
			for range rapid.IntRange(1, 4).Draw(rt, "cands") {
				c := &cand{board: b, kind: v1.SliceMPS, share: rapid.SampledFrom([]int{1, 2, 3, 4}).Draw(rt, "share"),
					unitFrac: 1, memFrac: 1, compFrac: 1, replicas: rapid.IntRange(1, 5).Draw(rt, "replicas")}
				if rapid.Bool().Draw(rt, "mig") {
					p := rapid.SampledFrom(profs).Draw(rt, "profile")
					c.kind, c.profile = v1.SliceMIGMPS, p
					c.memFrac = float64(p.MemorySlices) / float64(b.MemorySlices)
					c.compFrac = float64(p.ComputeSlices) / float64(b.ComputeSlices)
				}
				if c.share == 1 && c.profile != nil {
					c.kind = v1.SliceMIG
				} else if c.share == 1 {
					c.kind = v1.SliceExclusive
				}
				tn.feasible = append(tn.feasible, c)
			}
			ts = append(ts, tn)
		}
		want := math.Inf(1)
		choice := make([]int, n)
		var walk func(i int)
		walk = func(i int) {
			if i == n {
				reps := map[groupKey]int{}
				price := map[groupKey]float64{}
				for j, tn := range ts {
					c := tn.feasible[choice[j]]
					k := keyOf(tn, c)
					reps[k] += c.replicas
					price[k] = unitPrice(c, lam)
				}
				sum := 0.0
				for k, r := range reps {
					sum += unitsOf(r, k.share) * price[k]
				}
				want = min(want, sum)
				return
			}
			for c := range ts[i].feasible {
				choice[i] = c
				walk(i + 1)
			}
		}
		walk(0)
		if got := groupMin(ts, lam); math.Abs(got-want) > 1e-9 {
			rt.Fatalf("groupMin = %v, enumeration %v", got, want)
		}
	})
}

// On the 100-tenant synthetic pool the rounding of shared units lifts the bound from the volume
// bound's 20 GPUs to 21 (the planner uses 22), and on every small pool it lies between the
// volume bound and the GPUs used.
func TestGroupBoundTightens(t *testing.T) {
	p, err := newPlanner(synthPool(100), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	p.choose(true, false)
	if v, g := p.volumeBound(), p.groupBound(); v != 20 || g != 21 {
		t.Errorf("volume bound %d, group bound %d; want 20 and 21", v, g)
	}
	rapid.Check(t, func(rt *rapid.T) {
		pool := synthPoolOn(rapid.IntRange(1, 30).Draw(rt, "tenants"), 40)
		pl, err := Build(pool, Options{})
		if err != nil {
			rt.Fatal(err)
		}
		p, err := newPlanner(pool, Options{})
		if err != nil {
			rt.Fatal(err)
		}
		p.evaluate()
		p.choose(true, false)
		if v, g := p.volumeBound(), p.groupBound(); g < v || g > pl.Summary.GPUsUsed {
			rt.Fatalf("volume bound %d, group bound %d, GPUs used %d", v, g, pl.Summary.GPUsUsed)
		}
	})
}
