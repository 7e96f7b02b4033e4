package llm

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// SliceKind says how a slice divides a GPU.
type SliceKind string

// Slice kinds.
const (
	SliceGPU    SliceKind = "gpu"    // the whole GPU, exclusive
	SliceMIG    SliceKind = "mig"    // a MIG GPU instance: vLLM sees only its memory
	SliceShared SliceKind = "shared" // an MPS pinned-memory cap or a time-slice memory budget
)

// Slice is memory a vLLM instance runs in.
type Slice struct {
	Board string    `json:"board"`
	Kind  SliceKind `json:"kind"`
	Name  string    `json:"name"` // "gpu", a MIG profile ("3g.40gb"), or "shared-40GiB"
	// MemoryBytes is the slice's memory as CUDA reports it: the whole GPU less driver-reserved
	// memory (VisibleBytes), the MIG profile's memory, or the cap for shared.
	MemoryBytes int64 `json:"memoryBytes"`
	// GPUBytes is the whole GPU's memory, which --gpu-memory-utilization is a fraction of under
	// MPS and time-slicing.
	GPUBytes int64 `json:"gpuBytes"`
	SMs      int   `json:"sms,omitempty"`
}

// Slices lists the slices of board b: the whole GPU, every MIG profile with a known memory size
// (a media/graphics variant such as 1g.10gb+me is folded into its base profile when their memory,
// slices and SMs are the same), and one shared slice per memory cap in bytes.
func Slices(b *gpu.Board, sharedCaps ...int64) []Slice {
	if b == nil {
		return nil
	}
	total := VisibleBytes(b.MemoryMiB)
	out := []Slice{{Board: b.Name, Kind: SliceGPU, Name: "gpu", MemoryBytes: total, GPUBytes: total, SMs: b.SMs}}
	for _, p := range b.Profiles {
		if p.MemoryMiB <= 0 || hasBase(b.Profiles, p) {
			continue
		}
		mem := p.MemoryMiB * MiB
		out = append(out, Slice{Board: b.Name, Kind: SliceMIG, Name: p.Name, MemoryBytes: mem, GPUBytes: mem, SMs: p.SMs})
	}
	for _, c := range sharedCaps {
		out = append(out, Slice{Board: b.Name, Kind: SliceShared, Name: "shared-" + FormatGiB(c), MemoryBytes: c, GPUBytes: total})
	}
	return out
}

// Driver-reserved memory: on an H200 (driver 580.159, CUDA 13.0) nvidia-smi reports 143,771 MiB
// total of which 616 MiB is "Reserved", and cudaMemGetInfo's total — what vLLM multiplies by
// gpu_memory_utilization — is the remaining 143,156 MiB. Other boards are assumed to reserve the
// same share.
const (
	reservedMiBMeasured = 616
	totalMiBMeasured    = 143_771
)

// VisibleBytes is the memory CUDA reports as total on a whole GPU whose nvidia-smi total is
// memoryMiB: the total less the driver-reserved share.
func VisibleBytes(memoryMiB int64) int64 {
	return memoryMiB*MiB - memoryMiB*MiB/totalMiBMeasured*reservedMiBMeasured
}

// hasBase reports whether p is a variant ("+me", "+gfx", "-me" …) of another profile of the
// same shape, memory and SMs.
func hasBase(all []gpu.Profile, p gpu.Profile) bool {
	base, _, cut := strings.Cut(p.Name, "+")
	if !cut {
		if base, cut = strings.CutSuffix(p.Name, "-me"); !cut {
			return false
		}
	}
	for _, q := range all {
		if q.Name == base && q.ComputeSlices == p.ComputeSlices && q.MemorySlices == p.MemorySlices &&
			q.MemoryMiB == p.MemoryMiB && q.SMs == p.SMs {
			return true
		}
	}
	return false
}

// FormatGiB writes n bytes as GiB with up to two decimals ("40GiB", "19.62GiB").
func FormatGiB(n int64) string {
	s := strconv.FormatFloat(float64(n)/float64(GiB), 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "GiB"
}

// VLLMArgs are the vLLM engine arguments that make a fit true.
type VLLMArgs struct {
	GPUMemoryUtilization float64 `json:"gpuMemoryUtilization"`
	MaxModelLen          int     `json:"maxModelLen"`
	MaxNumSeqs           int     `json:"maxNumSeqs"`
	MaxNumBatchedTokens  int     `json:"maxNumBatchedTokens"`
	KVCacheDType         string  `json:"kvCacheDtype,omitempty"`
	EnforceEager         bool    `json:"enforceEager,omitempty"`
	Quantization         string  `json:"quantization,omitempty"`
	// LoRA holds the LoRA flags of an engine that serves adapters; nil without LoRA.
	LoRA *LoRAArgs `json:"lora,omitempty"`
}

// Flags renders the arguments as vLLM command-line flags.
func (v VLLMArgs) Flags() []string {
	f := []string{
		"--gpu-memory-utilization", strconv.FormatFloat(v.GPUMemoryUtilization, 'f', -1, 64),
		"--max-model-len", strconv.Itoa(v.MaxModelLen),
		"--max-num-seqs", strconv.Itoa(v.MaxNumSeqs),
		"--max-num-batched-tokens", strconv.Itoa(v.MaxNumBatchedTokens),
	}
	if v.KVCacheDType != "" {
		f = append(f, "--kv-cache-dtype", v.KVCacheDType)
	}
	if v.Quantization != "" {
		f = append(f, "--quantization", v.Quantization)
	}
	if v.EnforceEager {
		f = append(f, "--enforce-eager")
	}
	if v.LoRA != nil {
		f = append(f, v.LoRA.Flags()...)
	}
	return f
}

// Fit is a model on one slice.
type Fit struct {
	Slice   Slice    `json:"slice"`
	Fits    bool     `json:"fits"`
	Reasons []string `json:"reasons,omitempty"` // why it does not fit, or what was changed to fit
	// Memory holds the terms for the request (KVCache is what Options ask for).
	Memory Memory `json:"memory"`
	// BudgetBytes is ceil(utilization × device memory), what vLLM may use.
	BudgetBytes int64 `json:"budgetBytes"`
	// KVAvailableBytes is the budget left for KV blocks after weights and workspace.
	KVAvailableBytes int64 `json:"kvAvailableBytes"`
	// MaxTokens is the KV cache's capacity in tokens (whole blocks).
	MaxTokens int64 `json:"maxTokens"`
	// MaxConcurrency is how many sequences of the context length the KV cache holds at once.
	MaxConcurrency int64    `json:"maxConcurrency"`
	Args           VLLMArgs `json:"vllmArgs"`
}

// FitSlice fits m under o on slice s. The error is for invalid options only; a model that does
// not fit is a Fit with Fits false and the reasons.
func FitSlice(m Model, o Options, s Slice) (Fit, error) {
	p, err := resolve(m, o)
	if err != nil {
		return Fit{}, err
	}
	return p.fit(s), nil
}

// FitBoard fits m on every slice of board b (see Slices).
func FitBoard(m Model, o Options, b *gpu.Board, sharedCaps ...int64) ([]Fit, error) {
	if b == nil {
		return nil, errors.New("fit board: no board")
	}
	p, err := resolve(m, o)
	if err != nil {
		return nil, err
	}
	slices := Slices(b, sharedCaps...)
	out := make([]Fit, 0, len(slices))
	for _, s := range slices {
		out = append(out, p.fit(s))
	}
	return out, nil
}

// attempt is one utilization/eager combination Fit tries, with what to tell the user if it wins.
type attempt struct {
	util  float64
	eager bool
	note  string
}

// fit tries the requested arguments, then (utilization not given) a higher utilization, then
// --enforce-eager at each, and returns the first that fits or the reasons the first one fails.
func (p plan) fit(s Slice) Fit {
	u, first0 := p.o.GPUMemoryUtilization, ""
	up := maxUtilization(s)
	if u == 0 {
		u = DefaultUtilization
		switch {
		case s.Kind == SliceShared:
			u = sharedUtilization(s)
		case up > 0 && up < u:
			first0 = fmt.Sprintf("--gpu-memory-utilization lowered to %.2f: the %s CUDA context does not fit in %.0f%% of %s",
				up, gib(cudaContextBytes), 100*(1-u), gib(s.MemoryBytes))
			u = up
		}
	}
	tries := []attempt{{util: u, eager: p.o.EnforceEager, note: first0}}
	raise := p.o.GPUMemoryUtilization == 0 && s.Kind != SliceShared && up > u
	note := fmt.Sprintf("fits only at --gpu-memory-utilization %.2f (default %.2f)", up, u)
	if raise {
		tries = append(tries, attempt{util: up, eager: p.o.EnforceEager, note: note})
	}
	if !p.o.EnforceEager {
		tries = append(tries, attempt{util: u, eager: true, note: "CUDA graphs do not fit: --enforce-eager (slower decode)"})
		if raise {
			tries = append(tries, attempt{util: up, eager: true, note: note + " with --enforce-eager (slower decode)"})
		}
	}
	first := p.evaluate(s, tries[0])
	for i, t := range tries {
		f := first
		if i > 0 {
			f = p.evaluate(s, t)
		}
		if f.Fits {
			if t.note != "" {
				f.Reasons = append(f.Reasons, t.note)
			}
			return f
		}
	}
	first.Reasons = p.whyNot(first)
	return first
}

// sharedUtilization is the fraction of the whole GPU a shared slice's cap allows once its own
// CUDA context is inside the cap, rounded down to 0.001.
func sharedUtilization(s Slice) float64 {
	if s.GPUBytes <= 0 {
		return 0
	}
	return math.Floor(float64(s.MemoryBytes-cudaContextBytes)/float64(s.GPUBytes)*1000) / 1000
}

// maxUtilization is the highest utilization (0.01 steps, at most MaxAutoUtilization) that still
// leaves the CUDA context free memory at start.
func maxUtilization(s Slice) float64 {
	if s.MemoryBytes <= cudaContextBytes {
		return 0
	}
	u := math.Floor(float64(s.MemoryBytes-cudaContextBytes)/float64(s.MemoryBytes)*100) / 100
	return min(u, MaxAutoUtilization)
}

// evaluate computes one attempt.
func (p plan) evaluate(s Slice, t attempt) Fit {
	seen := s.MemoryBytes // the device memory vLLM sees, which picks its batched-token default
	if s.Kind == SliceShared {
		seen = s.GPUBytes
	}
	mem := p.memory(s.Board, seen, t.util, t.eager)
	budget := int64(math.Ceil(t.util * float64(seen)))
	f := Fit{Slice: s, Memory: mem, BudgetBytes: budget}
	if s.Kind == SliceShared {
		f.Memory.Total = mem.Budget() + mem.CUDAContext // the cap this request needs
		f.Memory.Headroom = 0
	}
	fixed := mem.Weights + mem.Activations + mem.NonTorch + mem.CUDAGraphs + mem.LoRA
	f.KVAvailableBytes = budget - fixed
	if blockBytes := p.perToken * DefaultBlockSize; f.KVAvailableBytes > 0 && blockBytes > 0 {
		f.MaxTokens = f.KVAvailableBytes / blockBytes * DefaultBlockSize
		f.MaxConcurrency = f.MaxTokens / p.seqTokens
	}
	startOK := budget+cudaContextBytes <= s.MemoryBytes && s.MemoryBytes <= s.GPUBytes && t.util > 0
	switch {
	case s.MemoryBytes > s.GPUBytes:
		f.Reasons = append(f.Reasons, fmt.Sprintf("%s exceeds the GPU's %s", s.label(), gib(s.GPUBytes)))
	case !startOK:
		f.Reasons = append(f.Reasons, fmt.Sprintf("--gpu-memory-utilization %.3g of %s leaves less than the %s CUDA context free in %s (%s)",
			t.util, gib(seen), gib(cudaContextBytes), s.label(), gib(s.MemoryBytes)))
	}
	f.Fits = startOK && f.MaxConcurrency >= 1 && f.MaxTokens >= mem.KVTokens
	f.Args = VLLMArgs{
		GPUMemoryUtilization: t.util, MaxModelLen: p.o.Context, MaxNumSeqs: mem.MaxNumSeqs,
		MaxNumBatchedTokens: mem.MaxNumBatchedTokens, EnforceEager: t.eager, Quantization: p.quantFlag(),
	}
	if p.kvElem == 1 {
		f.Args.KVCacheDType = KVCacheFP8
	}
	if l := p.o.LoRA; l != nil {
		f.Args.LoRA = &LoRAArgs{MaxLoRAs: l.MaxLoRAs, MaxRank: l.MaxRank, MaxCPULoRAs: max(l.MaxCPULoRAs, l.MaxLoRAs)}
	}
	return f
}

// quantFlag is --quantization: needed when the weights are quantized by formula (a catalog model,
// or fp8 online quantization of a 16-bit checkpoint); a quantized checkpoint is detected by vLLM.
func (p plan) quantFlag() string {
	if p.source == "checkpoint" {
		return ""
	}
	return p.q.VLLMFlag()
}
