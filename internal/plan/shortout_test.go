package plan

import (
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// TestShortOutputTPOTOwnPrefill: the prompts that arrive during a request's own prefill step are
// prefilled during its first decode step, so the window over which a request of few decode steps
// meets prompts is its own prefill and its decode, not its decode alone (tpotSpread, ADR 0109).
// One replica of llama-3.1-8b on an H200 1g.35gb instance at 500 + 60 exponential tokens (TTFT
// 1 s, TPOT 40 ms): counting the decode alone the model gave 3.578 req/s, where the simulator's
// TPOT p99 is 42.5–43.5 ms and 98.7–98.9 % of the requests meet the SLO over seeds 1–3, and its
// highest rate at 99 % is about 2.89. Now the model's rate meets it for 99 % at each seed, and
// 1.2 times it does not at one of them at least.
func TestShortOutputTPOTOwnPrefill(t *testing.T) {
	s := heldShape{"llama-3.1-8b", "1g.35gb", 6, 500, 60, v1.LengthsExponential, 1000 * time.Millisecond, 40 * time.Millisecond, 0}
	q := s.qmodel(t)
	rate, _ := q.maxRate(perf.SLO{TTFT: s.ttft, TPOT: s.tpot})
	maxLen := max(8192, lengthsNeed(v1.Traffic{InputTokens: s.in, OutputTokens: s.out, Lengths: s.law}))
	worst := func(r float64) float64 {
		w := 1.0
		for seed := uint64(1); seed <= 3; seed++ {
			a, _, _ := s.simulate(t, r, 256, maxLen, 2600, seed)
			w = min(w, a)
		}
		return w
	}
	at, over := worst(rate), worst(1.2*rate)
	t.Logf("%v: model %.3f req/s; simulator's worst of seeds 1–3 %.2f %% there, %.2f %% at 1.2 times it", s, rate, 100*at, 100*over)
	if at < 0.99 {
		t.Errorf("%v: %.2f %% of requests within the SLO at the model's %.3f req/s, want at least 99 %%", s, 100*at, rate)
	}
	if over >= 0.99 {
		t.Errorf("%v: the simulator still meets the SLO (%.2f %%) at 1.2 times the model's %.3f req/s", s, 100*over, rate)
	}
}
