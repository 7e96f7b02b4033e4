package perf

import (
	"math/rand/v2"
	"testing"
)

// stepBefore is step as it was before loadRates: every rate the load decides computed at each step.
func (e *Engine) stepBefore(w work, l Load) stepParts {
	if w.p+w.d <= 0 {
		return stepParts{clock: 1}
	}
	o := e.m.opts
	l = l.sanitize()
	overhead := o.StepOverhead.Seconds()
	alone := e.alone
	if l.BoardBusy > 0 {
		alone = e.aloneRates(l.BoardBusy)
	}
	s := e.gpuTime(w, alone)
	n := float64(l.Active)
	if e.s.Mode != Exclusive && n > 0 {
		duty := l.Duty
		if !(duty > 0 && duty <= 1) {
			duty = s.gpu() / (s.gpu() + overhead)
		}
		switch e.s.Mode {
		case TimeSlice:
			s.wait = e.timeSliceWait(s.gpu(), n*duty)
		case MPS:
			q := e.mpsRates(n*duty, l)
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

// TestAtLoadAsStepTime: AtLoad's step times are StepTime's, to the nanosecond, and step's parts
// are those of step before loadRates (stepBefore), bit for bit, on whole GPUs
// and MIG instances, exclusive, MPS and time-sliced, at random loads (the duty set or left to
// the step, the board busy or idle, odd fields the sanitizer maps out) and random batches.
func TestAtLoadAsStepTime(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 13))
	h := h100(t)
	m := mustModel(t, qwen7B)
	slices := []Slice{
		{Board: h},
		{Board: h, Mode: MPS, Replicas: 4, SMPercent: 25, MemoryMiB: 20000},
		{Board: h, Mode: MPS, Replicas: 2, MemoryMiB: 40000, ClockCap: 0.8},
		{Board: h, Mode: MPS, Replicas: 8, MemoryMiB: 10000},
		{Board: h, Mode: TimeSlice, Replicas: 3, MemoryMiB: 25000},
		{Board: h, Profile: profile(t, h, "3g.40gb")},
		{Board: h, Profile: profile(t, h, "3g.40gb"), Mode: MPS, Replicas: 2, SMPercent: 50, MemoryMiB: 19000},
	}
	checked, moved := 0, 0
	for _, s := range slices {
		e := mustEngine(t, m, s)
		for range 40 {
			l := Load{Active: r.IntN(9) - 1, BoardBusy: r.Float64()*1.4 - 0.2, SMPercent: []float64{0, 12.5, 50, 100, 130}[r.IntN(5)]}
			switch r.IntN(3) {
			case 0:
				l.Duty = 1
			case 1:
				l.Duty = r.Float64()*1.4 - 0.2
			}
			if r.IntN(3) == 0 {
				l.BoardBusy = 0
			}
			a := e.AtLoad(l)
			for range 50 {
				b := Batch{DecodeSeqs: r.IntN(300), KVTokens: int64(r.IntN(2_000_000))}
				if r.IntN(2) == 0 {
					b.PrefillSeqs = 1 + r.IntN(3)
					b.PrefillTokens = 1 + r.IntN(8192)
					b.PrefillPairs = int64(b.PrefillTokens) * int64(1+r.IntN(4000))
				}
				if r.IntN(20) == 0 {
					b = Batch{}
				}
				want := e.StepTime(b, l)
				if got := a.StepTime(b); got != want {
					t.Fatalf("%+v at %+v, batch %+v: AtLoad %v, StepTime %v", s, l, b, got, want)
				}
				if before := e.stepBefore(b.work(), l); before != e.step(b.work(), l) || seconds(before.total) != want {
					t.Fatalf("%+v at %+v, batch %+v: step %+v, before loadRates %+v", s, l, b, e.step(b.work(), l), before)
				}
				if l.Duty > 0 && l.Duty < 1 && b != (Batch{}) && a.StepTime(b) != e.StepTime(b, Load{Active: l.Active, Duty: 1, BoardBusy: l.BoardBusy, SMPercent: l.SMPercent}) {
					moved++ // the duty changes the step: the check above sees it
				}
				checked++
			}
		}
	}
	if checked == 0 || moved == 0 {
		t.Fatalf("%d steps checked, %d whose duty changed them", checked, moved)
	}
}
