package llm

import (
	"fmt"
	"strconv"
	"strings"
)

// gib writes n bytes as "14.96 GiB".
func gib(n int64) string { return strings.TrimSuffix(FormatGiB(n), "GiB") + " GiB" }

// whyNot explains a failed attempt, the binding limit first, then what would help. It replaces
// the attempt's own reasons (which only say why an instance could not start).
func (p plan) whyNot(f Fit) []string {
	mem, s := f.Memory, f.Slice
	work := mem.Activations + mem.NonTorch + mem.CUDAGraphs
	var r []string
	weightBound := false
	switch {
	case mem.Weights > s.MemoryBytes:
		r = append(r, fmt.Sprintf("weights %s exceed %s's %s", gib(mem.Weights), s.label(), gib(s.MemoryBytes)))
		weightBound = true
	case f.BudgetBytes+cudaContextBytes > s.MemoryBytes || s.MemoryBytes > s.GPUBytes:
		return f.Reasons // evaluate said why the instance cannot start
	case mem.Weights > f.BudgetBytes:
		r = append(r, fmt.Sprintf("weights %s exceed the %s budget (%.3g × %s)",
			gib(mem.Weights), gib(f.BudgetBytes), mem.Utilization, gib(budgetBase(s))))
		weightBound = true
	case f.MaxTokens == 0:
		r = append(r, fmt.Sprintf("weights %s + workspace %s (activations, non-torch, CUDA graphs) leave no KV cache in the %s budget",
			gib(mem.Weights), gib(work), gib(f.BudgetBytes)))
		weightBound = true
	case f.MaxConcurrency < 1:
		r = append(r, fmt.Sprintf("KV cache holds %s tokens, less than one %s-token sequence (--max-model-len %s would fit)",
			group(f.MaxTokens), group(int64(p.o.Context)), strconv.FormatInt(f.MaxTokens, 10)))
	case p.o.TokenBudget > 0:
		r = append(r, fmt.Sprintf("KV cache holds %s tokens, asked a budget of %s", group(f.MaxTokens), group(mem.KVTokens)))
	default:
		r = append(r, fmt.Sprintf("KV cache holds %s tokens = %d %s of %s, asked %d (%s tokens)",
			group(f.MaxTokens), f.MaxConcurrency, plural(f.MaxConcurrency, "sequence"), group(int64(p.o.Context)),
			p.o.Concurrency, group(mem.KVTokens)))
	}
	if weightBound && p.q.Sixteen() {
		r = append(r, fmt.Sprintf("quantized weights would take %s (fp8) or %s (int4-awq)",
			gib(p.a.WeightBytes(QuantFP8)), gib(p.a.WeightBytes(QuantInt4AWQ))))
	}
	if !weightBound && p.kvElem == 2 && p.perToken > 0 {
		half := (p.perToken + 1) / 2 * DefaultBlockSize
		r = append(r, fmt.Sprintf("--kv-cache-dtype fp8 would hold %s tokens", group(f.KVAvailableBytes/half*DefaultBlockSize)))
	}
	return r
}

// label names the slice in a sentence.
func (s Slice) label() string {
	switch s.Kind {
	case SliceGPU:
		return "the whole " + s.Board
	case SliceShared:
		return "the " + s.Name + " cap"
	}
	return s.Board + " " + s.Name
}

// budgetBase is the memory --gpu-memory-utilization is a fraction of on slice s.
func budgetBase(s Slice) int64 {
	if s.Kind == SliceShared {
		return s.GPUBytes
	}
	return s.MemoryBytes
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// group writes n with thousands separators: 131,072.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Notes says what a fit of m under o assumes: the model's own notes, then how the weights and
// KV cache are sized. The error is for invalid options.
func Notes(m Model, o Options) ([]string, error) {
	p, err := resolve(m, o)
	if err != nil {
		return nil, err
	}
	notes := append([]string(nil), m.Notes...)
	switch {
	case p.source == "checkpoint":
		notes = append(notes, fmt.Sprintf("weights %s from the checkpoint's safetensors headers", gib(p.weights)))
	case p.q == QuantFP8:
		notes = append(notes, fmt.Sprintf("weights %s: fp8 (vLLM quantizes 16-bit weights online with --quantization fp8, or loads an fp8 checkpoint)", gib(p.weights)))
	case !p.q.Sixteen():
		notes = append(notes, fmt.Sprintf("weights %s: needs a pre-quantized %s checkpoint of the model", gib(p.weights), p.q))
	default:
		notes = append(notes, fmt.Sprintf("weights %s: %s by formula", gib(p.weights), p.q))
	}
	notes = append(notes, fmt.Sprintf("KV cache %s bytes/token (%d-byte elements)", group(p.perToken), p.kvElem))
	if w := m.Arch.SlidingWindow; w > 0 && int64(p.o.Context) > p.seqTokens {
		notes = append(notes, fmt.Sprintf("sliding window %s: a sequence keeps at most %s tokens of KV", group(int64(w)), group(p.seqTokens)))
	}
	if o.Context == 0 {
		notes = append(notes, fmt.Sprintf("context %s assumed (--context to change; the model allows %s)",
			group(int64(p.o.Context)), group(int64(m.Arch.MaxPositions))))
	}
	return notes, nil
}
