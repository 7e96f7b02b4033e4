package perf

import (
	"math"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// TestVLLMBatchDefaults follows vLLM's get_batch_defaults (vllm/engine/arg_utils.py) for its
// OpenAI server: 1024/8192 on devices of 70 GiB or more unless the name has "a100", 256/2048
// elsewhere; the token budget is capped at max_num_seqs × max_model_len.
func TestVLLMBatchDefaults(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		board        string
		mem          float64
		ctx          int
		seqs, tokens int
	}{
		{"H100-SXM5-80GB", 80 * gib, 8192, 1024, 8192},
		{"H200-141GB", 141 * gib, 8192, 1024, 8192},
		{"A100-SXM4-80GB", 80 * gib, 8192, 256, 2048}, // the A100 exception (vLLM PR #17885)
		{"H100-SXM5-80GB", 40 * gib, 8192, 256, 2048}, // a 3g.40gb instance is a 40 GiB device
		{"H100-SXM5-80GB", 70 * gib, 8192, 1024, 8192},
		{"H100-SXM5-80GB", 80 * gib, 4, 1024, 4096}, // 1024 × 4 caps the budget
		{"H100-SXM5-80GB", 20 * gib, 2, 256, 512},   // 256 × 2
	} {
		b, err := gpu.Lookup(tc.board)
		if err != nil {
			t.Fatal(err)
		}
		s, tok := VLLMBatchDefaults(b, tc.mem, tc.ctx)
		if s != tc.seqs || tok != tc.tokens {
			t.Errorf("%s %.0f GiB ctx %d: %d/%d, want %d/%d", tc.board, tc.mem/gib, tc.ctx, s, tok, tc.seqs, tc.tokens)
		}
	}
	// An engine resolves them for what it sees, and an explicit option wins.
	h := h100(t)
	m := mustModel(t, llama7B)
	if e := mustEngine(t, m, Slice{Board: h}); e.MaxSeqs() != 1024 || e.MaxBatchedTokens() != 8192 {
		t.Errorf("whole H100: %d/%d, want 1024/8192", e.MaxSeqs(), e.MaxBatchedTokens())
	}
	if e := mustEngine(t, m, Slice{Board: h, Profile: profile(t, h, "3g.40gb")}); e.MaxSeqs() != 256 || e.MaxBatchedTokens() != 2048 {
		t.Errorf("H100 3g.40gb: %d/%d, want 256/2048", e.MaxSeqs(), e.MaxBatchedTokens())
	}
	o := DefaultOptions()
	o.MaxSeqs = 64
	m64, err := New(llama7B, llm.QuantBF16, o)
	if err != nil {
		t.Fatal(err)
	}
	if e := mustEngine(t, m64, Slice{Board: h}); e.MaxSeqs() != 64 || e.MaxBatchedTokens() != 8192 {
		t.Errorf("max seqs 64 on H100: %d/%d, want 64/8192", e.MaxSeqs(), e.MaxBatchedTokens())
	}
}

// TTFT is continuous across the chunk boundary: a prompt one token longer than the budget takes
// one more step of one token, not a second full chunk (before: 8191 → 226 ms, 8192 → 421 ms).
func TestTTFTContinuousAtChunkBoundary(t *testing.T) {
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, m, Slice{Board: h100(t)})
	b := e.MaxBatchedTokens()
	for _, conc := range []int{1, 8} {
		var ttft [3]float64
		for i, in := range []int{b - 1, b, b + 1} {
			r, err := e.Estimate(Workload{InputTokens: in, OutputTokens: 64, Concurrency: conc}, Load{})
			if err != nil {
				t.Fatal(err)
			}
			ttft[i] = r.TTFT.Seconds()
		}
		lo, hi := math.Min(ttft[0], math.Min(ttft[1], ttft[2])), math.Max(ttft[0], math.Max(ttft[1], ttft[2]))
		t.Logf("concurrency %d: TTFT at %d/%d/%d tokens: %.1f/%.1f/%.1f ms", conc, b-1, b, b+1, 1e3*ttft[0], 1e3*ttft[1], 1e3*ttft[2])
		if hi/lo > 1.05 {
			t.Errorf("concurrency %d: TTFT jumps %.1f%% across the %d-token budget", conc, 100*(hi/lo-1), b)
		}
	}
	// MaxRate's p99 TTFT at a trickle (its open-loop state), likewise.
	var p99 [3]float64
	for i, in := range []int{b - 1, b, b + 1} {
		p99[i] = e.openLoop(Workload{InputTokens: in, OutputTokens: 64}, 1e-9, Load{}).ttft
	}
	if hi, lo := math.Max(p99[0], math.Max(p99[1], p99[2])), math.Min(p99[0], math.Min(p99[1], p99[2])); hi/lo > 1.05 {
		t.Errorf("open-loop TTFT jumps %.1f%% across the budget: %v", 100*(hi/lo-1), p99)
	}
}

// One admission rule: Estimate runs as many sequences as KV / (prompt + output/2) and MaxRate
// stops at the same count; beyond it the excess waits and throughput saturates.
func TestOneAdmissionRuleAndQueue(t *testing.T) {
	m := mustModel(t, llama7B)
	h := h100(t)
	e := mustEngine(t, m, Slice{Board: h, Profile: profile(t, h, "1g.20gb")})
	w := Workload{InputTokens: 1000, OutputTokens: 1000}
	want := int(float64(e.KVCapacityTokens()) / 1500)
	if n, lim := e.Running(w, 10000); n != want || lim != LimitKV {
		t.Fatalf("Running %d (%s), want %d kv-capacity (%d tokens / 1,500)", n, lim, want, e.KVCapacityTokens())
	}
	at := func(c int) Result {
		w.Concurrency = c
		r, err := e.Estimate(w, Load{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	full, over := at(want), at(4*want)
	if over.Running != want || over.Limit != LimitKV {
		t.Errorf("4× the cache: running %d (%s), want %d kv-capacity", over.Running, over.Limit, want)
	}
	if math.Abs(over.OutputTokensPerSec/full.OutputTokensPerSec-1) > 1e-9 {
		t.Errorf("throughput beyond the cache %.1f, at it %.1f: want saturated", over.OutputTokensPerSec, full.OutputTokensPerSec)
	}
	// Little's law: 3 × want requests wait, each for the time 3·want/X.
	wait := float64(3*want) / full.RequestsPerSec
	if got := (over.TTFT - full.TTFT).Seconds(); math.Abs(got/wait-1) > 1e-3 {
		t.Errorf("queued TTFT adds %.2f s, want %.2f s", got, wait)
	}
}

// Prefills queue behind each other: with long prompts and many requests in flight, TTFT grows
// beyond one prompt's own chunk steps.
func TestPrefillsQueue(t *testing.T) {
	m := mustModel(t, llama7B)
	e := mustEngine(t, m, Slice{Board: h100(t)})
	w := Workload{InputTokens: 4000, OutputTokens: 50, Concurrency: 1}
	one, err := e.Estimate(w, Load{})
	if err != nil {
		t.Fatal(err)
	}
	w.Concurrency = 32
	many, err := e.Estimate(w, Load{})
	if err != nil {
		t.Fatal(err)
	}
	// Without the wait, TTFT is half a mean step plus the prompt's own chunk steps (kq = 0).
	noWait, _ := e.loopAt(4000, 50, 32, 0, float64(e.MaxBatchedTokens()), Load{})
	t.Logf("TTFT alone %v, 32 in flight %v, 32 in flight without the queue %.1f ms", one.TTFT, many.TTFT, 1e3*noWait.ttft)
	if many.TTFT.Seconds() < 1.5*noWait.ttft {
		t.Errorf("32 long prompts in flight: TTFT %v is not above %.1f ms: no wait behind other prefills", many.TTFT, 1e3*noWait.ttft)
	}
}
