package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// MaxConfigBytes bounds a config.json; real ones are a few KiB.
const MaxConfigBytes = 4 << 20

// cfgReader reads typed fields from one JSON object and records every problem, naming the field
// by its path in the file.
type cfgReader struct {
	obj    map[string]json.RawMessage
	prefix string          // "text_config." when reading a nested text config
	failed map[string]bool // fields with a type error
	errs   []error
}

func (r *cfgReader) raw(field string) (json.RawMessage, bool) {
	v, ok := r.obj[field]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

func (r *cfgReader) fail(field, format string, args ...any) {
	r.failed[field] = true
	r.errs = append(r.errs, fmt.Errorf("field %s%s: "+format, append([]any{r.prefix, field}, args...)...))
}

// int reads an integer field (JSON numbers with an integral value, e.g. 4096 or 4096.0).
func (r *cfgReader) int(field string, required bool) (int, bool) {
	v, ok := r.raw(field)
	if !ok {
		if required {
			r.fail(field, "missing")
		}
		return 0, false
	}
	var n json.Number
	if c := bytes.TrimSpace(v)[0]; c != '-' && (c < '0' || c > '9') {
		r.fail(field, "want an integer, got %s", clip(v))
		return 0, false
	}
	if err := json.Unmarshal(v, &n); err != nil {
		r.fail(field, "want an integer, got %s", clip(v))
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<40 {
		r.fail(field, "want an integer in range, got %s", clip(v))
		return 0, false
	}
	return int(f), true
}

func (r *cfgReader) bool(field string) (bool, bool) {
	v, ok := r.raw(field)
	if !ok {
		return false, false
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		r.fail(field, "want true or false, got %s", clip(v))
		return false, false
	}
	return b, true
}

func (r *cfgReader) string(field string) string {
	v, ok := r.raw(field)
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		r.fail(field, "want a string, got %s", clip(v))
	}
	return s
}

// clip shortens a raw value for an error message.
func clip(v []byte) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// decodeObject parses data as one JSON object.
func decodeObject(data []byte, what string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("parse %s: %w", what, jsonProblem(err))
	}
	if obj == nil {
		return nil, fmt.Errorf("parse %s: want a JSON object, got null", what)
	}
	return obj, nil
}

// ParseConfig reads a Hugging Face config.json into an Arch. It returns notes (what was assumed or
// left out) and, on failure, every problem at once, each naming its field. A config whose
// language model sits under "text_config" (vision-language models) is read from there, with
// torch_dtype and quantization_config taken from the top level when the nested object lacks them;
// the vision tower is not part of the shape (a checkpoint's safetensors still count it).
func ParseConfig(data []byte) (Arch, []string, error) {
	if len(data) > MaxConfigBytes {
		return Arch{}, nil, fmt.Errorf("parse config.json: %d bytes exceeds the %d-byte limit", len(data), MaxConfigBytes)
	}
	top, err := decodeObject(data, "config.json")
	if err != nil {
		return Arch{}, nil, err
	}
	r := &cfgReader{obj: top, failed: map[string]bool{}}
	var notes []string
	if _, has := r.raw("num_hidden_layers"); !has {
		if tc, ok := r.raw("text_config"); ok {
			inner, err := decodeObject(tc, "config.json field text_config")
			if err != nil {
				return Arch{}, nil, err
			}
			for _, k := range []string{"torch_dtype", "dtype", "quantization_config", "tie_word_embeddings"} {
				if _, ok := inner[k]; !ok && top[k] != nil {
					inner[k] = top[k]
				}
			}
			r = &cfgReader{obj: inner, prefix: "text_config.", failed: map[string]bool{}}
			notes = append(notes, "read the language model from text_config; the vision/audio tower is not in the formula")
		}
	}
	a, more := r.arch()
	notes = append(notes, more...)
	errs := r.errs
	for _, e := range a.problems() {
		field := strings.TrimPrefix(strings.SplitN(e.Error(), ":", 2)[0], "field ")
		if !r.failed[field] && !r.anyFailed(derivedFrom[field]...) {
			errs = append(errs, prefixField(e, r.prefix))
		}
	}
	if len(errs) > 0 {
		return Arch{}, notes, fmt.Errorf("parse config.json: %w", errors.Join(errs...))
	}
	return a, notes, nil
}

// derivedFrom lists, per field, the fields its checks depend on: when one of those failed to
// parse, the derived complaint would only repeat it.
var derivedFrom = map[string][]string{
	"num_key_value_heads":   {"num_attention_heads"},
	"head_dim":              {"hidden_size", "num_attention_heads"},
	"intermediate_size":     {"num_hidden_layers"},
	"first_k_dense_replace": {"num_hidden_layers"},
}

func (r *cfgReader) anyFailed(fields ...string) bool {
	for _, f := range fields {
		if r.failed[f] {
			return true
		}
	}
	return false
}

func prefixField(err error, prefix string) error {
	if prefix == "" {
		return err
	}
	return errors.New(strings.Replace(err.Error(), "field ", "field "+prefix, 1))
}

// arch reads the shape fields; problems land in r.errs.
func (r *cfgReader) arch() (Arch, []string) {
	var a Arch
	var notes []string
	a.Family = r.string("model_type")
	a.Layers, _ = r.int("num_hidden_layers", true)
	a.Hidden, _ = r.int("hidden_size", true)
	a.Heads, _ = r.int("num_attention_heads", true)
	a.Vocab, _ = r.int("vocab_size", true)
	a.HeadDim, _ = r.int("head_dim", false)
	a.MaxPositions, _ = r.int("max_position_embeddings", false)
	a.TiedEmbeddings, _ = r.bool("tie_word_embeddings")
	a.TorchDtype = r.string("torch_dtype")
	if a.TorchDtype == "" {
		a.TorchDtype = r.string("dtype")
	}
	notes = append(notes, r.moe(&a)...)
	if a.Intermediate, _ = r.int("intermediate_size", false); a.Intermediate == 0 && !r.failed["intermediate_size"] &&
		(a.Experts == 0 || a.FirstDenseLayers > 0) {
		r.fail("intermediate_size", "missing")
	}
	r.mla(&a)
	if kv, ok := r.int("num_key_value_heads", false); ok {
		a.KVHeads = kv
	} else {
		a.KVHeads = a.Heads // MHA: the HF default
	}
	if b, ok := r.bool("attention_bias"); ok {
		a.QKVBias = b
	} else {
		a.QKVBias = a.Family == "qwen2" || a.Family == "qwen2_moe"
	}
	notes = append(notes, r.window(&a)...)
	notes = append(notes, r.quantization(&a)...)
	return a, notes
}

// window reads sliding_window, honouring Qwen's use_sliding_window switch.
func (r *cfgReader) window(a *Arch) []string {
	w, _ := r.int("sliding_window", false)
	use, set := r.bool("use_sliding_window")
	if set && !use {
		return nil
	}
	a.SlidingWindow = w
	if w > 0 {
		if mwl, ok := r.int("max_window_layers", false); ok && set && mwl < a.Layers {
			return []string{fmt.Sprintf("only %d of %d layers use the sliding window; the KV cap assumes all do", a.Layers-mwl, a.Layers)}
		}
		if _, ok := r.raw("layer_types"); ok {
			return []string{"layer_types mixes sliding and full attention; the KV cap assumes every layer slides"}
		}
	}
	return nil
}

// moe reads the mixture-of-experts fields under their several HF names.
func (r *cfgReader) moe(a *Arch) []string {
	for _, f := range []string{"num_local_experts", "n_routed_experts", "num_experts"} {
		if n, ok := r.int(f, false); ok && n > 0 {
			a.Experts = n
			break
		}
	}
	if a.Experts == 0 {
		return nil
	}
	var notes []string
	a.ExpertsPerToken, _ = r.int("num_experts_per_tok", true)
	a.SharedExperts, _ = r.int("n_shared_experts", false)
	a.MoEIntermediate, _ = r.int("moe_intermediate_size", false)
	a.FirstDenseLayers, _ = r.int("first_k_dense_replace", false)
	if s, ok := r.int("shared_expert_intermediate_size", false); ok && s > 0 && a.MoEIntermediate > 0 {
		// Qwen-MoE: one shared expert of width s has the parameters of s/w experts of width w.
		a.SharedExperts = (s + a.MoEIntermediate - 1) / a.MoEIntermediate
		if s%a.MoEIntermediate != 0 {
			notes = append(notes, fmt.Sprintf("shared expert width %d rounded up to %d experts of %d", s, a.SharedExperts, a.MoEIntermediate))
		}
	}
	if _, ok := r.raw("mlp_only_layers"); ok {
		notes = append(notes, "mlp_only_layers is not modelled: every layer after first_k_dense_replace counts as MoE")
	}
	return notes
}

// mla reads the multi-head latent attention fields (DeepSeek-V2/V3).
func (r *cfgReader) mla(a *Arch) {
	if _, ok := r.raw("kv_lora_rank"); !ok {
		return
	}
	a.KVLoraRank, _ = r.int("kv_lora_rank", true)
	a.QLoraRank, _ = r.int("q_lora_rank", false)
	a.QKNopeHeadDim, _ = r.int("qk_nope_head_dim", true)
	a.QKRopeHeadDim, _ = r.int("qk_rope_head_dim", true)
	a.VHeadDim, _ = r.int("v_head_dim", true)
}

// quantization reads quantization_config into a canonical Quantization where the method is known.
func (r *cfgReader) quantization(a *Arch) []string {
	raw, ok := r.raw("quantization_config")
	if !ok {
		return nil
	}
	obj, err := decodeObject(raw, "quantization_config")
	if err != nil {
		r.fail("quantization_config", "want an object")
		return nil
	}
	q := &cfgReader{obj: obj, prefix: r.prefix + "quantization_config.", failed: map[string]bool{}}
	method := strings.ToLower(q.string("quant_method"))
	bits, _ := q.int("bits", false)
	group, _ := q.int("group_size", false)
	r.errs = append(r.errs, q.errs...)
	var notes []string
	switch {
	case method == "awq" && (bits == 4 || bits == 0):
		a.Quantization = string(QuantInt4AWQ)
	case method == "gptq" && (bits == 4 || bits == 0):
		a.Quantization = string(QuantInt4GPTQ)
	case method == "gptq" && bits == 8:
		a.Quantization = string(QuantInt8)
	case method == "fp8" || method == "fbgemm_fp8":
		a.Quantization = string(QuantFP8)
	case method == "compressed-tensors":
		a.Quantization = compressedTensors(obj)
	default:
		a.Quantization = method
	}
	if (a.Quantization == string(QuantInt4AWQ) || a.Quantization == string(QuantInt4GPTQ)) && group > 0 && group != int4GroupSize {
		notes = append(notes, fmt.Sprintf("group_size %d: the formula assumes %d (checkpoint bytes are exact)", group, int4GroupSize))
	}
	if !Quantization(a.Quantization).Valid() {
		notes = append(notes, fmt.Sprintf("quant_method %q is not modelled by the weight formula; the checkpoint's safetensors give its size", method))
	}
	return notes
}

// compressedTensors maps a compressed-tensors config (llm-compressor) to a Quantization by the
// first config group's weight type and bits.
func compressedTensors(obj map[string]json.RawMessage) string {
	var groups map[string]struct {
		Weights struct {
			NumBits int    `json:"num_bits"`
			Type    string `json:"type"`
		} `json:"weights"`
	}
	if err := json.Unmarshal(obj["config_groups"], &groups); err != nil {
		return "compressed-tensors"
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch w := groups[n].Weights; {
		case w.Type == "float" && w.NumBits == 8:
			return string(QuantFP8)
		case w.Type == "int" && w.NumBits == 8:
			return string(QuantInt8)
		case w.Type == "int" && w.NumBits == 4:
			return string(QuantInt4GPTQ)
		}
	}
	return "compressed-tensors"
}

// jsonProblem describes a JSON decoding error without quoting the input: encoding/json's syntax
// errors name the offending character, which for a file that is not JSON at all is the file's
// content.
func jsonProblem(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON (syntax error at byte %d)", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("not a JSON object of the expected shape (a %s at byte %d)", te.Value, te.Offset)
	}
	return errors.New("not valid JSON")
}
