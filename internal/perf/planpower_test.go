package perf

import (
	"math"
	"testing"

	"gpupool.dev/gpupool/internal/llm"
)

// PowerAt grows with the offered rate up to half the engine's capacity (near saturation the power
// model's mixed steps turn compute-bound and draw less, as its ML.ENERGY check shows above batch
// 64), is zero at zero, stays within the board's dynamic range, is the saturated engine's beyond
// what it sustains, and at low rates is the rate times one request's energy served alone (a
// prefill step of its prompt and O−1 decode steps at batch 1), within 15 %: at 0.02 req/s
// requests rarely overlap.
func TestPowerAtRate(t *testing.T) {
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	m := mustModel(t, a)
	b := h100(t)
	e := mustEngine(t, m, Slice{Board: b})
	w := Workload{InputTokens: 512, OutputTokens: 256}
	dyn := b.TDPWatts * (1 - DefaultOptions().IdlePowerFraction)
	prev := 0.0
	for _, rps := range []float64{0, 0.02, 0.5, 2, 5, 10, 20, 40, 1000} {
		p, err := e.PowerAt(w, rps, Load{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%6.2f req/s: %5.1f W above idle", rps, p)
		if !(p >= 0 && p <= dyn+1e-9) || rps <= 10 && p < prev-1e-9 || rps == 0 && p != 0 {
			t.Errorf("%g req/s: %g W (previous %g W, dynamic range %g W)", rps, p, prev, dyn)
		}
		prev = p
	}
	alone := e.StepEnergy(Batch{PrefillTokens: 512, PrefillSeqs: 1}, Load{}) +
		255*e.StepEnergy(Batch{DecodeSeqs: 1, KVTokens: 512 + 128}, Load{})
	sat, _ := e.PowerAt(w, 40, Load{})
	if p, _ := e.PowerAt(w, 1000, Load{}); math.Abs(p-sat) > 1e-6*sat {
		t.Errorf("saturated: %g W at 1000 req/s, %g W at 40", p, sat)
	}
	p, _ := e.PowerAt(w, 0.02, Load{})
	if r := p / (0.02 * alone); !(r >= 0.85 && r <= 1.15) {
		t.Errorf("at 0.02 req/s: %.3f W, the rate times one request's %.1f J alone is %.3f W (ratio %.2f)", p, alone, 0.02*alone, r)
	}
	if _, err := e.PowerAt(w, -1, Load{}); err == nil {
		t.Error("a negative rate: want an error")
	}
}
