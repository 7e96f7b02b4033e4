package perf

import (
	"fmt"
	"math"
	"time"
)

// Power model (doc.go, "Power and energy classes"). A board draws its idle power whenever it is
// on; above it, a step's kernels draw dynamic power by what bounds them:
//
//	compute-bound   (TDP − idle) · R · s · c³   s: the engine's share of the SMs, c: its clock
//	memory-bound    (TDP − idle) · MemoryPowerFraction · b · g(s/b) · (1 + c³)/2   b: its bandwidth
//	                share, g: the part of it its SMs pull (bandwidth saturation, 1 for a whole GPU),
//	                plus the compute power over the time its FLOPs would take at the compute rate
//	latency         as memory-bound (kernels in flight, few SMs busy)
//	all-reduce      as memory-bound times the share of the board's SMs the all-reduce kernel
//	                occupies (Options.AllReduceSMs): it is bound by the links, not by HBM
//	host time, wait nothing above idle
//
// and the step's dynamic energy is capped at (TDP − idle) · max(s, b) over the whole step: the
// board's power limit.
//
// MPS neighbours busy beside a client stretch its step, not its work: the step's energy is that of
// its compute, hidden and memory time at the client's own rates (its slice alone, at the clock the
// shared GPU runs at), so k symmetric clients together draw what one engine doing their work
// would, within the board's dynamic range. Time-slice waits draw nothing (another context runs).
//
// R is PowerDemandRatio, so a whole GPU running tensor work at the power-limited clock
// c = (1/R)^(1/3) draws exactly TDP, as boards do under a power cap; a clock cap (an energy
// class) lowers c and the compute power with its cube. Memory-bound kernels are taken to spend
// half their dynamic power in the memory system (independent of the graphics clock) and half in
// the SMs (with the clock cubed, as voltage follows frequency): an assumption until measured.

// EnergyClass names how a GPU trades speed for energy: its clocks are locked by class.
const (
	EnergyPerformance = "performance" // clocks locked at the top: the model's boost clock
	EnergyBalanced    = "balanced"    // the driver's default clocks: boost, power-limited
	EnergyEfficiency  = "efficiency"  // graphics clock capped at Options.EfficiencyClock of boost
)

// ClockCap is the clock cap, as a fraction of boost, of an energy class: 0 (none) for
// performance and balanced, Options.EfficiencyClock for efficiency. An empty class is balanced.
func (o Options) ClockCap(class string) (float64, error) {
	switch class {
	case "", EnergyBalanced, EnergyPerformance:
		return 0, nil
	case EnergyEfficiency:
		return o.EfficiencyClock, nil
	}
	return 0, fmt.Errorf("clock cap: unknown energy class %q (valid: performance, balanced, efficiency)", class)
}

// IdleWatts is the part of the board's idle power this engine is charged: the board's idle
// power (IdlePowerFraction × TDP) times the engine's share of the SMs it sits on (a MIG
// instance's share, divided among the replicas sharing it), and times the GPUs of a
// tensor-parallel replica.
func (e *Engine) IdleWatts() float64 {
	share := e.r.instSM / float64(max(e.s.Replicas, 1))
	return e.m.opts.IdlePowerFraction * e.s.Board.TDPWatts * share * e.r.tp
}

// StepEnergy is the dynamic energy, in joules above idle, of one step of b while l holds, over
// all the replica's GPUs.
func (e *Engine) StepEnergy(b Batch, l Load) float64 {
	if e.measuredOnly {
		_, j := e.measuredStep(b, l)
		return j
	}
	return e.energy(e.step(b.work(), l))
}

// StepTimeEnergy is StepTime and StepEnergy from one evaluation of the step, for simulators.
func (e *Engine) StepTimeEnergy(b Batch, l Load) (time.Duration, float64) {
	if e.measuredOnly {
		return e.measuredStep(b, l)
	}
	s := e.step(b.work(), l)
	t := seconds(s.total)
	if e.measured != nil && b.PrefillTokens == 0 && b.DecodeSeqs > 0 {
		if mt, ok := e.measured.latency(float64(b.DecodeSeqs), l); ok {
			t = seconds(mt)
		}
	}
	return t, e.energy(s)
}

// energy is the dynamic energy of a step with parts s, in joules, over the replica's GPUs: the
// compute power over the compute-bound time and over the arithmetic that memory-bound kernels
// hide under their streaming, plus the memory power over the memory-bound time and layer latency,
// plus the all-reduce kernel's SMs' share of the memory power over the all-reduces; capped, as a board's power limit caps it, at the dynamic range of the
// engine's share over the whole step.
func (e *Engine) energy(s stepParts) float64 {
	o, r := e.m.opts, e.r
	dyn := e.s.Board.TDPWatts * (1 - o.IdlePowerFraction)
	c := s.clock
	if !(c > 0) {
		c = 1
	}
	compute := dyn * math.Min(1, o.PowerDemandRatio*r.sm*c*c*c)
	memory := dyn * o.MemoryPowerFraction * r.bw * e.gOwn * (1 + c*c*c) / 2
	tc, th, tm := s.compute, s.hidden, s.memory
	if s.hasOwn {
		tc, th, tm = s.own[0], s.own[1], s.own[2]
	}
	j := compute*(tc+th) + memory*(tm+s.latency) + memory*r.commSM*s.comm
	return r.tp * math.Min(j, dyn*math.Max(r.sm, r.bw)*s.total)
}
