package perf

import "math"

// stepParts is one step's time in seconds, by what bounds it.
type stepParts struct {
	compute, memory, comm, latency float64 // GPU time
	// hidden is the compute time of the kernels that memory bounds (their FLOPs at the compute
	// rate): it adds no time, but the SMs do that arithmetic and draw power for it (power.go).
	hidden         float64
	overhead, wait float64
	total, clock   float64
	// own, when set, is the step's compute, hidden and memory time at the engine's own rates
	// (its slice alone, at the step's clock): MPS neighbours stretch a step, not its work, so the
	// step's energy is that of these times (power.go).
	own    [3]float64
	hasOwn bool
}

func (s stepParts) gpu() float64 { return s.compute + s.memory + s.comm + s.latency }

// rates are what the engine gets from its slice during one step.
type rates struct {
	flops     float64 // FLOP/s
	bwW, bwKV float64 // bytes/s for weight/activation streams and for KV reads
	clock     float64 // fraction of boost clock
}

// step evaluates the roofline of one step (doc.go, "Step time").
func (e *Engine) step(w work, l Load) stepParts {
	if w.p+w.d <= 0 {
		return stepParts{clock: 1}
	}
	r := e.ratesAt(l)
	return e.stepAt(w, &r)
}

// loadRates are what a step's rates take from its load alone, not from its work: the load
// sanitized, the engine's rates beside the board's busy share, and, where the load's duty is
// set, an MPS client's rates among its busy neighbours.
type loadRates struct {
	l      Load
	alone  rates
	mps    rates
	hasMPS bool
}

func (e *Engine) ratesAt(l Load) loadRates {
	l = l.sanitize()
	r := loadRates{l: l, alone: e.alone}
	if l.BoardBusy > 0 {
		r.alone = e.aloneRates(l.BoardBusy)
	}
	if n := float64(l.Active); e.s.Mode == MPS && n > 0 && l.Duty > 0 && l.Duty <= 1 {
		r.mps, r.hasMPS = e.mpsRates(n*l.Duty, r.l), true
	}
	return r
}

// stepAt is step at the load of r.
func (e *Engine) stepAt(w work, r *loadRates) stepParts {
	if w.p+w.d <= 0 {
		return stepParts{clock: 1}
	}
	o := e.m.opts
	l := r.l
	overhead := o.StepOverhead.Seconds()
	alone := r.alone
	s := e.gpuTime(w, alone)
	n := float64(l.Active)
	if e.s.Mode != Exclusive && n > 0 {
		duty := l.Duty
		if !(duty > 0 && duty <= 1) {
			duty = s.gpu() / (s.gpu() + overhead) // symmetric: neighbours behave like this engine
		}
		switch e.s.Mode {
		case TimeSlice:
			s.wait = e.timeSliceWait(s.gpu(), n*duty)
		case MPS:
			q := r.mps
			if !r.hasMPS {
				q = e.mpsRates(n*duty, l)
			}
			own := alone
			own.flops *= q.clock / alone.clock
			own.clock = q.clock
			o := e.gpuTime(w, own)
			s = e.gpuTime(w, q)
			s.own, s.hasOwn = [3]float64{o.compute, o.hidden, o.memory}, true
		}
	}
	s.overhead = overhead
	s.total = s.overhead + s.gpu() + s.wait
	return s
}

// timeSliceWait is how long a step of GPU time g waits for nd busy time-sliced neighbours
// (doc.go, "Sharing"): it takes max(1, g/q) rounds of the quantum q; in each round every busy
// neighbour holds the GPU for min(q, g) after a context switch, and one more switch brings the
// GPU back.
func (e *Engine) timeSliceWait(g, nd float64) float64 {
	o := e.m.opts
	q, sw := o.TimeSliceQuantum.Seconds(), o.ContextSwitch.Seconds()
	rounds := math.Max(1, g/q)
	return rounds * (nd*(math.Min(q, g)+sw) + math.Min(1, nd)*sw)
}

// sanitize maps out-of-range load fields to their neutral values, so that StepTime never
// returns NaN for odd input.
func (l Load) sanitize() Load {
	if l.Active < 0 {
		l.Active = 0
	}
	if !(l.Duty > 0 && l.Duty <= 1) {
		l.Duty = 0
	}
	if !(l.SMPercent > 0 && l.SMPercent <= 100) {
		l.SMPercent = 0
	}
	if !(l.BoardBusy > 0) {
		l.BoardBusy = 0
	}
	l.BoardBusy = math.Min(l.BoardBusy, 1)
	return l
}

// clockFactor is the power-limited clock when a fraction a of the board's SMs is busy: dynamic
// power grows with busy SMs × f³ (f ∝ V), so f = min(1, (1/(R·a))^(1/3)).
func (e *Engine) clockFactor(a float64) float64 {
	a = math.Min(1, a)
	c := 1.0
	// R·a at most 1 (an idle board included) needs no cube root: 1/(R·a) ≥ 1, so its root is
	// too, and f is 1
	if p := e.m.opts.PowerDemandRatio * a; p > 1 {
		c = math.Min(1, math.Cbrt(1/p))
	}
	if cp := e.s.ClockCap; cp > 0 {
		c = math.Min(c, cp)
	}
	return c
}

// bwSaturation is g(r): the fraction of a bandwidth share that SMs amounting to r times that
// share can pull (doc.go, "Step time"): g(r) = 1 − (1 − min(r, 1))^k.
func (e *Engine) bwSaturation(r float64) float64 {
	if !(r > 0) {
		return 0
	}
	return 1 - math.Pow(1-math.Min(r, 1), e.m.opts.BWSaturationExponent)
}

func (e *Engine) aloneRates(boardBusy float64) rates {
	o, r := e.m.opts, e.r
	clk := e.clockFactor(r.sm + math.Max(0, boardBusy))
	g := e.gOwn
	return rates{
		flops: r.peakFLOPS * o.MFU * r.sm * clk,
		bwW:   r.peakBW * r.bw * o.WeightBWEfficiency * g,
		bwKV:  r.peakBW * r.bw * o.KVBWEfficiency * g,
		clock: clk,
	}
}

// mpsRates are an MPS client's rates while nd = active neighbours × duty other clients are busy
// on the same GPU or instance (doc.go, "MPS").
func (e *Engine) mpsRates(nd float64, l Load) rates {
	o, r := e.m.opts, e.r
	cj := r.sm
	if l.SMPercent > 0 {
		cj = r.instSM * math.Min(l.SMPercent, 100) / 100
	}
	demand := r.sm + nd*cj
	smFrac := o.MFU * r.sm
	if demand > r.instSM {
		smFrac = math.Min(smFrac, e.overlap(o.MFU, nd)*r.instSM*r.sm/demand)
	}
	clk := e.clockFactor(math.Min(r.instSM, demand) + math.Max(0, l.BoardBusy))
	gOwn, gj := e.gOwn, e.gOwn
	if cj != r.sm {
		gj = e.bwSaturation(cj / r.bw)
	}
	pull := math.Max(1, gOwn+nd*gj)
	bw := func(eff float64) float64 {
		return r.peakBW * r.bw * math.Min(eff*gOwn, e.overlap(eff, nd)*gOwn/pull)
	}
	return rates{flops: r.peakFLOPS * smFrac * clk, bwW: bw(o.WeightBWEfficiency), bwKV: bw(o.KVBWEfficiency), clock: clk}
}

// overlap is the aggregate efficiency of 1+nd busy MPS clients of single-client efficiency eff:
// eff itself unless MPSOverlapGain is on, then 1-(1-eff)^(1+nd) (the resource idling only when
// every client idles; the H200 measurement contradicts it, see Options.MPSOverlapGain).
func (e *Engine) overlap(eff, nd float64) float64 {
	if !e.m.opts.MPSOverlapGain {
		return eff
	}
	return 1 - math.Pow(1-eff, 1+nd)
}

// gpuTime is the GPU time of w at rates q: each kernel class at its own roofline, summed
// because the kernels of one step run one after another.
func (e *Engine) gpuTime(w work, q rates) stepParts {
	m, tp := e.m, e.r.tp
	t := w.p + w.d
	var s stepParts
	s.clock = q.clock
	add := func(c, mem float64) {
		if c >= mem {
			s.compute += c
		} else {
			s.memory += mem
			s.hidden += c
		}
	}
	// GEMMs: every token through the layers, one logits row per finishing prefill and decode;
	// their traffic is the weights plus the tokens' GEMM inputs and outputs.
	add((m.bodyFLOPs*t+m.headFLOPs*(w.ps+w.d))/tp/q.flops, (m.weightBytesRead(t)+m.gemmIOBytes*t)/tp/q.bwW)
	// Prefill attention is compute-bound (flash attention keeps scores on chip).
	s.compute += m.attnFLOPs * w.pairs / tp / q.flops
	// Decode attention reads every cached token of every decoding sequence.
	if w.kv > 0 {
		add(m.attnFLOPs*w.kv/tp/q.flops, m.kvBytes*w.kv*e.r.kvShare/q.bwKV)
	}
	// KV-cache writes and activation traffic of the element-wise kernels.
	s.memory += (m.kvBytes*e.r.kvShare + m.actBytes/tp) * t / q.bwW
	// Every layer's kernels pay a fixed latency (launch, ramp-up, tail) that no share of the
	// GPU shortens; each tensor-parallel GPU runs every layer.
	s.latency = m.layers * m.opts.LayerLatency.Seconds()
	if tp > 1 {
		o := m.opts
		ring := 2 * (tp - 1) / tp * t * m.hidden * 2 / e.r.busBW
		s.comm = 2 * m.layers * (o.AllReduceLatency.Seconds() + ring)
	}
	return s
}
