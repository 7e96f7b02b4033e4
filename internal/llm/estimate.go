package llm

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Byte units.
const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// Constants of the memory model; doc.go gives each one's source.
const (
	// DefaultUtilization is vLLM's --gpu-memory-utilization default (EngineArgs, 0.9).
	DefaultUtilization = 0.9
	// MaxAutoUtilization is the highest utilization Fit picks by itself when 0.9 is not enough.
	MaxAutoUtilization = 0.95
	// DefaultBlockSize is vLLM's KV-cache block size in tokens.
	DefaultBlockSize = 16
	// DefaultContext is the --max-model-len assumed when none is given (capped by the model's
	// max_position_embeddings).
	DefaultContext = 8192
	// DefaultMaxNumSeqs is vLLM's --max-num-seqs default for the OpenAI server on devices below
	// 70 GiB and on A100s; larger devices get 1024 (VLLMBatchDefaults).
	DefaultMaxNumSeqs = 256
	// vLLM v1 picks --max-num-batched-tokens by device memory: 8192 on devices of 70 GiB or more,
	// 2048 below (OpenAI server usage context).
	batchedTokensLarge  = 8192
	batchedTokensSmall  = 2048
	largeDeviceBytes    = 70 * GiB
	cudaContextBytes    = 528 * MiB // CUDA context, outside vLLM's budget (measured 527 MiB, doc.go)
	nonTorchBytes       = 256 * MiB // cuBLAS/cuDNN workspaces etc., measured by vLLM as non-torch
	cudaGraphBaseBytes  = 256 * MiB // CUDA-graph pool: base ...
	cudaGraphLayerBytes = 8 * MiB   // ... plus per decoder layer
	activationBytes     = 2         // bf16/fp16 activations
	maxSequences        = 1 << 20   // bounds on options, far above any real deployment
	maxTokenBudget      = 1 << 40
	maxBatchedTokens    = 1 << 24
	logitsCopies        = 2 // fp32 logits and fp32 probabilities in the sampler
)

// Options are the serving choices a memory estimate depends on. Zero values take vLLM's
// defaults (see each field).
type Options struct {
	// Quantization of the weights; "" uses the checkpoint's, else the catalog's (DeepSeek-V3 is
	// fp8), else 16 bits per torch_dtype.
	Quantization Quantization `json:"quantization,omitempty"`
	// KVCacheDType is "auto" (the activation dtype, 2 bytes) or "fp8" (1 byte).
	KVCacheDType string `json:"kvCacheDtype,omitempty"`
	// Context is --max-model-len: 0 is min(DefaultContext, max_position_embeddings).
	Context int `json:"context,omitempty"`
	// Concurrency is how many sequences of Context tokens are in flight at once; 0 is 1.
	Concurrency int `json:"concurrency,omitempty"`
	// TokenBudget, when > 0, is the peak number of KV tokens in flight, replacing
	// Context × Concurrency (for traffic whose sequences are mostly shorter than Context).
	TokenBudget int64 `json:"tokenBudget,omitempty"`
	// MaxNumBatchedTokens is --max-num-batched-tokens: 0 is vLLM's default for the device.
	MaxNumBatchedTokens int `json:"maxNumBatchedTokens,omitempty"`
	// MaxNumSeqs is --max-num-seqs: 0 is Concurrency when given, else 256.
	MaxNumSeqs int `json:"maxNumSeqs,omitempty"`
	// GPUMemoryUtilization is --gpu-memory-utilization: 0 is 0.9, which Fit may raise to 0.95
	// to make a model fit; a value given here is kept.
	GPUMemoryUtilization float64 `json:"gpuMemoryUtilization,omitempty"`
	// EnforceEager drops CUDA graphs (vLLM --enforce-eager); Fit also falls back to it by itself.
	EnforceEager bool `json:"enforceEager,omitempty"`
	// LoRA turns on LoRA adapters (vLLM --enable-lora): their slots take GPU memory before the
	// KV cache does. Nil: no LoRA.
	LoRA *LoRAOptions `json:"lora,omitempty"`
}

// Memory is an estimate of a vLLM instance's memory, every term in bytes.
// Weights + KVCache + Activations + NonTorch + CUDAGraphs is the budget that must fit in
// gpu_memory_utilization × device memory; CUDAContext and Headroom are the rest of the device.
type Memory struct {
	Weights     int64 `json:"weights"`
	KVCache     int64 `json:"kvCache"`
	Activations int64 `json:"activations"`
	NonTorch    int64 `json:"nonTorch"`
	CUDAGraphs  int64 `json:"cudaGraphs"`
	// LoRA is the adapter slots LoRA preallocates (LoRAMemory.GPUBytes), 0 without LoRA.
	LoRA        int64 `json:"lora,omitempty"`
	CUDAContext int64 `json:"cudaContext"`
	Headroom    int64 `json:"headroom"`
	Total       int64 `json:"total"`

	WeightsSource       string       `json:"weightsSource"` // "checkpoint" or "formula"
	Quantization        Quantization `json:"quantization"`
	KVBytesPerToken     int64        `json:"kvBytesPerToken"`
	KVTokens            int64        `json:"kvTokens"`
	MaxNumBatchedTokens int          `json:"maxNumBatchedTokens"`
	MaxNumSeqs          int          `json:"maxNumSeqs"`
	Utilization         float64      `json:"utilization"`
}

// Budget is what vLLM must hold inside gpu_memory_utilization × device memory.
func (m Memory) Budget() int64 {
	return m.Weights + m.KVCache + m.Activations + m.NonTorch + m.CUDAGraphs + m.LoRA
}

// plan is Options resolved against a model and a device size.
type plan struct {
	a         Arch
	o         Options
	q         Quantization
	weights   int64
	source    string
	kvElem    int
	perToken  int64
	seqTokens int64 // KV tokens one sequence of Context holds (window-capped, block-rounded)
	concGiven bool  // Options.Concurrency was set
	lora      int64 // LoRA slot bytes, 0 without LoRA
}

// Estimate sizes m under o on a device whose total memory vLLM does not know yet: the
// --max-num-batched-tokens default is the large-device one (8192), the conservative choice.
// The device needed is Memory.Total bytes.
func Estimate(m Model, o Options) (Memory, error) {
	p, err := resolve(m, o)
	if err != nil {
		return Memory{}, err
	}
	util := p.o.GPUMemoryUtilization
	if util == 0 {
		util = DefaultUtilization
	}
	return p.memory("", largeDeviceBytes, util, p.o.EnforceEager), nil
}

// resolve checks o against m and fills the model-dependent defaults.
func resolve(m Model, o Options) (plan, error) {
	var errs []error
	p := plan{a: m.Arch, o: o}
	var err error
	if p.kvElem, err = KVElemBytes(o.KVCacheDType); err != nil {
		errs = append(errs, err)
	}
	if p.q, p.weights, p.source, err = weights(m, o.Quantization); err != nil {
		errs = append(errs, err)
	}
	a := m.Arch
	if p.o.Context == 0 {
		p.o.Context = DefaultContext
		if a.MaxPositions > 0 && a.MaxPositions < DefaultContext {
			p.o.Context = a.MaxPositions
		}
	}
	for _, f := range []struct {
		name    string
		v, most int64
	}{{"context", int64(o.Context), maxPositions}, {"concurrency", int64(o.Concurrency), maxSequences},
		{"token budget", o.TokenBudget, maxTokenBudget}, {"max-num-batched-tokens", int64(o.MaxNumBatchedTokens), maxBatchedTokens},
		{"max-num-seqs", int64(o.MaxNumSeqs), maxSequences}} {
		if f.v < 0 || f.v > f.most {
			errs = append(errs, fmt.Errorf("option %s: %d is outside [0, %d]", f.name, f.v, f.most))
		}
	}
	if a.MaxPositions > 0 && p.o.Context > a.MaxPositions {
		errs = append(errs, fmt.Errorf("option context: %d exceeds %s's max_position_embeddings %d", p.o.Context, a.Name, a.MaxPositions))
	}
	if u := o.GPUMemoryUtilization; u < 0 || u > 1 || math.IsNaN(u) {
		errs = append(errs, fmt.Errorf("option gpu-memory-utilization: %v is outside (0, 1]", u))
	}
	if o.LoRA != nil {
		lm, err := EstimateLoRA(a, *o.LoRA)
		if err != nil {
			errs = append(errs, err)
		}
		p.lora = lm.GPUBytes
	}
	if len(errs) > 0 {
		return plan{}, errors.Join(errs...)
	}
	p.concGiven = o.Concurrency > 0
	if p.o.Concurrency == 0 {
		p.o.Concurrency = 1
	}
	p.perToken = a.KVBytesPerToken(p.kvElem)
	seq := int64(p.o.Context)
	if w := int64(a.SlidingWindow); w > 0 && w+DefaultBlockSize < seq {
		seq = w + DefaultBlockSize // the window plus the partly filled block at its edge
	}
	p.seqTokens = roundUp(seq, DefaultBlockSize)
	if p.perToken > 0 && p.kvTokens() > math.MaxInt64/4/p.perToken {
		return plan{}, fmt.Errorf("option concurrency: %d tokens × %d bytes/token overflows", p.kvTokens(), p.perToken)
	}
	return p, nil
}

// memory computes every term for a device of deviceBytes at utilization util.
func (p plan) memory(board string, deviceBytes int64, util float64, eager bool) Memory {
	a := p.a
	ds, dt := VLLMBatchDefaults(board, deviceBytes, p.o.Context)
	seqs := int64(p.o.MaxNumSeqs)
	if seqs == 0 {
		seqs = int64(ds)
		if p.concGiven {
			seqs = int64(p.o.Concurrency)
		}
	}
	t := int64(p.o.MaxNumBatchedTokens)
	if t == 0 {
		t = int64(dt)
		if p.o.Context > 0 {
			t = min(t, seqs*int64(p.o.Context))
		}
	}
	m := Memory{
		Weights: p.weights, WeightsSource: p.source, Quantization: p.q,
		KVBytesPerToken: p.perToken, KVTokens: p.kvTokens(),
		Activations: activationWorkspace(a, t, min(seqs, t)),
		NonTorch:    nonTorchBytes, CUDAContext: cudaContextBytes, LoRA: p.lora,
		MaxNumBatchedTokens: int(t), MaxNumSeqs: int(seqs), Utilization: util,
	}
	m.KVCache = m.KVTokens * p.perToken
	if !eager {
		m.CUDAGraphs = cudaGraphBytes(a)
	}
	need := max(int64(math.Ceil(float64(m.Budget())/util)), m.Budget()+m.CUDAContext)
	m.Headroom = need - m.Budget() - m.CUDAContext
	m.Total = need
	return m
}

// kvTokens is the peak KV tokens the options ask for, block-rounded.
func (p plan) kvTokens() int64 {
	if p.o.TokenBudget > 0 {
		return roundUp(p.o.TokenBudget, DefaultBlockSize)
	}
	return p.seqTokens * int64(p.o.Concurrency)
}

// activationWorkspace is the peak of vLLM's profiling forward pass at t batched tokens, with
// logits for seqs sequences (see doc.go):
//
//	t × 2 bytes × (4·hidden + attention width + MLP width) + seqs × vocab × 4 bytes × 2
func activationWorkspace(a Arch, t, seqs int64) int64 {
	h, nh := int64(a.Hidden), int64(a.Heads)
	var attn int64
	if a.MLA() {
		attn = 2*nh*int64(a.QKNopeHeadDim+a.QKRopeHeadDim) + nh*int64(a.VHeadDim)
	} else {
		hd := int64(a.HeadDimension())
		attn = nh*hd + 2*int64(a.KVHeads)*hd
	}
	var mlpW int64
	if a.moeLayers() < int64(a.Layers) {
		mlpW = 3 * int64(a.Intermediate)
	}
	if a.MoE() {
		mlpW = max(mlpW, int64(a.ExpertsPerToken)*(3*a.expertWidth()+h))
	}
	return t*activationBytes*(4*h+attn+mlpW) + seqs*int64(a.Vocab)*4*logitsCopies
}

// cudaGraphBytes is the planning allowance for vLLM's captured CUDA graphs.
func cudaGraphBytes(a Arch) int64 { return cudaGraphBaseBytes + int64(a.Layers)*cudaGraphLayerBytes }

// weights picks the quantization and the weight bytes: the checkpoint's exact bytes when the
// checkpoint is what vLLM loads, else the formula.
func weights(m Model, want Quantization) (Quantization, int64, string, error) {
	a := m.Arch
	if want != "" && !want.Valid() {
		return "", 0, "", fmt.Errorf("option quantization: unknown %q", want)
	}
	ckq := Quantization(a.Quantization)
	if m.Checkpoint != nil {
		switch {
		case want == "" || want == ckq || (ckq == "" && want.Sixteen()):
			q := want
			if q == "" {
				q = ckq
			}
			if q == "" {
				q = sixteenBit(a)
			}
			return q, checkpointBytes(m), "checkpoint", nil
		case ckq == "" && want == QuantFP8:
			return want, a.WeightBytes(want), "formula", nil // vLLM quantizes 16-bit weights to fp8 online
		}
		return "", 0, "", fmt.Errorf("option quantization: %s conflicts with the checkpoint's %q (vLLM can only quantize a 16-bit checkpoint to fp8 online)",
			want, a.Quantization)
	}
	q := want
	if q == "" {
		q = ckq
	}
	if q == "" {
		q = sixteenBit(a)
	}
	if !q.Valid() {
		return "", 0, "", fmt.Errorf("option quantization: the config's %q is not modelled; give --quantization or the safetensors files", q)
	}
	return q, a.WeightBytes(q), "formula", nil
}

// sixteenBit is the 16-bit dtype vLLM runs a model in: fp16 for float16 configs, else bf16.
func sixteenBit(a Arch) Quantization {
	if a.TorchDtype == "float16" {
		return QuantFP16
	}
	return QuantBF16
}

// checkpointBytes is what loading the checkpoint takes: tensor bytes, with F32/F64 tensors of an
// unquantized checkpoint cast to 16 bits as vLLM does.
func checkpointBytes(m Model) int64 {
	ck := m.Checkpoint
	if m.Arch.Quantization != "" {
		return ck.Bytes
	}
	b := ck.Bytes
	for _, s := range ck.ByDType {
		switch s.DType {
		case "F32":
			b -= s.Bytes / 2
		case "F64":
			b -= s.Bytes * 3 / 4
		}
	}
	return b
}

func roundUp(n, k int64) int64 { return (n + k - 1) / k * k }

// VLLMBatchDefaults are the current vLLM release's --max-num-seqs and --max-num-batched-tokens
// defaults for its OpenAI API server on board (a catalog name; "" for unknown) when the device
// vLLM sees has deviceBytes of memory: 1024 sequences and 8192 tokens on devices of 70 GiB or more
// whose name does not contain "a100", 256 and 2048 elsewhere (a large budget lowered an
// A100-80GB's throughput, vLLM PR #17885). A MIG instance is the device it is; MPS and
// time-slicing see the whole GPU. The budget is capped at sequences × context (context > 0) and
// the sequences at the budget. Source: vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults
// and _set_default_max_num_seqs_and_batched_tokens_args.
func VLLMBatchDefaults(board string, deviceBytes int64, context int) (maxSeqs, batchedTokens int) {
	maxSeqs, batchedTokens = DefaultMaxNumSeqs, batchedTokensSmall
	if deviceBytes >= largeDeviceBytes && !strings.Contains(strings.ToLower(board), "a100") {
		maxSeqs, batchedTokens = 1024, batchedTokensLarge
	}
	if context > 0 && int64(maxSeqs)*int64(context) < int64(batchedTokens) {
		batchedTokens = maxSeqs * context
	}
	return min(maxSeqs, batchedTokens), batchedTokens
}
