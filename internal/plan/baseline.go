package plan

import (
	"cmp"
	"math"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// Baseline names.
const (
	BaselineExclusive   = "exclusive"
	BaselineMIGFirstFit = "mig-first-fit"
	BaselineRuleOfThumb = "rule-of-thumb"
)

// baselines computes the comparison strategies on the same tenants (those the plan serves),
// sized with the same performance model and SLOs, ignoring the fleet's size.
func (p *planner) baselines() []v1.Baseline {
	var served []*tenant
	for _, tn := range p.tenants {
		if tn.choice != nil {
			served = append(served, tn)
		}
	}
	return []v1.Baseline{
		{Name: BaselineExclusive, GPUs: p.exclusiveBaseline(served)},
		{Name: BaselineMIGFirstFit, GPUs: p.migFirstFit(served)},
		{Name: BaselineRuleOfThumb, GPUs: p.ruleOfThumb(served)},
	}
}

// probe evaluates one extra candidate of tn (cached like the others); nil when it does not serve.
func (p *planner) probe(tn *tenant, b *gpu.Board, kind v1.SliceKind, prof *gpu.Profile, share int) *cand {
	c := &cand{board: b, kind: kind, profile: prof, share: share, tp: 1, unitFrac: 1, memFrac: 1, compFrac: 1}
	p.evalCand(tn, c)
	if c.reject != "" {
		return nil
	}
	return c
}

// exclusiveReplicas is the fewest replicas tn needs on whole GPUs of any board, one GPU each, or
// the GPUs its chosen replicas take when no whole GPU serves it (tp each for a tensor-parallel
// choice, one each otherwise).
func (p *planner) exclusiveReplicas(tn *tenant) int {
	best := math.MaxInt
	for _, b := range p.boards {
		if c := p.probe(tn, b, v1.SliceExclusive, nil, 1); c != nil {
			best = min(best, c.replicas)
		}
	}
	if best == math.MaxInt {
		return tn.choice.replicas * max(tn.choice.tp, 1)
	}
	return best
}

// exclusiveBaseline: one whole GPU per replica.
func (p *planner) exclusiveBaseline(ts []*tenant) int {
	n := 0
	for _, tn := range ts {
		n += p.exclusiveReplicas(tn)
	}
	return n
}

// smallestMIG is the smallest MIG profile of b (memory, then compute) on which tn fits and meets
// its SLO, or nil.
func (p *planner) smallestMIG(tn *tenant, b *gpu.Board) *cand {
	profs := slices.Clone(migProfiles(b))
	slices.SortStableFunc(profs, func(x, y *gpu.Profile) int {
		return cmp.Or(cmp.Compare(x.MemoryMiB, y.MemoryMiB), cmp.Compare(x.ComputeSlices, y.ComputeSlices))
	})
	for _, prof := range profs {
		if c := p.probe(tn, b, v1.SliceMIG, prof, 1); c != nil {
			return c
		}
	}
	return nil
}

// migFirstFit: every replica on the smallest MIG profile that serves it, first fit over GPUs in
// order; tenants no MIG profile serves take whole GPUs.
func (p *planner) migFirstFit(ts []*tenant) int {
	gpus := 0
	ff := newFirstFitter()
	for _, tn := range ts {
		b := tn.choice.board
		c := p.smallestMIG(tn, b)
		if c == nil {
			gpus += p.exclusiveReplicas(tn)
			continue
		}
		for range c.replicas {
			if ff.add(b, c.profile.Name) {
				gpus++
			}
		}
	}
	return gpus
}

// firstFitter packs MIG instances first fit over GPUs in order.
type firstFitter struct {
	open map[*gpu.Board][]gpu.Layout
	skip map[string]int // board/profile → first GPU that may still have room for it
}

func newFirstFitter() *firstFitter {
	return &firstFitter{open: map[*gpu.Board][]gpu.Layout{}, skip: map[string]int{}}
}

// add puts one instance of profile on the first GPU of b with a free legal start, opening a GPU
// when none has one, and reports whether it opened one. GPUs only fill up, so a GPU that once had
// no room for a profile is skipped for it from then on.
func (f *firstFitter) add(b *gpu.Board, profile string) bool {
	key := b.Name + "/" + profile
	for i := f.skip[key]; i < len(f.open[b]); i++ {
		l := f.open[b][i]
		starts, err := b.FreeStarts(l, profile)
		if err != nil || len(starts) == 0 {
			f.skip[key] = i + 1
			continue
		}
		f.open[b][i] = append(l, gpu.Instance{Profile: profile, Start: starts[0]})
		return false
	}
	starts, err := b.FreeStarts(nil, profile)
	if err != nil || len(starts) == 0 {
		return true // cannot happen for the board's own profiles; count the GPU anyway
	}
	f.open[b] = append(f.open[b], gpu.Layout{{Profile: profile, Start: starts[0]}})
	return true
}

// ruleOfThumb takes the articles' four steps literally, tenant by tenant:
//
//  1. memory: a replica needing more than 85% of a GPU gets whole GPUs;
//  2. compute: a tenant needing more than 70% of a whole GPU's rate gets whole GPUs;
//  3. SLO shape: low-frequency tenants are time-sliced 8 to a GPU; large models (weights over a
//     quarter of the GPU) get the smallest MIG profile that serves them; small models share a GPU
//     four ways through MPS;
//  4. fairness does not change the count.
//
// MIG instances are packed first fit; MPS and time-sliced GPUs are filled in tenant order.
func (p *planner) ruleOfThumb(ts []*tenant) int {
	gpus, mps, ts8 := 0, 0, 0
	ff := newFirstFitter()
	for _, tn := range ts {
		b := tn.choice.board
		excl := p.probe(tn, b, v1.SliceExclusive, nil, 1)
		exN := p.exclusiveReplicas(tn)
		memBig := excl == nil || float64(excl.ev.fit.Memory.Budget()) > 0.85*float64(excl.ev.fit.Slice.MemoryBytes)
		// busy (above 0.7 of what one exclusive replica carries) is asked only where memBig is
		// not, and searched only as far as it needs (oneRateExceeds).
		switch {
		case memBig || excl.ev.oneRateExceeds(tn.t.Traffic.RPS, 0.7):
			gpus += exN
		case tn.t.LowFrequency:
			if c := p.probe(tn, b, v1.SliceTimeSlice, nil, 8); c != nil {
				ts8 += c.replicas
				continue
			}
			gpus += exN
		case float64(excl.ev.fit.Memory.Weights) > 0.25*float64(excl.ev.fit.Slice.MemoryBytes) || !b.MIGCapable():
			c := p.smallestMIG(tn, b)
			if c == nil {
				gpus += exN
				continue
			}
			for range c.replicas {
				if ff.add(b, c.profile.Name) {
					gpus++
				}
			}
		default:
			if c := p.probe(tn, b, v1.SliceMPS, nil, 4); c != nil {
				mps += c.replicas
				continue
			}
			gpus += exN
		}
	}
	return gpus + (mps+3)/4 + (ts8+7)/8
}
