package perf

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// LoRAOptions are the constants of the LoRA cost model (doc.go, "LoRA"). Zero values take the
// defaults of DefaultLoRAOptions.
type LoRAOptions struct {
	// KernelLatency is the fixed time of one LoRA kernel launch inside a CUDA graph: vLLM runs a
	// shrink (x·A) and an expand ((x·A)·B) kernel per LoRA-wrapped linear layer, four per decoder
	// layer (qkv, o, gate_up, down), so 8 × layers per step whatever the batch.
	KernelLatency time.Duration `json:"kernelLatency,omitempty"`
	// KernelEfficiency is the part of the engine's FLOP rate the SGMV/BGMV kernels reach: they
	// are thin GEMMs (rank columns) that use the tensor cores poorly. Their weight reads are not
	// derated by it: each distinct adapter's weights stream at the base weights' bandwidth (the
	// launches' fixed time covers a lone adapter's small, latency-bound reads).
	KernelEfficiency float64 `json:"kernelEfficiency,omitempty"`
	// HostLinkEfficiency is the part of the host link's bandwidth a pinned host-to-device copy
	// reaches.
	HostLinkEfficiency float64 `json:"hostLinkEfficiency,omitempty"`
	// CopyLatency is the fixed cost of one of the small copies that activating an adapter issues:
	// vLLM's set_lora copies each wrapped layer's A and B slices separately.
	CopyLatency time.Duration `json:"copyLatency,omitempty"`
	// DiskGBs is how fast an adapter that is not in host memory is read from local disk, GB/s.
	DiskGBs float64 `json:"diskGBs,omitempty"`
	// TokenLatency is the time the LoRA kernels take per token of a step whatever the rank: the
	// cost of kernels that work token by token (vLLM V0's BGMV decode kernels launch a thread
	// block per token and slice, so their time follows the tokens, not the rank). Zero, the
	// default, leaves the kernels to the launches and the roofline term; VLLMV0LoRAOptions sets
	// the value fitted to vLLM V0 (doc.go, "LoRA").
	TokenLatency time.Duration `json:"tokenLatency,omitempty"`
	// Read is which weights the kernels read for each distinct adapter in a step: LoRAReadSlot
	// (vLLM, the default) or LoRAReadOwnRankAttention (S-LoRA).
	Read LoRARead `json:"read,omitempty"`
	// TileRows is how many rows of tokens the kernels compute for a distinct adapter at the
	// least: vLLM V1's lora_shrink and lora_expand give each adapter's tokens tiles of BLOCK_M
	// rows (32 and 64 in their default configs), so an adapter with one token in a decode step
	// still costs a whole tile of multiply-adds. The default, 48, is the mean of the two, the A
	// and B halves of a slot being about equal (Llama-3.1-8B: 38,912 and 43,008 weights per layer
	// and unit of rank). 1 is a kernel that works token by token (Punica's and S-LoRA's BGMV, a
	// thread block per token): no padding, what VLLMV0LoRAOptions and SLoRAOptions set.
	TileRows int `json:"tileRows,omitempty"`
}

// LoRARead is which of an adapter's weights the LoRA kernels of a step read once for each
// distinct adapter in the batch (docs/lora.md, "What a distinct adapter costs").
type LoRARead string

const (
	// LoRAReadSlot: the adapter's whole GPU slot, every wrapped layer at the slot's
	// max_lora_rank. vLLM's lora_shrink and lora_expand take N and K from the stacked tensors
	// (max_lora_rank; an adapter of lower rank is zero-padded) and run for every wrapped layer,
	// whatever modules the adapter targets. The default.
	LoRAReadSlot LoRARead = "slot"
	// LoRAReadOwnRankAttention: q, k, v and o at the adapter's own rank. S-LoRA keeps only those
	// four projections' weights and its BGMV kernels return at once from the thread blocks past
	// the token's own adapter rank (bgmv_multi_lora_rank_shrink_kernel: j >= lora_rank).
	LoRAReadOwnRankAttention LoRARead = "ownRankAttention"
)

// DefaultLoRAOptions are the constants doc.go justifies. KernelLatency and KernelEfficiency are
// assumptions, not fitted: testdata/fidelity/lora.csv holds no published run of today's kernels
// with a base run beside it (docs/lora.md, "Fidelity").
func DefaultLoRAOptions() LoRAOptions {
	return LoRAOptions{
		KernelLatency:      4 * time.Microsecond,
		KernelEfficiency:   0.25,
		HostLinkEfficiency: 0.8,
		CopyLatency:        8 * time.Microsecond,
		DiskGBs:            2,
		Read:               LoRAReadSlot,
		TileRows:           48,
	}
}

// VLLMV0LoRATokenLatency is TokenLatency fitted to the one published pair of runs declared as the
// fit (testdata/fidelity/lora.csv, vllm-pr-11267 with max-loras 1: vLLM V0, A100, Llama-2-7B,
// rank 8, 66.4 % of the base throughput): the step time the model gives that run, less the
// launches and the roofline term, over its tokens per step. TestLoRAV0Fit derives it again.
const VLLMV0LoRATokenLatency = 58 * time.Microsecond

// VLLMV0LoRAOptions are DefaultLoRAOptions with the per-token cost of vLLM V0's LoRA kernels
// (VLLMV0LoRATokenLatency). The engines gpupool renders are not V0; this profile exists so that
// the published runs of kernels that work token by token (vLLM V0's, and S-LoRA's, whose decode
// kernel is Punica's BGMV too) are predicted by a stated structure rather than listed as misses.
// No S-LoRA row was fitted: they are held out (testdata/fidelity/lora.csv).
func VLLMV0LoRAOptions() LoRAOptions {
	o := DefaultLoRAOptions()
	o.TokenLatency = VLLMV0LoRATokenLatency
	o.TileRows = 1
	return o
}

// SLoRAOptions are VLLMV0LoRAOptions for S-LoRA's kernels: the same per-token cost (its decode
// kernel is Punica's BGMV, as vLLM V0's was), with each distinct adapter read as S-LoRA reads it,
// q, k, v and o at the adapter's own rank (LoRAReadOwnRankAttention). No constant is fitted to
// S-LoRA: its published runs are held out (testdata/fidelity/lora.csv).
func SLoRAOptions() LoRAOptions {
	o := VLLMV0LoRAOptions()
	o.Read = LoRAReadOwnRankAttention
	return o
}

func (o LoRAOptions) withDefaults() LoRAOptions {
	d := DefaultLoRAOptions()
	if o.KernelLatency == 0 {
		o.KernelLatency = d.KernelLatency
	}
	if o.KernelEfficiency == 0 {
		o.KernelEfficiency = d.KernelEfficiency
	}
	if o.HostLinkEfficiency == 0 {
		o.HostLinkEfficiency = d.HostLinkEfficiency
	}
	if o.CopyLatency == 0 {
		o.CopyLatency = d.CopyLatency
	}
	if o.DiskGBs == 0 {
		o.DiskGBs = d.DiskGBs
	}
	if o.Read == "" {
		o.Read = d.Read
	}
	if o.TileRows == 0 {
		o.TileRows = d.TileRows
	}
	return o
}

func (o LoRAOptions) validate() error {
	var errs []error
	if o.KernelLatency < 0 || o.KernelLatency > time.Millisecond {
		errs = append(errs, fmt.Errorf("kernelLatency: %v is outside [0, 1ms]", o.KernelLatency))
	}
	if !(o.KernelEfficiency > 0 && o.KernelEfficiency <= 1) {
		errs = append(errs, fmt.Errorf("kernelEfficiency: %v is outside (0, 1]", o.KernelEfficiency))
	}
	if !(o.HostLinkEfficiency > 0 && o.HostLinkEfficiency <= 1) {
		errs = append(errs, fmt.Errorf("hostLinkEfficiency: %v is outside (0, 1]", o.HostLinkEfficiency))
	}
	if o.CopyLatency < 0 || o.CopyLatency > time.Millisecond {
		errs = append(errs, fmt.Errorf("copyLatency: %v is outside [0, 1ms]", o.CopyLatency))
	}
	if !(o.DiskGBs > 0 && o.DiskGBs <= 1000) {
		errs = append(errs, fmt.Errorf("diskGBs: %v is outside (0, 1000]", o.DiskGBs))
	}
	if o.TokenLatency < 0 || o.TokenLatency > time.Millisecond {
		errs = append(errs, fmt.Errorf("tokenLatency: %v is outside [0, 1ms]", o.TokenLatency))
	}
	if o.TileRows < 1 || o.TileRows > 256 {
		errs = append(errs, fmt.Errorf("tileRows: %d is outside [1, 256]", o.TileRows))
	}
	if o.Read != LoRAReadSlot && o.Read != LoRAReadOwnRankAttention {
		errs = append(errs, fmt.Errorf("read: %q is neither %q nor %q", o.Read, LoRAReadSlot, LoRAReadOwnRankAttention))
	}
	return errors.Join(errs...)
}

// LoRACost is the LoRA cost model of one engine: what adapters add to a step and what bringing
// an adapter into a GPU slot costs. It is immutable.
type LoRACost struct {
	e        *Engine
	o        LoRAOptions
	perRank  float64 // LoRA weights per unit of rank on one GPU, all wrapped layers (llm.LoRASlotBytes / 2)
	attnRank float64 // LoRA weights per unit of rank on one GPU, q, k, v and o only (sharded evenly under TP)
	kernels  float64 // LoRA kernel launches per step
	copies   float64 // small copies per adapter activation
	hostLink float64 // host-to-device bytes/s
}

// loraKernelsPerLayer: shrink and expand for each of qkv_proj, o_proj, gate_up_proj, down_proj,
// one launch each whatever the distinct adapters in the batch (vLLM's lora_shrink and
// lora_expand put every adapter, and every slice of a merged layer, on one grid).
const loraKernelsPerLayer = 8

// loraAttention are the projections S-LoRA's adapters carry.
var loraAttention = []string{"q_proj", "k_proj", "v_proj", "o_proj"}

// loraCopiesPerLayer: A and B of qkv (3 slices each), o, gate_up (2 slices each), down.
const loraCopiesPerLayer = 2 * (3 + 1 + 2 + 1)

// LoRA returns e's LoRA cost model under o.
func (e *Engine) LoRA(o LoRAOptions) (*LoRACost, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("lora cost of %s: %w", e.m.name, err)
	}
	slot, err := llm.LoRASlotBytes(e.m.arch, 1, int(e.r.tp))
	if err != nil {
		return nil, fmt.Errorf("lora cost of %s: %w", e.m.name, err)
	}
	attn, err := llm.LoRAAdapterBytes(e.m.arch, 1, loraAttention)
	if err != nil {
		return nil, fmt.Errorf("lora cost of %s: %w", e.m.name, err)
	}
	return &LoRACost{
		e: e, o: o, perRank: float64(slot) / 2, attnRank: float64(attn) / 2 / e.r.tp,
		kernels:  loraKernelsPerLayer * e.m.layers,
		copies:   loraCopiesPerLayer * e.m.layers,
		hostLink: HostLinkGBs(e.s.Board.Name) * 1e9 * o.HostLinkEfficiency,
	}, nil
}

// StepOverhead is the time the LoRA kernels add to a step of tokens tokens (prefill and decode)
// that use adapters distinct adapters, on slots of rank maxRank: StepOverheadMix with every
// adapter of rank maxRank.
func (c *LoRACost) StepOverhead(tokens, adapters, maxRank int) time.Duration {
	return c.StepOverheadMix(tokens, adapters, maxRank, float64(maxRank))
}

// StepOverheadMix is the time the LoRA kernels add to a step of tokens tokens that use adapters
// distinct adapters of mean rank meanRank on slots of rank maxRank: the launches, a fixed number
// a step whatever the adapters; the larger of reading each distinct adapter's weights once at the
// base weights' bandwidth (Read says which weights: vLLM's whole max-rank slot, S-LoRA's q, k, v
// and o at the adapter's own rank) and 2 FLOPs per weight for each row computed, at
// KernelEfficiency of the FLOP rate, the rows being the tokens or, when more, TileRows for each
// distinct adapter; plus TokenLatency per token. A step without adapters costs nothing extra.
func (c *LoRACost) StepOverheadMix(tokens, adapters, maxRank int, meanRank float64) time.Duration {
	if tokens <= 0 || adapters <= 0 || maxRank <= 0 {
		return 0
	}
	r := c.e.alone
	weights := c.perRank * float64(maxRank)
	if c.o.Read == LoRAReadOwnRankAttention {
		weights = c.attnRank * math.Min(math.Max(meanRank, 1), float64(maxRank))
	}
	distinct := float64(min(adapters, tokens))
	bytes := distinct * weights * 2
	flops := 2 * math.Max(float64(tokens), distinct*float64(c.o.TileRows)) * weights
	busy := math.Max(bytes/r.bwW, flops/(r.flops*c.o.KernelEfficiency))
	return seconds(c.kernels*c.o.KernelLatency.Seconds() + busy + float64(tokens)*c.o.TokenLatency.Seconds())
}

// SlotBytes is one adapter slot of rank on one GPU of the engine (llm.LoRASlotBytes).
func (c *LoRACost) SlotBytes(rank int) int64 { return int64(c.perRank) * int64(rank) * 2 }

// LoadTime is how long activating an adapter of bytes takes: a copy from pinned host memory over
// the host link plus vLLM's per-slice copies, and first a read from disk when it is not among
// the max_cpu_loras adapters kept in host memory.
func (c *LoRACost) LoadTime(bytes int64, fromDisk bool) time.Duration {
	if bytes <= 0 {
		return 0
	}
	t := float64(bytes)/c.hostLink + c.copies*c.o.CopyLatency.Seconds()
	if fromDisk {
		t += float64(bytes) / (c.o.DiskGBs * 1e9)
	}
	return seconds(t)
}

// HostLinkGBs is the bandwidth of a board's link to host memory, GB/s per direction: PCIe Gen4
// x16 on Ampere boards (32), PCIe Gen5 x16 on Hopper and Blackwell boards (64), NVLink-C2C on
// Grace superchips (450, GH200/GB200/GB300 datasheets).
func HostLinkGBs(board string) float64 {
	switch {
	case strings.HasPrefix(board, "GH200"), strings.HasPrefix(board, "GB200"), strings.HasPrefix(board, "GB300"):
		return 450
	case strings.HasPrefix(board, "A100"), strings.HasPrefix(board, "A30"), strings.HasPrefix(board, "A10"),
		strings.HasPrefix(board, "L4"), strings.HasPrefix(board, "L40"):
		return 32
	}
	return 64
}

// PlaceLoRA is a on a whole GPU of b at quantization q with DefaultOptions and DefaultLoRAOptions:
// the engine of a shared LoRA group and its cost model, at the power-limited boost clock.
func PlaceLoRA(a llm.Arch, q llm.Quantization, b *gpu.Board) (*Engine, *LoRACost, error) {
	return PlaceLoRAAt(a, q, b, 0)
}

// PlaceLoRAAt is PlaceLoRA with the GPU's graphics clock locked at clock, a fraction of boost
// (Slice.ClockCap; 0: no lock): the engine of a group whose energy class locks its GPU.
func PlaceLoRAAt(a llm.Arch, q llm.Quantization, b *gpu.Board, clock float64) (*Engine, *LoRACost, error) {
	m, err := New(a, q, DefaultOptions())
	if err != nil {
		return nil, nil, err
	}
	e, err := m.Place(Slice{Board: b, ClockCap: clock})
	if err != nil {
		return nil, nil, err
	}
	c, err := e.LoRA(LoRAOptions{})
	if err != nil {
		return nil, nil, err
	}
	return e, c, nil
}
