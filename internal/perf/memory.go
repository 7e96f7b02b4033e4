package perf

import (
	"gpupool.dev/gpupool/internal/llm"
)

// kvCapacity is the slice's KV-cache capacity in tokens and whether the weights fit at all.
// It asks llm's memory model (vLLM's accounting: weights, activation workspace, CUDA graphs,
// CUDA context, utilization) for single-GPU engines, so that perf and the memory estimate agree;
// tensor-parallel engines, which that model does not cover, use the rougher formula
// memory × GPUMemoryUtilization − weights/tp − RuntimeReserveMiB, over KV bytes/tp per token.
func (e *Engine) kvCapacity() int64 {
	if e.r.tp == 1 {
		if n, ok := e.llmCapacity(); ok {
			return n
		}
	}
	o := e.m.opts
	free := e.r.memBytes*o.GPUMemoryUtilization - e.m.weightBytes/e.r.tp - float64(o.RuntimeReserveMiB)*mib
	if free <= 0 {
		return 0
	}
	return int64(free / (e.m.kvBytes / e.r.tp))
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
		MaxNumBatchedTokens: e.maxBatchedTokens, MaxNumSeqs: e.m.opts.MaxSeqs}, sl)
	if err != nil || e.m.opts.KVElemBytes > 2 {
		return 0, false
	}
	if fit.KVAvailableBytes <= 0 || fit.MaxConcurrency < 1 {
		// vLLM refuses to start when one sequence of --max-model-len does not fit the cache.
		return 0, true
	}
	return fit.MaxTokens, true
}

// batchedTokensFor is vLLM v1's --max-num-batched-tokens default for the OpenAI server: 8192 on
// devices of 70 GiB or more, 2048 below (the device vLLM sees: a MIG instance's memory, or the
// whole GPU under MPS and time-slicing).
func batchedTokensFor(deviceBytes float64) int {
	if deviceBytes >= 70*(1<<30) {
		return 8192
	}
	return 2048
}
