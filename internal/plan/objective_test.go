package plan

import (
	"math"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// One 1g.20gb (memory 2/8, compute 1/7) and six 1g.10gb (1/8, 1/7 each) fill one H100 exactly:
// the vector objective says 1 GPU (memory 8/8, compute 7/7) where the sum of unit sizes says
// 1/4 + 6/7 = 1.107. Moving the 1g.20gb tenant to a whole GPU costs 1 + 6/7 − 1 = 6/7 (memory
// falls to 6/8, so compute's 6/7 is the larger share), and a whole GPU on top adds exactly 1.
func TestVectorObjective(t *testing.T) {
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
	whole := &cand{board: b, kind: v1.SliceExclusive, share: 1, replicas: 1, unitFrac: 1, memFrac: 1, compFrac: 1}
	big, small := mig("1g.20gb"), mig("1g.10gb")
	ids := newKeyIDs()
	sum, vec := newFractional(ids), newFractional(ids)
	vec.vec = newVectorObjective()
	tn := &tenant{}
	for _, f := range []*fractional{sum, vec} {
		f.move(ids.of(tn, big), big, 1)
		f.move(ids.of(tn, small), small, 6)
	}
	total := func(f *fractional) float64 {
		s := 0.0
		for _, x := range f.vec.tot {
			s += f.vec.value(x)
		}
		return s
	}
	if got := total(vec); math.Abs(got-1) > 1e-9 {
		t.Errorf("vector objective %v, want 1", got)
	}
	kb, ks, kw := ids.of(tn, big), ids.of(tn, small), ids.of(tn, whole)
	if got := sum.delta(kb, big, 0) + sum.cost(kb, 1) + sum.cost(ks, 6); math.Abs(got-(0.25+6.0/7)) > 1e-9 {
		t.Errorf("sum objective %v, want 1.107", got)
	}
	if d := vec.moveDelta(kb, big, -1, kw, whole, 1); math.Abs(d-6.0/7) > 1e-9 {
		t.Errorf("moving the 1g.20gb tenant to a whole GPU: delta %v, want 6/7", d)
	}
	if d := vec.moveDelta(ks, small, 0, kw, whole, 1); math.Abs(d-1) > 1e-9 {
		t.Errorf("adding a whole GPU: delta %v, want 1", d)
	}
}
