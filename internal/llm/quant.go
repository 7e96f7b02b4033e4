package llm

import (
	"fmt"
	"strings"
)

// Quantization is how weights are stored: bf16, fp16, fp8, int8, int4-awq, int4-gptq.
type Quantization string

// The quantizations the memory model knows.
const (
	QuantBF16     Quantization = "bf16"
	QuantFP16     Quantization = "fp16"
	QuantFP8      Quantization = "fp8"
	QuantInt8     Quantization = "int8"
	QuantInt4AWQ  Quantization = "int4-awq"
	QuantInt4GPTQ Quantization = "int4-gptq"
)

// Quantizations lists every known quantization, in a fixed order.
func Quantizations() []Quantization {
	return []Quantization{QuantBF16, QuantFP16, QuantFP8, QuantInt8, QuantInt4AWQ, QuantInt4GPTQ}
}

// quantSpellings maps the spellings seen in HF configs, vLLM flags and model names to a Quantization.
var quantSpellings = map[string]Quantization{
	"bf16": QuantBF16, "bfloat16": QuantBF16,
	"fp16": QuantFP16, "float16": QuantFP16, "f16": QuantFP16, "half": QuantFP16,
	"fp8": QuantFP8, "f8": QuantFP8, "fp8_e4m3": QuantFP8, "fp8-e4m3": QuantFP8, "e4m3": QuantFP8,
	"f8_e4m3": QuantFP8, "fbgemm_fp8": QuantFP8, "w8a8-fp8": QuantFP8, "fp8-dynamic": QuantFP8,
	"int8": QuantInt8, "i8": QuantInt8, "w8a8": QuantInt8, "w8a8-int8": QuantInt8, "w8a16": QuantInt8,
	"bitsandbytes-8bit": QuantInt8, "smoothquant": QuantInt8,
	"int4-awq": QuantInt4AWQ, "awq": QuantInt4AWQ, "awq_marlin": QuantInt4AWQ, "int4_awq": QuantInt4AWQ,
	"w4a16-awq": QuantInt4AWQ, "awq-int4": QuantInt4AWQ,
	"int4-gptq": QuantInt4GPTQ, "gptq": QuantInt4GPTQ, "gptq_marlin": QuantInt4GPTQ, "int4_gptq": QuantInt4GPTQ,
	"w4a16": QuantInt4GPTQ, "w4a16-gptq": QuantInt4GPTQ, "gptq-int4": QuantInt4GPTQ, "int4": QuantInt4GPTQ,
}

// ParseQuantization accepts the canonical names and common spellings, case-insensitively:
// bf16/bfloat16, fp16/float16/half, fp8/fp8_e4m3/fbgemm_fp8, int8/w8a8, awq/awq_marlin,
// gptq/gptq_marlin/w4a16 (plain "int4" and "w4a16" mean GPTQ layout, the compressed-tensors default).
func ParseQuantization(s string) (Quantization, error) {
	key := strings.ToLower(strings.TrimSpace(s))
	if q, ok := quantSpellings[key]; ok {
		return q, nil
	}
	names := make([]string, 0, len(Quantizations()))
	for _, q := range Quantizations() {
		names = append(names, string(q))
	}
	return "", fmt.Errorf("parse quantization %q: unknown (valid: %s; also awq, gptq, w4a16, w8a8, fp8_e4m3)",
		s, strings.Join(names, ", "))
}

// Valid reports whether q is one of the canonical quantizations.
func (q Quantization) Valid() bool {
	for _, k := range Quantizations() {
		if q == k {
			return true
		}
	}
	return false
}

// bitsPerWeight is the storage width of one quantized element of a linear layer.
func (q Quantization) bitsPerWeight() int64 {
	switch q {
	case QuantFP8, QuantInt8:
		return 8
	case QuantInt4AWQ, QuantInt4GPTQ:
		return 4
	}
	return 16
}

// Sixteen reports whether q keeps weights at 16 bits (bf16 or fp16).
func (q Quantization) Sixteen() bool { return q == QuantBF16 || q == QuantFP16 }

// VLLMFlag returns the value for vLLM's --quantization, "" when none is needed (16-bit weights).
// vLLM picks the Marlin kernels for AWQ/GPTQ checkpoints by itself on Ampere and newer; the plain
// method names are what it accepts everywhere.
func (q Quantization) VLLMFlag() string {
	switch q {
	case QuantFP8:
		return "fp8"
	case QuantInt4AWQ:
		return "awq"
	case QuantInt4GPTQ:
		return "gptq"
	}
	// int8 (W8A8) has no online mode in vLLM: it needs a pre-quantized checkpoint, whose
	// quantization_config vLLM reads by itself. 16-bit needs no flag.
	return ""
}

// KV-cache element widths: "auto" stores the KV cache in the model's activation dtype (2 bytes for
// bf16/fp16; vLLM runs float32 checkpoints in 16 bits), "fp8" (vLLM --kv-cache-dtype fp8, e4m3 on
// Hopper and newer) in one byte.
const (
	KVCacheAuto = "auto"
	KVCacheFP8  = "fp8"
)

// KVElemBytes returns the bytes per cached element for a --kv-cache-dtype value.
func KVElemBytes(kvDType string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(kvDType)) {
	case "", KVCacheAuto, "bf16", "bfloat16", "fp16", "float16":
		return 2, nil
	case KVCacheFP8, "fp8_e4m3", "fp8_e5m2":
		return 1, nil
	}
	return 0, fmt.Errorf("parse kv-cache dtype %q: unknown (valid: auto, fp8)", kvDType)
}
