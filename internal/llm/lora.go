package llm

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// LoRAOptions are an engine's LoRA settings (vLLM --enable-lora and its limits). An engine with
// LoRA serves many adapters of one base model in one batch.
type LoRAOptions struct {
	// MaxLoRAs is --max-loras: adapter slots on the GPU, the most distinct adapters in one batch.
	MaxLoRAs int `json:"maxLoras"`
	// MaxRank is --max-lora-rank, one of LoRARanks; every slot is this large.
	MaxRank int `json:"maxLoraRank"`
	// MaxCPULoRAs is --max-cpu-loras, ≥ MaxLoRAs: adapters kept in host memory; 0 is MaxLoRAs
	// (vLLM's default).
	MaxCPULoRAs int `json:"maxCpuLoras,omitempty"`
	// AdapterBytes is the largest adapter's tensor bytes (Adapter.Bytes); 0 uses a full-rank
	// adapter on every linear layer, SlotBytes.
	AdapterBytes int64 `json:"adapterBytes,omitempty"`
	// TensorParallel is the engine's tensor-parallel size; 0 is 1. Slots are per GPU.
	TensorParallel int `json:"tensorParallel,omitempty"`
}

// LoRAMemory is what LoRA adds to an engine.
type LoRAMemory struct {
	// SlotBytes is one adapter slot on one GPU: max_lora_rank × (in + out) of every LoRA-wrapped
	// linear layer, in the model's dtype.
	SlotBytes int64 `json:"slotBytes"`
	// GPUBytes is MaxLoRAs × SlotBytes, allocated at start-up whatever the adapters are.
	GPUBytes int64 `json:"gpuBytes"`
	// HostBytes is MaxCPULoRAs × the adapter's bytes: vLLM's host-memory LRU cache of adapters.
	HostBytes int64 `json:"hostBytes"`
}

// loraLinear is one linear layer that vLLM wraps with LoRA: A is rank × In per slice, B is
// Out × rank summed over slices (QKV has three slices, gate_up two).
type loraLinear struct {
	name    string
	inFull  int64 // input width
	outFull int64 // output width, summed over the slices
	slices  int64
	rowPar  bool // row-parallel: input sharded; else column-parallel: output sharded
}

// loraLinears lists a dense GQA model's LoRA-wrapped layers per decoder layer, as vLLM builds
// them: qkv_proj (merged, 3 slices), o_proj, gate_up_proj (merged, 2 slices), down_proj.
func (a Arch) loraLinears() ([]loraLinear, error) {
	if a.MLA() || a.MoE() {
		return nil, fmt.Errorf("LoRA sizing covers dense models with grouped-query attention; %s (%s) is not one", a.Name, a.Family)
	}
	h, hd := int64(a.Hidden), int64(a.HeadDimension())
	q, kv, inter := int64(a.Heads)*hd, int64(a.KVHeads)*hd, int64(a.Intermediate)
	return []loraLinear{
		{name: "qkv_proj", inFull: h, outFull: q + 2*kv, slices: 3},
		{name: "o_proj", inFull: q, outFull: h, slices: 1, rowPar: true},
		{name: "gate_up_proj", inFull: h, outFull: 2 * inter, slices: 2},
		{name: "down_proj", inFull: inter, outFull: h, slices: 1, rowPar: true},
	}, nil
}

// LoRASlotBytes is one adapter slot of rank on one GPU of a tp-way engine. vLLM
// (vllm/lora/layers/base_linear.py, create_lora_weights) allocates for every wrapped layer and
// every slice lora_a_stacked (max_loras, 1, max_lora_rank, input_size) and lora_b_stacked
// (max_loras, 1, output_size, max_lora_rank) in lora_dtype (auto: the model's dtype, 2 bytes).
// Column-parallel layers (qkv, gate_up) shard the output, row-parallel ones (o, down) the input;
// the other side stays whole (fully_sharded_loras off, the default). vLLM wraps every supported
// layer (vllm/lora/models.py, _create_lora_modules), so the slot's size does not depend on which
// modules an adapter targets.
func LoRASlotBytes(a Arch, rank, tp int) (int64, error) {
	ls, err := a.loraLinears()
	if err != nil {
		return 0, err
	}
	if tp < 1 {
		tp = 1
	}
	var perLayer int64
	for _, l := range ls {
		in, out := l.inFull, l.outFull/int64(tp)
		if l.rowPar {
			in, out = l.inFull/int64(tp), l.outFull
		}
		perLayer += l.slices*int64(rank)*in + out*int64(rank)
	}
	return perLayer * int64(a.Layers) * activationBytes, nil
}

// LoRAAdapterBytes is the tensor bytes of an adapter of rank that targets the given modules of
// a (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; nil is all of them), at
// 2 bytes per weight: what a PEFT adapter_model.safetensors holds.
func LoRAAdapterBytes(a Arch, rank int, modules []string) (int64, error) {
	if a.MLA() || a.MoE() {
		return 0, fmt.Errorf("LoRA sizing covers dense models with grouped-query attention; %s (%s) is not one", a.Name, a.Family)
	}
	h, hd := int64(a.Hidden), int64(a.HeadDimension())
	q, kv, inter := int64(a.Heads)*hd, int64(a.KVHeads)*hd, int64(a.Intermediate)
	shape := map[string][2]int64{
		"q_proj": {h, q}, "k_proj": {h, kv}, "v_proj": {h, kv}, "o_proj": {q, h},
		"gate_proj": {h, inter}, "up_proj": {h, inter}, "down_proj": {inter, h},
	}
	if modules == nil {
		modules = LoRAModules
	}
	var n int64
	var unknown []string
	for _, m := range modules {
		s, ok := shape[m]
		if !ok {
			unknown = append(unknown, m)
			continue
		}
		n += int64(rank) * (s[0] + s[1])
	}
	if len(unknown) > 0 {
		return 0, fmt.Errorf("modules %s are not linear layers of %s (valid: %s)", strings.Join(unknown, ", "), a.Name, strings.Join(LoRAModules, ", "))
	}
	return n * int64(a.Layers) * activationBytes, nil
}

// LoRAModules are the linear layers of a dense decoder layer that a PEFT adapter may target.
var LoRAModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// validate reports every problem of o at once.
func (o LoRAOptions) validate() []error {
	var errs []error
	if o.MaxLoRAs < 1 || o.MaxLoRAs > maxSequences {
		errs = append(errs, fmt.Errorf("option max-loras: %d is outside [1, %d]", o.MaxLoRAs, maxSequences))
	}
	if !slices.Contains(LoRARanks, o.MaxRank) {
		errs = append(errs, fmt.Errorf("option max-lora-rank: %d is not one of vLLM's %v", o.MaxRank, LoRARanks))
	}
	if o.MaxCPULoRAs != 0 && (o.MaxCPULoRAs < o.MaxLoRAs || o.MaxCPULoRAs > maxSequences) {
		errs = append(errs, fmt.Errorf("option max-cpu-loras: %d must be between max-loras (%d) and %d", o.MaxCPULoRAs, o.MaxLoRAs, maxSequences))
	}
	if o.AdapterBytes < 0 || o.AdapterBytes > 1<<40 {
		errs = append(errs, fmt.Errorf("option adapter bytes: %d is outside [0, 1 TiB]", o.AdapterBytes))
	}
	if o.TensorParallel < 0 || o.TensorParallel > 64 {
		errs = append(errs, fmt.Errorf("option tensor-parallel: %d is outside [0, 64]", o.TensorParallel))
	}
	return errs
}

// EstimateLoRA is what o adds to a's engine: slots on each GPU and the host cache.
func EstimateLoRA(a Arch, o LoRAOptions) (LoRAMemory, error) {
	if errs := o.validate(); len(errs) > 0 {
		return LoRAMemory{}, errors.Join(errs...)
	}
	slot, err := LoRASlotBytes(a, o.MaxRank, o.TensorParallel)
	if err != nil {
		return LoRAMemory{}, err
	}
	cpu := o.MaxCPULoRAs
	if cpu == 0 {
		cpu = o.MaxLoRAs
	}
	ab := o.AdapterBytes
	if ab == 0 {
		ab, _ = LoRAAdapterBytes(a, o.MaxRank, nil)
	}
	return LoRAMemory{SlotBytes: slot, GPUBytes: slot * int64(o.MaxLoRAs), HostBytes: ab * int64(cpu)}, nil
}

// LoRAArgs are the vLLM flags of a LoRA engine.
type LoRAArgs struct {
	MaxLoRAs    int `json:"maxLoras"`
	MaxRank     int `json:"maxLoraRank"`
	MaxCPULoRAs int `json:"maxCpuLoras"`
	// Modules maps each adapter's served name to its path (--lora-modules name=path).
	Modules map[string]string `json:"loraModules,omitempty"`
}

// Flags renders --enable-lora and its limits, then one --lora-modules name=path per adapter in
// name order (vLLM's flag takes several values).
func (l LoRAArgs) Flags() []string {
	f := []string{"--enable-lora",
		"--max-loras", strconv.Itoa(l.MaxLoRAs),
		"--max-lora-rank", strconv.Itoa(l.MaxRank),
		"--max-cpu-loras", strconv.Itoa(max(l.MaxCPULoRAs, l.MaxLoRAs)),
	}
	if len(l.Modules) == 0 {
		return f
	}
	names := make([]string, 0, len(l.Modules))
	for n := range l.Modules {
		names = append(names, n)
	}
	sort.Strings(names)
	f = append(f, "--lora-modules")
	for _, n := range names {
		f = append(f, n+"="+l.Modules[n])
	}
	return f
}

// RankFor is the smallest of vLLM's --max-lora-rank values that covers rank, 0 when none does.
func RankFor(rank int) int {
	for _, r := range LoRARanks {
		if r >= rank {
			return r
		}
	}
	return 0
}
