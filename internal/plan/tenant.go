package plan

import (
	"fmt"
	"math"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Request shape assumed when a tenant's traffic gives no token counts.
const (
	defaultInputTokens  = 512
	defaultOutputTokens = 256
)

// tenant is one pool tenant as the planner sees it.
type tenant struct {
	idx    int
	t      v1.Tenant
	model  llm.Model
	modKey string // identifies the model for the evaluation cache
	llmOpt llm.Options
	perfM  *perf.Model
	work   perf.Workload
	slo    perf.SLO
	group  string // who it may share an MPS or time-sliced slice with ("" : nobody)
	notes  []string
	// overCtx is the share of its requests longer than its --max-model-len (overContextShare).
	overCtx float64
	// clock is the clock lock of the tenant's energy class (perf.Options.ClockCap: 0.7 of boost
	// for efficiency, 0 for none), which its replicas are sized at: the planner gives each energy
	// class GPUs of its own, whose clocks are locked for it (the simulator runs them so).
	clock float64
	// measured is the tenant's measured profile (Options.Profiles), nil for the LLM models;
	// batchLimit is the longest batch latency it allows (measuredLatencyShare × slo.e2eP99).
	measured   *perf.Measured
	batchLimit time.Duration
	// shapeID and qshapeID are the evaluation cache shapeIn's numbers of the tenant's shape
	// (evalCache.shape), and fitID and placeID its numbers of the tenant's model with its
	// memory-fit options and with its performance model's (fitModel, placeModel).
	shapeID, qshapeID int
	fitID, placeID    int
	shapeIn           *evalCache

	cands    []*cand // every candidate evaluated, feasible or not
	feasible []*cand // the feasible ones, cheapest first
	// boundExtra are rejected candidates the lower bound still counts, at their lbReplicas
	// (boundAdmits): their rejection rests on busy neighbours, which a plan may avoid.
	boundExtra []*cand
	// fixedFallback are the kinds fixedSlices rejected for a fixed count, best first
	// (fixedPrefer): what the tenant falls back to when its kept kinds find no room.
	fixedFallback []*cand
	// loadFloors is loadFloor of each of a fixed-count tenant's candidates, set once evaluated
	// (fixedFloors) so that the lower bound, which runs beside the predictions, reads it only.
	loadFloors map[*cand]int
	choice     *cand
	infeas     []v1.Reason // set when the tenant cannot be (fully) served
	// sc is feasible as the choice's local search reads it (searchCands); scFrom is the feasible
	// slice it was filled from (held, so that its array is not reused for another while sc is
	// kept), and scNumbered says that every entry of sc has its group's number.
	sc         []searchCand
	scFrom     []*cand
	scNumbered bool
	// scSet is planner.replicasSet when sc was filled from its candidates; scForbid and scRuled say that
	// an entry of sc may be forbidden or disallowed; scUses has the bits useBit of the use numbers
	// of its MIG entries, none without (searchCands, fixedUses).
	scSet             uint64
	scForbid, scRuled bool
	scUses            uint64
	// stay is when the local search last found no move for it (bestMove).
	stay stayed
	// chFor is the choice whose group number in chIn (keyIDs.of) and replicas chKid and chReps
	// are, while the candidates' replicas are as at chSet (planner.replicasSet): choiceKid.
	chFor         *cand
	chIn          *keyIDs
	chSet         uint64
	chKid, chReps int32
}

func newTenant(i int, t v1.Tenant, o Options, po perf.Options) (*tenant, error) {
	tn := &tenant{idx: i, t: t}
	if m := o.Profiles[t.Name]; m != nil {
		return newMeasuredTenant(tn, m)
	}
	models := o.Models
	switch {
	case t.Model.Dir != "":
		m, ok := models[t.Name]
		if !ok {
			return nil, fmt.Errorf("build plan: tenant %s: model.dir %q was not loaded (pass it in Options.Models)", t.Name, t.Model.Dir)
		}
		tn.model, tn.modKey = m, "dir:"+t.Name
	default:
		a, err := llm.Lookup(t.Model.Name)
		if err != nil {
			return nil, fmt.Errorf("build plan: tenant %s: %w", t.Name, err)
		}
		tn.model, tn.modKey = llm.FromArch(a), "catalog:"+a.Name
	}
	kv := t.Model.KVCacheDtype
	if kv == "" {
		kv = llm.KVCacheAuto
	}
	elem, err := llm.KVElemBytes(kv)
	if err != nil {
		return nil, fmt.Errorf("build plan: tenant %s: %w", t.Name, err)
	}
	// The memory fit asks for one sequence of the full context, as vLLM does to start; the engine
	// runs as many of the tenant's requests as its KV cache holds (perf's admission rule) and the
	// queueing model sizes the replicas for that batch, so concurrency is only --max-num-seqs.
	tn.llmOpt = llm.Options{Quantization: t.Model.Quantization, KVCacheDType: kv,
		Context: contextFor(t, tn.model.Arch.MaxPositions), MaxNumSeqs: t.Concurrency}
	q := t.Model.Quantization
	if q == "" {
		if mem, err := llm.Estimate(tn.model, llm.Options{KVCacheDType: kv}); err == nil {
			q = mem.Quantization
		}
	}
	po.KVElemBytes = elem
	if t.Concurrency > 0 {
		po.MaxSeqs = t.Concurrency
	}
	if tn.perfM, err = perf.New(tn.model.Arch, q, po); err != nil {
		return nil, fmt.Errorf("build plan: tenant %s: %w", t.Name, err)
	}
	if tn.clock, err = po.ClockCap(string(t.EnergyClass)); err != nil {
		return nil, fmt.Errorf("build plan: tenant %s: energyClass: %w", t.Name, err)
	}
	tn.work = perf.Workload{InputTokens: t.Traffic.InputTokens, OutputTokens: t.Traffic.OutputTokens}
	if tn.work.InputTokens <= 0 || tn.work.OutputTokens <= 0 {
		tn.work.InputTokens = cmpOr(tn.work.InputTokens, defaultInputTokens)
		tn.work.OutputTokens = cmpOr(tn.work.OutputTokens, defaultOutputTokens)
		tn.notes = append(tn.notes, fmt.Sprintf("traffic gives no token counts: sized for %d prompt and %d output tokens",
			tn.work.InputTokens, tn.work.OutputTokens))
	}
	tn.slo = sloTargets(t.SLO, tn.work.OutputTokens, lengthLaw(t.Traffic), t.MaxContext)
	if n := outputP99(tn.work.OutputTokens, lengthLaw(t.Traffic), t.MaxContext); t.SLO.E2EP99 != nil && n != tn.work.OutputTokens {
		tn.notes = append(tn.notes, splitNote(t, tn.slo, tn.work.OutputTokens))
	}
	tn.group = sharingGroup(t)
	// Where the model's maximum held the context below what all but 0.1 % need (contextFor).
	if sh := overContextShare(t.Traffic, t.MaxContext, tn.llmOpt.Context); sh > 0 && lengthsNeed(t.Traffic) > tn.llmOpt.Context {
		tn.overCtx = sh
		if sh <= overContextMiss {
			tn.notes = append(tn.notes, overContextWhy(sh, tn.llmOpt.Context))
		}
	}
	return tn, nil
}

// overContextWhy says what share sh of a tenant's requests the context ctx refuses.
func overContextWhy(sh float64, ctx int) string {
	return fmt.Sprintf("%.2f %% of its requests are longer than --max-model-len %d, the model's maximum, and vLLM answers them with an error (shorter prompts, or a model of a longer context, serve them)", 100*sh, ctx)
}

func cmpOr(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// sloTargets turns the tenant's p99 targets into the TTFT and TPOT targets the performance model
// checks. An end-to-end target E is split: TTFT ≤ min(ttft, E/4 when ttft is unset) and
// TPOT ≤ (E − TTFT)/(L − 1), with L the 99th-percentile output length under the tenant's length
// law (outputP99: the mean out for fixed lengths). A request's end-to-end latency is its TTFT plus
// its TPOT times its output length less one; with TTFT and TPOT at most their targets (their
// p99s), that sum exceeds E only for requests longer than L, at most 1 % of them. For fixed
// lengths this is the sum of the two p99s (conservative: a sum of p99s is at least the p99 of the
// sum); for varying lengths it is what keeps the long requests, the ones in the e2e tail, within
// E (the mean length bounds nothing there).
func sloTargets(s v1.SLO, out int, law v1.Lengths, maxCtx int) perf.SLO {
	return splitE2E(s, 2, out, law, maxCtx)
}

// splitE2E is sloTargets with eighths/8 of E for the TTFT where ttftP99 is unset (evaluate tries
// other shares for varying lengths, e2eSplits).
func splitE2E(s v1.SLO, eighths int, out int, law v1.Lengths, maxCtx int) perf.SLO {
	var r perf.SLO
	if s.TTFTP99 != nil {
		r.TTFT = s.TTFTP99.Std()
	}
	if s.TPOTP99 != nil {
		r.TPOT = s.TPOTP99.Std()
	}
	if s.E2EP99 == nil {
		return r
	}
	e := s.E2EP99.Std()
	if r.TTFT == 0 {
		r.TTFT = e / 4
		if eighths != 2 {
			r.TTFT = e * time.Duration(eighths) / 8
		}
	}
	rest := e - r.TTFT
	if n := outputP99(out, law, maxCtx); n > 1 {
		per := rest / time.Duration(n-1)
		if r.TPOT == 0 || per < r.TPOT {
			r.TPOT = max(per, time.Microsecond)
		}
	}
	return r
}

// outputP99 is the 99th percentile of a request's output length (the least n with P(L ≤ n) ≥
// 0.99) as the simulator draws it around the mean out: out itself for fixed lengths ("");
// uniform, out/2 + j with j uniform on {0, …, out} (integer division), at least 1; exponential,
// 1 + ⌊ln U / ln(1 − 1/out)⌋ (geometric on {1, 2, …} with mean out, capped at 64·out + 1, far
// above the quantile), so P(L > n) = (1 − 1/out)^n and n = ⌈ln 0.01 / ln(1 − 1/out)⌉, about
// 4.6·out. A maxContext above 1 caps a drawn output at maxContext − 1 (the prompt takes at least
// one token), and the quantile with it.
func outputP99(out int, law v1.Lengths, maxCtx int) int {
	n := out
	switch law {
	case v1.LengthsUniform:
		n = max(1, out/2+(99*(out+1)+99)/100-1)
	case v1.LengthsExponential:
		if out > 1 {
			n = int(math.Ceil(math.Log(0.01) / math.Log1p(-1/float64(out))))
		}
	}
	if law != "" && maxCtx > 1 {
		n = min(n, maxCtx-1)
	}
	return n
}

// sharingGroup is the key of the tenants a tenant may share an MPS or time-sliced slice with:
//
//	hard    "" — nobody (its slices are whole GPUs and unshared MIG instances)
//	soft    "soft:<path>" — its trust group, the tenants with the same non-empty path; a soft
//	        tenant without a path is its own group, "solo:<name>"
//	shared  "shared" — every shared tenant (time-slicing only among low-frequency ones)
func sharingGroup(t v1.Tenant) string {
	switch isolationOf(t) {
	case v1.IsolationHard:
		return ""
	case v1.IsolationShared:
		return "shared"
	}
	if t.Path == "" {
		return "solo:" + t.Name
	}
	return "soft:" + t.Path
}

// maxDemandReplicas bounds a computed replica count, far above what any fleet holds.
const maxDemandReplicas = 1 << 30

// demandReplicas is how many replicas a slice that sustains rate req/s needs: ceil(rps / rate)
// (at least 1), or the fixed count; plus one for redundancy; at least the reservation. It returns
// 0 when the traffic cannot be carried (rate 0).
func demandReplicas(t v1.Tenant, rate float64) int {
	var n int
	switch {
	case t.Replicas != nil:
		n = *t.Replicas
	case t.Traffic.RPS <= 0:
		n = 1
	case rate <= 0:
		return 0
	default:
		// Checked: a tiny rate would make the quotient overflow int; above maxDemandReplicas
		// no fleet can place the replicas anyway (the candidate is rejected for capacity).
		n = max(1, int(min(math.Ceil(t.Traffic.RPS/rate-1e-9), maxDemandReplicas)))
	}
	if t.Redundancy {
		n++
	}
	return max(n, t.Reservation)
}

func energyOf(t v1.Tenant) v1.EnergyClass {
	if t.EnergyClass == "" {
		return v1.DefaultEnergyClass
	}
	return t.EnergyClass
}

func isolationOf(t v1.Tenant) v1.Isolation {
	if t.Isolation == "" {
		return v1.DefaultIsolation
	}
	return t.Isolation
}

// contextFor is the --max-model-len a tenant's replicas get: its maxContext when set; otherwise
// min(llm.DefaultContext, the model's maximum), raised to the tenant's own prompt + output tokens
// when those are longer (vLLM rejects a request longer than --max-model-len; for lengths that
// vary, what all but 0.1 % of its requests need: lengthsNeed), never above the model's maximum.
func contextFor(t v1.Tenant, maxPos int) int {
	if t.MaxContext > 0 {
		return t.MaxContext
	}
	c := llm.DefaultContext
	if maxPos > 0 && maxPos < c {
		c = maxPos
	}
	if need := lengthsNeed(t.Traffic); need > c {
		c = need
		if maxPos > 0 && c > maxPos {
			c = maxPos
		}
	}
	return c
}
