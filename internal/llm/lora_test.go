package llm

import (
	"slices"
	"strings"
	"testing"
)

// Llama-3.1-8B: hidden 4096, 32 heads × 128 = 4096 (q), 8 KV heads × 128 = 1024 (k, v),
// intermediate 14336, 32 layers. Per decoder layer and unit of rank, vLLM's slot holds
//
//	qkv_proj      A 3 × 4096 = 12,288   B 4096 + 2·1024 = 6,144
//	o_proj        A 4096                B 4096
//	gate_up_proj  A 2 × 4096 = 8,192    B 2 × 14,336 = 28,672
//	down_proj     A 14,336              B 4096
//	                                    total 81,920 weights
//
// so one rank-16 slot is 81,920 × 16 × 32 layers × 2 bytes = 83,886,080 bytes (80 MiB).
func TestLoRASlotBytesLlama8B(t *testing.T) {
	a := mustLookup(t, "llama-3.1-8b")
	got, err := LoRASlotBytes(a, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got != 83_886_080 {
		t.Errorf("rank-16 slot = %d bytes, want 83,886,080", got)
	}
	// Rank is linear: rank 64 is four times rank 16.
	if r64, _ := LoRASlotBytes(a, 64, 1); r64 != 4*got {
		t.Errorf("rank-64 slot = %d, want %d", r64, 4*got)
	}
	// TP 2: column-parallel B halves (6,144 + 28,672 → 17,408), row-parallel A halves
	// (4096 + 14,336 → 9,216); the rest stays: 12,288 + 8,192 + 4096 + 4096 = 28,672;
	// 17,408 + 9,216 + 28,672 = 55,296 per unit rank and layer → × 16 × 32 × 2 = 56,623,104.
	if tp2, _ := LoRASlotBytes(a, 16, 2); tp2 != 56_623_104 {
		t.Errorf("rank-16 slot at TP 2 = %d, want 56,623,104", tp2)
	}
}

// A PEFT adapter of rank 16 on all seven linear layers holds rank × (in + out) per module:
// q 8,192, k 5,120, v 5,120, o 8,192, gate 18,432, up 18,432, down 18,432 = 81,920, the same
// total as the slot (merging q/k/v and gate/up changes the layout, not the count).
// Attention only (q, k, v, o): 26,624 × 16 × 32 × 2 = 27,262,976 bytes.
func TestLoRAAdapterBytes(t *testing.T) {
	a := mustLookup(t, "llama-3.1-8b")
	all, err := LoRAAdapterBytes(a, 16, nil)
	if err != nil || all != 83_886_080 {
		t.Errorf("all modules = %d, %v; want 83,886,080", all, err)
	}
	attn, err := LoRAAdapterBytes(a, 16, []string{"q_proj", "k_proj", "v_proj", "o_proj"})
	if err != nil || attn != 27_262_976 {
		t.Errorf("attention = %d, %v; want 27,262,976", attn, err)
	}
	if _, err := LoRAAdapterBytes(a, 16, []string{"q_proj", "lm_head", "wq"}); err == nil ||
		!strings.Contains(err.Error(), "lm_head, wq") {
		t.Errorf("unknown modules: %v, want both named", err)
	}
}

func TestLoRARefusesMoEAndMLA(t *testing.T) {
	for _, slug := range []string{"mixtral-8x7b", "deepseek-v3"} {
		a, err := Lookup(slug)
		if err != nil {
			t.Skip(err)
		}
		if _, err := LoRASlotBytes(a, 16, 1); err == nil {
			t.Errorf("%s: sized, want a refusal", slug)
		}
	}
}

// Eight rank-16 slots take 8 × 80 MiB = 640 MiB of the budget before the KV cache: the fit's KV
// capacity drops by exactly that many bytes' worth of blocks, and the flags say so.
func TestFitWithLoRA(t *testing.T) {
	s := sliceNamed(t, h100(), "gpu")
	base := mustFit(t, "llama-3.1-8b", Options{}, s)
	lo := &LoRAOptions{MaxLoRAs: 8, MaxRank: 16, MaxCPULoRAs: 64}
	with := mustFit(t, "llama-3.1-8b", Options{LoRA: lo}, s)
	if with.Memory.LoRA != 8*83_886_080 {
		t.Fatalf("LoRA term %d, want %d", with.Memory.LoRA, 8*83_886_080)
	}
	if d := base.KVAvailableBytes - with.KVAvailableBytes; d != with.Memory.LoRA {
		t.Errorf("KV bytes fell by %d, want the LoRA term %d", d, with.Memory.LoRA)
	}
	if with.Memory.Budget()-base.Memory.Budget() != with.Memory.LoRA {
		t.Errorf("budget does not include the LoRA term")
	}
	flags := with.Args.Flags()
	want := []string{"--enable-lora", "--max-loras", "8", "--max-lora-rank", "16", "--max-cpu-loras", "64"}
	if i := slices.Index(flags, "--enable-lora"); i < 0 || !slices.Equal(flags[i:i+7], want) {
		t.Errorf("flags %v, want %v", flags, want)
	}
	if slices.Contains(base.Args.Flags(), "--enable-lora") {
		t.Error("LoRA flags without LoRA")
	}
}

func TestLoRAOptionsAllProblemsAtOnce(t *testing.T) {
	a := mustLookup(t, "llama-3.1-8b")
	_, err := EstimateLoRA(a, LoRAOptions{MaxLoRAs: 0, MaxRank: 12, MaxCPULoRAs: -1, TensorParallel: 99})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"max-loras", "max-lora-rank", "max-cpu-loras", "tensor-parallel"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	// Host cache: 64 adapters of 27,262,976 bytes.
	m, err := EstimateLoRA(a, LoRAOptions{MaxLoRAs: 4, MaxRank: 16, MaxCPULoRAs: 64, AdapterBytes: 27_262_976})
	if err != nil || m.HostBytes != 64*27_262_976 || m.GPUBytes != 4*83_886_080 {
		t.Errorf("got %+v, %v", m, err)
	}
}

func TestLoRAFlagsModulesSorted(t *testing.T) {
	got := LoRAArgs{MaxLoRAs: 2, MaxRank: 8, Modules: map[string]string{"b": "/a/b", "a": "/a/a"}}.Flags()
	want := []string{"--enable-lora", "--max-loras", "2", "--max-lora-rank", "8", "--max-cpu-loras", "2",
		"--lora-modules", "a=/a/a", "b=/a/b"}
	if !slices.Equal(got, want) {
		t.Errorf("flags %v, want %v", got, want)
	}
	for r, w := range map[int]int{1: 1, 2: 8, 16: 16, 17: 32, 300: 320, 512: 512, 513: 0} {
		if g := RankFor(r); g != w {
			t.Errorf("RankFor(%d) = %d, want %d", r, g, w)
		}
	}
}
