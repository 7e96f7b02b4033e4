package plan

import (
	"cmp"
	"math"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
)

// vectorObjective is the second objective the choice is optimised for. The sum of unit sizes
// (max(memory share, compute share) per MIG instance) overcounts a mix of memory-heavy and
// compute-heavy instances that share GPUs: four 1g.20gb (memory 2/8 each) and six 1g.10gb
// (compute 1/7 each) do not fit one GPU, but one 1g.20gb and six 1g.10gb do. Per board and
// energy class (the packer's buckets) it counts
//
//	whole GPUs + max(Σ memory shares, Σ compute shares, large instances) of the MIG instances,
//
// each group's units ceil(replicas / share) as in the sum. A large instance takes more than half
// of the GPU's memory or compute slices (4g.40gb on an H100, 4g.20gb on an A100 40GB, 4g.24gb on
// an A30, every 7g), so no two of them share a GPU: five 4g.40gb take five H100s, where their
// compute shares add up to 2.857 (ADR 0069). It is a lower bound on the GPUs of the bucket's
// packing (a GPU holds at most all memory and all compute slices, and at most one large
// instance) and the quantity the cutting-stock packer then gets close to.
type vectorObjective struct {
	tot [][4]float64 // whole, memory, compute, large, by bucket number (keyIDs.buckets)
	has []bool       // buckets added to at least once
}

type bucketKey struct {
	board  string
	energy v1.EnergyClass
}

// unitChange is what a move does to one bucket: GPUs, shares and large instances added
// (negative: removed).
type unitChange struct {
	b                       int // bucket number
	whole, mem, comp, large float64
}

// apply adds ch's parts to a bucket's totals.
func (ch *unitChange) apply(t *[4]float64) {
	t[0] += ch.whole
	t[1] += ch.mem
	t[2] += ch.comp
	t[3] += ch.large
}

// largeShare is the share above which a MIG instance is large: two of them never share a GPU.
const largeShare = 0.5 + 1e-9

// isLarge tells whether a MIG instance of these memory and compute shares is large.
func isLarge(memFrac, compFrac float64) bool { return memFrac > largeShare || compFrac > largeShare }

func newVectorObjective() *vectorObjective { return &vectorObjective{} }

// change is what r replicas of c joining (r > 0) or leaving (r < 0) group k do to the units.
func (f *fractional) change(k int, c *cand, r int) unitChange {
	return f.changeBy(k, r, &searchCand{tpf: unitGPUs(c), memFrac: c.memFrac, compFrac: c.compFrac, whole: c.whole()})
}

// changeBy is change for r replicas of e's candidate.
func (f *fractional) changeBy(k, r int, e *searchCand) unitChange {
	f.fit(k)
	cur := f.replicas[k]
	return f.changeOf(k, f.units(k, cur+r)-f.units(k, cur), e)
}

// changeOf is changeBy for a change of du units of group k.
func (f *fractional) changeOf(k int, du float64, e *searchCand) unitChange {
	ch := unitChange{b: f.ids.bucket[k]}
	if e.whole {
		ch.whole = du * e.tpf
	} else {
		ch.mem, ch.comp = du*e.memFrac, du*e.compFrac
		if isLarge(e.memFrac, e.compFrac) {
			ch.large = du
		}
	}
	return ch
}

func unitsOf(r, share int) float64 {
	if r <= 0 {
		return 0
	}
	return math.Ceil(float64(r) / float64(share))
}

func (v *vectorObjective) value(t [4]float64) float64 { return t[0] + max(t[1], t[2], t[3]) }

func (v *vectorObjective) get(b int) [4]float64 {
	if b < len(v.tot) {
		return v.tot[b]
	}
	return [4]float64{}
}

func (v *vectorObjective) add(ch unitChange) {
	for len(v.tot) <= ch.b {
		v.tot, v.has = append(v.tot, [4]float64{}), append(v.has, false)
	}
	v.has[ch.b] = true
	ch.apply(&v.tot[ch.b])
}

// delta is the change of the objective when both changes apply.
func (v *vectorObjective) delta(a, b unitChange) float64 {
	return v.deltaFrom(&leaving{ch: a, vecA: v.alone(a)}, b)
}

// alone is the change of a's bucket's value when a alone applies.
func (v *vectorObjective) alone(a unitChange) float64 {
	ta := v.get(a.b)
	before := v.value(ta)
	a.apply(&ta)
	return v.value(ta) - before
}

// deltaFrom is delta for l.ch and b, with l.vecA = v.alone(l.ch) (the search weighs a tenant's
// leaving once for all its moves). The terms add in the order they always did, so the values
// are the same to the bit.
func (v *vectorObjective) deltaFrom(l *leaving, b unitChange) float64 {
	a := l.ch
	if a.b == b.b {
		ta := v.get(a.b)
		before := v.value(ta)
		a.apply(&ta)
		b.apply(&ta)
		return v.value(ta) - before
	}
	tb := v.get(b.b)
	d := l.vecA - v.value(tb)
	b.apply(&tb)
	return d + v.value(tb)
}

// chosenValue is the objective the choice minimises, of the current choice: the vector one with
// vector, the sum of rounded unit sizes otherwise.
func (p *planner) chosenValue(vector bool) float64 {
	f := p.newFractional(vector)
	keys := p.fillChosen(f)
	pen := 0.0
	if f.cap != nil {
		pen = f.cap.penalty()
	}
	if vector {
		total := pen
		var buckets []int
		for b, has := range f.vec.has {
			if has {
				buckets = append(buckets, b)
			}
		}
		slices.SortFunc(buckets, func(x, y int) int {
			a, b := p.ids.buckets[x], p.ids.buckets[y]
			return cmp.Or(cmp.Compare(a.board, b.board), cmp.Compare(a.energy, b.energy))
		})
		for _, b := range buckets {
			total += f.vec.value(f.vec.get(b))
		}
		return total
	}
	return f.sumCost(keys) + pen
}
