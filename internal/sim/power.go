package sim

// Power is accounted per physical GPU (doc.go, "Report"). The performance model gives each step
// its dynamic energy as if the engine had its slice to itself; a step draws it evenly over its
// length (power = energy / step time). Engines sharing a GPU (MPS clients, time-sliced contexts,
// MIG instances) run steps that overlap in time, and the board's power limit holds their sum:
// while the steps in flight on one GPU ask for more than its dynamic range (TDP − idle, times the
// GPUs of a tensor-parallel engine placed on it), the excess is taken off each step in proportion
// to its power. A GPU with one step in flight at a time is never capped here: perf already caps
// a step at its slice's share of the range.

// gpuDynCap is the dynamic power, in watts above idle, GPU g can draw: TDP − idle, times the GPUs
// of the widest tensor-parallel engine placed on it (its energy counts every GPU of its group).
func (s *Sim) gpuDynCap(g *gpuState) float64 {
	n := 1
	for _, di := range g.domains {
		for _, ri := range s.domains[di].replicas {
			n = max(n, s.replicas[ri].eng.Slice().TensorParallel)
		}
	}
	return (1 - s.cfg.IdlePowerFraction) * g.board.TDPWatts * float64(n)
}

// accountPower integrates GPU gi's step power from its last change up to now, taking off the
// energy above the GPU's cap (gpuDynCap). It runs before any step on the GPU starts or ends, so
// the set of steps in flight is constant over the interval.
func (s *Sim) accountPower(gi int32, now int64) {
	g := s.gpus[gi]
	dt := now - g.powSince
	g.powSince = now
	if dt <= 0 || g.stepping < 2 {
		return
	}
	g.active = g.active[:0]
	for _, di := range g.domains {
		for _, ri := range s.domains[di].replicas {
			if s.replicas[ri].inStep {
				g.active = append(g.active, ri)
			}
		}
	}
	s.capPower(g, g.active, dt)
}

// capPower takes the energy above g's cap off the steps of active, which run together for dt
// nanoseconds, in proportion to their power.
func (s *Sim) capPower(g *gpuState, active []int32, dt int64) {
	sum := 0.0
	for _, ri := range active {
		sum += s.replicas[ri].stepW
	}
	if !(sum > g.dynCap) {
		return
	}
	excess := (sum - g.dynCap) * float64(dt) / 1e9
	for _, ri := range active {
		r := s.replicas[ri]
		x := excess * r.stepW / sum
		r.dynJ -= x
		s.tenants[r.tenant].stats.joules -= x
	}
	g.dynJ -= excess
	g.cappedJ += excess
}

// finishPower closes the power accounting at the end of the run: it caps the steps in flight up
// to the end and takes off their energy after it, so that a GPU's energy, like its utilisation,
// is that of the simulated duration.
func (s *Sim) finishPower() {
	for gi := range s.gpus {
		s.accountPower(int32(gi), s.end)
	}
	for _, r := range s.replicas {
		if !r.inStep || r.stepEnd <= s.end {
			continue
		}
		x := r.stepW * float64(r.stepEnd-s.end) / 1e9
		r.dynJ -= x
		s.tenants[r.tenant].stats.joules -= x
		s.gpus[r.gpu].dynJ -= x
	}
}
