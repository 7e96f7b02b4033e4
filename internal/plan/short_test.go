package plan

import (
	"fmt"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// shortPool is one node of gpus H100s, no burst pool, a Llama-3.1-70B bf16 tenant (big, which
// no single H100 holds) at bigRPS and a Qwen2.5-7B tenant (small) at 0.2 req/s.
func shortPool(t testing.TB, gpus int, bigRPS float64, modes string) *v1.Pool {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: short}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100-SXM5-80GB, count: %d}]
policy:
  burstPoolPercent: 0
  allowedModes: [%s]
tenants:
- name: big
  model: {name: llama-3.1-70b, quantization: bf16}
  concurrency: 32
  traffic: {rps: %g, inputTokens: 1024, outputTokens: 256}
  slo: {ttftP99: 5s, tpotP99: 100ms}
- name: small
  model: {name: qwen2.5-7b}
  traffic: {rps: 0.2, inputTokens: 500, outputTokens: 200}
  slo: {ttftP99: 800ms, tpotP99: 50ms}
`, gpus, modes, bigRPS)
	pool, err := v1.LoadPool([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// On one node of 2 H100s a 70B bf16 tenant sized at two tensor-parallel groups of 2 (1 req/s)
// cannot be served in full. Packed first, it used to keep the one group that found room and
// leave the 7B tenant no GPU, both short; now it gives up that group, the 7B tenant is served in
// full, and the 70B tenant is reported short with a reason naming the GPUs it needs and the
// tenant served in its place.
func TestShortTenantGivesWay(t *testing.T) {
	pool := shortPool(t, 2, 1, "exclusive, mig, mps, timeslice")
	pl := build(t, pool)
	big, small := pl.Tenants[0], pl.Tenants[1]
	if small.Infeasible || len(small.Replicas) != 1 {
		t.Errorf("small: infeasible %v with %d replicas, want served in full with 1: %v", small.Infeasible, len(small.Replicas), small.Reasons)
	}
	if !big.Infeasible || len(big.Replicas) != 0 {
		t.Fatalf("big: infeasible %v with %d replicas, want short with none", big.Infeasible, len(big.Replicas))
	}
	r := big.Reasons[0]
	if r.Code != v1.ReasonNoCapacity {
		t.Fatalf("big: first reason %s, want NoCapacity: %s", r.Code, r.Message)
	}
	for _, want := range []string{"in favour of small", "need 4 H100-SXM5-80GB GPUs (2 groups of 2)", "only 1 of them had found room (on n0/0, n0/1;"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("big: reason %q lacks %q", r.Message, want)
		}
	}
	t.Logf("big: %s", r.Message)
}
