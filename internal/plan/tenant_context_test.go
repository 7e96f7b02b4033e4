package plan

import (
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// contextFor: maxContext wins; otherwise min(8192, model max), raised to prompt + output.
func TestContextFor(t *testing.T) {
	cases := []struct {
		name            string
		maxCtx, in, out int
		maxPos, want    int
	}{
		{"explicit", 4096, 10000, 200, 131072, 4096},
		{"default", 0, 800, 200, 131072, 8192},                  // min(8192, 131072)
		{"short model", 0, 800, 200, 4096, 4096},                // min(8192, 4096)
		{"long requests", 0, 10000, 200, 131072, 10200},         // 10000 + 200 > 8192
		{"longer than the model", 0, 30000, 5000, 32768, 32768}, // capped at the model's maximum
		{"unknown model maximum", 0, 9000, 1000, 0, 10000},
	}
	for _, c := range cases {
		tn := v1.Tenant{MaxContext: c.maxCtx, Traffic: v1.Traffic{InputTokens: c.in, OutputTokens: c.out}}
		if got := contextFor(tn, c.maxPos); got != c.want {
			t.Errorf("%s: context %d, want %d", c.name, got, c.want)
		}
	}
}

// The memory fit asks for one sequence of the context, as vLLM does to start, not concurrency of
// them: llama-3.1-8b with 64 sequences of 8,192 tokens would need 64 GiB of KV cache beside its
// 15 GiB of weights, more than an H100's 80 GB, yet one exclusive H100 serves it, with
// --max-num-seqs 64 and as many requests at once as its KV cache holds (the queueing model's
// slots), not tensor parallelism over two.
func TestConcurrencyIsNotMemory(t *testing.T) {
	doc := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: conc}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100-SXM5-80GB, count: 8}]
policy: {burstPoolPercent: 0, allowedModes: [exclusive]}
tenants:
- name: t
  model: {name: llama-3.1-8b}
  concurrency: 64
  traffic: {rps: 1, inputTokens: 512, outputTokens: 256}
  slo: {ttftP99: 2s, tpotP99: 100ms}
`
	pool, err := v1.LoadPool([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible || len(tn.Replicas) == 0 {
		t.Fatalf("infeasible: %v", tn.Reasons)
	}
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if r.TensorParallel.Size > 1 {
				t.Errorf("%s: tensor-parallel %d, want one GPU per replica", g.Ref(), r.TensorParallel.Size)
			}
			if !strings.Contains(strings.Join(r.VLLMArgs, " "), "--max-num-seqs 64") {
				t.Errorf("%s: vLLM args %v lack --max-num-seqs 64", g.Ref(), r.VLLMArgs)
			}
		}
	}
}
