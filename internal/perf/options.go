package perf

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Options holds every constant of the model. DefaultOptions documents each value and its source;
// doc.go explains the equations they enter. A zero Options is not valid: start from DefaultOptions
// and override fields.
type Options struct {
	// MFU is the fraction of the tensor-core peak a large GEMM reaches at boost clock.
	MFU float64 `json:"mfu"`
	// FP8MFU is the fraction of the FP8 tensor-core peak an FP8 GEMM (fp8 weights) reaches.
	FP8MFU float64 `json:"fp8Mfu"`
	// WeightBWEfficiency is the fraction of peak HBM bandwidth a long contiguous stream reaches:
	// weights, GEMM inputs and outputs, element-wise kernels and the KV-cache writes. The fixed
	// cost of each layer's kernels is LayerLatency, not part of this fraction.
	WeightBWEfficiency float64 `json:"weightBwEfficiency"`
	// KVBWEfficiency is the fraction of peak HBM bandwidth the decode attention kernel reaches
	// while reading the KV cache (a paged cache gathers blocks; a dense one streams).
	KVBWEfficiency float64 `json:"kvBwEfficiency"`
	// BWSaturationExponent is k in g(r) = 1 − (1 − r)^k, the fraction of its bandwidth share a
	// client with r times as large a share of the SMs can pull; see doc.go.
	BWSaturationExponent float64 `json:"bwSaturationExponent"`
	// PowerDemandRatio is how far the board's dynamic power at boost clock with every SM running
	// tensor work exceeds its power budget; it sets the clock when many SMs are busy.
	PowerDemandRatio float64 `json:"powerDemandRatio"`
	// LayerLatency is the fixed GPU time each decoder layer's kernels cost per step besides their
	// FLOPs and bytes: launch gaps, ramp-up until enough bytes are in flight, and tails. It does
	// not shrink with a bigger slice and is there even when the step replays a CUDA graph.
	LayerLatency time.Duration `json:"layerLatency"`
	// StepOverhead is the per-step time the GPU waits for the host (scheduling, sampling,
	// launches): it does not shrink with a bigger slice.
	StepOverhead time.Duration `json:"stepOverhead"`
	// ActHiddenPasses and ActInterPasses count how many hidden-sized and intermediate-sized
	// vectors each token reads or writes in one layer in element-wise kernels (norms, residual
	// adds, rotary, activation function, the cache write's read of k and v), at 2 bytes each.
	// GEMM inputs and outputs are not counted here: they overlap the GEMM's own work and enter
	// its roofline (doc.go, "Step time").
	ActHiddenPasses float64 `json:"actHiddenPasses"`
	ActInterPasses  float64 `json:"actInterPasses"`
	// TimeSliceQuantum is the time one context keeps the GPU under time-slicing before the
	// scheduler switches to the next context with pending work.
	TimeSliceQuantum time.Duration `json:"timeSliceQuantum"`
	// ContextSwitch is the cost of one time-slice context switch (save and restore SM state);
	// each neighbour's slice costs two, to it and back.
	ContextSwitch time.Duration `json:"contextSwitch"`
	// MPSOverlapGain, when on, lets busy MPS clients raise each other's efficiencies: the
	// aggregate efficiency of n busy clients is 1-(1-e)^n for MFU and the bandwidth fractions.
	// Off by default: measured on an H200, two saturated clients gain 3.6 % (prefill) and 11 %
	// (decode) in aggregate, which LayerLatency overlapping the other client's work explains;
	// the gain predicts 25 %. Kept for comparison.
	MPSOverlapGain bool `json:"mpsOverlapGain"`
	// AllReduceLatency and InterconnectGBs describe a tensor-parallel all-reduce: a fixed latency
	// plus a ring transfer at the interconnect's bus bandwidth. InterconnectGBs 0: the board's
	// link from the catalog (gpu.Board.Interconnect) at 80 % (NCCL's bus bandwidth).
	AllReduceLatency time.Duration `json:"allReduceLatency"`
	InterconnectGBs  float64       `json:"interconnectGBs"`
	// AllReduceSMs is how many SMs an all-reduce kernel occupies: the thread blocks it
	// launches, one per SM. An all-reduce is bound by the links, not by the SMs or HBM, so over
	// its time the board draws the memory-bound power of these SMs only (power.go).
	AllReduceSMs int `json:"allReduceSMs"`
	// IdlePowerFraction is a board's idle power as a fraction of its TDP; MemoryPowerFraction the
	// dynamic power (above idle) of memory-bound kernels pulling the whole bandwidth, as a
	// fraction of TDP − idle (power.go).
	IdlePowerFraction   float64 `json:"idlePowerFraction"`
	MemoryPowerFraction float64 `json:"memoryPowerFraction"`
	// EfficiencyClock is the graphics clock, as a fraction of boost, the efficiency energy class
	// locks GPUs to.
	EfficiencyClock float64 `json:"efficiencyClock"`
	// KVElemBytes is the width of one cached K or V element (2 for bf16/fp16, 1 for fp8).
	KVElemBytes int `json:"kvElemBytes"`
	// MaxSeqs and MaxBatchedTokens are the engine's batch limits (vLLM max_num_seqs and
	// max_num_batched_tokens); MaxBatchedTokens is also the chunked-prefill budget of a step.
	// 0: vLLM's default for the device the engine sees (VLLMBatchDefaults).
	MaxSeqs          int `json:"maxSeqs"`
	MaxBatchedTokens int `json:"maxBatchedTokens"`
	// ReserveFullOutput makes admission reserve KV cache for a request's prompt and its whole
	// output (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity policy), so a cache of N tokens
	// runs N / (I + O) sequences; off (vLLM): blocks are allocated as tokens are computed, and a
	// running sequence holds I + O/2 on average (Workload.KVTokensPerSeq).
	ReserveFullOutput bool `json:"reserveFullOutput,omitempty"`
	// Context is the engine's --max-model-len, which the memory model sizes the KV cache and
	// workspace for; 0: min(8192, the model's maximum), as llm.Options.Context.
	Context int `json:"context,omitzero"`
	// GPUMemoryUtilization and RuntimeReserveMiB size the KV cache of tensor-parallel engines
	// only (single-GPU engines use llm's memory model): the fraction of memory the engine may use
	// and the least it keeps out of the KV cache for activations, CUDA graphs and the CUDA
	// context (llm's estimate for the model replaces it when larger).
	GPUMemoryUtilization float64 `json:"gpuMemoryUtilization"`
	RuntimeReserveMiB    int64   `json:"runtimeReserveMiB"`
}

// DefaultOptions returns the model's constants, for a serving engine (vLLM-like). Sources (see
// doc.go for the equations); "the H200 measurement" is this project's (bench/gpu; a copy and
// what each row is in testdata/measured), raw PyTorch kernels without a serving engine:
//
//   - WeightBWEfficiency 0.90: the H200 measurement's device copy reaches 89 % of the 4.8 TB/s
//     peak and its dense KV-cache reads 95 % (the cost of 512 → 2048 cached tokens).
//   - LayerLatency 33 µs: the H200 measurement's decode at batch 1 (CUDA graph): 4.17 ms for
//     13.2 GB of llama-7b weights and 4.51 ms for 15.0 GB of llama-3.1-8b, each 1.0-1.1 ms more
//     than streaming at 0.90, over 32 layers. On an A100 the same two constants give the 80 %
//     effective weight streaming the earlier MuxServe fit found.
//   - BWSaturationExponent 2.6: the H200 measurement's MPS sweep (llama-7b decode, batch 32):
//     the bandwidth of 30/50/70 % of the SMs is 0.60/0.84/0.96 of the whole GPU's; the same
//     shape holds in MuxServe's A100 sweep.
//   - MFU 0.75: a grid-search fit to MuxServe's A100-80GB single-GPU step times (LLaMA-7B/13B,
//     prefill and decode at 30/50/70/100 % SMs through MPS; Duan et al., ICML 2024, artifact
//     examples/placement/llama.json), with that engine's own StepOverhead and KV read (4 ms and
//     0.65, fidelity_test.go's muxServeOptions); raw cuBLAS on the H200 reaches 70-78 % of peak.
//   - FP8MFU 0.60: FP8 GEMMs reach a smaller fraction of their (twice as high) peak under the
//     same power limit; set by one published row, TensorRT-LLM's Llama-3.3-70B FP8 on one H200 at
//     1000/1000 tokens (testdata/fidelity/published.csv, marked in-sample).
//   - StepOverhead 1 ms: the host time per step of today's vLLM (CUDA graphs for the whole
//     decode step, asynchronous output processing and scheduling since v0.6): with it a batch-1
//     decode of Llama-3.1-8B on an H100 takes 7.1 ms, the 7.1-7.3 ms quoted for vLLM v0.6 (not a
//     row of testdata/fidelity: no primary source with its full setting was found). 2023 engines
//     spent about 4 ms.
//   - KVBWEfficiency 0.90: paged attention (FlashAttention/FlashInfer over 16-token blocks) reads
//     the KV cache as fast as weights stream; set by one published row, TensorRT-LLM's
//     Llama-3.1-8B FP8 on one H100 at 1000/1000 tokens (in-sample), which 0.80-0.90 all meet
//     within 5 %. MuxServe's 2023 kernel read at 0.65.
//   - PowerDemandRatio 1.3: MuxServe's A100 sweep alone fits 1.4 (prefill at 30 % SMs takes
//     2.7×, not 3.3×, the full-GPU time); the H200 measurement's sweep wants about 1.25 (3.0×).
//     1.3 serves both within the tests' bounds.
//   - ActHiddenPasses 14, ActInterPasses 3: counted from a LLaMA decoder layer as vLLM runs it:
//     two fused add-RMSNorms (read input and residual, write both: 8), rotary on q and k in
//     place (4 with MHA), the cache write's read of k and v (2); SiLU-and-mul reads gate and up
//     and writes one (3). About 180 KB per token per layer for LLaMA-7B.
//   - TimeSliceQuantum 2 ms, ContextSwitch 150 µs: the H200 measurement, two time-sliced
//     processes both busy: each step takes 2.15-2.18× its time alone (2 + 2·switch/quantum), and
//     CUDA events miss 2.4-2.6 ms of each step, the neighbour's slice and the two switches around
//     it (quantum + 2·switch). NVIDIA does not publish the time-slice length.
//   - MPSOverlapGain off: see the field.
//   - AllReduceLatency 15 µs: NCCL all-reduce of small messages on NVLink (nccl-tests: ~10-20 µs).
//     InterconnectGBs 0: the board's link from the catalog at 80 %, NCCL's bus bandwidth on
//     large messages (about 360 of 450 GB/s on NVLink-4 H100s, 230 of 300 on NVLink-3 A100s).
//   - AllReduceSMs 36: vLLM's custom all-reduce, which serves the all-reduces of a node's
//     tensor-parallel decode and prefill steps, launches at most 36 thread blocks
//     (csrc/custom_all_reduce.cuh, defaultBlockLimit); the H100 has 132 SMs. Drawing all-reduces
//     at the whole board's memory-bound power put Llama-3.1-70B on four H100s 15-43 % high on
//     power against ML.ENERGY (out of sample, docs/cost.md).
//   - KVElemBytes 2: vLLM's --kv-cache-dtype auto stores the KV cache in bf16/fp16.
//   - IdlePowerFraction 0.15: data-centre boards report roughly 60-100 W idle against 400-700 W
//     TDP in nvidia-smi (an assumption, not a measurement of this project).
//   - MemoryPowerFraction 0.7: fitted to ML.ENERGY's measured power for Llama-3.1-8B on one
//     H100 at batch 8 and 16 (486 and 513 W; mlenergy_test.go has the rows and their links);
//     with memory-bound kernels also charged the compute power of their arithmetic, the batches
//     32-256 come out within 25 % of the measured power, throughput and joules per token.
//   - EfficiencyClock 0.7: the efficiency class's clock lock; LLM-serving studies find the
//     energy per token lowest around 60-80 % of the top clock (e.g. DynamoLLM, Stojkovic et al.,
//     2024); an assumption until a board is measured.
//   - MaxSeqs 0, MaxBatchedTokens 0: vLLM's defaults for its API server on the device the engine
//     sees (VLLMBatchDefaults: vllm/engine/arg_utils.py, get_batch_defaults): 1024 sequences and
//     8192 tokens on devices of 70 GiB or more except A100s, 256 and 2048 elsewhere.
//   - GPUMemoryUtilization 0.90: vLLM's default. RuntimeReserveMiB 1536: the least a
//     tensor-parallel GPU keeps outside weights and KV cache (activations for a 2048-token step,
//     sampler and CUDA graphs of a 7B-13B model); llm's terms for the model at the engine's batch
//     limits replace it when larger (memory.go).
//
// To compare with raw kernels rather than a serving engine, set StepOverhead to 0
// (h200_fidelity_test.go does). docs/perf-fidelity.md has every constant with its source and the
// fidelity table.
func DefaultOptions() Options {
	return Options{
		MFU:                  0.75,
		FP8MFU:               0.60,
		WeightBWEfficiency:   0.90,
		KVBWEfficiency:       0.90,
		BWSaturationExponent: 2.6,
		PowerDemandRatio:     1.3,
		StepOverhead:         1 * time.Millisecond,
		LayerLatency:         33 * time.Microsecond,
		ActHiddenPasses:      14,
		ActInterPasses:       3,
		TimeSliceQuantum:     2 * time.Millisecond,
		ContextSwitch:        150 * time.Microsecond,
		MPSOverlapGain:       false,
		AllReduceLatency:     15 * time.Microsecond,
		InterconnectGBs:      0,
		AllReduceSMs:         36,
		KVElemBytes:          2,
		IdlePowerFraction:    0.15,
		MemoryPowerFraction:  0.7,
		EfficiencyClock:      0.7,
		MaxSeqs:              0,
		MaxBatchedTokens:     0,
		GPUMemoryUtilization: 0.90,
		RuntimeReserveMiB:    1536,
	}
}

// Validate returns every out-of-range option at once.
func (o Options) Validate() error {
	var errs []error
	frac := func(name string, v float64) {
		if !(v > 0 && v <= 1) {
			errs = append(errs, fmt.Errorf("option %s: %v is outside (0, 1]", name, v))
		}
	}
	pos := func(name string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("option %s: %v must be a positive number", name, v))
		}
	}
	nonneg := func(name string, v float64) {
		if !(v >= 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("option %s: %v must be zero or positive", name, v))
		}
	}
	frac("mfu", o.MFU)
	frac("fp8Mfu", o.FP8MFU)
	frac("weightBwEfficiency", o.WeightBWEfficiency)
	frac("kvBwEfficiency", o.KVBWEfficiency)
	frac("gpuMemoryUtilization", o.GPUMemoryUtilization)
	frac("efficiencyClock", o.EfficiencyClock)
	frac("memoryPowerFraction", o.MemoryPowerFraction)
	nonneg("idlePowerFraction", o.IdlePowerFraction)
	if o.IdlePowerFraction >= 1 {
		errs = append(errs, fmt.Errorf("option idlePowerFraction: %v is not below 1", o.IdlePowerFraction))
	}
	pos("bwSaturationExponent", o.BWSaturationExponent)
	pos("powerDemandRatio", o.PowerDemandRatio)
	nonneg("interconnectGBs", o.InterconnectGBs)
	pos("timeSliceQuantum", float64(o.TimeSliceQuantum))
	nonneg("stepOverhead", float64(o.StepOverhead))
	nonneg("layerLatency", float64(o.LayerLatency))
	nonneg("actHiddenPasses", o.ActHiddenPasses)
	nonneg("actInterPasses", o.ActInterPasses)
	nonneg("contextSwitch", float64(o.ContextSwitch))
	nonneg("allReduceLatency", float64(o.AllReduceLatency))
	nonneg("allReduceSMs", float64(o.AllReduceSMs))
	nonneg("runtimeReserveMiB", float64(o.RuntimeReserveMiB))
	if o.KVElemBytes < 1 || o.KVElemBytes > 4 {
		errs = append(errs, fmt.Errorf("option kvElemBytes: %d is outside [1, 4]", o.KVElemBytes))
	}
	if o.MaxSeqs < 0 {
		errs = append(errs, fmt.Errorf("option maxSeqs: %d is negative", o.MaxSeqs))
	}
	if o.MaxBatchedTokens < 0 {
		errs = append(errs, fmt.Errorf("option maxBatchedTokens: %d is negative", o.MaxBatchedTokens))
	}
	if o.Context < 0 {
		errs = append(errs, fmt.Errorf("option context: %d is negative", o.Context))
	}
	return errors.Join(errs...)
}
