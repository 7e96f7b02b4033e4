package perf

import (
	"fmt"
	"math"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// Engine is a Model placed on a Slice: one inference-engine replica. It is immutable and safe
// for concurrent use; StepTime does not allocate.
type Engine struct {
	m     *Model
	s     Slice
	r     resources
	alone rates // rates alone on an otherwise idle board, cached for the hot path
	// gOwn is bwSaturation(r.sm/r.bw), the share of its bandwidth the engine's own SMs pull:
	// fixed for the engine, and a power function that every step would otherwise compute again
	gOwn  float64
	kvCap int64 // KV-cache capacity in tokens; 0: the weights do not fit
	// maxBatchedTokens is the step token budget: Options.MaxBatchedTokens, or vLLM's default
	// for the device the engine sees.
	maxBatchedTokens int
	// maxSeqs is the engine's sequence limit: Options.MaxSeqs, or vLLM's default for the device.
	maxSeqs  int
	measured *measuredBinding
	// measuredOnly: a measured table without a model (NewMeasuredEngine).
	measuredOnly bool
}

// Place puts m on s. It fails when the slice is invalid or the board lacks the compute type.
func (m *Model) Place(s Slice) (*Engine, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("place %s: %w", m.name, err)
	}
	peak := s.Board.BF16TFLOPS
	switch m.computeKind {
	case "fp8":
		if s.Board.FP8TFLOPS > 0 {
			// FP8 GEMMs reach FP8MFU of the FP8 peak, where BF16 ones reach MFU of theirs.
			peak = s.Board.FP8TFLOPS * m.opts.FP8MFU / m.opts.MFU
		}
	case "int8":
		peak = 2 * s.Board.BF16TFLOPS // dense INT8 is twice BF16 on Ampere and Hopper
	}
	if tp := s.TensorParallel; tp > 1 && m.arch.Heads%tp != 0 {
		return nil, fmt.Errorf("place %s on %s: tensor parallel %d does not divide the %d attention heads", m.name, s.Name(), tp, m.arch.Heads)
	}
	e := &Engine{m: m, s: s, r: s.resolve(peak)}
	e.r.kvShare = m.kvShare(e.r.tp)
	e.r.busBW = m.busBandwidth(s.Board)
	e.r.commSM = m.commSMShare(s.Board)
	e.gOwn = e.bwSaturation(e.r.sm / e.r.bw)
	e.alone = e.aloneRates(0)
	e.maxSeqs, e.maxBatchedTokens = e.batchLimits()
	e.kvCap = e.kvCapacity()
	return e, nil
}

// Model and Slice return what the engine was built from.
func (e *Engine) Model() *Model { return e.m }
func (e *Engine) Slice() Slice  { return e.s }

// Batch is the work of one engine step (one forward pass under continuous batching).
type Batch struct {
	// PrefillTokens is the number of prompt tokens computed this step (all prefill chunks).
	PrefillTokens int `json:"prefillTokens"`
	// PrefillSeqs is the number of sequences with a prefill chunk this step; 0 with
	// PrefillTokens > 0 counts as 1. Each gets a logits row when its prompt completes.
	PrefillSeqs int `json:"prefillSeqs"`
	// PrefillPairs is the number of (query, key) pairs the prefill chunks attend over; 0 means
	// each chunk is a whole fresh prompt of equal length L = PrefillTokens/PrefillSeqs, i.e.
	// PrefillTokens × (L+1)/2. A chunk of c tokens after o cached ones has c·o + c(c+1)/2.
	PrefillPairs int64 `json:"prefillPairs"`
	// DecodeSeqs is the number of sequences generating one token this step.
	DecodeSeqs int `json:"decodeSeqs"`
	// KVTokens is the number of cached tokens the decode sequences attend over (the sum of their
	// context lengths; with a sliding window, capped at the window).
	KVTokens int64 `json:"kvTokens"`
}

// ChunkPairs returns the (query, key) pairs of a prefill chunk of c tokens after o cached ones.
func ChunkPairs(c, o int) int64 {
	if c <= 0 {
		return 0
	}
	cc, oo := int64(c), int64(max(o, 0))
	return cc*oo + cc*(cc+1)/2
}

// work is a Batch in float64, so that averages (fractional batches) flow through the same code.
type work struct {
	p, ps, pairs, d, kv float64
}

func (b Batch) work() work {
	w := work{p: float64(max(b.PrefillTokens, 0)), ps: float64(max(b.PrefillSeqs, 0)),
		pairs: float64(max(b.PrefillPairs, 0)), d: float64(max(b.DecodeSeqs, 0)), kv: float64(max(b.KVTokens, 0))}
	return w.defaults()
}

func (w work) defaults() work {
	if w.p > 0 && w.ps < 1 {
		w.ps = 1
	}
	if w.p > 0 && w.pairs == 0 {
		w.pairs = w.p * (w.p/w.ps + 1) / 2
	}
	return w
}

// StepTime is the wall time of one engine step of b on the engine's slice while l describes the
// neighbours. An empty batch takes no time.
func (e *Engine) StepTime(b Batch, l Load) time.Duration {
	if e.measuredOnly {
		t, _ := e.measuredStep(b, l)
		return t
	}
	if e.measured != nil && b.PrefillTokens == 0 && b.DecodeSeqs > 0 {
		if t, ok := e.measured.latency(float64(b.DecodeSeqs), l); ok {
			return seconds(t)
		}
	}
	return seconds(e.step(b.work(), l).total)
}

// AtLoad is an engine's step times at one load: what its rates take from the load alone (the
// board's busy share, an MPS client's neighbours at a set duty) is computed once, not at every
// step. Safe for concurrent use, as the engine is.
type AtLoad struct {
	e *Engine
	l Load
	r loadRates
}

// AtLoad is e at load l.
func (e *Engine) AtLoad(l Load) *AtLoad {
	return &AtLoad{e: e, l: l, r: e.ratesAt(l)}
}

// Engine is the engine a is the step times of. An AtLoad is read only, so callers may share one
// among every user of the same engine and load.
func (a *AtLoad) Engine() *Engine { return a.e }

// StepTime is e.StepTime(b, l), the same duration.
func (a *AtLoad) StepTime(b Batch) time.Duration {
	e := a.e
	if e.measuredOnly || e.measured != nil {
		return e.StepTime(b, a.l)
	}
	return seconds(e.stepAt(b.work(), &a.r).total)
}

// Breakdown splits a step's time into what bounds it.
type Breakdown struct {
	Compute  time.Duration `json:"compute"`  // parts bound by tensor-core FLOPs
	Memory   time.Duration `json:"memory"`   // parts bound by memory bandwidth
	Comm     time.Duration `json:"comm"`     // tensor-parallel all-reduce
	Latency  time.Duration `json:"latency"`  // fixed kernel latency of the layers
	Overhead time.Duration `json:"overhead"` // host time per step
	Wait     time.Duration `json:"wait"`     // waiting for other time-sliced contexts
	Total    time.Duration `json:"total"`
	Clock    float64       `json:"clock"` // clock as a fraction of boost under the power limit
}

// Breakdown is StepTime with its parts.
func (e *Engine) Breakdown(b Batch, l Load) Breakdown {
	if e.measuredOnly {
		t, _ := e.measuredStep(b, l)
		return Breakdown{Total: t, Clock: e.alone.clock}
	}
	s := e.step(b.work(), l)
	return Breakdown{Compute: seconds(s.compute), Memory: seconds(s.memory), Comm: seconds(s.comm),
		Latency: seconds(s.latency), Overhead: seconds(s.overhead), Wait: seconds(s.wait), Total: seconds(s.total), Clock: s.clock}
}

func seconds(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s > math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return time.Duration(s * 1e9)
}

// KVCapacityTokens is how many tokens of KV cache fit on the slice once the weights and the
// engine's other memory are placed (per replica, over all its tensor-parallel GPUs); 0 when the
// weights do not fit. See memory.go for where the number comes from.
func (e *Engine) KVCapacityTokens() int64 { return e.kvCap }

// WithKVCapacity returns a copy of e with the KV capacity set to tokens (for example from a
// memory estimate made with other serving options, or a measurement).
func (e *Engine) WithKVCapacity(tokens int64) *Engine {
	c := *e
	c.kvCap = max(tokens, 0)
	return &c
}

// WithMaxSeqs returns a copy of e with the sequence limit set to n (vLLM --max-num-seqs, for
// example a replica's own argument); e itself when n is not positive.
func (e *Engine) WithMaxSeqs(n int) *Engine {
	if n <= 0 {
		return e
	}
	c := *e
	c.maxSeqs = n
	return &c
}

// MaxBatchedTokens is the engine's per-step token budget.
func (e *Engine) MaxBatchedTokens() int { return e.maxBatchedTokens }

// MaxSeqs is the engine's sequence limit (vLLM --max-num-seqs): Options.MaxSeqs, or vLLM's
// default for the device the engine sees (VLLMBatchDefaults).
func (e *Engine) MaxSeqs() int { return e.maxSeqs }

// FitsWeights reports whether the weights and runtime reserve fit in the slice's usable memory.
func (e *Engine) FitsWeights() bool { return e.KVCapacityTokens() > 0 }

// TensorParallelDegrees are the tensor-parallel degrees above 1 that m can run at over whole
// GPUs of board b within one node: 2, 4 and 8 where the degree divides the attention heads (vLLM
// requires it) and the board's link connects that many GPUs (an NVLink bridge pairs two).
func (m *Model) TensorParallelDegrees(b *gpu.Board) []int {
	var out []int
	for _, tp := range []int{2, 4, 8} {
		if m.arch.Heads%tp != 0 || b == nil || b.Interconnect.MaxGPUs > 0 && tp > b.Interconnect.MaxGPUs {
			continue
		}
		out = append(out, tp)
	}
	return out
}
