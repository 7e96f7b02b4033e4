package perf

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// errMeasuredOnly is returned by the closed- and open-loop estimates of an engine built from a
// measured table alone: the table has batch latencies, not the token-level costs they need.
var errMeasuredOnly = errors.New("the engine is a measured table without a model: use the table (Measured.Best)")

// NewMeasuredEngine is an engine for a model known only by its measured table (ParvaGPU's DNNs:
// BERT, ResNet …; any name): every step takes the table's batch latency at the step's batch (its
// requests: decode sequences, or prefill sequences) and process count (1 + the active MPS
// neighbours) on the slice's instance size. A request is one prompt token and one output token,
// served in one step. Batches between two measured ones are interpolated, a process count the
// table lacks (or has no runnable row for) is time-shared from the most processes below it that
// have one, a batch beyond the largest runnable one is scaled from it in proportion, and a
// non-runnable row takes the next runnable batch. The KV
// cache does not limit it (the table's batches are what fits); its sequence limit is the table's
// largest runnable batch with one process. Options supply the power model.
func NewMeasuredEngine(t *Measured, s Slice, o Options) (*Engine, error) {
	if t == nil {
		return nil, errors.New("new measured engine: no table")
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new measured engine %s: %w", t.name, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("new measured engine %s: %w", t.name, err)
	}
	m := &Model{name: t.name, opts: o, computeKind: "bf16"}
	e := &Engine{m: m, s: s, r: s.resolve(s.Board.BF16TFLOPS)}
	e.r.kvShare, e.r.busBW = 1, 1
	e.gOwn = e.bwSaturation(e.r.sm / e.r.bw)
	e.alone = e.aloneRates(0)
	b, err := bindMeasured(s, t)
	if err != nil {
		return nil, fmt.Errorf("new measured engine %s on %s: %w", t.name, s.Name(), err)
	}
	e.measured, e.measuredOnly = b, true
	for _, p := range t.rows[measuredKey{b.gpcs, 1}] {
		if p.Runnable {
			e.maxSeqs = max(e.maxSeqs, int(p.Batch))
		}
	}
	if e.maxSeqs < 1 {
		return nil, fmt.Errorf("new measured engine %s on %s: no runnable row with one process", t.name, s.Name())
	}
	e.maxBatchedTokens = e.maxSeqs
	e.kvCap = math.MaxInt64 / 4
	return e, nil
}

// bindMeasured binds table t to slice s's instance size (its MIG profile's compute slices, or
// the board's), failing when the table has no one-process rows for it.
func bindMeasured(s Slice, t *Measured) (*measuredBinding, error) {
	gpcs := s.Board.ComputeSlices
	if s.Profile != nil {
		gpcs = s.Profile.ComputeSlices
	}
	if len(t.rows[measuredKey{gpcs, 1}]) == 0 {
		return nil, fmt.Errorf("bind measured profile %s: no rows for a %d-GPC instance with 1 process", t.name, gpcs)
	}
	return &measuredBinding{t: t, gpcs: gpcs}, nil
}

// MeasuredOnly reports whether the engine is a measured table without a model.
func (e *Engine) MeasuredOnly() bool { return e.measuredOnly }

// anyLatency is the batch latency in seconds of n requests with 1 + active processes, never
// failing (see NewMeasuredEngine for the rules).
func (b *measuredBinding) anyLatency(n float64, active int) float64 {
	procs := 1 + max(active, 0)
	n = math.Max(n, 1)
	if p, err := b.t.at(b.gpcs, procs, n); err == nil {
		return p.Latency.Seconds()
	}
	// The most processes up to procs with a runnable row, time-shared up to procs.
	var ps []MeasuredPoint
	share := 1.0
	for q := procs; q >= 1 && ps == nil; q-- {
		for _, p := range b.t.rows[measuredKey{b.gpcs, q}] {
			if p.Runnable {
				ps, share = b.t.rows[measuredKey{b.gpcs, q}], float64(procs)/float64(q)
				break
			}
		}
	}
	var last MeasuredPoint
	for _, p := range ps {
		if !p.Runnable {
			continue
		}
		if p.Batch >= n {
			return share * p.Latency.Seconds()
		}
		last = p
	}
	if last.Batch <= 0 {
		return 0
	}
	return share * last.Latency.Seconds() * n / last.Batch
}

// measuredStep is a measured-only engine's step: its time, and its dynamic energy taken as
// compute-bound work on the engine's SMs at its clock for the whole batch latency.
func (e *Engine) measuredStep(b Batch, l Load) (time.Duration, float64) {
	n := max(b.DecodeSeqs, b.PrefillSeqs)
	if n == 0 && b.PrefillTokens > 0 {
		n = b.PrefillTokens
	}
	if n <= 0 {
		return 0, 0
	}
	t := e.measured.anyLatency(float64(n), l.sanitize().Active)
	c := e.alone.clock
	dyn := e.s.Board.TDPWatts * (1 - e.m.opts.IdlePowerFraction) * math.Min(1, e.m.opts.PowerDemandRatio*e.r.sm*c*c*c)
	return seconds(t), dyn * t
}
