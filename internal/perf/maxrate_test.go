package perf

import (
	"math"
	"testing"
	"time"
)

func TestMaxRateLimits(t *testing.T) {
	h := h100Literal()
	m := mustModel(t, qwen7B)
	w := Workload{InputTokens: 512, OutputTokens: 256}
	slo := SLO{TTFT: time.Second, TPOT: 50 * time.Millisecond}
	rate := func(s Slice, slo SLO, l Load) Rate {
		t.Helper()
		r, err := mustEngine(t, m, s).MaxRate(w, slo, l)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	excl := rate(Slice{Board: h}, slo, Load{})
	g3 := rate(Slice{Board: h, Profile: &h.Profiles[3]}, slo, Load{})
	g2 := rate(Slice{Board: h, Profile: &h.Profiles[2]}, slo, Load{})
	t.Logf("Qwen2.5-7B, 512/256, TTFT p99 ≤ 1 s, TPOT p99 ≤ 50 ms: exclusive %.2f req/s (%s), 3g.40gb %.2f (%s), 2g.20gb %.2f (%s)",
		excl.RequestsPerSec, excl.Limit, g3.RequestsPerSec, g3.Limit, g2.RequestsPerSec, g2.Limit)
	if !(excl.RequestsPerSec > g3.RequestsPerSec && g3.RequestsPerSec > g2.RequestsPerSec && g2.RequestsPerSec > 0) {
		t.Errorf("rates should shrink with the slice: %.2f, %.2f, %.2f", excl.RequestsPerSec, g3.RequestsPerSec, g2.RequestsPerSec)
	}
	if excl.Limit == LimitNone || excl.TPOT > slo.TPOT || excl.TTFT > slo.TTFT {
		t.Errorf("exclusive: %+v", excl)
	}
	// A TPOT target below one decode step of a single request (≈ 4 ms overhead + 15.2 GB /
	// 2.68 TB/s ≈ 9.7 ms) cannot be met at any rate.
	if r := rate(Slice{Board: h}, SLO{TPOT: 5 * time.Millisecond}, Load{}); r.RequestsPerSec != 0 || r.Limit != LimitTPOT {
		t.Errorf("impossible TPOT: %+v", r)
	}
	// 15.2 GB of BF16 weights do not fit the 9.75 GiB of 1g.10gb.
	if r := rate(Slice{Board: h, Profile: &h.Profiles[0]}, slo, Load{}); r.Limit != LimitNoFit || r.RequestsPerSec != 0 {
		t.Errorf("1g.10gb: %+v", r)
	}
	// With no latency target the engine runs until it saturates (or its KV cache or sequence
	// limit binds).
	free := rate(Slice{Board: h}, SLO{}, Load{})
	if free.Limit != LimitSaturated && free.Limit != LimitKV && free.Limit != LimitMaxSeqs || free.RequestsPerSec < excl.RequestsPerSec {
		t.Errorf("no SLO: %+v vs %+v", free, excl)
	}
	// An active time-slice neighbour lowers the rate; an idle one does not.
	ts := Slice{Board: h, Mode: TimeSlice, Replicas: 2}
	idle, busy := rate(ts, slo, Load{}), rate(ts, slo, Load{Active: 1})
	if !(busy.RequestsPerSec < idle.RequestsPerSec) {
		t.Errorf("time-slice: busy neighbour %.2f req/s, idle %.2f", busy.RequestsPerSec, idle.RequestsPerSec)
	}
}

// At the rate MaxRate returns, the p99 it reports is within the SLO and the TPOT target binds
// tightly: just above the rate the binding target is missed.
func TestMaxRateIsTight(t *testing.T) {
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: a100Literal()})
	w := Workload{InputTokens: 1024, OutputTokens: 128}
	slo := SLO{TTFT: 2 * time.Second, TPOT: 40 * time.Millisecond}
	r, err := e.MaxRate(w, slo, Load{})
	if err != nil {
		t.Fatal(err)
	}
	above := e.openLoop(w, r.RequestsPerSec*1.01, Load{})
	missed := above.limit != LimitNone || above.tpot > slo.TPOT.Seconds() || above.ttft > slo.TTFT.Seconds()
	if !missed {
		t.Errorf("1 %% above %.3f req/s still meets the SLO: %+v", r.RequestsPerSec, above)
	}
	if math.Abs(float64(r.TPOT-slo.TPOT)) > 0.05*float64(slo.TPOT) && math.Abs(float64(r.TTFT-slo.TTFT)) > 0.05*float64(slo.TTFT) &&
		r.Limit != LimitSaturated && r.Limit != LimitKV && r.Limit != LimitMaxSeqs {
		t.Errorf("neither target is near binding at the max rate: %+v", r)
	}
}

func TestMaxRateErrors(t *testing.T) {
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: a100Literal()})
	if _, err := e.MaxRate(Workload{InputTokens: 0, OutputTokens: -1}, SLO{}, Load{}); err == nil {
		t.Error("bad workload: no error")
	}
	if _, err := e.MaxRate(Workload{InputTokens: 1, OutputTokens: 1}, SLO{TTFT: -1}, Load{}); err == nil {
		t.Error("negative SLO: no error")
	}
	if _, err := e.Estimate(Workload{InputTokens: 1, OutputTokens: 1, Concurrency: -3}, Load{}); err == nil {
		t.Error("negative concurrency: no error")
	}
}

func TestEstimateLimits(t *testing.T) {
	b := a100Literal()
	m := mustModel(t, llama7B)
	e := mustEngine(t, m, Slice{Board: b})
	// More than max_num_seqs (256) in flight: the rest queue.
	r, _ := e.Estimate(Workload{InputTokens: 128, OutputTokens: 128, Concurrency: 400}, Load{})
	if r.Running != 256 || r.Limit != LimitMaxSeqs {
		t.Errorf("400 in flight: running %d, limit %q", r.Running, r.Limit)
	}
	// 64 sequences of 4096 + 4096 tokens need 524,288 KV tokens, more than the ≈118k that fit.
	r, _ = e.Estimate(Workload{InputTokens: 4096, OutputTokens: 4096, Concurrency: 64}, Load{})
	if r.Limit != LimitKV || r.Running >= 64 || r.Running < 10 {
		t.Errorf("long sequences: running %d, limit %q", r.Running, r.Limit)
	}
	small := mustEngine(t, m, Slice{Board: b, Profile: &b.Profiles[0]})
	r, _ = small.Estimate(Workload{InputTokens: 128, OutputTokens: 128, Concurrency: 1}, Load{})
	if r.Limit != LimitNoFit || r.OutputTokensPerSec <= 0 {
		t.Errorf("no fit still reports the physics: %+v", r)
	}
}
