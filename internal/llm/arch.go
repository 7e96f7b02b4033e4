package llm

import (
	"errors"
	"fmt"
)

// role says how a group of tensors is stored under weight quantization.
type role int

const (
	roleEmbed  role = iota // token embedding: kept at 16 bits
	roleLMHead             // output projection: kept at 16 bits
	roleLinear             // a decoder-layer projection: quantized
	roleRouter             // MoE router (gate): kept at 16 bits
	roleVector             // norms and biases: kept at 16 bits
)

// tensorGroup is count identical matrices of rows × cols (out × in) elements, of which active are
// used for every token (fewer than count for routed experts).
type tensorGroup struct {
	name          string
	role          role
	rows, cols    int64
	count, active int64
}

// Size limits applied by Validate. They keep every product of the memory model inside int64
// (3 × experts × layers × hidden × intermediate < 2^57) and reject configs no real model has.
const (
	maxLayers       = 1024
	maxHidden       = 1 << 16
	maxHeads        = 1 << 12
	maxHeadDim      = 1 << 12
	maxIntermediate = 1 << 19
	maxVocab        = 1 << 23
	maxExperts      = 1 << 10
	maxPositions    = 1 << 26
	maxRank         = 1 << 16
)

// HeadDimension returns head_dim: the explicit value, or hidden / heads.
func (a Arch) HeadDimension() int {
	if a.HeadDim > 0 {
		return a.HeadDim
	}
	if a.Heads > 0 {
		return a.Hidden / a.Heads
	}
	return 0
}

// MLA reports whether the model uses multi-head latent attention.
func (a Arch) MLA() bool { return a.KVLoraRank > 0 }

// MoE reports whether the model routes tokens to experts.
func (a Arch) MoE() bool { return a.Experts > 0 }

// moeLayers is how many decoder layers carry experts.
func (a Arch) moeLayers() int64 {
	if !a.MoE() {
		return 0
	}
	return int64(a.Layers - a.FirstDenseLayers)
}

// expertWidth is one expert's intermediate size.
func (a Arch) expertWidth() int64 {
	if a.MoEIntermediate > 0 {
		return int64(a.MoEIntermediate)
	}
	return int64(a.Intermediate)
}

// maxTensorGroups bounds the groups appendTensors lists (MLA attention with a query LoRA, MoE with
// shared experts and an untied lm_head: 17), so the callers' buffers never grow.
const maxTensorGroups = 20

// appendTensors appends every weight of the model as groups to g (see doc.go for the layer
// layout). WeightBytes and Params pass a buffer on their stack: the planner asks for the weights
// of every tenant on every slice it tries.
func (a Arch) appendTensors(g []tensorGroup) []tensorGroup {
	h, l, v := int64(a.Hidden), int64(a.Layers), int64(a.Vocab)
	g = append(g, tensorGroup{name: "embed_tokens", role: roleEmbed, rows: v, cols: h, count: 1, active: 1})
	g = a.appendAttention(g, l)
	g = append(g, tensorGroup{name: "norms", role: roleVector, rows: 1, cols: 2*h*l + h, count: 1, active: 1})
	dense := l - a.moeLayers()
	g = appendMLP(g, "mlp.gate_up", "mlp.down", int64(a.Intermediate), h, dense, dense)
	if ml := a.moeLayers(); ml > 0 {
		e, k, w := int64(a.Experts), int64(a.ExpertsPerToken), a.expertWidth()
		g = appendMLP(g, "experts.gate_up", "experts.down", w, h, e*ml, k*ml)
		if s := int64(a.SharedExperts); s > 0 {
			g = appendMLP(g, "shared_experts.gate_up", "shared_experts.down", w, h, s*ml, s*ml)
		}
		g = append(g, tensorGroup{name: "router", role: roleRouter, rows: e, cols: h, count: ml, active: ml})
	}
	if !a.TiedEmbeddings {
		g = append(g, tensorGroup{name: "lm_head", role: roleLMHead, rows: v, cols: h, count: 1, active: 1})
	}
	return g
}

// appendMLP appends a gated MLP of width w on hidden h: gate and up (w × h, named gateUp), down
// (h × w, named down).
func appendMLP(g []tensorGroup, gateUp, down string, w, h, count, active int64) []tensorGroup {
	if count == 0 {
		return g
	}
	return append(g,
		tensorGroup{name: gateUp, role: roleLinear, rows: w, cols: h, count: 2 * count, active: 2 * active},
		tensorGroup{name: down, role: roleLinear, rows: h, cols: w, count: count, active: active})
}

// appendAttention appends the attention projections of l layers: GQA/MHA, or MLA when
// KVLoraRank > 0.
func (a Arch) appendAttention(g []tensorGroup, l int64) []tensorGroup {
	h, nh := int64(a.Hidden), int64(a.Heads)
	lin := func(name string, rows, cols int64) tensorGroup {
		return tensorGroup{name: name, role: roleLinear, rows: rows, cols: cols, count: l, active: l}
	}
	if a.MLA() {
		qk := int64(a.QKNopeHeadDim + a.QKRopeHeadDim)
		kvr, rope := int64(a.KVLoraRank), int64(a.QKRopeHeadDim)
		if qr := int64(a.QLoraRank); qr > 0 {
			g = append(g, lin("q_a_proj", qr, h), lin("q_b_proj", nh*qk, qr),
				tensorGroup{name: "q_a_layernorm", role: roleVector, rows: 1, cols: qr, count: l, active: l})
		} else {
			g = append(g, lin("q_proj", nh*qk, h))
		}
		return append(g, lin("kv_a_proj_with_mqa", kvr+rope, h),
			tensorGroup{name: "kv_a_layernorm", role: roleVector, rows: 1, cols: kvr, count: l, active: l},
			lin("kv_b_proj", nh*int64(a.QKNopeHeadDim+a.VHeadDim), kvr),
			lin("o_proj", h, nh*int64(a.VHeadDim)))
	}
	hd := int64(a.HeadDimension())
	q, kv := nh*hd, int64(a.KVHeads)*hd
	g = append(g, lin("q_proj", q, h), lin("k_proj", kv, h), lin("v_proj", kv, h), lin("o_proj", h, q))
	if a.QKVBias {
		g = append(g, tensorGroup{name: "qkv_bias", role: roleVector, rows: 1, cols: q + 2*kv, count: l, active: l})
	}
	return g
}

// Params returns the total parameter count and the parameters active per token (differs for MoE:
// only ExpertsPerToken routed experts run; embeddings count as active).
func (a Arch) Params() (total, active int64) {
	var buf [maxTensorGroups]tensorGroup
	for _, t := range a.appendTensors(buf[:0]) {
		total += t.rows * t.cols * t.count
		active += t.rows * t.cols * t.active
	}
	return total, active
}

// Quantization group size and scale widths (see doc.go, "Weights").
const (
	int4GroupSize = 128 // AWQ and GPTQ default group_size
)

// WeightBytes returns the bytes the weights take at quantization q, including scale overheads.
// Decoder-layer projections (attention, MLP, experts) take q's width; embeddings, lm_head, MoE
// routers, norms and biases stay at 16 bits, as vLLM keeps them. Overheads per quantized matrix
// of rows × cols (out × in):
//
//	fp8:       one fp32 per-tensor scale (4 bytes)
//	int8:      one fp32 scale per output channel (4 × rows)
//	int4-awq:  per group of 128 inputs per output: fp16 scale + packed int4 zero = 2.5 bytes
//	int4-gptq: as AWQ, plus the int32 g_idx of every input (4 × cols)
//
// An unknown q counts as 16-bit.
func (a Arch) WeightBytes(q Quantization) int64 {
	var b int64
	var buf [maxTensorGroups]tensorGroup
	for _, t := range a.appendTensors(buf[:0]) {
		n := t.rows * t.cols * t.count
		if t.role != roleLinear || q.bitsPerWeight() == 16 {
			b += 2 * n
			continue
		}
		b += n * q.bitsPerWeight() / 8
		switch q {
		case QuantFP8:
			b += 4 * t.count
		case QuantInt8:
			b += 4 * t.rows * t.count
		case QuantInt4AWQ, QuantInt4GPTQ:
			groups := t.rows * ((t.cols + int4GroupSize - 1) / int4GroupSize) * t.count
			b += (groups*5 + 1) / 2
			if q == QuantInt4GPTQ {
				b += 4 * t.cols * t.count
			}
		}
	}
	return b
}

// KVBytesPerToken returns the KV-cache bytes one token takes in all layers, with elemBytes bytes
// per cached element (2 for bf16/fp16, 1 for fp8): 2 × layers × kv_heads × head_dim × elemBytes
// (K and V), or for MLA the compressed latent layers × (kv_lora_rank + qk_rope_head_dim) × elemBytes.
func (a Arch) KVBytesPerToken(elemBytes int) int64 {
	e := int64(elemBytes)
	if a.MLA() {
		return int64(a.Layers) * int64(a.KVLoraRank+a.QKRopeHeadDim) * e
	}
	return 2 * int64(a.Layers) * int64(a.KVHeads) * int64(a.HeadDimension()) * e
}

// Validate checks the shape and returns every problem at once, each naming its HF config field.
func (a Arch) Validate() error { return errors.Join(a.problems()...) }

// problems lists what Validate reports, one error per field, each starting "field NAME:".
func (a Arch) problems() []error {
	var errs []error
	bad := func(field string, v int, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("field %s: %d is outside [%d, %d]", field, v, lo, hi))
		}
	}
	bad("num_hidden_layers", a.Layers, 1, maxLayers)
	bad("hidden_size", a.Hidden, 1, maxHidden)
	bad("num_attention_heads", a.Heads, 1, maxHeads)
	bad("intermediate_size", a.Intermediate, 0, maxIntermediate)
	bad("vocab_size", a.Vocab, 1, maxVocab)
	bad("max_position_embeddings", a.MaxPositions, 0, maxPositions)
	bad("sliding_window", a.SlidingWindow, 0, maxPositions)
	if a.MLA() {
		errs = append(errs, a.validateMLA()...)
	} else {
		bad("num_key_value_heads", a.KVHeads, 1, maxHeads)
		bad("head_dim", a.HeadDim, 0, maxHeadDim)
		errs = append(errs, a.validateGQA()...)
	}
	errs = append(errs, a.validateMoE()...)
	if a.Intermediate == 0 && a.moeLayers() < int64(a.Layers) {
		errs = append(errs, errors.New("field intermediate_size: missing or 0 but the model has dense MLP layers"))
	}
	return errs
}

func (a Arch) validateGQA() []error {
	var errs []error
	if a.HeadDim == 0 && a.Heads > 0 && a.Hidden%a.Heads != 0 {
		errs = append(errs, fmt.Errorf("field head_dim: missing and hidden_size %d is not a multiple of num_attention_heads %d", a.Hidden, a.Heads))
	}
	if a.HeadDimension() < 1 {
		errs = append(errs, fmt.Errorf("field head_dim: %d (hidden_size / num_attention_heads) is below 1", a.HeadDimension()))
	}
	if a.KVHeads > 0 && a.Heads > 0 && a.Heads%a.KVHeads != 0 {
		errs = append(errs, fmt.Errorf("field num_key_value_heads: %d does not divide num_attention_heads %d", a.KVHeads, a.Heads))
	}
	return errs
}

func (a Arch) validateMLA() []error {
	var errs []error
	for _, f := range []struct {
		name   string
		v, min int
	}{
		{"kv_lora_rank", a.KVLoraRank, 1}, {"q_lora_rank", a.QLoraRank, 0},
		{"qk_nope_head_dim", a.QKNopeHeadDim, 1}, {"qk_rope_head_dim", a.QKRopeHeadDim, 1},
		{"v_head_dim", a.VHeadDim, 1},
	} {
		if f.v < f.min || f.v > maxRank {
			errs = append(errs, fmt.Errorf("field %s: %d is outside [%d, %d]", f.name, f.v, f.min, maxRank))
		}
	}
	return errs
}

func (a Arch) validateMoE() []error {
	if a.Experts == 0 {
		if a.ExpertsPerToken != 0 || a.SharedExperts != 0 || a.FirstDenseLayers != 0 {
			return []error{errors.New("field num_experts_per_tok: set but the model has no experts")}
		}
		return nil
	}
	var errs []error
	if a.Experts < 0 || a.Experts > maxExperts {
		errs = append(errs, fmt.Errorf("field num_local_experts: %d is outside [1, %d]", a.Experts, maxExperts))
	}
	if a.ExpertsPerToken < 1 || a.ExpertsPerToken > a.Experts {
		errs = append(errs, fmt.Errorf("field num_experts_per_tok: %d is outside [1, %d experts]", a.ExpertsPerToken, a.Experts))
	}
	if a.SharedExperts < 0 || a.SharedExperts > maxExperts {
		errs = append(errs, fmt.Errorf("field n_shared_experts: %d is outside [0, %d]", a.SharedExperts, maxExperts))
	}
	if a.MoEIntermediate < 0 || a.MoEIntermediate > maxIntermediate {
		errs = append(errs, fmt.Errorf("field moe_intermediate_size: %d is outside [0, %d]", a.MoEIntermediate, maxIntermediate))
	}
	if a.FirstDenseLayers < 0 || a.FirstDenseLayers > a.Layers {
		errs = append(errs, fmt.Errorf("field first_k_dense_replace: %d is outside [0, %d layers]", a.FirstDenseLayers, a.Layers))
	}
	if a.expertWidth() < 1 {
		errs = append(errs, errors.New("field moe_intermediate_size: missing and intermediate_size is 0"))
	}
	return errs
}
