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
// sized with the same performance model and SLOs, ignoring the fleet's size. Where the plan's
// simulation judged a tenant's candidate of the slice a baseline gives it (whole GPUs, or one
// MIG profile, of one board: slices with no neighbour to change what the runs saw), the
// baseline takes the simulation's word over the model's (simCount, ADR 0074); a baseline is
// Confirmed when every tenant's count in it is one the runs passed.
func (p *planner) baselines() []v1.Baseline {
	var served []*tenant
	for _, tn := range p.tenants {
		if tn.choice != nil {
			served = append(served, tn)
		}
	}
	ex, exOK := p.exclusiveBaseline(served)
	ff, ffOK := p.migFirstFit(served)
	rt, rtOK := p.ruleOfThumb(served)
	some := len(served) > 0
	return []v1.Baseline{
		{Name: BaselineExclusive, GPUs: ex, Confirmed: some && exOK},
		{Name: BaselineMIGFirstFit, GPUs: ff, Confirmed: some && ffOK},
		{Name: BaselineRuleOfThumb, GPUs: rt, Confirmed: some && rtOK},
	}
}

// passed reports whether the runs of st judged its count and found it within the SLO.
func (st *confirmState) passed() bool {
	return st != nil && st.judged && !st.short()
}

// simCount is the replicas a baseline gives tn on c, a probe of one replica a slice (whole GPUs
// or a MIG profile of c's board), with the plan's simulation taken over the model: each of tn's
// candidates of the same slice (board, kind, profile; one replica a slice, no tensor
// parallelism) that the runs judged puts a floor under it, the count they passed or one more
// than a count they found short. ok reports that the count is one the runs passed. Without a
// judged candidate of that slice it is the model's count, not confirmed.
func (p *planner) simCount(tn *tenant, c *cand) (n int, ok bool) {
	n = c.replicas
	if p.confirmed == nil || (c.kind != v1.SliceExclusive && c.kind != v1.SliceMIG) {
		return n, false
	}
	same := func(o *cand) bool {
		return o != nil && o.board == c.board && o.kind == c.kind && o.profile == c.profile && o.share == 1 && max(o.tp, 1) == 1
	}
	floor, pass := 0, false
	see := func(o *cand) {
		st := p.confirmed[o]
		if !same(o) || st == nil || !st.judged || st.simulated == 0 {
			return
		}
		f := st.simulated
		if !st.passed() {
			f++
		}
		if f > floor || (f == floor && st.passed()) {
			floor, pass = f, st.passed()
		}
	}
	see(tn.choice)
	for _, o := range tn.feasible {
		if o != tn.choice {
			see(o)
		}
	}
	if floor == 0 {
		return n, false
	}
	if floor >= n {
		return floor, pass
	}
	return n, false // the model asks more than any count the runs judged
}

// raisedByRuns reports whether the plan's simulation found the queueing model's count short for
// tn: its choice runs more replicas than the model gave it, or a count was found short before.
func (p *planner) raisedByRuns(tn *tenant) bool {
	st := p.confirmed[tn.choice]
	return len(p.confirmShort[tn]) > 0 || (st != nil && tn.choice.replicas > st.model)
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

// exclusiveReplicas is the fewest replicas tn needs on whole GPUs of any board, one GPU each
// (simCount's on each board), or the GPUs its chosen replicas take when no whole GPU serves it
// (tp each for a tensor-parallel choice, one each otherwise). When the plan's simulation found
// the model's count short for tn and its choice runs on whole GPUs, it is never fewer than the
// GPUs the choice takes: the model was found short for this tenant, so another board's model
// count does not undercut what the plan needed. ok reports a count the runs passed.
func (p *planner) exclusiveReplicas(tn *tenant) (int, bool) {
	best, ok := math.MaxInt, false
	for _, b := range p.boards {
		if c := p.probe(tn, b, v1.SliceExclusive, nil, 1); c != nil {
			n, pass := p.simCount(tn, c)
			if n < best || (n == best && pass) {
				best, ok = n, pass
			}
		}
	}
	ch := tn.choice
	st := p.confirmed[ch]
	chosen := ch.replicas * max(ch.tp, 1)
	chosenOK := st.passed() && st.simulated == ch.replicas
	switch {
	case best == math.MaxInt:
		return chosen, chosenOK
	case ch.kind == v1.SliceExclusive && p.raisedByRuns(tn) && chosen > best:
		return chosen, chosenOK
	}
	return best, ok
}

// exclusiveBaseline: one whole GPU per replica.
func (p *planner) exclusiveBaseline(ts []*tenant) (int, bool) {
	n, all := 0, true
	for _, tn := range ts {
		k, ok := p.exclusiveReplicas(tn)
		n, all = n+k, all && ok
	}
	return n, all
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
// order; tenants no MIG profile serves take whole GPUs. ok reports that every count is one the
// plan's runs passed.
func (p *planner) migFirstFit(ts []*tenant) (gpus int, ok bool) {
	ok = true
	ff := newFirstFitter()
	for _, tn := range ts {
		b := tn.choice.board
		c := p.smallestMIG(tn, b)
		if c == nil {
			n, pass := p.exclusiveReplicas(tn)
			gpus, ok = gpus+n, ok && pass
			continue
		}
		n, pass := p.simCount(tn, c)
		ok = ok && pass
		for range n {
			if ff.add(b, c.profile.Name) {
				gpus++
			}
		}
	}
	return gpus, ok
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
// MIG instances are packed first fit; MPS and time-sliced GPUs are filled in tenant order. ok
// reports that every count is one the plan's runs passed: never with MPS or time-sliced tenants,
// whose runs had other neighbours.
func (p *planner) ruleOfThumb(ts []*tenant) (int, bool) {
	gpus, mps, ts8 := 0, 0, 0
	ok := true
	ff := newFirstFitter()
	for _, tn := range ts {
		b := tn.choice.board
		excl := p.probe(tn, b, v1.SliceExclusive, nil, 1)
		exN, exOK := p.exclusiveReplicas(tn)
		memBig := excl == nil || float64(excl.ev.fit.Memory.Budget()) > 0.85*float64(excl.ev.fit.Slice.MemoryBytes)
		// busy (above 0.7 of what one exclusive replica carries) is asked only where memBig is
		// not, and searched only as far as it needs (oneRateExceeds).
		switch {
		case memBig || excl.ev.oneRateExceeds(tn.t.Traffic.RPS, 0.7):
			gpus, ok = gpus+exN, ok && exOK
		case tn.t.LowFrequency:
			if c := p.probe(tn, b, v1.SliceTimeSlice, nil, 8); c != nil {
				ts8 += c.replicas
				ok = false
				continue
			}
			gpus, ok = gpus+exN, ok && exOK
		case float64(excl.ev.fit.Memory.Weights) > 0.25*float64(excl.ev.fit.Slice.MemoryBytes) || !b.MIGCapable():
			c := p.smallestMIG(tn, b)
			if c == nil {
				gpus, ok = gpus+exN, ok && exOK
				continue
			}
			n, pass := p.simCount(tn, c)
			ok = ok && pass
			for range n {
				if ff.add(b, c.profile.Name) {
					gpus++
				}
			}
		default:
			if c := p.probe(tn, b, v1.SliceMPS, nil, 4); c != nil {
				mps += c.replicas
				ok = false
				continue
			}
			gpus, ok = gpus+exN, ok && exOK
		}
	}
	return gpus + (mps+3)/4 + (ts8+7)/8, ok
}
