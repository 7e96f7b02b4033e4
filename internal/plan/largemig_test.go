package plan

import (
	"math"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// A MIG instance that takes more than half of a GPU's memory or compute slices shares no GPU
// with another such instance: the vector objective counts those instances as whole GPUs at
// least (ADR 0069). Five 4g.40gb on an H100 (compute 4/7 each, 2.857 in all) take five GPUs;
// two 3g.40gb (memory 4/8 each) still fill one; a 4g.40gb beside a 3g.40gb fills one.
func TestVectorObjectiveCountsLargeInstances(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	mig := func(name string) *cand {
		p, err := b.Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		c := &cand{board: b, kind: v1.SliceMIG, profile: p, share: 1, replicas: 1,
			memFrac: float64(p.MemorySlices) / float64(b.MemorySlices), compFrac: float64(p.ComputeSlices) / float64(b.ComputeSlices)}
		c.unitFrac = max(c.memFrac, c.compFrac)
		return c
	}
	value := func(moves func(f *fractional, ids *keyIDs, tn *tenant)) float64 {
		ids := newKeyIDs()
		f := newFractional(ids)
		f.vec = newVectorObjective()
		moves(f, ids, &tenant{})
		s := 0.0
		for _, x := range f.vec.tot {
			s += f.vec.value(x)
		}
		return s
	}
	four, three := mig("4g.40gb"), mig("3g.40gb")
	for _, tc := range []struct {
		name  string
		moves func(f *fractional, ids *keyIDs, tn *tenant)
		want  float64
	}{
		{"5 × 4g.40gb", func(f *fractional, ids *keyIDs, tn *tenant) { f.move(ids.of(tn, four), four, 5) }, 5},
		{"2 × 3g.40gb", func(f *fractional, ids *keyIDs, tn *tenant) { f.move(ids.of(tn, three), three, 2) }, 1},
		{"4g.40gb + 3g.40gb", func(f *fractional, ids *keyIDs, tn *tenant) {
			f.move(ids.of(tn, four), four, 1)
			f.move(ids.of(&tenant{}, three), three, 1)
		}, 1},
	} {
		if got := value(tc.moves); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: vector objective %v, want %v", tc.name, got, tc.want)
		}
	}
	// A move's delta agrees with the objective: a sixth 4g.40gb adds a GPU, a 3g.40gb beside
	// five 4g.40gb adds nothing the large count does not already hold.
	ids := newKeyIDs()
	f := newFractional(ids)
	f.vec = newVectorObjective()
	tn, other := &tenant{}, &tenant{}
	f.move(ids.of(tn, four), four, 5)
	if d := f.moveDelta(ids.of(other, three), three, 0, ids.of(tn, four), four, 1); math.Abs(d-1) > 1e-9 {
		t.Errorf("a sixth 4g.40gb: delta %v, want 1", d)
	}
	if d := f.moveDelta(ids.of(tn, four), four, 0, ids.of(other, three), three, 1); math.Abs(d) > 1e-9 {
		t.Errorf("a 3g.40gb beside five 4g.40gb: delta %v, want 0", d)
	}
}

// Review 12's M1 (testdata/review12/x1-h100-one-4g-per-gpu.yaml): mistral-7b at 14 req/s
// bursty on three H100s, DRA. The choice took 5 × 4g.40gb, counted as 2.857 GPUs, and the
// packer placed 3 of them (one a GPU): the tenant was NoCapacity where its exclusive candidate
// (3 GPUs) fits. With four H100s it was still short (4 of 5). Every tenant is now served, on
// no more GPUs than the exclusive-only twin takes.
func TestLargeMIGTenantServedWhole(t *testing.T) {
	for _, gpus := range []int{3, 4} {
		pool := loadPool(t, "../../testdata/review12/x1-h100-one-4g-per-gpu.yaml")
		pool.Fleet.Nodes[0].GPUs[0].Count = gpus
		pl := build(t, pool)
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("%d GPUs: %v", gpus, err)
		}
		for _, tn := range pl.Tenants {
			if tn.Infeasible {
				t.Errorf("%d GPUs: %s infeasible: %v", gpus, tn.Name, tn.Reasons)
			}
		}
		if pl.Summary.GPUsUsed > 3 {
			t.Errorf("%d GPUs: %d used, the exclusive candidate takes 3", gpus, pl.Summary.GPUsUsed)
		}
	}
}

// Review 12's M2 (testdata/review12/s1-a100-40-8b-trickle.yaml): llama-3.1-8b at 0.05 req/s,
// concurrency 1, on A100 40GB. 3 × 4g.20gb (1.714 by the sum of unit sizes) took 3 GPUs, one
// 4g.20gb a GPU; 4 × 3g.20gb take 2, as the mig-first-fit baseline says. The plan, confirmed by
// simulation as the command line plans it, takes no more GPUs than that baseline.
func TestLargeMIGNotAboveFirstFit(t *testing.T) {
	pool := loadPool(t, "../../testdata/review12/s1-a100-40-8b-trickle.yaml")
	pl := buildWith(t, pool, confirmed)
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	if pl.Tenants[0].Infeasible {
		t.Fatalf("infeasible: %v", pl.Tenants[0].Reasons)
	}
	ff := -1
	for _, b := range pl.Summary.Baselines {
		if b.Name == "mig-first-fit" {
			ff = b.GPUs
		}
	}
	if ff < 0 {
		t.Fatalf("no mig-first-fit baseline in %+v", pl.Summary.Baselines)
	}
	if pl.Summary.GPUsUsed > ff || pl.Summary.GPUsUsed > 2 {
		t.Errorf("%d GPUs used, mig-first-fit %d, 4 × 3g.20gb take 2", pl.Summary.GPUsUsed, ff)
	}
}
