package perf

import (
	"fmt"
	"math"
)

// PowerAt is the engine's mean dynamic power, in watts above idle over all the replica's GPUs,
// while it serves Poisson arrivals of requests shaped like w at rps requests per second under
// load l: the planned energy of a replica (docs/cost.md, "Planned").
//
// With mean step time t, a request spends about O steps in the engine, so N = λ·O·t requests are
// in it on average and the engine is busy (at least one request) with probability
// p = 1 − e^(−N) (Poisson occupancy). While busy its steps carry, on average, the work of the mean
// step divided by p: λ(O−1)t/p decoding sequences and λ·I·t/p prompt tokens. t solves
// t = step time of that work; the power is p × the step's dynamic energy / t. Beyond the rate the
// engine sustains (no solution, or more decoding sequences than it runs at once) it is the power
// at the highest rate it sustains.
func (e *Engine) PowerAt(w Workload, rps float64, l Load) (float64, error) {
	if err := w.Validate(); err != nil {
		return 0, fmt.Errorf("power of %s on %s: %w", e.m.name, e.s.Name(), err)
	}
	if e.measuredOnly {
		return 0, fmt.Errorf("power of %s on %s: %w", e.m.name, e.s.Name(), errMeasuredOnly)
	}
	if !(rps > 0) || math.IsInf(rps, 0) {
		if rps == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("power of %s on %s: rate %g req/s must be zero or positive and finite", e.m.name, e.s.Name(), rps)
	}
	if p, ok := e.powerAt(w, rps, l); ok {
		return p, nil
	}
	// Saturated: the power at the highest rate the engine sustains, found by bisection.
	lo, hi := 0.0, rps
	for range 40 {
		mid := (lo + hi) / 2
		if _, ok := e.powerAt(w, mid, l); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	p, _ := e.powerAt(w, lo, l)
	return p, nil
}

// powerAt is PowerAt's steady state at rate rps; false when there is none (the engine cannot keep
// up, or the mean decoding sequences exceed what it runs at once).
func (e *Engine) powerAt(w Workload, rps float64, l Load) (float64, bool) {
	if !(rps > 0) {
		return 0, true
	}
	in, out := float64(w.InputTokens), float64(w.OutputTokens)
	busyWork := func(t float64) (work, float64) {
		n := rps * out * t                    // requests in the engine
		p, tp := -math.Expm1(-n), 1/(rps*out) // busy probability, and t/p (its limit as t → 0)
		if n > 1e-9 {
			tp = t / p
		}
		return work{p: rps * in * tp, ps: rps * tp, pairs: rps * tp * in * (in + 1) / 2,
			d: rps * (out - 1) * tp, kv: rps * (out - 1) * tp * (in + out/2)}, p
	}
	t, ok := fixedPoint(func(t float64) float64 {
		wk, _ := busyWork(t)
		return e.step(wk, l).total
	})
	if !ok {
		return 0, false
	}
	wk, p := busyWork(t)
	if running, _ := e.Running(w, maxTokens); wk.d > float64(running) {
		return 0, false
	}
	s := e.step(wk, l)
	return p * e.energy(s) / s.total, true
}
