package perf

import (
	"math"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// kvCapacity is the slice's KV-cache capacity in tokens and whether the weights fit at all.
// It asks llm's memory model (vLLM's accounting: weights, activation workspace, CUDA graphs,
// CUDA context, utilization) for single-GPU engines, so that perf and the memory estimate agree;
// tensor-parallel engines, which that model does not cover, use the rougher formula
// memory × GPUMemoryUtilization − weights/tp − reserve, over each GPU's share of a token's KV
// bytes (kvShare), where the reserve is what llm's model gives the whole model for activations,
// non-torch memory and CUDA graphs at the engine's batch limits (an upper bound per GPU: only the
// hidden states and the sampler are replicated), at least RuntimeReserveMiB.
func (e *Engine) kvCapacity() int64 {
	if e.r.tp == 1 {
		if n, ok := e.llmCapacity(); ok {
			return n
		}
	}
	o := e.m.opts
	free := e.r.memBytes*o.GPUMemoryUtilization - e.m.weightBytes/e.r.tp - e.tpReserve()
	if free <= 0 {
		return 0
	}
	return int64(free / (e.m.kvBytes * e.r.kvShare))
}

// tpReserve is a tensor-parallel GPU's memory outside weights and KV cache, bytes: llm's
// activation workspace, non-torch memory and CUDA graphs for the model at the engine's batch
// limits, or RuntimeReserveMiB when larger or when llm cannot estimate the model.
func (e *Engine) tpReserve() float64 {
	floor := float64(e.m.opts.RuntimeReserveMiB) * mib
	mem, err := llm.Estimate(llm.FromArch(e.m.arch), llm.Options{Quantization: e.m.quant, Context: e.m.context(),
		MaxNumBatchedTokens: e.maxBatchedTokens, MaxNumSeqs: e.maxSeqs})
	if err != nil {
		return floor
	}
	return math.Max(floor, float64(mem.Activations+mem.NonTorch+mem.CUDAGraphs))
}

func (e *Engine) llmCapacity() (int64, bool) {
	s, b := e.s, e.s.Board
	sl := llm.Slice{Board: b.Name, Kind: llm.SliceGPU, Name: "gpu", MemoryBytes: int64(e.r.instMemBytes), GPUBytes: int64(e.r.instMemBytes), SMs: b.SMs}
	if s.Profile != nil {
		sl.Kind, sl.Name, sl.SMs = llm.SliceMIG, s.Profile.Name, s.Profile.SMs
	}
	if e.r.memBytes < e.r.instMemBytes {
		sl.Kind, sl.Name, sl.MemoryBytes = llm.SliceShared, "shared", int64(e.r.memBytes)
	}
	kv := llm.KVCacheAuto
	if e.m.opts.KVElemBytes == 1 {
		kv = llm.KVCacheFP8
	}
	ctx := e.m.opts.Context
	if ctx == 0 && e.m.arch.MaxPositions <= 0 {
		ctx = llm.DefaultContext
	}
	fit, err := llm.FitSlice(llm.FromArch(e.m.arch), llm.Options{Quantization: e.m.quant, KVCacheDType: kv, Context: ctx,
		MaxNumBatchedTokens: e.maxBatchedTokens, MaxNumSeqs: e.maxSeqs}, sl)
	if err != nil || e.m.opts.KVElemBytes > 2 {
		return 0, false
	}
	if fit.KVAvailableBytes <= 0 || fit.MaxConcurrency < 1 {
		// vLLM refuses to start when one sequence of --max-model-len does not fit the cache.
		return 0, true
	}
	return fit.MaxTokens, true
}

// VLLMBatchDefaults is the current vLLM release's --max-num-seqs and --max-num-batched-tokens
// defaults for its OpenAI API server on a device of deviceBytes memory of board b (llm's
// VLLMBatchDefaults, the one place they are written down with their source: 1024 sequences and
// 8192 tokens on devices of 70 GiB or more but A100s, 256 and 2048 elsewhere, the budget capped
// at sequences × context).
func VLLMBatchDefaults(b *gpu.Board, deviceBytes float64, context int) (maxSeqs, batchedTokens int) {
	name := ""
	if b != nil {
		name = b.Name
	}
	return llm.VLLMBatchDefaults(name, int64(deviceBytes), context)
}

// batchLimits resolves Options.MaxSeqs and Options.MaxBatchedTokens for the engine: each that is
// 0 takes VLLMBatchDefaults' value for the device the engine sees.
func (e *Engine) batchLimits() (seqs, tokens int) {
	o := e.m.opts
	ds, dt := VLLMBatchDefaults(e.s.Board, e.r.instMemBytes, e.m.context())
	seqs, tokens = o.MaxSeqs, o.MaxBatchedTokens
	if tokens == 0 {
		tokens = dt
		if seqs > 0 && int64(seqs)*int64(e.m.context()) < int64(tokens) {
			tokens = seqs * e.m.context()
		}
	}
	if seqs == 0 {
		seqs = min(ds, tokens)
	}
	return seqs, max(tokens, 1)
}

// context is the engine's --max-model-len: Options.Context, or min(8192, the model's maximum).
func (m *Model) context() int {
	if m.opts.Context > 0 {
		return m.opts.Context
	}
	if m.arch.MaxPositions > 0 && m.arch.MaxPositions < llm.DefaultContext {
		return m.arch.MaxPositions
	}
	return llm.DefaultContext
}

// allReduceBusEfficiency is the fraction of the link's per-direction bandwidth an NCCL ring
// all-reduce reaches as bus bandwidth on large messages: nccl-tests report about 360 GB/s on
// NVLink-4 H100s (450 GB/s each way) and about 230 GB/s on NVLink-3 A100s (300 GB/s).
const allReduceBusEfficiency = 0.8

// busBandwidth is the all-reduce bus bandwidth between tensor-parallel GPUs, bytes/s:
// Options.InterconnectGBs when set, else the board's link (gpu.Board.Interconnect) at
// allReduceBusEfficiency; a board without a link in the catalog falls back to PCIe Gen4.
func (m *Model) busBandwidth(b *gpu.Board) float64 {
	if g := m.opts.InterconnectGBs; g > 0 {
		return g * 1e9
	}
	link := 32.0
	if b != nil && b.Interconnect.GBs > 0 {
		link = b.Interconnect.GBs
	}
	return link * allReduceBusEfficiency * 1e9
}

// kvShare is the part of each token's KV cache one of tp tensor-parallel GPUs holds and reads:
// 1/tp of the KV heads, but at least one head (vLLM replicates KV heads when tp exceeds their
// number); an MLA latent is not split by head, so every GPU holds all of it.
func (m *Model) kvShare(tp float64) float64 {
	if tp <= 1 || m.arch.MLA() {
		return 1
	}
	kvh := float64(m.arch.KVHeads)
	if kvh <= 0 {
		kvh = float64(m.arch.Heads)
	}
	return math.Max(1/tp, 1/kvh)
}

// commSMShare is the fraction of the board's SMs a tensor-parallel all-reduce keeps busy:
// Options.AllReduceSMs thread blocks, one per SM, over the board's SMs (132 when the catalog
// does not say).
func (m *Model) commSMShare(b *gpu.Board) float64 {
	sms := 132.0
	if b != nil && b.SMs > 0 {
		sms = float64(b.SMs)
	}
	return math.Min(1, float64(m.opts.AllReduceSMs)/sms)
}
