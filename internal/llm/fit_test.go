package llm

import (
	"slices"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
)

// h100 is an H100 SXM5 80GB as `nvidia-smi mig -lgip` reports it (81,559 MiB total; 1g.10gb
// 9.75 GiB, 1g.20gb 19.62 GiB, 3g.40gb 40,448 MiB, 7g.80gb 79.25 GiB).
func h100() *gpu.Board {
	return &gpu.Board{Name: "H100-SXM5-80GB", MemoryMiB: 81_559, SMs: 132, Profiles: []gpu.Profile{
		{Name: "1g.10gb", ComputeSlices: 1, MemorySlices: 1, MemoryMiB: 9984, SMs: 16},
		{Name: "1g.10gb+me", ComputeSlices: 1, MemorySlices: 1, MemoryMiB: 9984, SMs: 16},
		{Name: "1g.20gb", ComputeSlices: 1, MemorySlices: 2, MemoryMiB: 20_096, SMs: 26},
		{Name: "2g.20gb", ComputeSlices: 2, MemorySlices: 2, MemoryMiB: 20_096, SMs: 32},
		{Name: "3g.40gb", ComputeSlices: 3, MemorySlices: 4, MemoryMiB: 40_448, SMs: 60},
		{Name: "4g.40gb", ComputeSlices: 4, MemorySlices: 4, MemoryMiB: 40_448, SMs: 64},
		{Name: "7g.80gb", ComputeSlices: 7, MemorySlices: 8, MemoryMiB: 81_152, SMs: 132},
	}}
}

func sliceNamed(t testing.TB, b *gpu.Board, name string, caps ...int64) Slice {
	t.Helper()
	for _, s := range Slices(b, caps...) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no slice %s on %s", name, b.Name)
	return Slice{}
}

func mustFit(t testing.TB, slug string, o Options, s Slice) Fit {
	t.Helper()
	f, err := FitSlice(FromArch(mustLookup(t, slug)), o, s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSlicesOfH100(t *testing.T) {
	got := Slices(h100(), 40*GiB)
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	want := []string{"gpu", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "shared-40GiB"}
	if !slices.Equal(names, want) {
		t.Errorf("slices %v, want %v (+me folded into 1g.10gb)", names, want)
	}
	// Whole GPU: 81,559 MiB less the driver-reserved 616/143,771 share = 81,209.6 MiB.
	if v := got[0].MemoryBytes; v/MiB != 81_209 || got[7].GPUBytes != v || got[4].MemoryBytes != 40_448*MiB {
		t.Errorf("sizes wrong: %+v", got)
	}
}

func TestVisibleBytesMatchesMeasuredH200(t *testing.T) {
	// cudaMemGetInfo on an H200 (driver 580.159, CUDA 13.0) reported total 150,109,880,320 bytes
	// for nvidia-smi's 143,771 MiB; nvidia-smi rounds to MiB, so agree within 2 MiB.
	const measured = 150_109_880_320
	if d := VisibleBytes(143_771) - measured; d < -2*MiB || d > 2*MiB {
		t.Errorf("VisibleBytes(143771) = %d, measured %d", VisibleBytes(143_771), measured)
	}
}

func TestWorkedFitLlama31_8BOnH100MIG(t *testing.T) {
	// Reference worked fit: 1g.20gb at 0.9 → budget 17.66 GiB, weights 14.96 GiB, ≈ 10k–14k tokens.
	f := mustFit(t, "llama-3.1-8b", Options{}, sliceNamed(t, h100(), "1g.20gb"))
	if !f.Fits || f.MaxTokens < 10_000 || f.MaxTokens > 14_000 || f.MaxConcurrency != 1 {
		t.Errorf("1g.20gb: fits %v, %d tokens, %d sequences; want fits, 10k–14k, 1", f.Fits, f.MaxTokens, f.MaxConcurrency)
	}
	if b := float64(f.BudgetBytes) / float64(GiB); !within(b, 17.66, 0.002) {
		t.Errorf("budget %.3f GiB, want 17.66", b)
	}
	if f.Args.GPUMemoryUtilization != 0.9 || f.Args.MaxNumBatchedTokens != 2048 || f.Args.EnforceEager || len(f.Reasons) != 0 {
		t.Errorf("args %+v reasons %q", f.Args, f.Reasons)
	}
	// 3g.40gb: about 19–20 GiB of KV ≈ 160k tokens.
	f3 := mustFit(t, "llama-3.1-8b", Options{}, sliceNamed(t, h100(), "3g.40gb"))
	if kv := float64(f3.KVAvailableBytes) / float64(GiB); !f3.Fits || kv < 19 || kv > 20 || f3.MaxTokens < 150_000 || f3.MaxTokens > 170_000 {
		t.Errorf("3g.40gb: fits %v, KV %.2f GiB, %d tokens", f3.Fits, kv, f3.MaxTokens)
	}
	// Qwen2.5-7B (56 KiB/token) holds at least 2.3× the tokens in the same slice.
	q := mustFit(t, "qwen2.5-7b", Options{}, sliceNamed(t, h100(), "3g.40gb"))
	if float64(q.MaxTokens) < 2.3*float64(f3.MaxTokens) {
		t.Errorf("qwen2.5-7b %d tokens vs llama %d", q.MaxTokens, f3.MaxTokens)
	}
}

func TestWorkedFitThroughGPUCatalog(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	fits, err := FitBoard(FromArch(mustLookup(t, "llama-3.1-8b")), Options{}, b)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Fit{}
	for _, f := range fits {
		byName[f.Slice.Name] = f
	}
	if f := byName["1g.20gb"]; !f.Fits || f.MaxTokens < 10_000 || f.MaxTokens > 14_000 {
		t.Errorf("1g.20gb via the catalog: %+v", f)
	}
	if f := byName["1g.10gb"]; f.Fits {
		t.Error("1g.10gb fits 14.96 GiB of weights")
	}
	if f := byName["gpu"]; !f.Fits || f.Args.MaxNumBatchedTokens != 8192 {
		t.Errorf("whole H100: %+v", f)
	}
}

func TestFitExplainsMisses(t *testing.T) {
	h := h100()
	tests := []struct {
		name  string
		slug  string
		o     Options
		slice Slice
		want  []string
	}{
		{"weights over the slice", "llama-3.1-70b", Options{}, sliceNamed(t, h, "3g.40gb"),
			[]string{"weights 131.42 GiB exceed H100-SXM5-80GB 3g.40gb's 39.5 GiB", "67.67 GiB (fp8)", "37.04 GiB (int4-awq)"}},
		{"weights over the whole GPU", "llama-3.1-70b", Options{}, sliceNamed(t, h, "gpu"),
			[]string{"exceed the whole H100-SXM5-80GB's 79.31 GiB"}},
		// 14.96 GiB of weights fit a 16 GiB slice but not its 0.9 × 16 = 14.4 GiB budget.
		{"weights over the budget", "llama-3.1-8b", Options{}, Slice{Board: "X", Kind: SliceMIG, Name: "custom", MemoryBytes: 16 * GiB, GPUBytes: 16 * GiB},
			[]string{"weights 14.96 GiB exceed the 14.4 GiB budget (0.9 × 16 GiB)"}},
		// fp8: 8.46 GiB of weights + 1.24 GiB of workspace > 0.9 × 9.75 GiB = 8.78 GiB.
		{"no room for KV", "llama-3.1-8b", Options{Quantization: QuantFP8}, sliceNamed(t, h, "1g.10gb"),
			[]string{"weights 8.46 GiB + workspace 1.24 GiB (activations, non-torch, CUDA graphs) leave no KV cache in the 8.78 GiB budget"}},
		{"context longer than the cache", "llama-3.1-8b", Options{Context: 131072}, sliceNamed(t, h, "1g.20gb"),
			[]string{"less than one 131,072-token sequence", "--kv-cache-dtype fp8 would hold"}},
		{"concurrency", "llama-3.1-8b", Options{Concurrency: 64}, sliceNamed(t, h, "3g.40gb"),
			[]string{"= 19 sequences of 8,192, asked 64 (524,288 tokens)"}},
		{"token budget", "llama-3.1-8b", Options{TokenBudget: 400_000}, sliceNamed(t, h, "3g.40gb"),
			[]string{"asked a budget of 400,000"}},
		{"utilization too high to start", "qwen2.5-0.5b", Options{GPUMemoryUtilization: 0.99}, sliceNamed(t, h, "1g.10gb"),
			[]string{"--gpu-memory-utilization 0.99", "leaves less than the 0.52 GiB CUDA context free"}},
		{"cap above the GPU", "qwen2.5-0.5b", Options{}, sliceNamed(t, h, "shared-90GiB", 90*GiB),
			[]string{"the shared-90GiB cap exceeds the GPU's 79.31 GiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFit(t, tt.slug, tt.o, tt.slice)
			if f.Fits {
				t.Fatalf("fits: %+v", f)
			}
			all := strings.Join(f.Reasons, "; ")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("reasons %q lack %q", all, w)
				}
			}
		})
	}
}

func TestFitRaisesUtilizationThenGoesEager(t *testing.T) {
	s := sliceNamed(t, h100(), "1g.20gb")
	// 12,000 tokens on 1g.20gb: 11,952 fit at 0.9 with graphs; 0.95 adds 0.98 GiB (≈ 8,000 tokens).
	f := mustFit(t, "llama-3.1-8b", Options{TokenBudget: 12_000}, s)
	if !f.Fits || f.Args.GPUMemoryUtilization != 0.95 || f.Args.EnforceEager {
		t.Fatalf("fit %+v", f)
	}
	if len(f.Reasons) != 1 || !strings.Contains(f.Reasons[0], "fits only at --gpu-memory-utilization 0.95 (default 0.90)") {
		t.Errorf("reasons %q", f.Reasons)
	}
	// A utilization the user gave is kept; eager frees the 512 MiB graph allowance (4,096 tokens).
	f = mustFit(t, "llama-3.1-8b", Options{TokenBudget: 12_000, GPUMemoryUtilization: 0.9}, s)
	if !f.Fits || !f.Args.EnforceEager || f.Args.GPUMemoryUtilization != 0.9 || f.Memory.CUDAGraphs != 0 {
		t.Errorf("eager fallback: %+v", f)
	}
	if !slices.Contains(f.Args.Flags(), "--enforce-eager") || !strings.Contains(strings.Join(f.Reasons, ";"), "CUDA graphs do not fit") {
		t.Errorf("flags %v reasons %q", f.Args.Flags(), f.Reasons)
	}
	// Three 8192-token sequences (24,576 tokens) need both: 0.95 and eager.
	f = mustFit(t, "llama-3.1-8b", Options{Concurrency: 3}, s)
	if !f.Fits || !f.Args.EnforceEager || f.Args.GPUMemoryUtilization != 0.95 || f.Args.MaxNumSeqs != 3 {
		t.Errorf("0.95 + eager: %+v", f)
	}
	// Forced eager and a fixed utilization: nothing to fall back to, so it misses and says why.
	f = mustFit(t, "llama-3.1-8b", Options{Concurrency: 3, GPUMemoryUtilization: 0.9, EnforceEager: true}, s)
	if f.Fits || !strings.Contains(strings.Join(f.Reasons, ";"), "asked 3") {
		t.Errorf("fixed: %+v", f)
	}
}

func TestFitSharedSliceUtilization(t *testing.T) {
	h := h100()
	s := sliceNamed(t, h, "shared-40GiB", 40*GiB)
	f := mustFit(t, "llama-3.1-8b", Options{}, s)
	// (40 GiB − 0.52 GiB context) / 79.31 GiB visible = 0.4978… → 0.497 of the whole GPU.
	if !f.Fits || f.Args.GPUMemoryUtilization != 0.497 {
		t.Fatalf("fit %+v", f)
	}
	if f.BudgetBytes+cudaContextBytes > s.MemoryBytes {
		t.Errorf("budget %d + context exceeds the cap %d", f.BudgetBytes, s.MemoryBytes)
	}
	// Two co-tenants with half the GPU each: their utilizations add up to less than 1, and each
	// budget plus its context stays inside its cap.
	half := sliceNamed(t, h, "shared-39.82GiB", 81_559*MiB/2)
	fh := mustFit(t, "llama-3.1-8b", Options{}, half)
	if u := fh.Args.GPUMemoryUtilization; 2*u >= 1 || fh.BudgetBytes+cudaContextBytes > half.MemoryBytes || !fh.Fits {
		t.Errorf("half-GPU co-tenant: %+v", fh)
	}
	if f.Memory.Total != f.Memory.Budget()+f.Memory.CUDAContext || f.Memory.Total > s.MemoryBytes {
		t.Errorf("shared total %d, cap %d", f.Memory.Total, s.MemoryBytes)
	}
	// The batched-token default follows the whole GPU vLLM sees (≥ 70 GiB → 8192).
	if f.Args.MaxNumBatchedTokens != 8192 {
		t.Errorf("max-num-batched-tokens %d", f.Args.MaxNumBatchedTokens)
	}
}

func TestFitFP8KVDoublesTokens(t *testing.T) {
	s := sliceNamed(t, h100(), "3g.40gb")
	bf := mustFit(t, "llama-3.1-8b", Options{}, s)
	f8 := mustFit(t, "llama-3.1-8b", Options{KVCacheDType: "fp8"}, s)
	if f8.MaxTokens < 2*bf.MaxTokens-16 || f8.MaxTokens > 2*bf.MaxTokens+16 || f8.Args.KVCacheDType != "fp8" {
		t.Errorf("fp8 %d tokens vs bf16 %d; args %+v", f8.MaxTokens, bf.MaxTokens, f8.Args)
	}
	if !slices.Contains(f8.Args.Flags(), "fp8") {
		t.Errorf("flags %v", f8.Args.Flags())
	}
}

func TestFitQuantizationFlag(t *testing.T) {
	s := sliceNamed(t, h100(), "gpu")
	for q, flag := range map[Quantization]string{QuantBF16: "", QuantFP8: "fp8", QuantInt4AWQ: "awq", QuantInt4GPTQ: "gptq", QuantInt8: ""} {
		f := mustFit(t, "llama-3.1-70b", Options{Quantization: q}, s)
		if f.Args.Quantization != flag {
			t.Errorf("%s: --quantization %q, want %q", q, f.Args.Quantization, flag)
		}
	}
	// A quantized checkpoint is detected by vLLM: no flag.
	m, err := LoadDir(tinyDir(t))
	if err != nil {
		t.Fatal(err)
	}
	f, err := FitSlice(m, Options{}, s)
	if err != nil || f.Args.Quantization != "" || !f.Fits || f.Memory.WeightsSource != "checkpoint" {
		t.Errorf("checkpoint fit %+v, %v", f, err)
	}
}

func TestFitFlagsRendering(t *testing.T) {
	v := VLLMArgs{GPUMemoryUtilization: 0.495, MaxModelLen: 8192, MaxNumSeqs: 4, MaxNumBatchedTokens: 2048,
		KVCacheDType: "fp8", EnforceEager: true, Quantization: "awq"}
	want := "--gpu-memory-utilization 0.495 --max-model-len 8192 --max-num-seqs 4 --max-num-batched-tokens 2048 " +
		"--kv-cache-dtype fp8 --quantization awq --enforce-eager"
	if got := strings.Join(v.Flags(), " "); got != want {
		t.Errorf("Flags() = %q\nwant %q", got, want)
	}
}

func TestFitDeepSeekV3NeedsMoreThanOneH100(t *testing.T) {
	fits, err := FitBoard(FromArch(mustLookup(t, "deepseek-v3")), Options{}, h100())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fits {
		if f.Fits {
			t.Errorf("deepseek-v3 fits %s", f.Slice.Name)
		}
	}
}

func TestFitInvalidOptions(t *testing.T) {
	if _, err := FitBoard(FromArch(mustLookup(t, "llama-2-7b")), Options{Context: 8192}, h100()); err == nil {
		t.Error("context 8192 on a 4096-position model accepted")
	}
	if _, err := FitSlice(FromArch(mustLookup(t, "llama-2-7b")), Options{KVCacheDType: "x"}, Slice{}); err == nil {
		t.Error("bad kv dtype accepted")
	}
}

func TestNotes(t *testing.T) {
	notes, err := Notes(FromArch(mustLookup(t, "mistral-7b-v0.1")), Options{Context: 32768, Quantization: QuantInt4AWQ})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(notes, "; ")
	for _, w := range []string{"pre-quantized int4-awq checkpoint", "131,072 bytes/token", "sliding window 4,096: a sequence keeps at most 4,112 tokens"} {
		if !strings.Contains(all, w) {
			t.Errorf("notes %q lack %q", all, w)
		}
	}
	notes, _ = Notes(FromArch(mustLookup(t, "llama-3.1-8b")), Options{})
	if all := strings.Join(notes, "; "); !strings.Contains(all, "context 8,192 assumed") {
		t.Errorf("notes %q", all)
	}
}

func TestFitLowersDefaultUtilizationOnSmallSlices(t *testing.T) {
	// A100-40GB 1g.5gb: 4,864 MiB. At 0.9, 4,377.6 MiB requested + the 528 MiB context > 4,864:
	// vLLM would refuse to start. (4,864 − 528) / 4,864 = 0.891… → 0.89.
	small := Slice{Board: "A100-SXM4-40GB", Kind: SliceMIG, Name: "1g.5gb", MemoryBytes: 4864 * MiB, GPUBytes: 4864 * MiB}
	f := mustFit(t, "qwen2.5-0.5b", Options{}, small)
	if !f.Fits || f.Args.GPUMemoryUtilization != 0.89 {
		t.Fatalf("fit %+v", f)
	}
	if len(f.Reasons) != 1 || !strings.Contains(f.Reasons[0], "lowered to 0.89: the 0.52 GiB CUDA context does not fit in 10% of 4.75 GiB") {
		t.Errorf("reasons %q", f.Reasons)
	}
	// When the weights alone exceed the slice, that is the reason given, not the start-up check.
	f = mustFit(t, "mistral-7b-v0.1", Options{GPUMemoryUtilization: 0.9}, small)
	if f.Fits || len(f.Reasons) == 0 || !strings.HasPrefix(f.Reasons[0], "weights 13.49 GiB exceed A100-SXM4-40GB 1g.5gb's 4.75 GiB") {
		t.Errorf("reasons %q", f.Reasons)
	}
}

// The vLLM args fit writes carry vLLM's per-device batch defaults: 1024 sequences and 8192 tokens
// on a whole H100, 256 and 2048 on its 3g.40gb instance (40 GiB) and on a whole A100-80GB (the
// A100 exception of get_batch_defaults).
func TestFitBatchDefaultsPerDevice(t *testing.T) {
	for _, tc := range []struct {
		board, slice string
		seqs, tokens int
	}{
		{"H100-SXM5-80GB", "gpu", 1024, 8192},
		{"H100-SXM5-80GB", "3g.40gb", 256, 2048},
		{"A100-SXM4-80GB", "gpu", 256, 2048},
	} {
		b, err := gpu.Lookup(tc.board)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Lookup("llama-3.1-8b")
		if err != nil {
			t.Fatal(err)
		}
		fits, err := FitBoard(FromArch(a), Options{}, b)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fits {
			if f.Slice.Name != tc.slice {
				continue
			}
			found = true
			if f.Args.MaxNumSeqs != tc.seqs || f.Args.MaxNumBatchedTokens != tc.tokens {
				t.Errorf("%s %s: --max-num-seqs %d --max-num-batched-tokens %d, want %d and %d",
					tc.board, tc.slice, f.Args.MaxNumSeqs, f.Args.MaxNumBatchedTokens, tc.seqs, tc.tokens)
			}
		}
		if !found {
			t.Errorf("%s: no %s slice", tc.board, tc.slice)
		}
	}
	if s, tok := VLLMBatchDefaults("H200-141GB", 140*GiB, 4); s != 1024 || tok != 4096 {
		t.Errorf("H200 with a 4-token context: %d/%d, want 1024/4096 (1024 × 4)", s, tok)
	}
}
