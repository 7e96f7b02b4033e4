package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

func timeDur(n int) time.Duration { return time.Duration(max(n, 0)) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func gib(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/float64(llm.GiB)) }

func (tn *tenant) describeModel() string {
	q := tn.choiceQuant()
	return fmt.Sprintf("%s %s", tn.model.Arch.Name, q)
}

func (tn *tenant) choiceQuant() llm.Quantization {
	for _, c := range tn.cands {
		if c.ev != nil && c.ev.fit.Memory.Quantization != "" {
			return c.ev.fit.Memory.Quantization
		}
	}
	return tn.llmOpt.Quantization
}

// tenantReasons explains a served tenant in the four steps: memory, compute, SLO shape and
// isolation, fairness; then the rejected alternatives.
func (p *planner) tenantReasons(tn *tenant) []v1.Reason {
	c := tn.choice
	var out []v1.Reason
	if tn.measured != nil {
		out = append(out, measuredMemoryReason(tn), p.measuredComputeReason(tn))
	} else {
		out = append(out, p.memoryReason(tn), p.computeReason(tn))
	}
	out = append(out, shapeReason(tn, c.ev.oneRate().RequestsPerSec > 0 && (tn.t.Replicas == nil || fixedMeets(c, *tn.t.Replicas))))
	if tn.t.Replicas != nil {
		out = append(out, v1.NewReason(v1.ReasonFixedReplicas, "replicas fixed at %d by the pool, not sized from traffic", *tn.t.Replicas))
	}
	if m := minReplicasOf(tn.t); tn.t.Replicas == nil && m > 0 && c.sz.n > 0 {
		// redundancy's replica comes first; the floor raises what the load and it need.
		switch {
		case tn.t.Redundancy && c.sz.n+1 < m:
			out = append(out, v1.NewReason(v1.ReasonReplicaBounds, "minReplicas %d raises the %d replica(s) the load and redundancy need", m, c.sz.n+1))
		case !tn.t.Redundancy && c.sz.n < m:
			out = append(out, v1.NewReason(v1.ReasonReplicaBounds, "minReplicas %d raises the %d replica(s) the load needs", m, c.sz.n))
		}
	}
	if tn.t.Redundancy {
		out = append(out, redundancyReason(tn.t, c, unspread(tn) < 0))
	}
	if e := energyOf(tn.t); e != v1.EnergyBalanced {
		out = append(out, v1.NewReason(v1.ReasonEnergyClass, "energy class %s: shares GPUs only with %s tenants (clocks are per GPU)", e, e))
	}
	if code, msg := p.exclusions(tn); code != "" && code != out[2].Code {
		out = append(out, v1.NewReason(code, "%s", msg))
	}
	if why := p.noMIGMPS(tn); why != "" {
		out = append(out, v1.NewReason(v1.ReasonModeNotAllowed, "%s", why))
	}
	return append(out, rejected(tn, 3)...)
}

// redundancyReason says what redundancy added: one replica beyond the fixed count or the load's,
// and, where minReplicas or the reservation raised the count further, that the floor decides;
// kept on another GPU when spread, else that all run on one (the Redundancy reason
// spreadRedundant adds says where and why).
func redundancyReason(t v1.Tenant, c *cand, spread bool) v1.Reason {
	where := "kept on another GPU"
	if !spread {
		where = "meant for another GPU, but all run on one (below)"
	}
	base, what := c.need, "the load needs"
	if t.Replicas != nil {
		base, what = *t.Replicas, "the pool fixes"
	}
	if base > 0 && c.replicas > base+1 {
		return v1.NewReason(v1.ReasonRedundancy, "one replica beyond the %d %s (%d), within the %d in all that %s sets, %s",
			base, what, base+1, c.replicas, floorName(t, c.replicas), where)
	}
	if base < 1 {
		return v1.NewReason(v1.ReasonRedundancy, "one replica beyond the load (%d in all), %s", c.replicas, where)
	}
	return v1.NewReason(v1.ReasonRedundancy, "one replica beyond the %d %s (%d in all), %s", base, what, c.replicas, where)
}

// floorName names the floor that set n replicas: minReplicas or the reservation.
func floorName(t v1.Tenant, n int) string {
	if t.Reservation >= n && minReplicasOf(t) < n {
		return fmt.Sprintf("the reservation of %d", t.Reservation)
	}
	return fmt.Sprintf("minReplicas %d", minReplicasOf(t))
}

// memoryReason is step 1: what the model needs and the smallest slice that holds it.
func (p *planner) memoryReason(tn *tenant) v1.Reason {
	c := tn.choice
	m := c.ev.fit.Memory
	var smallest *cand
	for _, x := range tn.cands {
		if x.board != c.board || x.ev == nil || !x.ev.fit.Fits {
			continue
		}
		if smallest == nil || x.ev.fit.Slice.MemoryBytes < smallest.ev.fit.Slice.MemoryBytes {
			smallest = x
		}
	}
	work := m.Activations + m.NonTorch + m.CUDAGraphs
	msg := fmt.Sprintf("%s needs %s of weights + %s of KV cache (%d tokens) + %s of workspace; the smallest slice of %s that holds it is %s (%s)",
		tn.describeModel(), gib(m.Weights), gib(m.KVCache), m.KVTokens, gib(work), c.board.Name, smallest.label(), gib(smallest.ev.fit.Slice.MemoryBytes))
	code := v1.ReasonMemoryBound
	if float64(c.ev.fit.Slice.MemoryBytes) > 1.01*float64(smallest.ev.fit.Slice.MemoryBytes) {
		code = v1.ReasonComputeBound
		msg += fmt.Sprintf("; %s (%s) was chosen for compute", c.label(), gib(c.ev.fit.Slice.MemoryBytes))
	}
	if len(tn.notes) > 0 {
		msg += "; " + strings.Join(tn.notes, "; ")
	}
	return v1.NewReason(code, "%s", msg)
}

// computeReason is step 2: the rate one replica sustains within the SLO and the replicas needed.
func (p *planner) computeReason(tn *tenant) v1.Reason {
	c := tn.choice
	r := c.ev.oneRate()
	msg := fmt.Sprintf("one replica on %s %s sustains %.3g req/s of %d+%d tokens within %s (p99 TTFT %s, TPOT %s; above it %s binds)",
		c.board.Name, c.label(), r.RequestsPerSec, tn.work.InputTokens, tn.work.OutputTokens, describeSLO(tn), roundDur(r.TTFT), roundDur(r.TPOT),
		limitName(string(r.Limit)))
	lam := peakRate(tn.t.Traffic)
	switch fixed := tn.t.Replicas; {
	case fixed != nil && !fixedMeets(c, *fixed):
		msg += fmt.Sprintf("; the fixed %d replica(s) miss the SLO (see %s above)", *fixed, v1.ReasonSLOUnmet)
	case c.sz.n > 0:
		msg += fmt.Sprintf("; %.3g req/s over %d replica(s) with %d slot(s) each (%s; excess requests queue): p99 TTFT %s with the queue wait, TPOT %s; fewer than %d replica(s) cannot keep up at all",
			lam, c.sz.n, c.ev.q.slots, c.ev.q.slotsWhy(), roundDur(seconds(c.sz.state().ttft)), roundDur(seconds(c.sz.state().tpot)), c.sz.lowest)
	}
	if n := seqCap(c); n > 0 && c.ev.q.lengths != "" {
		msg += fmt.Sprintf("; --max-num-seqs %d, the requests its KV cache holds at the %s lengths' 99th-percentile request (%.0f tokens): with more a long request fills the cache before the slots do, and the engine admits a request whose first prefill chunk fits but whose next does not, which preempts itself and is admitted again, a loop the queueing model does not count", n, c.ev.q.lengths, c.ev.q.totalP99())
	} else if n > 0 {
		msg += fmt.Sprintf("; --max-num-seqs %d, the requests its KV cache holds at full length: with more the engine admits a request whose first prefill chunk fits but whose next does not, which preempts itself and is admitted again, a loop the queueing model does not count", n)
	}
	msg += fmt.Sprintf("; %d replica(s) = %.3f GPU-equivalents", c.replicas, c.cost)
	if !c.whole() && isLarge(c.memFrac, c.compFrac) {
		// the share above counts the instance's slices; the packing gives each a GPU (ADR 0069)
		n := (c.replicas + c.share - 1) / c.share
		msg += fmt.Sprintf(", but a %s instance takes more than half of a GPU and no two share one: its %d instance(s) take %d GPU(s)", c.profile.Name, n, n)
	}
	for _, x := range tn.feasible {
		if x != c {
			msg += fmt.Sprintf("; next cheapest: %s on %s, %d replica(s) = %.3f", x.label(), x.board.Name, x.replicas, x.cost)
			break
		}
	}
	msg += p.spilledWhy(tn)
	return v1.NewReason(v1.ReasonComputeBound, "%s", msg)
}

func limitName(l string) string {
	if l == "" {
		return "nothing"
	}
	return l
}

func describeSLO(tn *tenant) string {
	if tn.measured != nil {
		return fmt.Sprintf("the SLO (e2e %s, so a batch may take %s)", tn.t.SLO.E2EP99.Std(), roundDur(tn.batchLimit))
	}
	var parts []string
	if tn.slo.TTFT > 0 {
		parts = append(parts, "TTFT ≤ "+tn.slo.TTFT.String())
	}
	if tn.slo.TPOT > 0 {
		parts = append(parts, "TPOT ≤ "+roundDur(tn.slo.TPOT).String())
	}
	if len(parts) == 0 {
		return "no SLO"
	}
	return "the SLO (" + strings.Join(parts, ", ") + ")"
}

// shapeReason is step 3: why this kind of slice (isolation, SLO shape, frequency). held says
// whether the SLO holds up to the compute reason's rate (not when one replica meets it at no rate,
// or a fixed count misses it).
func shapeReason(tn *tenant, held bool) v1.Reason {
	c := tn.choice
	switch {
	case c.kind == v1.SliceTimeSlice || c.kind == v1.SliceMIGTimeSlice:
		return v1.NewReason(v1.ReasonLowFrequency, "low-frequency shared tenant: time-sliced 1/%d with other low-frequency tenants (no memory or fault isolation; memory capped at %s)", c.share, gib(c.ev.capBytes))
	case c.kind == v1.SliceMPS || c.kind == v1.SliceMIGMPS:
		return v1.NewReason(v1.ReasonTrustGroup, "MPS share 1/%d (%d%% of SMs, %s pinned memory) shared only within %s: MPS gives no fault or bandwidth isolation",
			c.share, c.ev.smPct, gib(c.ev.capBytes), groupText(tn.group))
	case isolationOf(tn.t) == v1.IsolationHard:
		return v1.NewReason(v1.ReasonIsolationHard, "isolation hard: %s that no other tenant shares", c.label())
	}
	if !held {
		return v1.NewReason(v1.ReasonSLOShapeUniform, "an unshared %s: no neighbour adds latency", c.label())
	}
	return v1.NewReason(v1.ReasonSLOShapeUniform, "an unshared %s: no neighbour adds latency, so the SLO holds at every load up to the rate above", c.label())
}

// fixedUnmet is the headline of a tenant whose fixed replica count the model says misses the SLO
// on its chosen slice: the count is planned as the pool asks, and the tenant is infeasible.
func (p *planner) fixedUnmet(tn *tenant) (v1.Reason, bool) {
	c := tn.choice
	if tn.t.Replicas == nil || c == nil || fixedMeets(c, *tn.t.Replicas) {
		return v1.Reason{}, false
	}
	fixed, lam := *tn.t.Replicas, peakRate(tn.t.Traffic)
	msg := fmt.Sprintf("the fixed %d replica(s) on %s %s do not meet %s at %.3g req/s", fixed, c.board.Name, c.label(), describeSLO(tn), lam)
	switch {
	case c.ev.q == nil && c.need > 0: // a measured profile
		msg += fmt.Sprintf(": %.3g req/s a replica, so it needs %d", c.ev.oneRate().RequestsPerSec, c.need)
	case c.ev.q == nil:
		msg += fmt.Sprintf(": no rate meets the SLO (p99 latency %s at a trickle)", roundDur(c.ev.oneRate().TTFT))
	case c.need > 0:
		st := c.ev.q.state(lam, fixed)
		if st.limit == perf.LimitNone || st.limit == perf.LimitTTFT || st.limit == perf.LimitTPOT {
			msg += fmt.Sprintf(" (p99 TTFT %s, TPOT %s)", roundDur(seconds(st.ttft)), roundDur(seconds(st.tpot)))
		} else if st.limit == perf.LimitSaturated && fixed < c.sz.lowest {
			msg += fmt.Sprintf(" (saturated: fewer than %d replica(s) cannot keep up at all)", c.sz.lowest)
		} else {
			msg += fmt.Sprintf(" (%s)", st.limit)
		}
		msg += fmt.Sprintf(": it needs %d", c.need)
	default:
		msg += ": " + c.sz.why
	}
	if len(tn.feasible) > 0 && !slices.ContainsFunc(tn.feasible, func(x *cand) bool { return fixedMeets(x, fixed) }) &&
		!slices.ContainsFunc(tn.fixedFallback, func(x *cand) bool { return fixedMeets(x, fixed) }) {
		msg += fmt.Sprintf("; on no allowed slice do %d replica(s) meet it", fixed)
	}
	msg += p.fixedChoiceWhy(tn)
	return v1.NewReason(v1.ReasonSLOUnmet, "%s; planned as fixed, not sized", msg), true
}

func groupText(g string) string {
	switch {
	case g == "shared":
		return "the shared tier"
	case strings.HasPrefix(g, "soft:"):
		return fmt.Sprintf("trust group %q", strings.TrimPrefix(g, "soft:"))
	}
	return "the tenant's own replicas"
}

// rejected lists up to n rejected alternatives on the chosen board, smallest first, with costs.
func rejected(tn *tenant, n int) []v1.Reason {
	var rej []*cand
	for _, x := range tn.cands {
		if x.reject != "" && x != tn.choice && (tn.choice == nil || x.board == tn.choice.board) { // a fixed count's fallback may be chosen
			rej = append(rej, x)
		}
	}
	slices.SortStableFunc(rej, func(a, b *cand) int {
		fa, fb := a.unitFrac/float64(a.share), b.unitFrac/float64(b.share)
		switch {
		case fa < fb:
			return 1
		case fa > fb:
			return -1
		}
		return 0
	})
	var out []v1.Reason
	for _, x := range rej {
		if len(out) == n {
			break
		}
		out = append(out, v1.NewReason(x.reject, "rejected %s on %s (%.3f GPU per replica): %s", x.label(), x.board.Name, x.unitFrac/float64(x.share), x.why))
	}
	return out
}

// infeasibleReasons explains a tenant no candidate serves.
func (p *planner) infeasibleReasons(tn *tenant) []v1.Reason {
	counts := map[v1.ReasonCode]int{}
	for _, c := range tn.cands {
		counts[c.reject]++
	}
	var out []v1.Reason
	switch {
	case len(tn.cands) == 0:
		code, msg := p.exclusions(tn)
		if code == "" {
			code, msg = v1.ReasonModeNotAllowed, "no slice kind is allowed"
		}
		out = append(out, v1.NewReason(code, "no slice kind the tenant may use: %s", msg))
	case counts[v1.ReasonNoFit] == len(tn.cands):
		out = append(out, p.noFitReason(tn))
	case counts[v1.ReasonOverCap] > 0:
		// The bound decided: these slices meet the SLO with more replicas than it allows.
		c := fewestOverCap(tn)
		msg := fmt.Sprintf("no slice that holds the model meets %s within %s: the fewest replicas that do, on %s of %s, are %d%s",
			describeSLO(tn), maxReplicasName(tn.t), c.label(), c.board.Name, c.asked, spareNote(tn.t))
		if counts[v1.ReasonSLOUnmet] > 0 {
			msg += fmt.Sprintf("; on %d other slice(s) no replica count meets it", counts[v1.ReasonSLOUnmet])
		}
		out = append(out, v1.NewReason(v1.ReasonOverCap, "%s", msg))
	case counts[v1.ReasonNoCapacity] > 0 && counts[v1.ReasonSLOUnmet] > 0:
		// Some slice meets the SLO with a count the fleet cannot hold: the fleet is the term, not
		// the other slices on which no count meets it.
		out = append(out, v1.NewReason(v1.ReasonNoCapacity,
			"the slices that meet %s need more replicas for %.3g req/s than the fleet's %d GPUs can hold; on %d other slice(s) no replica count meets it",
			describeSLO(tn), tn.t.Traffic.RPS, len(p.fleet), counts[v1.ReasonSLOUnmet]))
	case counts[v1.ReasonSLOUnmet] > 0 && tn.measured != nil:
		out = append(out, v1.NewReason(v1.ReasonSLOUnmet, "no allowed slice meets %s by measured profile %s",
			describeSLO(tn), tn.measured.Name()))
	case counts[v1.ReasonSLOUnmet] > 0:
		msg := fmt.Sprintf("no allowed slice meets %s for %d+%d-token requests at %.3g req/s",
			describeSLO(tn), tn.work.InputTokens, tn.work.OutputTokens, tn.t.Traffic.RPS)
		if c := fastestUnmet(tn); c != nil {
			msg += fmt.Sprintf(": even the fastest, %s on %s: %s", c.label(), c.board.Name, c.why)
		}
		out = append(out, v1.NewReason(v1.ReasonSLOUnmet, "%s", msg))
	case counts[v1.ReasonNoCapacity] > 0 && counts[v1.ReasonOverCap] == 0:
		out = append(out, v1.NewReason(v1.ReasonNoCapacity, "every slice that holds the model needs more replicas for %.3g req/s than the fleet's %d GPUs can hold",
			tn.t.Traffic.RPS, len(p.fleet)))
	default:
		out = append(out, v1.NewReason(v1.ReasonOverCap, "every slice that holds the model needs more replicas than %s allows", maxReplicasName(tn.t)))
	}
	if why := p.noMIGMPS(tn); why != "" {
		out = append(out, v1.NewReason(v1.ReasonModeNotAllowed, "%s", why))
	}
	return append(out, rejected(tn, 4)...)
}

// fewestOverCap is the OverCap-rejected candidate that asks for the fewest replicas (the first
// such, in candidate order), nil when none.
func fewestOverCap(tn *tenant) *cand {
	var best *cand
	for _, c := range tn.cands {
		if c.reject == v1.ReasonOverCap && (best == nil || c.asked < best.asked) {
			best = c
		}
	}
	return best
}

// fastestUnmet is the SLO-rejected candidate with the shortest TPOT at batch 1 (the one a single
// request does best on), nil when none.
func fastestUnmet(tn *tenant) *cand {
	var best *cand
	bt := 0.0
	for _, c := range tn.cands {
		if c.reject != v1.ReasonSLOUnmet || c.ev == nil || c.ev.q == nil {
			continue
		}
		if t := c.ev.q.trickle().tpot; best == nil || t < bt {
			best, bt = c, t
		}
	}
	return best
}

// noFitReason says how far the model is from fitting the largest slice.
func (p *planner) noFitReason(tn *tenant) v1.Reason {
	if tn.measured != nil {
		return measuredNoFitReason(tn)
	}
	// A slice that holds the model but whose replica cannot be sized (a board whose compute or
	// bandwidth the catalog does not know) is no memory misfit: name that term, not memory.
	for _, c := range tn.cands {
		if c.ev != nil && c.ev.err != nil && c.ev.fit != nil && c.ev.fit.Fits {
			return v1.NewReason(v1.ReasonNoFit,
				"%s fits %s of %s (%s), but its rate cannot be predicted there: %v — give the tenant a measured profile, or plan it on a board the catalog has compute and bandwidth figures for",
				tn.describeModel(), c.label(), c.board.Name, gib(c.ev.fit.Slice.MemoryBytes), c.ev.err)
		}
	}
	var best *cand
	for _, c := range tn.cands {
		if c.ev != nil && (best == nil || c.ev.fit.Slice.MemoryBytes > best.ev.fit.Slice.MemoryBytes) {
			best = c
		}
	}
	if best == nil {
		return v1.NewReason(v1.ReasonNoFit, "the model fits no allowed slice")
	}
	m := best.ev.fit.Memory
	budget := float64(best.ev.fit.Slice.GPUBytes) * llm.DefaultUtilization
	if best.ev.fit.Slice.GPUBytes == 0 {
		budget = float64(best.ev.fit.Slice.MemoryBytes) * llm.DefaultUtilization
	}
	gpus := int(math.Ceil(float64(m.Budget()) / budget))
	group := 1
	for _, c := range tn.cands {
		group = max(group, c.tp)
	}
	return v1.NewReason(v1.ReasonNoFit,
		"%s needs %s of weights (%s with KV cache and workspace): no slice of %s holds it (the largest, %s, has %s); at least %d GPUs per replica would be needed, more than the largest tensor-parallel group the model, the board's link and one node of the fleet allow (%d) — quantize (fp8, int4) or shorten maxContext",
		tn.describeModel(), gib(m.Weights), gib(m.Budget()), best.board.Name, best.label(), gib(best.ev.fit.Slice.MemoryBytes), max(gpus, group+1), group)
}
