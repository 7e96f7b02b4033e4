package llm

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestEstimateLlama31_8BTerms(t *testing.T) {
	m := FromArch(mustLookup(t, "llama-3.1-8b"))
	got, err := Estimate(m, Options{Context: 8192, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := Memory{
		Weights: 16_060_522_496, // 8,030,261,248 params × 2 bytes
		KVCache: 4_294_967_296,  // 131,072 bytes/token × 8192 tokens × 4 sequences
		// T = 8192 batched tokens × 2 bytes × (4·4096 + (4096 + 2·1024) + 3·14336 = 65,536)
		// = 1,073,741,824, plus logits for min(4 seqs, T) × 128,256 vocab × 4 bytes × 2 = 4,104,192.
		Activations: 1_077_846_016,
		NonTorch:    268_435_456, // 256 MiB
		CUDAGraphs:  536_870_912, // 256 MiB + 32 layers × 8 MiB
		CUDAContext: 553_648_128, // 528 MiB
		// budget = sum of the five above = 22,238,642,176; / 0.9 = 24,709,602,417.8 → 24,709,602,418
		// total; headroom = total − budget − context.
		Headroom: 1_917_312_114,
		Total:    24_709_602_418,

		WeightsSource: "formula", Quantization: QuantBF16, KVBytesPerToken: 131_072, KVTokens: 32_768,
		MaxNumBatchedTokens: 8192, MaxNumSeqs: 4, Utilization: 0.9,
	}
	if got != want {
		t.Errorf("Estimate =\n%+v\nwant\n%+v", got, want)
	}
	if got.Budget() != 22_238_642_176 {
		t.Errorf("Budget = %d", got.Budget())
	}
	if sum := got.Budget() + got.CUDAContext + got.Headroom; sum != got.Total {
		t.Errorf("terms sum to %d, total %d", sum, got.Total)
	}
}

func TestEstimateKVVariants(t *testing.T) {
	llama := FromArch(mustLookup(t, "llama-3.1-8b"))
	mistral := FromArch(mustLookup(t, "mistral-7b-v0.1"))
	tests := []struct {
		name     string
		m        Model
		o        Options
		tokens   int64
		kvPerTok int64
	}{
		{"default context 8192, one sequence", llama, Options{}, 8192, 131_072},
		{"context rounds up to blocks", llama, Options{Context: 1000}, 1008, 131_072}, // 63 blocks of 16
		{"fp8 KV halves bytes", llama, Options{Context: 4096, KVCacheDType: "fp8"}, 4096, 65_536},
		{"token budget replaces context × concurrency", llama, Options{Concurrency: 64, TokenBudget: 10_001}, 10_016, 131_072},
		// window 4096 + one block = 4112 tokens per sequence, × 2 sequences
		{"sliding window caps each sequence", mistral, Options{Context: 32768, Concurrency: 2}, 8224, 131_072},
		{"context under the window is not capped", mistral, Options{Context: 2048, Concurrency: 2}, 4096, 131_072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Estimate(tt.m, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if got.KVTokens != tt.tokens || got.KVBytesPerToken != tt.kvPerTok || got.KVCache != tt.tokens*tt.kvPerTok {
				t.Errorf("KV = %d tokens × %d = %d; want %d × %d", got.KVTokens, got.KVBytesPerToken, got.KVCache, tt.tokens, tt.kvPerTok)
			}
		})
	}
}

func TestEstimateEagerAndDefaults(t *testing.T) {
	m := FromArch(mustLookup(t, "qwen2.5-0.5b"))
	e, err := Estimate(m, Options{EnforceEager: true, MaxNumBatchedTokens: 1024, MaxNumSeqs: 8, GPUMemoryUtilization: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if e.CUDAGraphs != 0 || e.MaxNumBatchedTokens != 1024 || e.MaxNumSeqs != 8 || e.Utilization != 0.5 {
		t.Errorf("estimate = %+v", e)
	}
	// At 0.5 the total is twice the budget (which exceeds the 512 MiB context).
	if e.Total != e.Budget()*2 {
		t.Errorf("total %d, budget %d", e.Total, e.Budget())
	}
	// Context defaults to max_position_embeddings when that is shorter than 8192 (Llama-2: 4096).
	l2, _ := Estimate(FromArch(mustLookup(t, "llama-2-7b")), Options{})
	if l2.KVTokens != 4096 || l2.Quantization != QuantFP16 {
		t.Errorf("llama-2-7b: %d tokens, %s", l2.KVTokens, l2.Quantization)
	}
	// DeepSeek-V3 defaults to its released fp8.
	ds, _ := Estimate(FromArch(mustLookup(t, "deepseek-v3")), Options{})
	if ds.Quantization != QuantFP8 {
		t.Errorf("deepseek-v3 quantization %s", ds.Quantization)
	}
}

func TestEstimateMoEAndMLAActivations(t *testing.T) {
	// Mixtral: MLP width = top-2 × (3·14336 + 4096) = 94,208, above the dense 3·14336.
	mix := mustLookup(t, "mixtral-8x7b")
	// per token 2 × (4·4096 + 6144 + 94,208) = 233,472 bytes; × 2048 + 256 seqs × 32000 × 8.
	if got, want := activationWorkspace(mix, 2048, 256), int64(2048*233_472+256*32000*8); got != want {
		t.Errorf("mixtral activations %d, want %d", got, want)
	}
	// DeepSeek-V3: attention width 2·128·192 + 128·128 = 65,536; MLP max(3·18432, 8·(3·2048 + 7168)) = 106,496.
	ds := mustLookup(t, "deepseek-v3")
	if got, want := activationWorkspace(ds, 100, 10), int64(100*2*(4*7168+65_536+106_496)+10*129_280*8); got != want {
		t.Errorf("deepseek activations %d, want %d", got, want)
	}
}

func TestEstimateCheckpointWeights(t *testing.T) {
	m, err := LoadDir(tinyDir(t))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Estimate(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Weights != 2*tinyParams || e.WeightsSource != "checkpoint" || e.Quantization != QuantBF16 {
		t.Errorf("checkpoint weights: %+v", e)
	}
	// fp8 on a 16-bit checkpoint is vLLM's online quantization: the formula sizes it.
	e, err = Estimate(m, Options{Quantization: QuantFP8})
	if err != nil || e.WeightsSource != "formula" || e.Weights != m.Arch.WeightBytes(QuantFP8) {
		t.Errorf("fp8 online: %+v, %v", e, err)
	}
	// int4 cannot be made from a bf16 checkpoint at load time.
	if _, err := Estimate(m, Options{Quantization: QuantInt4AWQ}); err == nil || !strings.Contains(err.Error(), "conflicts with the checkpoint") {
		t.Errorf("awq on bf16 checkpoint: %v", err)
	}
}

func TestEstimateFloat32CheckpointLoadsAt16Bits(t *testing.T) {
	fsys := fstest.MapFS{
		"config.json":       {Data: []byte(strings.Replace(tinyConfig, "bfloat16", "float32", 1))},
		"model.safetensors": {Data: mustEncode(t, llamaTensors(tinyArch(), "F32"), nil)},
	}
	m, err := LoadDir(fsys)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Estimate(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Checkpoint.Bytes != 4*tinyParams || e.Weights != 2*tinyParams {
		t.Errorf("checkpoint %d bytes, estimate %d; want %d and %d", m.Checkpoint.Bytes, e.Weights, 4*tinyParams, 2*tinyParams)
	}
}

func TestEstimateRejectsBadOptionsAllAtOnce(t *testing.T) {
	m := FromArch(mustLookup(t, "llama-3.1-8b"))
	_, err := Estimate(m, Options{Context: 200_000, Concurrency: -1, KVCacheDType: "int2", GPUMemoryUtilization: 1.5, Quantization: "q3"})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"option context: 200000 exceeds llama-3.1-8b's max_position_embeddings 131072",
		"option concurrency: -1", "kv-cache dtype \"int2\"", "gpu-memory-utilization: 1.5", `quantization: unknown "q3"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

func TestEstimateUnmodelledQuantNeedsCheckpoint(t *testing.T) {
	a := tinyArch()
	a.Quantization = "bitsandbytes"
	if _, err := Estimate(FromArch(a), Options{}); err == nil || !strings.Contains(err.Error(), "not modelled") {
		t.Errorf("err = %v", err)
	}
	if _, err := Estimate(FromArch(a), Options{Quantization: QuantInt4AWQ}); err != nil {
		t.Errorf("explicit quantization should override: %v", err)
	}
}

func TestEstimateRefusesOverflow(t *testing.T) {
	// The largest shape Validate allows: 2 × 1024 layers × 4096 kv heads × 4096 head_dim × 2 bytes
	// = 2^36 bytes/token; × 2^40 tokens would overflow int64.
	a := Arch{Name: "huge", Layers: 1024, Hidden: 65536, Heads: 4096, KVHeads: 4096, HeadDim: 4096, Intermediate: 1, Vocab: 1}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Estimate(FromArch(a), Options{Context: 16, TokenBudget: 1 << 40}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("err = %v, want overflow", err)
	}
	if _, err := Estimate(FromArch(a), Options{Concurrency: 1<<20 + 1}); err == nil || !strings.Contains(err.Error(), "option concurrency") {
		t.Errorf("err = %v, want the concurrency bound", err)
	}
	if _, err := FitBoard(FromArch(a), Options{}, nil); err == nil {
		t.Error("FitBoard(nil board) succeeded")
	}
}
