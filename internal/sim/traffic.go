package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	v1 "gpupool.dev/gpupool/api/v1"
)

// pending is the next request a source will deliver.
type pending struct {
	at      int64
	tenant  int32
	in, out int32
}

// source yields arrivals in time order: one per tenant with generated traffic, or one for a
// whole trace.
type source struct {
	next    pending
	rng     *rand.Rand
	pattern v1.Pattern
	tenant  int32
	t       float64 // time of the last arrival, ns
	rate    float64 // mean (poisson, constant, bursty) or peak (diurnal) arrivals per ns
	meanIn  int
	meanOut int
	maxCtx  int
	lengths Lengths
	// bursty: whether the current period is on, and when it ends (ns)
	on       bool
	phaseEnd float64
	onRate   float64
	meanOn   float64
	meanOff  float64
	// diurnal
	period, trough float64
	// trace replay
	trace []traceReq
	pos   int
}

// traceReq is a trace row resolved to a tenant index.
type traceReq struct {
	at      int64
	tenant  int32
	in, out int32
}

// buildSources makes one source per tenant with traffic, or one trace source. Each tenant's
// random stream is seeded from (Seed, tenant index), so adding a tenant does not change the
// others' arrivals.
func (s *Sim) buildSources(tr *Trace) error {
	if tr != nil {
		return s.traceSource(tr)
	}
	for i, t := range s.tenants {
		tf := t.spec.Traffic
		if tf.RPS <= 0 {
			continue
		}
		lengths := tf.Lengths // the tenant's own, unless the run overrides it
		if s.cfg.Lengths != "" {
			lengths = s.cfg.Lengths
		}
		src := source{tenant: int32(i), rng: rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)+1)),
			pattern: tf.Pattern, rate: tf.RPS / 1e9, meanIn: max(tf.InputTokens, 1), meanOut: max(tf.OutputTokens, 1),
			maxCtx: t.spec.MaxContext, lengths: lengths}
		switch src.pattern {
		case v1.PatternBursty:
			src.meanOn, src.meanOff = float64(s.cfg.BurstOn), float64(s.cfg.BurstOff)
			src.onRate = src.rate * (src.meanOn + src.meanOff) / src.meanOn
			src.on = src.rng.Float64() < src.meanOn/(src.meanOn+src.meanOff)
			src.phaseEnd = src.rng.ExpFloat64() * src.meanOn
			if !src.on {
				src.phaseEnd = src.rng.ExpFloat64() * src.meanOff
			}
		case v1.PatternDiurnal:
			src.period, src.trough = float64(s.cfg.DiurnalPeriod), s.cfg.DiurnalTrough
		case v1.PatternConstant:
			src.t = -src.rng.Float64() / src.rate // a random phase, so tenants are not in lockstep
		}
		s.sources = append(s.sources, src)
	}
	return nil
}

func (s *Sim) traceSource(tr *Trace) error {
	reqs := make([]traceReq, 0, len(tr.Requests))
	var unknown []string
	for _, r := range tr.Requests {
		ti, ok := s.tenantIdx[r.Tenant]
		if !ok {
			if len(unknown) < 10 {
				unknown = append(unknown, fmt.Sprintf("line %d: unknown tenant %q", r.Line, r.Tenant))
			}
			continue
		}
		reqs = append(reqs, traceReq{at: int64(r.At), tenant: ti, in: int32(r.InputTokens), out: int32(r.OutputTokens)})
	}
	if len(unknown) > 0 {
		return fmt.Errorf("replay trace: tenants not in the pool: %v", unknown)
	}
	late := 0
	for _, r := range reqs {
		if r.at >= s.end {
			late++
		}
	}
	if late > 0 {
		s.notes = append(s.notes, fmt.Sprintf("trace: %d of %d rows arrive after the simulated duration and were not replayed", late, len(reqs)))
	}
	s.sources = append(s.sources, source{trace: reqs})
	return nil
}

// advance computes the source's next arrival; false when there is none before end.
func (src *source) advance(end int64) bool {
	if src.trace != nil {
		if src.pos >= len(src.trace) {
			return false
		}
		r := src.trace[src.pos]
		src.pos++
		src.next = pending{at: r.at, tenant: r.tenant, in: r.in, out: r.out}
		return r.at < end
	}
	t, ok := src.nextTime(float64(end))
	if !ok || !(t < float64(end)) { // also keeps int64(t) below from overflowing
		return false
	}
	src.t = t
	in, out := src.draw()
	src.next = pending{at: int64(t), tenant: src.tenant, in: in, out: out}
	return src.next.at < end
}

// nextTime is the next arrival time in ns after src.t.
func (src *source) nextTime(end float64) (float64, bool) {
	t := src.t
	switch src.pattern {
	case v1.PatternConstant:
		return t + 1/src.rate, true
	case v1.PatternBursty:
		for t < end {
			if !src.on {
				t = src.phaseEnd
				src.on, src.phaseEnd = true, t+src.rng.ExpFloat64()*src.meanOn
				continue
			}
			c := t + src.rng.ExpFloat64()/src.onRate
			if c < src.phaseEnd {
				return c, true
			}
			t = src.phaseEnd
			src.on, src.phaseEnd = false, t+src.rng.ExpFloat64()*src.meanOff
		}
		return t, false
	case v1.PatternDiurnal:
		for t < end { // thinning (Lewis and Shedler) against the peak rate
			t += src.rng.ExpFloat64() / src.rate
			f := src.trough + (1-src.trough)*(1+math.Cos(2*math.Pi*t/src.period))/2
			if src.rng.Float64() < f {
				return t, true
			}
		}
		return t, false
	}
	return t + src.rng.ExpFloat64()/src.rate, true
}

// draw returns the token lengths of the next request.
func (src *source) draw() (int32, int32) {
	in, out := src.meanIn, src.meanOut
	switch src.lengths {
	case LengthsUniform:
		in = max(1, in/2+src.rng.IntN(in+1))
		out = max(1, out/2+src.rng.IntN(out+1))
	case LengthsExponential:
		in, out = geometric(src.rng, in), geometric(src.rng, out)
	}
	if c := src.maxCtx; c > 1 {
		in = min(in, c-1)
		out = min(out, c-in)
	}
	return int32(min(in, math.MaxInt32/2)), int32(min(out, math.MaxInt32/2))
}

// geometric draws from the geometric law on {1, 2, …} with mean m.
func geometric(r *rand.Rand, m int) int {
	if m <= 1 {
		return 1
	}
	p := 1 / float64(m)
	u := 1 - r.Float64() // (0, 1]
	return 1 + int(math.Min(math.Log(u)/math.Log1p(-p), 64*float64(m)))
}
