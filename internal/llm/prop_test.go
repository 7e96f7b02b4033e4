package llm

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// genArch draws a valid architecture: dense GQA, MoE, or MLA.
func genArch(t *rapid.T) Arch {
	heads := rapid.IntRange(1, 64).Draw(t, "heads")
	kvDiv := rapid.SampledFrom(divisors(heads)).Draw(t, "kvHeads")
	hd := rapid.SampledFrom([]int{32, 64, 80, 128, 256}).Draw(t, "headDim")
	a := Arch{
		Name: "gen", Layers: rapid.IntRange(1, 128).Draw(t, "layers"),
		Heads: heads, KVHeads: kvDiv, HeadDim: hd, Hidden: heads * hd,
		Intermediate: rapid.IntRange(1, 65536).Draw(t, "intermediate"),
		Vocab:        rapid.IntRange(1, 300_000).Draw(t, "vocab"),
		MaxPositions: rapid.IntRange(1024, 1<<20).Draw(t, "maxPos"),
		QKVBias:      rapid.Bool().Draw(t, "bias"), TiedEmbeddings: rapid.Bool().Draw(t, "tied"),
	}
	switch rapid.IntRange(0, 2).Draw(t, "kind") {
	case 1:
		a.Experts = rapid.IntRange(2, 256).Draw(t, "experts")
		a.ExpertsPerToken = rapid.IntRange(1, a.Experts).Draw(t, "topk")
		a.SharedExperts = rapid.IntRange(0, 2).Draw(t, "shared")
		a.MoEIntermediate = rapid.IntRange(0, 8192).Draw(t, "moeInter")
		a.FirstDenseLayers = rapid.IntRange(0, a.Layers).Draw(t, "dense")
	case 2:
		a.KVLoraRank = rapid.IntRange(1, 1024).Draw(t, "kvLora")
		a.QLoraRank = rapid.IntRange(0, 2048).Draw(t, "qLora")
		a.QKNopeHeadDim = rapid.IntRange(1, 256).Draw(t, "nope")
		a.QKRopeHeadDim = rapid.IntRange(1, 128).Draw(t, "rope")
		a.VHeadDim = rapid.IntRange(1, 256).Draw(t, "v")
	}
	return a
}

func divisors(n int) []int {
	var d []int
	for i := 1; i <= n; i++ {
		if n%i == 0 {
			d = append(d, i)
		}
	}
	return d
}

func TestPropArchInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genArch(t)
		if err := a.Validate(); err != nil {
			t.Fatalf("generated arch invalid: %v", err)
		}
		total, active := a.Params()
		if active <= 0 || active > total {
			t.Fatalf("active %d, total %d", active, total)
		}
		if !a.MoE() && active != total {
			t.Fatalf("dense model: active %d ≠ total %d", active, total)
		}
		bf16, fp8, int8, awq, gptq := a.WeightBytes(QuantBF16), a.WeightBytes(QuantFP8), a.WeightBytes(QuantInt8), a.WeightBytes(QuantInt4AWQ), a.WeightBytes(QuantInt4GPTQ)
		if bf16 != 2*total {
			t.Fatalf("bf16 %d ≠ 2 × %d params", bf16, total)
		}
		if !(awq < gptq && fp8 <= int8 && fp8 < bf16) {
			t.Fatalf("ordering broken: bf16 %d fp8 %d int8 %d awq %d gptq %d", bf16, fp8, int8, awq, gptq)
		}
		// 4-bit weights are smaller than 8-bit ones only where a projection's input fills a
		// quantization group: each group of int4GroupSize inputs carries a 16-bit scale and a
		// 4-bit zero, so a projection with one input (intermediate size 1) takes 3 bytes a weight
		// under AWQ against 1 under FP8. Real checkpoints' inputs are multiples of the group size.
		if minLinearInputs(a) >= int4GroupSize && !(gptq < int8+int8 && awq < fp8) {
			t.Fatalf("4-bit ordering broken: bf16 %d fp8 %d int8 %d awq %d gptq %d", bf16, fp8, int8, awq, gptq)
		}
		if a.KVBytesPerToken(2) != 2*a.KVBytesPerToken(1) || a.KVBytesPerToken(1) <= 0 {
			t.Fatalf("KV bytes %d / %d", a.KVBytesPerToken(2), a.KVBytesPerToken(1))
		}
	})
}

func TestPropFitInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		slug := rapid.SampledFrom([]string{"qwen2.5-0.5b", "llama-3.2-1b", "llama-3.1-8b", "mistral-7b-v0.1", "mixtral-8x7b"}).Draw(t, "model")
		a, err := Lookup(slug)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{
			Context:             rapid.IntRange(16, 32768).Draw(t, "context"),
			Concurrency:         rapid.IntRange(0, 64).Draw(t, "concurrency"),
			KVCacheDType:        rapid.SampledFrom([]string{"auto", "fp8"}).Draw(t, "kv"),
			MaxNumBatchedTokens: 2048, // fixed: vLLM's default changes at 70 GiB, which is not monotone
		}
		mib := rapid.Int64Range(1024, 200_000).Draw(t, "slice MiB")
		small := Slice{Board: "B", Kind: SliceMIG, Name: "s", MemoryBytes: mib * MiB, GPUBytes: mib * MiB}
		big := small
		big.MemoryBytes += rapid.Int64Range(0, 100_000).Draw(t, "extra MiB") * MiB
		big.GPUBytes = big.MemoryBytes
		fs, err := FitSlice(FromArch(a), o, small)
		if err != nil {
			t.Fatal(err)
		}
		fb, _ := FitSlice(FromArch(a), o, big)
		if fs.Fits && !fb.Fits {
			t.Fatalf("fits %d MiB but not %d MiB", mib, big.MemoryBytes/MiB)
		}
		if fs.Fits {
			m := fs.Memory
			if fs.BudgetBytes < m.Budget() || fs.BudgetBytes+m.CUDAContext > small.MemoryBytes {
				t.Fatalf("fit breaks the budget: %+v", fs)
			}
			if fs.MaxTokens < m.KVTokens || fs.MaxConcurrency < 1 || fs.MaxTokens%DefaultBlockSize != 0 {
				t.Fatalf("fit without capacity: %+v", fs)
			}
			if u := fs.Args.GPUMemoryUtilization; u <= 0 || u > MaxAutoUtilization {
				t.Fatalf("utilization %v", u)
			}
		}
		plain := fs.Args.GPUMemoryUtilization == DefaultUtilization && !fs.Args.EnforceEager
		if (!fs.Fits && len(fs.Reasons) == 0) || (fs.Fits && plain && len(fs.Reasons) > 0) {
			t.Fatalf("reasons %q do not match fits %v", fs.Reasons, fs.Fits)
		}
	})
}

func TestPropHeaderRoundTrip(t *testing.T) {
	dtypes := []string{"BF16", "F16", "F32", "I32", "U8", "F8_E4M3", "F64", "BOOL", "F4"}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "tensors")
		var ts []Tensor
		var want int64
		for i := 0; i < n; i++ {
			dt := rapid.SampledFrom(dtypes).Draw(t, "dtype")
			shape := rapid.SliceOfN(rapid.Int64Range(0, 9), 0, 3).Draw(t, "shape")
			tt := Tensor{Name: fmt.Sprintf("t%d", i), DType: dt, Shape: shape}
			if tt.Elements()*dtypeBits[dt]%8 != 0 {
				tt.Shape = append(tt.Shape, 2) // sub-byte dtypes need whole bytes
			}
			want += tt.Elements() * dtypeBits[dt] / 8
			ts = append(ts, tt)
		}
		file, err := EncodeHeader(ts, map[string]string{"k": "v"})
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(file)
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		var got int64
		for _, s := range h.ByDType() {
			got += s.Bytes
		}
		if len(h.Tensors) != n || h.DataBytes != want || got != want {
			t.Fatalf("%d tensors, %d data bytes, %d summed; want %d, %d", len(h.Tensors), h.DataBytes, got, n, want)
		}
	})
}

// minLinearInputs is the smallest input width (columns) of a's quantized projections.
func minLinearInputs(a Arch) int64 {
	m := int64(-1)
	for _, g := range a.appendTensors(nil) {
		if g.role == roleLinear && (m < 0 || g.cols < m) {
			m = g.cols
		}
	}
	return m
}

// TestTensorGroupsFitBuffer: every catalog model lists at most maxTensorGroups weight groups,
// the buffer WeightBytes and Params list them into, and the largest shape the lister can make
// (MLA with a query LoRA, QKV bias unused by MLA, MoE with shared experts, untied lm_head) does
// too; WeightBytes allocates nothing.
func TestTensorGroupsFitBuffer(t *testing.T) {
	archs := Catalog()
	widest := mustLookup(t, "deepseek-v3")
	widest.TiedEmbeddings = false
	widest.SharedExperts = max(widest.SharedExperts, 1)
	widest.QLoraRank = max(widest.QLoraRank, 1536)
	archs = append(archs, widest)
	for _, a := range archs {
		if n := len(a.appendTensors(nil)); n > maxTensorGroups {
			t.Errorf("%s lists %d weight groups, more than the buffer's %d", a.Name, n, maxTensorGroups)
		}
	}
	a := mustLookup(t, "llama-3.1-8b")
	if allocs := testing.AllocsPerRun(100, func() { a.WeightBytes(QuantInt4GPTQ) }); allocs != 0 {
		t.Errorf("WeightBytes allocates %v times a call, want 0", allocs)
	}
}
