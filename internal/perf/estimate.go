package perf

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Workload is a request shape: prompt and output lengths, and (for Estimate) how many requests
// a closed-loop client keeps in flight.
type Workload struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// Concurrency is used by Estimate only: requests kept in flight. MaxRate ignores it.
	Concurrency int `json:"concurrency,omitempty"`
}

// maxTokens bounds request lengths so that every product in the model stays finite and exact.
const maxTokens = 1 << 24

// Validate returns every problem with the workload at once.
func (w Workload) Validate() error {
	var errs []error
	if w.InputTokens < 1 || w.InputTokens > maxTokens {
		errs = append(errs, fmt.Errorf("validate workload: input tokens %d outside [1, %d]", w.InputTokens, maxTokens))
	}
	if w.OutputTokens < 1 || w.OutputTokens > maxTokens {
		errs = append(errs, fmt.Errorf("validate workload: output tokens %d outside [1, %d]", w.OutputTokens, maxTokens))
	}
	if w.Concurrency < 0 || w.Concurrency > maxTokens {
		errs = append(errs, fmt.Errorf("validate workload: concurrency %d outside [0, %d]", w.Concurrency, maxTokens))
	}
	return errors.Join(errs...)
}

// Limit says what stops an engine from doing more: a closed set.
type Limit string

const (
	LimitNone      Limit = ""             // nothing: the answer is the physics
	LimitTTFT      Limit = "ttft"         // the TTFT p99 target binds
	LimitTPOT      Limit = "tpot"         // the TPOT p99 target binds
	LimitSaturated Limit = "saturated"    // the engine cannot keep up at a higher rate
	LimitKV        Limit = "kv-capacity"  // the KV cache is full
	LimitMaxSeqs   Limit = "max-seqs"     // the engine's sequence limit binds
	LimitNoFit     Limit = "does-not-fit" // the weights, or one sequence of the engine's context with them, do not fit the slice's memory
)

// Result is the steady state of a closed-loop client on one engine.
type Result struct {
	Concurrency        int           `json:"concurrency"`
	Running            int           `json:"running"` // sequences the engine runs; the rest queue
	RequestsPerSec     float64       `json:"requestsPerSec"`
	OutputTokensPerSec float64       `json:"outputTokensPerSec"`
	TotalTokensPerSec  float64       `json:"totalTokensPerSec"` // prompt + output tokens
	TTFT               time.Duration `json:"ttft"`
	TPOT               time.Duration `json:"tpot"`
	E2E                time.Duration `json:"e2e"`
	// Limit is why Running < Concurrency (max-seqs, kv-capacity), or LimitNoFit: the weights, or
	// one sequence of the engine's context, do not fit, and the numbers are what the slice's
	// compute and bandwidth alone would give.
	Limit Limit `json:"limit,omitempty"`
}

// Estimate is the steady state of Concurrency requests kept in flight on e while l holds:
// continuous batching with chunked prefill, every step carrying the running decodes plus the
// average prefill load (doc.go, "Closed loop"). Means, not percentiles.
func (e *Engine) Estimate(w Workload, l Load) (Result, error) {
	if err := w.Validate(); err != nil {
		return Result{}, fmt.Errorf("estimate %s on %s: %w", e.m.name, e.s.Name(), err)
	}
	c := max(w.Concurrency, 1)
	res := Result{Concurrency: c}
	in, out := float64(w.InputTokens), float64(w.OutputTokens)
	running := min(c, e.m.opts.MaxSeqs)
	if running < c {
		res.Limit = LimitMaxSeqs
	}
	if !e.FitsWeights() {
		res.Limit = LimitNoFit
	} else if fit := int(e.KVCapacityTokens() / int64(w.InputTokens+w.OutputTokens)); fit < running {
		running, res.Limit = fit, LimitKV
	}
	res.Running = running
	if running == 0 {
		return res, nil
	}
	r := float64(running)
	o1 := out - 1
	budget := float64(e.maxBatchedTokens)
	d := r * o1 / (1 + o1)
	var k float64
	for range 3 { // decode seqs take budget from prefill chunks, which changes the split
		k = math.Ceil(in / math.Max(1, budget-d))
		d = r * o1 / (k + o1)
	}
	steps := k + o1
	avg := work{p: r * in / steps, ps: r / steps, pairs: r * in * (in + 1) / 2 / steps, d: d, kv: d * (in + out/2)}
	t := e.step(avg, l).total
	chunk := math.Min(in, math.Max(1, budget-d))
	own := avg
	own.p += chunk
	own.ps++
	own.pairs += in * (in + 1) / 2 / k
	tOwn := e.step(own, l).total
	ttft := t/2 + k*tOwn
	x := r / (ttft + o1*t)
	if c > running {
		ttft += float64(c-running) / x
	}
	res.RequestsPerSec = x
	res.OutputTokensPerSec = x * out
	res.TotalTokensPerSec = x * (in + out)
	res.TTFT, res.TPOT = seconds(ttft), seconds(t)
	res.E2E = seconds(ttft + o1*t)
	return res, nil
}
