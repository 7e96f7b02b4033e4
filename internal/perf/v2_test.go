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

// Tensor parallelism: whole GPUs only, at most what the board's link connects, degrees that
// divide the heads; the all-reduce follows the board's link (a PCIe H100 pays more than an SXM
// one for the same batch); KV heads split down to one per GPU.
func TestTensorParallel(t *testing.T) {
	h := h100(t)
	m := mustModel(t, llama7B)
	if _, err := m.Place(Slice{Board: h, Profile: profile(t, h, "3g.40gb"), TensorParallel: 2}); err == nil {
		t.Error("tensor parallel over MIG instances accepted")
	}
	if _, err := m.Place(Slice{Board: h, TensorParallel: 3}); err == nil {
		t.Error("tensor parallel 3 accepted for 32 heads")
	}
	nvl, err := gpu.Lookup("H100-NVL-94GB")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Place(Slice{Board: nvl, TensorParallel: 4}); err == nil {
		t.Error("tensor parallel 4 accepted over an NVLink bridge that pairs 2 GPUs")
	}
	if got := m.TensorParallelDegrees(nvl); len(got) != 1 || got[0] != 2 {
		t.Errorf("H100 NVL degrees %v, want [2]", got)
	}
	pcie, err := gpu.Lookup("H100-PCIe-80GB")
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{DecodeSeqs: 256, KVTokens: 256 * 1024}
	sxm := mustEngine(t, m, Slice{Board: h, TensorParallel: 4}).Breakdown(b, Load{})
	pc := mustEngine(t, m, Slice{Board: pcie, TensorParallel: 4}).Breakdown(b, Load{})
	// Ring all-reduce of 256 tokens × 4096 × 2 B = 2 MiB, 2·(3/4) of it per GPU, twice per layer
	// over 32 layers: at 0.8 × 450 GB/s ≈ 0.56 ms of transfer, at 0.8 × 64 GB/s ≈ 3.9 ms, plus
	// 64 × 15 µs of latency on both.
	wantSXM := 64 * (15e-6 + 1.5*256*4096*2/(0.8*450e9))
	wantPCIe := 64 * (15e-6 + 1.5*256*4096*2/(0.8*64e9))
	near(t, "SXM all-reduce s", sxm.Comm.Seconds(), wantSXM, 0.01)
	near(t, "PCIe all-reduce s", pc.Comm.Seconds(), wantPCIe, 0.01)
	// llama-3.1-8b has 8 KV heads: over 8 GPUs each holds one, a KV token costs 1/8 per GPU.
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	m8, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got := m8.kvShare(8); got != 1.0/8 {
		t.Errorf("kv share at tp 8 with 8 KV heads: %v, want 1/8", got)
	}
	// Qwen2.5-7B has 4 KV heads: beyond 4 GPUs each still holds one whole head (vLLM replicates
	// KV heads rather than splitting one), so 8 GPUs hold 1/4 of a token each, not 1/8.
	mq := mustModel(t, qwen7B)
	if got := mq.kvShare(8); got != 0.25 {
		t.Errorf("kv share at tp 8 with 4 KV heads: %v, want 1/4", got)
	}
}

// An engine that reserves the whole output at admission (TensorRT-LLM's GUARANTEED_NO_EVICT)
// runs KV / (I + O) sequences; vLLM's on-demand allocation runs KV / (I + O/2).
func TestReserveFullOutput(t *testing.T) {
	h := h100(t)
	o := DefaultOptions()
	o.ReserveFullOutput = true
	trt, err := New(llama7B, llm.QuantBF16, o)
	if err != nil {
		t.Fatal(err)
	}
	sl := Slice{Board: h, Profile: profile(t, h, "1g.20gb")}
	ev, et := mustEngine(t, mustModel(t, llama7B), sl), mustEngine(t, trt, sl)
	w := Workload{InputTokens: 200, OutputTokens: 1800}
	nv, _ := ev.Running(w, 100000)
	nt, _ := et.Running(w, 100000)
	if nv != int(float64(ev.KVCapacityTokens())/1100) || nt != int(float64(et.KVCapacityTokens())/2000) {
		t.Errorf("running %d (vLLM) and %d (reserve full output) of KV %d: want KV/1100 and KV/2000", nv, nt, ev.KVCapacityTokens())
	}
}
