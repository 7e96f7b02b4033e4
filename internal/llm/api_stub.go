package llm

// STUB: the signatures below are the package's contract; the bodies are being written.

import "errors"

var errTODO = errors.New("not implemented yet")

// Quantization is how weights are stored: bf16, fp16, fp8, int8, int4-awq, int4-gptq.
type Quantization string

// Lookup finds a catalog architecture by slug ("llama-3.1-8b"), case-insensitively.
func Lookup(name string) (Arch, error) { return Arch{}, errTODO }

// Catalog returns every catalog architecture, sorted by slug.
func Catalog() []Arch { return nil }

// Params returns the total parameter count and the parameters active per token (differs for MoE).
func (a Arch) Params() (total, active int64) { return 0, 0 }

// WeightBytes returns the bytes the weights take at quantization q, including scale overheads.
func (a Arch) WeightBytes(q Quantization) int64 { return 0 }

// KVBytesPerToken returns the KV-cache bytes one token takes in all layers, with elemBytes bytes
// per cached element (2 for bf16/fp16, 1 for fp8).
func (a Arch) KVBytesPerToken(elemBytes int) int64 { return 0 }
