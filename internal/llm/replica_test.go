package llm

import (
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
)

// A fit with the arguments a fit wrote is that fit: the utilization it chose (0.9 for
// qwen2.5-14b fp8 at 4,096 tokens on an H100 1g.20gb instance, 0.95 at 8,192) given back
// evaluates the same attempt, and the other options are kept.
func TestWithVLLMArgsRefitsTheFit(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Profile("1g.20gb")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Lookup("qwen2.5-14b")
	if err != nil {
		t.Fatal(err)
	}
	m := FromArch(a)
	sl := ReplicaSlice(b, p, 0, 1)
	utils := map[float64]bool{}
	for _, ctx := range []int{4096, 8192} {
		o := Options{Quantization: "fp8", KVCacheDType: KVCacheAuto, Context: ctx}
		f, err := FitSlice(m, o, sl)
		if err != nil || !f.Fits {
			t.Fatalf("context %d: %v %v", ctx, err, f.Reasons)
		}
		utils[f.Args.GPUMemoryUtilization] = true
		// the planner's options at the model's default context, then the replica's arguments
		back, err := Options{Quantization: "fp8", KVCacheDType: KVCacheAuto}.WithVLLMArgs(f.Args.Flags())
		if err != nil {
			t.Fatal(err)
		}
		if back.Context != ctx || back.GPUMemoryUtilization != f.Args.GPUMemoryUtilization || back.Quantization != "fp8" {
			t.Errorf("context %d: options from %v are %+v", ctx, f.Args.Flags(), back)
		}
		g, err := FitSlice(m, back, sl)
		if err != nil || g.MaxTokens != f.MaxTokens || g.Args.GPUMemoryUtilization != f.Args.GPUMemoryUtilization {
			t.Errorf("context %d: refit holds %d tokens at %v (%v), the fit %d at %v",
				ctx, g.MaxTokens, g.Args.GPUMemoryUtilization, err, f.MaxTokens, f.Args.GPUMemoryUtilization)
		}
	}
	if len(utils) != 2 {
		t.Errorf("the two contexts fit at the same utilization %v: the case does not tell them apart", utils)
	}
}

func TestWithVLLMArgsForms(t *testing.T) {
	o, err := Options{Context: 100, EnforceEager: false}.WithVLLMArgs([]string{"--max-model-len=2048", "--enforce-eager",
		"--gpu-memory-utilization", "0.5", "--max-model-len", "4096", "--max-num-seqs", "7"})
	if err != nil || o.Context != 4096 || o.GPUMemoryUtilization != 0.5 || !o.EnforceEager || o.MaxNumSeqs != 0 {
		t.Errorf("got %+v, %v; want context 4096 (the last), utilization 0.5, eager, max-num-seqs not taken", o, err)
	}
	for _, bad := range [][]string{{"--max-model-len", "4k"}, {"--gpu-memory-utilization=1.5"}, {"--gpu-memory-utilization", "0"}} {
		if _, err := (Options{}).WithVLLMArgs(bad); err == nil || !strings.Contains(err.Error(), bad[0][:14]) {
			t.Errorf("%v: error %v", bad, err)
		}
	}
}

// A replica's slice: the instance or the whole GPU as CUDA reports it, its memory limit as a
// shared slice of that, and without a limit the planner's share of the memory.
func TestReplicaSlice(t *testing.T) {
	b := h100()
	p, err := b.Profile("3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	all := Slices(b, 10*GiB)
	if got := ReplicaSlice(b, nil, 0, 1); got != all[0] {
		t.Errorf("whole GPU: %+v, Slices says %+v", got, all[0])
	}
	if got := ReplicaSlice(b, nil, 10*GiB, 4); got != all[len(all)-1] {
		t.Errorf("capped: %+v, Slices says %+v", got, all[len(all)-1])
	}
	if got := ReplicaSlice(b, nil, b.MemoryMiB*MiB, 2); got != all[0] {
		t.Errorf("a cap of the board's whole memory: %+v, want the whole GPU %+v", got, all[0])
	}
	mig := ReplicaSlice(b, p, 0, 1)
	if mig.Kind != SliceMIG || mig.MemoryBytes != p.MemoryMiB*MiB {
		t.Errorf("3g.40gb: %+v", mig)
	}
	half := ReplicaSlice(b, p, 0, 2)
	if half.Kind != SliceShared || half.GPUBytes != mig.MemoryBytes || half.MemoryBytes != mig.MemoryBytes/2/MiB*MiB {
		t.Errorf("3g.40gb shared by 2 without a limit: %+v", half)
	}
}
