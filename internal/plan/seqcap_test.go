package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// seqCapPool is t00050 of testdata/short-150-on-60.yaml alone on the H200 of its plan
// (llama-3.2-3b, 2 req/s of 4,000 + 150 tokens, two 1g.18gb instances whose KV cache holds 16
// requests at full length) with EXTRA added to the tenant.
func seqCapPool(t *testing.T, extra string) *v1.Pool {
	t.Helper()
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: seqcap}
fleet:
  nodes:
  - name: n1
    gpus: [{board: H200, count: 1}]
policy: {burstPoolPercent: 0}
tenants:
- name: t00050
  isolation: soft
  model: {name: llama-3.2-3b}
  traffic: {rps: 2, inputTokens: 4000, outputTokens: 150, lengths: fixed}
  slo: {ttftP99: 2500ms, tpotP99: 60ms}
  minReplicas: 2
  maxReplicas: 8
` + extra))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// maxNumSeqsOf is the --max-num-seqs of every replica of pl, in order.
func maxNumSeqsOf(pl *v1.Plan) []string {
	var out []string
	for _, g := range pl.GPUs {
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				if i := slices.Index(r.VLLMArgs, "--max-num-seqs"); i >= 0 && i+1 < len(r.VLLMArgs) {
					out = append(out, r.VLLMArgs[i+1])
				}
			}
		}
		for _, r := range g.Replicas {
			if i := slices.Index(r.VLLMArgs, "--max-num-seqs"); i >= 0 && i+1 < len(r.VLLMArgs) {
				out = append(out, r.VLLMArgs[i+1])
			}
		}
	}
	return out
}

// TestSeqCapEndsPreemptionLoop: a replica whose KV cache, not max-num-seqs, sets its places, and
// whose cache holds those places at full length, is started with --max-num-seqs at those places
// where the pool leaves concurrency unset and the lengths are fixed, and its ComputeBound reason
// says why. At vLLM's default 256 the engine admits a 17th request whose first prefill chunk
// fits and which preempts itself at its second, and at seed 22 the queue never recovers (93.4 %
// within the SLO in 30 minutes); at 16 there is no preemption and every request meets the SLO.
// A concurrency the pool sets keeps its max-num-seqs; uniform lengths are capped lower, at the
// 11 requests the cache holds at the law's 99th-percentile total length (ADR 0093,
// TestSeqCapVaryingLengths).
func TestSeqCapEndsPreemptionLoop(t *testing.T) {
	pool := seqCapPool(t, "")
	pl := buildWith(t, pool, Options{})
	if got := maxNumSeqsOf(pl); !slices.Equal(got, []string{"16", "16"}) {
		t.Fatalf("--max-num-seqs of the replicas: %v, want 16 and 16", got)
	}
	var why string
	for _, r := range pl.Tenants[0].Reasons {
		if r.Code == v1.ReasonComputeBound {
			why = r.Message
		}
	}
	if !strings.Contains(why, "--max-num-seqs 16, the requests its KV cache holds at full length") {
		t.Errorf("ComputeBound reason does not name the cap: %q", why)
	}
	tr := simulatePlan(t, pool, pl, 30*time.Minute, 22)["t00050"]
	t.Logf("seed 22: %.4f within the SLO, %d preemptions, TTFT p99 %.0f ms", tr.SLOAttainment, tr.Preemptions, tr.TTFT.P99)
	if tr.SLOAttainment < 0.99 || tr.Preemptions != 0 {
		t.Errorf("seed 22: %.4f within the SLO and %d preemptions, want at least 0.99 and none", tr.SLOAttainment, tr.Preemptions)
	}
	for _, c := range []struct{ name, extra, want string }{
		{"concurrency set", "  concurrency: 32\n", "32"},
		{"varying lengths", "", "11"},
	} {
		p := seqCapPool(t, c.extra)
		if c.name == "varying lengths" {
			p.Tenants[0].Traffic.Lengths = v1.LengthsUniform
		}
		got := maxNumSeqsOf(buildWith(t, p, Options{}))
		if len(got) == 0 || slices.ContainsFunc(got, func(s string) bool { return s != c.want }) {
			t.Errorf("%s: --max-num-seqs %v, want %s", c.name, got, c.want)
		}
	}
}
