package sim

import (
	"fmt"
	"math"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is what a run shows: per tenant, per GPU and across tenants. Latencies are in
// milliseconds, rates per simulated second.
type Report struct {
	Seed            uint64          `json:"seed"`
	DurationSeconds float64         `json:"durationSeconds"`
	Events          int64           `json:"events"`
	Tenants         []TenantReport  `json:"tenants"`
	GPUs            []GPUReport     `json:"gpus"`
	Replicas        []ReplicaReport `json:"replicas"`
	// JainIndex is Jain's fairness index of the tenants' normalised throughput (served output
	// tokens / offered output tokens), over tenants with traffic: 1 when all get the same
	// fraction of their demand, 1/n when one gets everything.
	JainIndex float64  `json:"jainIndex"`
	Notes     []string `json:"notes,omitempty"`
}

// Latency is a latency distribution's percentiles in milliseconds (HDR histogram, 1 %
// resolution).
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// TenantReport is one tenant's outcome.
type TenantReport struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Arrived = Completed + Dropped + Unfinished (requests in flight at the end).
	Arrived    int64 `json:"arrived"`
	Completed  int64 `json:"completed"`
	Unfinished int64 `json:"unfinished"`
	// Dropped counts arrivals refused: no replica in the plan, prompt + output tokens longer
	// than the replica's --max-model-len (vLLM returns an error for such a request) or than its
	// KV cache, or the replica's queue full.
	Dropped            int64 `json:"dropped"`
	DroppedNoReplica   int64 `json:"droppedNoReplica,omitempty"`
	DroppedOverContext int64 `json:"droppedOverContext,omitempty"`
	DroppedTooLong     int64 `json:"droppedTooLong,omitempty"`
	DroppedQueueFull   int64 `json:"droppedQueueFull,omitempty"`
	Preemptions        int64 `json:"preemptions"`
	// TTFT, TPOT and E2E are over completed requests.
	TTFT Latency `json:"ttftMs"`
	TPOT Latency `json:"tpotMs"`
	E2E  Latency `json:"e2eMs"`
	// SLOAttainment is the fraction of completed and dropped requests whose TTFT, TPOT and
	// end-to-end latency each met the tenant's p99 objective (1 with no objective). With no
	// request completed or dropped there is nothing to judge: SLOJudged is 0 and the attainment
	// (then 1) says nothing.
	SLOAttainment float64 `json:"sloAttainment"`
	// SLOJudged is the number of requests the attainment is over (completed + dropped).
	SLOJudged int64 `json:"sloJudged"`
	// GoodputRPS and GoodputTokensPerSec count the requests meeting every objective.
	GoodputRPS          float64 `json:"goodputRps"`
	GoodputTokensPerSec float64 `json:"goodputTokensPerSec"`
	// OutputTokensPerSec are the output tokens generated per second; OfferedTokensPerSec what
	// the arrivals asked for; NormalisedThroughput their ratio.
	OutputTokensPerSec   float64 `json:"outputTokensPerSec"`
	OfferedTokensPerSec  float64 `json:"offeredTokensPerSec"`
	NormalisedThroughput float64 `json:"normalisedThroughput"`
	OutputTokens         int64   `json:"outputTokens"`
	// EnergyJoules is the tenant's energy: its replicas' share of their GPUs' idle power over the
	// run plus the dynamic energy of their steps (perf's power model); JoulesPerToken that over
	// the output tokens generated.
	EnergyJoules   float64 `json:"energyJoules"`
	JoulesPerToken float64 `json:"joulesPerToken,omitempty"`
}

// GPUReport is one GPU's utilisation and energy.
type GPUReport struct {
	GPU   string `json:"gpu"`
	Board string `json:"board"`
	Mode  string `json:"mode"`
	// Utilization is the time-average fraction of the board's SMs inside a running step (a MIG
	// instance counts with its share of the SMs).
	Utilization float64 `json:"utilization"`
	// AvgPowerWatts and EnergyJoules follow the power model of doc.go: idle power once per GPU
	// plus its steps' dynamic energy, the steps in flight together capped at TDP − idle.
	AvgPowerWatts  float64 `json:"avgPowerWatts"`
	EnergyJoules   float64 `json:"energyJoules"`
	OutputTokens   int64   `json:"outputTokens"`
	JoulesPerToken float64 `json:"joulesPerToken"`
}

// ReplicaReport is one engine: where it ran, its limits and how hard it worked.
type ReplicaReport struct {
	Name             string `json:"name"` // tenant/index
	Slice            string `json:"slice"`
	Domain           string `json:"domain"` // the GPU or MIG instance it shares
	KVCapacityTokens int64  `json:"kvCapacityTokens"`
	MaxBatchedTokens int    `json:"maxBatchedTokens"`
	MaxSeqs          int    `json:"maxSeqs"`
	Steps            int64  `json:"steps"`
	Preemptions      int64  `json:"preemptions"`
	// DynamicJoules is the energy above idle of the replica's steps (the power model); OutputTokens
	// the tokens it generated and PromptTokens the prompt tokens it computed (a prompt recomputed
	// after a preemption counts again). Exact, for cost attribution (docs/cost.md).
	DynamicJoules float64 `json:"dynamicJoules"`
	OutputTokens  int64   `json:"outputTokens"`
	PromptTokens  int64   `json:"promptTokens"`
}

// Result is a run's report with the distributions behind it, for plots.
type Result struct {
	Report Report
	hists  [][3]*hdr.Histogram // per tenant: ttft, tpot, e2e
	// timeline[g][k] is GPU g's utilisation in bucket k.
	timeline [][]float64
	bucket   time.Duration
}

// Metric names a latency distribution.
type Metric int

// Latency metrics.
const (
	TTFT Metric = iota
	TPOT
	E2E
)

// CDFPoint is one point of a latency CDF.
type CDFPoint struct {
	Ms       float64 `json:"ms"`
	Fraction float64 `json:"fraction"`
}

// CDF returns tenant i's distribution of metric m as points of the cumulative distribution:
// the latency at fractions 0.5 %, 1 %, … 99.5 % and at 99.9 % and 100 %.
func (r *Result) CDF(i int, m Metric) []CDFPoint {
	h := r.hists[i][m]
	if h.TotalCount() == 0 {
		return nil
	}
	out := make([]CDFPoint, 0, 202)
	add := func(f float64) {
		out = append(out, CDFPoint{Ms: float64(h.ValueAtQuantile(100*f)) / 1000, Fraction: f})
	}
	for k := 1; k < 200; k++ {
		add(float64(k) / 200)
	}
	add(0.999)
	add(1)
	return out
}

// Timeline returns each GPU's utilisation per interval of the run, and the interval length.
func (r *Result) Timeline() ([][]float64, time.Duration) { return r.timeline, r.bucket }

func (s *Sim) result() *Result {
	d := float64(s.end) / 1e9
	rep := Report{Seed: s.cfg.Seed, DurationSeconds: d, Events: s.events}
	res := &Result{bucket: time.Duration(s.end / int64(s.cfg.TimelineBuckets))}
	var xs []float64
	for _, t := range s.tenants {
		tr := tenantReport(t, s.replicas, d)
		if t.stats.offeredTokens > 0 {
			xs = append(xs, tr.NormalisedThroughput)
		}
		rep.Tenants = append(rep.Tenants, tr)
		res.hists = append(res.hists, [3]*hdr.Histogram{t.stats.ttft, t.stats.tpot, t.stats.e2e})
	}
	rep.JainIndex = round(Jain(xs), 6)
	w := float64(s.end) / float64(s.cfg.TimelineBuckets)
	for _, g := range s.gpus {
		rep.GPUs = append(rep.GPUs, s.gpuReport(g, d))
		tl := make([]float64, len(g.timeline))
		for k, v := range g.timeline {
			tl[k] = v / w
		}
		res.timeline = append(res.timeline, tl)
	}
	for _, r := range s.replicas {
		rep.Replicas = append(rep.Replicas, ReplicaReport{Name: r.name, Slice: r.eng.Slice().Name(),
			Domain: s.domains[r.domain].name, KVCapacityTokens: r.kvCap, MaxBatchedTokens: r.budget, MaxSeqs: r.maxSeqs,
			Steps: r.steps, Preemptions: r.preemptions, DynamicJoules: round(r.dynJ, 3), OutputTokens: r.outTokens, PromptTokens: r.inTokens})
	}
	rep.Notes = []string{
		"latencies are over completed requests; requests still in flight at the end are counted as unfinished",
		"energy: idle power plus each step's dynamic power from the performance model (compute-bound kernels at the clock cubed, memory-bound ones at 0.7 of the dynamic range plus their arithmetic, fitted to ML.ENERGY's H100 measurements); energy classes lock clocks (efficiency: 70 % of boost)",
	}
	for _, g := range s.gpus {
		if w := g.cappedJ / d; w >= 0.5 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("gpu %s: its engines' concurrent steps asked for %.0f W above the board's TDP on average; capped at TDP", g.ref, w))
		}
	}
	rep.Notes = append(rep.Notes, s.notes...)
	for i, t := range rep.Tenants {
		if n := t.DroppedOverContext; n > 0 {
			var ml int64
			for _, ri := range s.tenants[i].replicas {
				ml = max(ml, s.replicas[ri].maxLen)
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("tenant %s: %d request(s) rejected: prompt + output tokens over --max-model-len %d (vLLM answers them with an error); counted in DROP and against SLO attainment", t.Name, n, ml))
		}
	}
	res.Report = rep
	return res
}

func tenantReport(t *tenantState, replicas []*replica, d float64) TenantReport {
	st := &t.stats
	tr := TenantReport{Name: t.spec.Name, Replicas: len(t.replicas), Arrived: st.arrived, Completed: st.completed,
		Unfinished: st.unfinished, DroppedNoReplica: st.dropped[dropNoReplica], DroppedTooLong: st.dropped[dropTooLong],
		DroppedOverContext: st.dropped[dropOverContext], DroppedQueueFull: st.dropped[dropQueueFull], Preemptions: st.preemptions, OutputTokens: st.tokens,
		TTFT: latency(st.ttft), TPOT: latency(st.tpot), E2E: latency(st.e2e)}
	for _, n := range st.dropped {
		tr.Dropped += n
	}
	tr.SLOAttainment = 1
	tr.SLOJudged = st.completed + tr.Dropped
	if n := tr.SLOJudged; n > 0 {
		tr.SLOAttainment = round(float64(st.met)/float64(n), 6)
	}
	tr.GoodputRPS = round(float64(st.met)/d, 4)
	tr.GoodputTokensPerSec = round(float64(st.metTokens)/d, 2)
	tr.OutputTokensPerSec = round(float64(st.tokens)/d, 2)
	tr.OfferedTokensPerSec = round(float64(st.offeredTokens)/d, 2)
	if st.offeredTokens > 0 {
		tr.NormalisedThroughput = round(math.Min(1, float64(st.tokens)/float64(st.offeredTokens)), 6)
	}
	energy := st.joules
	for _, ri := range t.replicas {
		energy += replicas[ri].eng.IdleWatts() * d
	}
	tr.EnergyJoules = round(energy, 1)
	if st.tokens > 0 {
		tr.JoulesPerToken = round(energy/float64(st.tokens), 4)
	}
	return tr
}

func (s *Sim) gpuReport(g *gpuState, d float64) GPUReport {
	busy := 0.0
	for _, di := range g.domains {
		dm := s.domains[di]
		busy += float64(dm.busy) / 1e9 * dm.smFrac
	}
	util := busy / d
	idle := s.cfg.IdlePowerFraction * g.board.TDPWatts
	energy := idle*d + g.dynJ
	r := GPUReport{GPU: g.ref, Board: g.board.Name, Mode: string(g.mode), Utilization: round(util, 6),
		AvgPowerWatts: round(energy/d, 2), EnergyJoules: round(energy, 1), OutputTokens: g.tokens}
	if g.tokens > 0 {
		r.JoulesPerToken = round(energy/float64(g.tokens), 4)
	}
	return r
}

func latency(h *hdr.Histogram) Latency {
	ms := func(q float64) float64 { return round(float64(h.ValueAtQuantile(q))/1000, 3) }
	return Latency{P50: ms(50), P95: ms(95), P99: ms(99)}
}

// Jain returns Jain's fairness index (Σx)² / (n·Σx²) of xs; 1 for no values or all zero.
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
