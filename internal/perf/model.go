package perf

import (
	"errors"
	"fmt"
	"math"

	"gpupool.dev/gpupool/internal/llm"
)

// Model is a transformer at a quantization, reduced to the per-token costs the roofline needs.
// It is immutable and safe for concurrent use.
type Model struct {
	name  string
	arch  llm.Arch
	quant llm.Quantization
	opts  Options

	layers, hidden float64
	bodyFLOPs      float64 // GEMM FLOPs per token through the decoder layers (2 × active body params)
	headFLOPs      float64 // FLOPs of one logits row (2 × vocab × hidden)
	attnFLOPs      float64 // attention FLOPs per (query, key) pair, all layers
	weightBytes    float64 // all weights at the quantization
	embedBytes     float64 // the input embedding table, looked up rather than streamed (0 if tied)
	expertBytes    float64 // the routed experts' part of weightBytes (MoE)
	experts, topK  float64
	kvBytes        float64 // KV-cache bytes per token, all layers
	gemmIOBytes    float64 // GEMM input and output bytes per token, all layers
	actBytes       float64 // element-wise kernels' bytes per token outside GEMMs and attention, all layers
	computeKind    string  // "bf16", "fp8" or "int8": which tensor-core peak the GEMMs use
}

// New reduces an architecture at quantization q (empty: bf16) to a Model. Options must validate.
func New(a llm.Arch, q llm.Quantization, o Options) (*Model, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new model %s: %w", a.Name, err)
	}
	if q == "" {
		q = llm.QuantBF16
	}
	var errs []error
	if a.Layers <= 0 || a.Hidden <= 0 || a.Heads <= 0 || a.Vocab <= 0 {
		errs = append(errs, fmt.Errorf("layers, hidden size, heads and vocab must be positive (have %d, %d, %d, %d)",
			a.Layers, a.Hidden, a.Heads, a.Vocab))
	}
	total, active := a.Params()
	wb := a.WeightBytes(q)
	kv := a.KVBytesPerToken(o.KVElemBytes)
	if total <= 0 || active <= 0 || wb <= 0 || kv <= 0 {
		errs = append(errs, fmt.Errorf("parameters, weight bytes and KV bytes per token must be positive (have %d, %d, %d)",
			active, wb, kv))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("new model %s: %w", a.Name, errors.Join(errs...))
	}
	h, v, l := float64(a.Hidden), float64(a.Vocab), float64(a.Layers)
	body := float64(active) - v*h // the input embedding is a lookup, not a GEMM
	if !a.TiedEmbeddings {
		body -= v * h // lm_head runs once per logits row, counted in headFLOPs
	}
	m := &Model{
		name: a.Name, arch: a, quant: q, opts: o,
		layers: l, hidden: h,
		bodyFLOPs:   2 * math.Max(body, 0),
		headFLOPs:   2 * v * h,
		attnFLOPs:   2 * float64(a.Heads) * float64(qkDim(a)+vDim(a)) * l,
		weightBytes: float64(wb),
		kvBytes:     float64(kv),
		computeKind: computeKind(q),
	}
	m.actBytes = 2 * (o.ActHiddenPasses*h*l + o.ActInterPasses*interPerToken(a))
	m.gemmIOBytes = gemmIOBytes(a)
	if !a.TiedEmbeddings {
		m.embedBytes = 2 * v * h // kept at 16 bits under every quantization
	}
	if a.Experts > 0 && a.ExpertsPerToken > 0 {
		routed := float64(a.Layers-a.FirstDenseLayers) * float64(a.Experts) * 3 * h * float64(expertWidth(a))
		m.expertBytes = m.weightBytes * math.Min(1, routed/float64(total))
		m.experts, m.topK = float64(a.Experts), float64(a.ExpertsPerToken)
	}
	return m, nil
}

// Name is the architecture's name; Quantization the weights' storage.
func (m *Model) Name() string                   { return m.name }
func (m *Model) Quantization() llm.Quantization { return m.quant }
func (m *Model) Options() Options               { return m.opts }

// WeightBytes is the weights' size at the model's quantization.
func (m *Model) WeightBytes() int64 { return int64(m.weightBytes) }

// KVBytesPerToken is the KV-cache size of one token at Options.KVElemBytes.
func (m *Model) KVBytesPerToken() int64 { return int64(m.kvBytes) }

func qkDim(a llm.Arch) int {
	if a.KVLoraRank > 0 {
		return a.QKNopeHeadDim + a.QKRopeHeadDim
	}
	return headDim(a)
}

func vDim(a llm.Arch) int {
	if a.KVLoraRank > 0 {
		return a.VHeadDim
	}
	return headDim(a)
}

func headDim(a llm.Arch) int {
	if a.HeadDim > 0 {
		return a.HeadDim
	}
	return a.Hidden / a.Heads
}

func expertWidth(a llm.Arch) int {
	if a.MoEIntermediate > 0 {
		return a.MoEIntermediate
	}
	return a.Intermediate
}

// interPerToken sums the intermediate width one token passes through over all layers.
func interPerToken(a llm.Arch) float64 {
	if a.Experts == 0 {
		return float64(a.Layers) * float64(a.Intermediate)
	}
	dense := float64(a.FirstDenseLayers) * float64(a.Intermediate)
	moe := float64(a.Layers-a.FirstDenseLayers) * float64(a.ExpertsPerToken+a.SharedExperts) * float64(expertWidth(a))
	return dense + moe
}

// computeKind picks the tensor-core type: FP8 weights run FP8 GEMMs, int8 (W8A8) runs INT8
// GEMMs, weight-only int4 (AWQ, GPTQ) dequantizes into BF16 GEMMs.
func computeKind(q llm.Quantization) string {
	switch q {
	case llm.QuantFP8:
		return "fp8"
	case llm.QuantInt8:
		return "int8"
	}
	return "bf16"
}

// weightBytesRead is the weight traffic of one step of t tokens: every dense weight once except
// the input embedding (a lookup of t rows, not a stream; a tied embedding is streamed as the
// output head), and of the routed experts only those some token picked. With uniform routing of
// top-k of E experts, the expected fraction touched is 1 − (1 − k/E)^t.
func (m *Model) weightBytesRead(t float64) float64 {
	w := m.weightBytes - m.embedBytes
	if m.expertBytes == 0 {
		return w
	}
	touched := 1 - math.Pow(1-m.topK/m.experts, t)
	return w - m.expertBytes*(1-touched)
}

// gemmIOBytes is what one token's GEMMs read and write besides the weights, over all layers, at
// 2 bytes an element: the q/k/v projection reads the hidden state and writes q, k and v; the
// output projection reads the attention output and writes the hidden state; gate/up reads the
// hidden state and writes two intermediate vectors; down reads one and writes the hidden state.
// Inside a GEMM this traffic overlaps its compute, so it joins the weights in the GEMM roofline.
func gemmIOBytes(a llm.Arch) float64 {
	h, l := float64(a.Hidden), float64(a.Layers)
	q := float64(a.Heads) * float64(qkDim(a))
	kv := float64(a.KVBytesPerToken(2)) / (4 * l) // one of K or V per layer (MLA: its latent)
	o := float64(a.Heads) * float64(vDim(a))
	return 2 * (l*(h+q+2*kv) + l*(o+h) + l*h + 3*interPerToken(a) + l*h)
}
