package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// LoRAAdapter is one adapter's traffic and objectives on a shared LoRA engine.
type LoRAAdapter struct {
	Name string
	// RPS is the mean Poisson arrival rate; InputTokens and OutputTokens the requests' mean
	// lengths, drawn by Lengths (fixed, uniform or exponential, as Config.Lengths; "" is fixed)
	// as the dense simulator draws a tenant's, a drawn pair capped by MaxContext (0: no cap).
	RPS                       float64
	InputTokens, OutputTokens int
	Lengths                   Lengths
	MaxContext                int
	// Bytes is the adapter's tensor bytes (what a load copies); Rank its LoRA rank.
	Bytes int64
	Rank  int
	// TTFT and TPOT are p99 objectives; 0: none.
	TTFT, TPOT time.Duration
	// Burst, when RPS > 0, adds Burst.RPS arrivals from Start to End.
	Burst LoRABurst
	// Cap is the most requests of this adapter in the engine at once (a gateway's per-adapter
	// concurrency limit); the rest wait at the gateway, and their wait counts in TTFT. 0: no cap.
	Cap int
}

// LoRABurst is extra traffic for a while.
type LoRABurst struct {
	Start, End time.Duration
	RPS        float64
}

// LoRAConfig is one engine with LoRA serving many adapters of its base model.
type LoRAConfig struct {
	Engine *perf.Engine
	Cost   *perf.LoRACost
	// MaxLoRAs, MaxRank and MaxCPULoRAs are the engine's --max-loras, --max-lora-rank and
	// --max-cpu-loras (0: MaxLoRAs).
	MaxLoRAs, MaxRank, MaxCPULoRAs int
	Adapters                       []LoRAAdapter
	// Duration is how long requests arrive; the run then drains what is in flight.
	Duration time.Duration
}

// LoRAAdapterResult is one adapter's outcome.
type LoRAAdapterResult struct {
	Name      string `json:"name"`
	Arrived   int64  `json:"arrived"`
	Completed int64  `json:"completed"`
	// Met counts completed requests within every objective; Attainment is Met / Arrived.
	Met        int64         `json:"met"`
	Attainment float64       `json:"attainment"`
	TTFTP99    time.Duration `json:"ttftP99"`
	TPOTP99    time.Duration `json:"tpotP99"`
	// InputTokens and OutputTokens are the tokens the engine computed for the adapter: what a
	// shared engine's energy and cost are split by.
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	// MeetsSLO: every p99 within its objective and every arrival completed.
	MeetsSLO bool `json:"meetsSlo"`
}

// LoRAResult is a shared engine's run.
type LoRAResult struct {
	Adapters []LoRAAdapterResult `json:"adapters"`
	// Loads counts adapter activations into a GPU slot (the first of each included), LoadTime
	// their total time, DiskLoads those that missed the host cache too.
	Loads     int64         `json:"loads"`
	DiskLoads int64         `json:"diskLoads"`
	LoadTime  time.Duration `json:"loadTime"`
	Steps     int64         `json:"steps"`
	// ActiveMean and ActiveMax are the distinct adapters in a step (time-weighted mean, and most);
	// InFlightMean the requests in the engine (waiting or running, time-weighted).
	ActiveMean   float64 `json:"activeMean"`
	ActiveMax    int     `json:"activeMax"`
	InFlightMean float64 `json:"inFlightMean"`
	// TTFTP99 and TPOTP99 are the engine's p99s over every adapter's requests together (what
	// the planner's queueing model predicts for an engine: plan.LoRAPrediction).
	TTFTP99 time.Duration `json:"ttftP99"`
	TPOTP99 time.Duration `json:"tpotP99"`
	// Busy is the engine's time in steps; End when the last request finished.
	Busy time.Duration `json:"busy"`
	End  time.Duration `json:"end"`
	// DynamicJoules is the energy above idle of the engine's steps by the power model (the base
	// model's step; the LoRA kernels' and adapter loads' time is counted at idle power): the
	// engine's GPU draws its idle power over the run plus this.
	DynamicJoules float64 `json:"dynamicJoules"`
}

// MeetsAll says whether every adapter met its objectives.
func (r LoRAResult) MeetsAll() bool {
	for _, a := range r.Adapters {
		if !a.MeetsSLO {
			return false
		}
	}
	return true
}

// loraReq is one request on a shared engine.
type loraReq struct {
	adapter            int
	arrival, first     int64 // ns
	in, out            int
	prefilled, decoded int
}

// loraState is the engine's running state.
type loraState struct {
	cfg      LoRAConfig
	gateway  [][]*loraReq // per adapter, FIFO, beyond Cap
	waiting  []*loraReq   // in the engine, not yet running
	running  []*loraReq
	inEngine []int // per adapter: requests waiting or running in the engine
	slots    lru   // adapters resident in GPU slots
	host     lru   // adapters in the host cache
	kvCap    int64
	kvUsed   int64
	stats    []loraStats
	res      LoRAResult
	// activeSum and inFlightSum integrate distinct adapters and requests over busy time.
	activeSum, inFlightSum float64
	// ttft and tpot are every request's, all adapters together.
	ttft, tpot *hdr.Histogram
}

type loraStats struct {
	arrived, completed, met, in, out int64
	ttft, tpot                       *hdr.Histogram
}

// SimulateLoRA runs cfg with arrivals drawn from r. Each step is vLLM's: the running requests
// decode, then waiting requests are admitted in arrival order while the batch has fewer than
// MaxLoRAs distinct adapters or the request's adapter is already in it (vLLM's scheduler skips
// the others), within the sequence, token-budget and KV limits; a request whose adapter is not in
// a GPU slot evicts the least recently used one and the step pays the load (perf.LoRACost).
func SimulateLoRA(cfg LoRAConfig, r *rand.Rand) (LoRAResult, error) {
	if err := cfg.validate(); err != nil {
		return LoRAResult{}, err
	}
	arr := loraArrivals(cfg, r)
	s := &loraState{cfg: cfg, gateway: make([][]*loraReq, len(cfg.Adapters)), inEngine: make([]int, len(cfg.Adapters)),
		slots: newLRU(cfg.MaxLoRAs), host: newLRU(max(cfg.MaxCPULoRAs, cfg.MaxLoRAs)), stats: make([]loraStats, len(cfg.Adapters))}
	s.kvCap = cfg.Engine.KVCapacityTokens()
	if kb := cfg.Engine.Model().KVBytesPerToken(); kb > 0 {
		s.kvCap -= cfg.Cost.SlotBytes(cfg.MaxRank) * int64(cfg.MaxLoRAs) / kb // the slots come out of the KV cache (llm.Memory.LoRA)
	}
	if s.kvCap <= 0 {
		return LoRAResult{}, errors.New("simulate lora: the adapter slots leave no KV cache")
	}
	// vLLM loads the adapters named in --lora-modules into its host cache when the server starts
	// (serving_models.py init_static_loras → add_lora), before it reports ready: they start in
	// host memory, up to max_cpu_loras.
	for i := range min(len(cfg.Adapters), s.host.cap) {
		s.host.add(i)
	}
	for i := range s.stats {
		s.stats[i] = loraStats{ttft: hdr.New(histLow, histHigh, histDigits), tpot: hdr.New(histLow, histHigh, histDigits)}
	}
	s.ttft, s.tpot = hdr.New(histLow, histHigh, histDigits), hdr.New(histLow, histHigh, histDigits)
	now, next := int64(0), 0
	for next < len(arr) || len(s.waiting)+len(s.running) > 0 || s.gatewayLen() > 0 {
		for ; next < len(arr) && arr[next].arrival <= now; next++ {
			s.arrive(arr[next])
		}
		if len(s.waiting)+len(s.running) == 0 {
			if next < len(arr) {
				now = arr[next].arrival
			}
			continue
		}
		now += s.step(now)
	}
	s.res.End = time.Duration(now)
	s.finish()
	return s.res, nil
}

func (c LoRAConfig) validate() error {
	var errs []error
	if c.Engine == nil || c.Cost == nil {
		errs = append(errs, errors.New("engine and cost are required"))
	}
	if c.MaxLoRAs < 1 {
		errs = append(errs, fmt.Errorf("maxLoras: %d, want ≥ 1", c.MaxLoRAs))
	}
	if llm.RankFor(c.MaxRank) != c.MaxRank {
		errs = append(errs, fmt.Errorf("maxRank: %d is not one of %v", c.MaxRank, llm.LoRARanks))
	}
	if c.Duration <= 0 || c.Duration > 24*time.Hour {
		errs = append(errs, fmt.Errorf("duration: %v is outside (0, 24h]", c.Duration))
	}
	for i, a := range c.Adapters {
		p := fmt.Sprintf("adapters[%d]", i)
		if !(a.RPS >= 0 && a.RPS < 1e6) || !(a.Burst.RPS >= 0 && a.Burst.RPS < 1e6) {
			errs = append(errs, fmt.Errorf("%s: rates must be in [0, 1e6)", p))
		}
		switch a.Lengths {
		case "", LengthsFixed, LengthsUniform, LengthsExponential:
		default:
			errs = append(errs, fmt.Errorf("%s: lengths: unknown %q (valid: fixed, uniform, exponential)", p, a.Lengths))
		}
		if a.InputTokens < 1 || a.OutputTokens < 1 {
			errs = append(errs, fmt.Errorf("%s: inputTokens and outputTokens must be ≥ 1", p))
		}
		if a.Rank < 1 || a.Rank > c.MaxRank {
			errs = append(errs, fmt.Errorf("%s.rank: %d is outside 1..maxRank %d", p, a.Rank, c.MaxRank))
		}
		if a.Cap < 0 || a.Bytes < 0 {
			errs = append(errs, fmt.Errorf("%s: cap and bytes must be ≥ 0", p))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("simulate lora: %w", errors.Join(errs...))
	}
	return nil
}

// draws says whether src draws lengths (uniform or exponential) rather than take the means.
func (src *source) draws() bool {
	return src.lengths == LengthsUniform || src.lengths == LengthsExponential
}

// loraArrivals draws every adapter's Poisson arrivals (and bursts) and merges them by time, each
// request's lengths by its adapter's law.
func loraArrivals(cfg LoRAConfig, r *rand.Rand) []*loraReq {
	var all []*loraReq
	end := float64(cfg.Duration)
	for i, a := range cfg.Adapters {
		// Fixed lengths draw nothing, so that their arrivals are those of a run without lengths.
		lengths := source{rng: r, meanIn: a.InputTokens, meanOut: a.OutputTokens, maxCtx: a.MaxContext, lengths: a.Lengths}
		add := func(rate, from, to float64) {
			if rate <= 0 {
				return
			}
			for t := from + r.ExpFloat64()/rate*1e9; t < to; t += r.ExpFloat64() / rate * 1e9 {
				q := &loraReq{adapter: i, arrival: int64(t), in: a.InputTokens, out: a.OutputTokens}
				if lengths.draws() {
					in, out := lengths.draw()
					q.in, q.out = int(in), int(out)
				}
				all = append(all, q)
			}
		}
		add(a.RPS, 0, end)
		add(a.Burst.RPS, float64(a.Burst.Start), math.Min(float64(a.Burst.End), end))
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].arrival < all[j].arrival })
	return all
}

// arrive passes a request through the adapter's gateway cap into the engine's queue.
func (s *loraState) arrive(q *loraReq) {
	s.stats[q.adapter].arrived++
	if int64(q.in+q.out) > s.kvCap {
		return // never fits the KV cache: it counts as arrived and never completes
	}
	if c := s.cfg.Adapters[q.adapter].Cap; c > 0 && s.inEngine[q.adapter] >= c {
		s.gateway[q.adapter] = append(s.gateway[q.adapter], q)
		return
	}
	s.inEngine[q.adapter]++
	s.waiting = append(s.waiting, q)
}

func (s *loraState) gatewayLen() int {
	n := 0
	for _, g := range s.gateway {
		n += len(g)
	}
	return n
}
