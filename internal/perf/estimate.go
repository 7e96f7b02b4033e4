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
	// PowerWatts is the replica's mean power (its share of the board's idle power plus the
	// dynamic power of its steps), JoulesPerToken that over its output tokens per second.
	PowerWatts     float64 `json:"powerWatts"`
	JoulesPerToken float64 `json:"joulesPerToken"`
	// Limit is why Running < Concurrency (max-seqs, kv-capacity), or LimitNoFit: the weights, or
	// one sequence of the engine's context, do not fit, and the numbers are what the slice's
	// compute and bandwidth alone would give.
	Limit Limit `json:"limit,omitempty"`
}

// KVTokensPerSeq is the admission rule every part of the model uses: a running sequence holds,
// on average over its life, its prompt and half its output in the KV cache (vLLM allocates blocks
// as tokens are computed, and running sequences are at staggered points of their output). A
// cache of N tokens runs N / KVTokensPerSeq sequences of w at once; the rest wait.
func (w Workload) KVTokensPerSeq() float64 {
	return float64(w.InputTokens) + float64(w.OutputTokens)/2
}

// kvPerSeq is the KV tokens one running sequence of w takes under the engine's admission rule.
func (e *Engine) kvPerSeq(w Workload) float64 {
	if e.m.opts.ReserveFullOutput {
		return float64(w.InputTokens) + float64(w.OutputTokens)
	}
	return w.KVTokensPerSeq()
}

// Running is how many of c requests shaped like w the engine runs at once, and what limits it:
// its sequence limit (MaxSeqs) or its KV cache under KVTokensPerSeq (prompt + whole output with
// Options.ReserveFullOutput). The rest wait in the engine's queue, as vLLM keeps them.
func (e *Engine) Running(w Workload, c int) (int, Limit) {
	running, lim := min(c, e.maxSeqs), LimitNone
	if running < c {
		lim = LimitMaxSeqs
	}
	if !e.FitsWeights() {
		return running, LimitNoFit
	}
	if fit := int(float64(e.KVCapacityTokens()) / e.kvPerSeq(w)); fit < running {
		running, lim = max(fit, 0), LimitKV
	}
	return running, lim
}

// Estimate is the steady state of Concurrency requests kept in flight on e while l holds:
// continuous batching with chunked prefill as vLLM schedules it (every step runs the decodes
// first, then prefill chunks in arrival order up to the token budget), every step carrying the
// running decodes plus the average prefill load (doc.go, "Closed loop"). A prompt waits behind
// the prefills ahead of it; requests beyond what the engine runs (Running) wait for a slot, and
// both waits count in TTFT. Means, not percentiles.
func (e *Engine) Estimate(w Workload, l Load) (Result, error) {
	if err := w.Validate(); err != nil {
		return Result{}, fmt.Errorf("estimate %s on %s: %w", e.m.name, e.s.Name(), err)
	}
	if e.measuredOnly {
		return Result{}, fmt.Errorf("estimate %s on %s: %w", e.m.name, e.s.Name(), errMeasuredOnly)
	}
	c := max(w.Concurrency, 1)
	res := Result{Concurrency: c}
	running, lim := e.Running(w, c)
	res.Running, res.Limit = running, lim
	if running == 0 {
		return res, nil
	}
	cl := e.closedLoop(float64(w.InputTokens), float64(w.OutputTokens), float64(running), l)
	x := float64(running) / cl.e2e
	ttft := cl.ttft
	if c > running {
		ttft += float64(c-running) / x
	}
	out := float64(w.OutputTokens)
	res.RequestsPerSec = x
	res.OutputTokensPerSec = x * out
	res.TotalTokensPerSec = x * (float64(w.InputTokens) + out)
	res.TTFT, res.TPOT = seconds(ttft), seconds(cl.tpot)
	res.PowerWatts = e.IdleWatts() + cl.joules/cl.tpot
	if res.OutputTokensPerSec > 0 {
		res.JoulesPerToken = res.PowerWatts / res.OutputTokensPerSec
	}
	res.E2E = seconds(ttft + (out-1)*cl.tpot)
	return res, nil
}

// loopState is the closed loop's steady state: mean TTFT of a running request, mean step time
// (TPOT), and a running request's whole life (TTFT + the other output tokens' steps).
type loopState struct{ ttft, tpot, e2e, joules float64 }

// closedLoop solves r running requests of in prompt and out output tokens. A request waits kq
// steps for prefill budget, spends k steps on its own chunks and out−1 steps decoding, so d =
// r(out−1)/(kq+k+out−1) sequences decode in a mean step and r·in/(kq+k+out−1) prompt tokens are
// prefilled. Its own chunks get the budget B − d′ left by the other requests' decodes d′ =
// (r−1)(out−1)/(…); the last chunk is what remains of the prompt, so TTFT is continuous in the
// prompt length across a chunk boundary. The wait is an M/D/1 queue in time on the prefill
// budget: a prompt's service S is in/(B − d′) of a step whose budget is all prefill, the
// utilisation ρ = X·S at the throughput X = r / (TTFT + (out−1)·t), and the mean wait behind the
// prefills ahead of it ρS / (2(1−ρ)).
func (e *Engine) closedLoop(in, out, r float64, l Load) loopState {
	budget := float64(e.maxBatchedTokens)
	var st loopState
	kq := 0.0
	for range 40 {
		var svc float64
		st, svc = e.loopAt(in, out, r, kq, budget, l)
		if r <= 1 {
			break
		}
		rho := math.Min(0.98, r/st.e2e*svc)
		wait := rho * svc / (2 * (1 - rho))
		next := wait / math.Max(st.tpot, 1e-9)
		if math.Abs(next-kq) <= 1e-4*(1+kq) {
			break
		}
		kq = (kq + next) / 2
	}
	return st
}

// loopAt is the closed loop's state when a prompt waits kq steps for prefill budget; it returns
// the state and the prompt's own service time (its chunk steps).
func (e *Engine) loopAt(in, out, r, kq, budget float64, l Load) (loopState, float64) {
	o1 := out - 1
	k := math.Ceil(in / budget)
	var d, dOthers, bOwn float64
	for range 4 { // decodes take budget from the prompt's chunks, which changes k
		steps := kq + k + o1
		d = r * o1 / steps
		dOthers = (r - 1) * o1 / steps
		bOwn = math.Max(1, budget-dOthers)
		k = math.Ceil(in / bOwn)
	}
	steps := kq + k + o1
	avg := work{p: r * in / steps, ps: r / steps, pairs: r * in * (in + 1) / 2 / steps, d: d, kv: d * (in + out/2)}
	sp := e.step(avg, l)
	t := sp.total
	// A step carrying one of the prompt's chunks: the others' decodes, the chunk, and other
	// prefills filling what the chunk leaves of the budget, up to their mean load.
	chunkStep := func(c, off float64) float64 {
		others := math.Max(0, math.Min(bOwn-c, avg.p*(r-1)/math.Max(r, 1)))
		s := work{p: c + others, ps: 1 + others/in, pairs: float64(ChunkPairs(int(c), int(off))) + others*(in+1)/2,
			d: dOthers, kv: dOthers * (in + out/2)}
		return e.step(s, l).total
	}
	full := math.Min(in, bOwn)
	last := in - (k-1)*full
	own := chunkStep(last, in-last)
	if k > 1 {
		// The k−1 full chunks, each charged at the mean offset of the prompt's full chunks.
		own += (k - 1) * chunkStep(full, (k-2)*full/2)
	}
	ttft := t/2 + kq*t + own
	// The prompt's share of the prefill server: in/bOwn of a step whose whole budget is prefill
	// (short prompts share a step, long ones take several).
	busy := work{p: bOwn, ps: math.Max(1, bOwn/in), pairs: bOwn * (math.Min(in, bOwn) + 1) / 2, d: dOthers, kv: dOthers * (in + out/2)}
	svc := in / bOwn * e.step(busy, l).total
	return loopState{ttft: ttft, tpot: t, e2e: ttft + o1*t, joules: e.energy(sp)}, svc
}
