package plan

import (
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// meanInFlight inverts m + 3.09·√m.
func TestMeanInFlight(t *testing.T) {
	for _, tc := range []struct{ n, want float64 }{
		{0, 0},
		{-1, 0},
		// √m = (−3.09 + √(3.09² + 4·7.328)) / 2 = (−3.09 + 6.233) / 2 = 1.5716 → m = 2.470
		{7.328, 2.470},
		// √m = (−3.09 + √(9.548 + 59.52)) / 2 = 2.610 → m = 6.812
		{14.88, 6.812},
	} {
		if got := meanInFlight(tc.n); math.Abs(got-tc.want) > 0.002 {
			t.Errorf("meanInFlight(%v) = %.4f, want %.3f", tc.n, got, tc.want)
		}
	}
}

func TestInFlightRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.Float64Range(0, 1e6).Draw(t, "m")
		if got := meanInFlight(inFlightP999(m)); math.Abs(got-m) > 1e-6*(1+m) {
			t.Fatalf("meanInFlight(inFlightP999(%v)) = %v", m, got)
		}
	})
}

// On the articles' node a 13B replica on a 20 GB MPS share of a 3g.40gb instance holds 7,328
// KV tokens: 7.328 requests of 1,000 tokens. The queueing model sizes the candidate so that the
// 99.9th percentile of the requests holding a slot fits in that cache, and the plan's replicas
// carry the 0.5 req/s every product tenant offers.
func TestKVHoldBoundsSmallShares(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	setKV(pool, "llama-2-13b", "")                    // bf16 KV: the case where a half 3g.40gb share is small
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA // MIG+MPS is a candidate on the DRA path only
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	tn := p.tenants[4]
	if tn.t.Name != "product-0" {
		t.Fatalf("tenant 4 is %s", tn.t.Name)
	}
	var share *cand
	for _, c := range tn.cands {
		if c.kind == v1.SliceMIGMPS && c.profile.Name == "3g.40gb" && c.share == 2 {
			share = c
		}
	}
	if share == nil || share.reject != "" {
		t.Fatalf("3g.40gb + mps 1/2 missing or rejected: %+v", share)
	}
	q := share.ev.q
	if math.Abs(q.kvSeqs-7.328) > 1e-9 {
		t.Errorf("kv holds %.4f requests, want 7.328 (7,328 tokens / 1,000)", q.kvSeqs)
	}
	if got := inFlightP999(share.sz.state.inFlight); got > q.kvSeqs {
		t.Errorf("p99.9 in flight %.2f at %d replicas exceeds the %.2f requests the cache holds", got, share.replicas, q.kvSeqs)
	}
	// One replica fewer would put more in flight than the cache holds, or miss the SLO.
	if share.sz.n > 1 && meets(q.state(peakRate(tn.t.Traffic), share.sz.n-1), tn.slo) == "" {
		t.Errorf("%d replicas also meet the SLO: the search is not the fewest", share.sz.n-1)
	}
	pl := build(t, pool)
	for _, pt := range pl.Tenants {
		if !strings.HasPrefix(pt.Name, "product-") || pt.Infeasible {
			continue
		}
		if pt.Predicted.MaxRPS < 0.5 {
			t.Errorf("%s: max rps %.3f below its 0.5 req/s", pt.Name, pt.Predicted.MaxRPS)
		}
	}
}

// engine2023 are the performance model's constants for the vLLM of 2023 that some planner cases
// were built on: 4 ms of host time per step, a paged-attention KV read at 0.65 of the bandwidth
// and 256 sequences.
func engine2023() perf.Options {
	o := perf.DefaultOptions()
	o.StepOverhead = 4 * time.Millisecond
	o.KVBWEfficiency = 0.65
	o.MaxSeqs = 256
	return o
}
