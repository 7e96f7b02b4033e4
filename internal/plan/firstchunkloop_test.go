package plan

import (
	"cmp"
	"fmt"
	"math"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/sim"
)

// loopShape is one replica of model (bf16) on a MIG instance profile of board, at its
// efficiency clock or the boost clock, for prompts of in tokens and 150 output tokens.
type loopShape struct {
	model, board, profile string
	start, in             int
	efficiency            bool
}

// qmodel is the shape's queueing model at --max-num-seqs conc.
func (s loopShape) qmodel(t *testing.T, conc int) *qmodel {
	t.Helper()
	clock := 0.0
	if s.efficiency {
		clock = perf.DefaultOptions().EfficiencyClock
	}
	e := migEngine(t, s.model, s.board, s.profile, clock)
	return newQModel(e, perf.Workload{InputTokens: s.in, OutputTokens: 150}, perf.Load{}).withSeqCap(conc)
}

// simulate runs the shape's replica alone at rps req/s for d at --max-num-seqs seqs (the pool's
// concurrency), max-model-len 8,192 and a 2,048-token budget, the SLO loose enough that only a
// collapse misses it.
func (s loopShape) simulate(t *testing.T, rps float64, seqs int, d time.Duration, seed uint64) sim.TenantReport {
	t.Helper()
	ec := ""
	if s.efficiency {
		ec = "  energyClass: efficiency\n"
	}
	pool, err := v1.LoadPool([]byte(fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: loop}
fleet:
  nodes:
  - name: n0
    gpus: [{board: %s, count: 1}]
tenants:
- name: t
  isolation: hard
  model: {name: %s}
  traffic: {rps: %g, inputTokens: %d, outputTokens: 150}
  slo: {ttftP99: 30000ms, tpotP99: 1000ms}
  concurrency: %d
%s`, s.board, s.model, rps, s.in, seqs, ec)))
	if err != nil {
		t.Fatal(err)
	}
	pl := migPlan(t, "loop", s.board, s.profile, []int{s.start}, 8192, seqs)
	return simulate(t, pool, pl, d, seed).Report.Tenants[0]
}

// thrashRate is the highest rate (to 1e-4 req/s) that one replica of q carries without
// firstChunkThrash refusing it.
func thrashRate(q *qmodel) float64 {
	lo, hi := 1e-4, 5.0
	for hi-lo > 1e-4 {
		m := (lo + hi) / 2
		if t, ok := q.meanStep(m); !ok || q.firstChunkThrash(m, 1, t) {
			hi = m
		} else {
			lo = m
		}
	}
	return lo
}

// An uncapped KV-bound replica of long prompts (a pool's concurrency 16 above the places of its
// cache) enters the first-chunk loop in a burst that fills the places while prompts queue for
// the prefill, and where its rate is above what it serves inside the loop it never leaves:
// qwen2.5-7b on an A100 1g.20gb at its efficiency clock, 4,000 + 150 tokens, serves 0.085 req/s
// there, and at 0.1 req/s, which ADR 0084's share-of-time rule (kvThrashMiss) accepts, three of
// five 24-hour runs collapse (23–29 % of requests within the SLO) though 2-hour runs never
// preempt. At the rate firstChunkThrash accepts (loopDrain's edge; ADR 0096's budget of entries
// a day, dropped for one replica by ADR 0100, accepted 0.054) no 24-hour run at seeds 1–3 may
// preempt at all. qwen2.5-3b on an H100 1g.10gb serves 0.41 and 0.85 req/s in the loop and leaves
// it: there the runs may preempt but must meet the SLO for 99 % of the requests, and the rule must
// spare the rate kvThrashMiss accepts (loopServes, loopDrain), where the budget alone cut
// 8,000-token prompts from 0.117 to 0.056 req/s and 4,000-token ones from 0.596 to 0.361. Nor may
// the rule fall below floor of ref: the simulator's highest rate without a preemption in runs at
// seeds 1–5, or for a loop that is left kvThrashMiss's rate.
func TestFirstChunkLoopDay(t *testing.T) {
	for _, c := range []struct {
		name       string
		s          loopShape
		left       bool // the replica leaves the loop at the rate: preemptions allowed
		ref, floor float64
	}{
		{"qwen2.5-7b A100 1g.20gb efficiency, 4,000 tokens", loopShape{"qwen2.5-7b", "A100-SXM4-80GB", "1g.20gb", 0, 4000, true}, false, 0.06, 0.8},
		{"qwen2.5-7b A100 1g.20gb boost, 4,000 tokens", loopShape{"qwen2.5-7b", "A100-SXM4-80GB", "1g.20gb", 0, 4000, false}, false, 0.0733, 0.9},
		{"qwen2.5-3b H100 1g.10gb, 8,000 tokens", loopShape{"qwen2.5-3b", "H100-SXM5-80GB", "1g.10gb", 6, 8000, false}, true, 0.1166, 0.85},
		{"qwen2.5-3b H100 1g.10gb, 4,000 tokens", loopShape{"qwen2.5-3b", "H100-SXM5-80GB", "1g.10gb", 6, 4000, false}, true, 0.5955, 0.85},
	} {
		q := c.s.qmodel(t, 16)
		if !q.kvBound || q.capped || q.k <= 1 || q.slots >= 16 {
			t.Fatalf("%s: slots %d kvBound %t capped %t, %g chunks: want an uncapped KV-bound replica of long prompts below 16 places",
				c.name, q.slots, q.kvBound, q.capped, q.k)
		}
		rate := thrashRate(q)
		for seed := uint64(1); seed <= 3; seed++ {
			r := c.s.simulate(t, rate, 16, 24*time.Hour, seed)
			t.Logf("%s (%d places): model %.4f req/s; seed %d: %d preemptions, %.2f %% of %d requests within the SLO",
				c.name, q.slots, rate, seed, r.Preemptions, 100*r.SLOAttainment, r.Completed)
			if r.SLOAttainment < 0.99 || (!c.left && r.Preemptions > 0) {
				t.Errorf("%s: at the model's %.4f req/s, seed %d of 24 hours: %d preemptions, %.2f %% within the SLO",
					c.name, rate, seed, r.Preemptions, 100*r.SLOAttainment)
			}
		}
		if rate < c.floor*c.ref {
			t.Errorf("%s: model %.4f req/s, below %.2f of %.4f", c.name, rate, c.floor, c.ref)
		}
	}
}

// The planner, given the pool of the "Clock" table's row (a) with a TPOT target that the 1g.20gb
// meets (testdata/first-chunk-loop.yaml), put the tenant on that instance at 0.1 req/s, where
// 24-hour runs at seeds 1–3 collapse in the first-chunk loop; with ADR 0096's rule it takes a
// larger instance, and no 24-hour run preempts.
func TestFirstChunkLoopPlan(t *testing.T) {
	pool := loadPool(t, "testdata/first-chunk-loop.yaml")
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible || len(tn.Replicas) == 0 {
		t.Fatalf("infeasible or unpredicted: %v", tn.Reasons)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		r := simulate(t, pool, pl, 24*time.Hour, seed).Report.Tenants[0]
		t.Logf("%d × %s, seed %d: %d preemptions, %.2f %% of %d requests within the SLO", len(tn.Replicas), tn.Replicas[0].Instance, seed,
			r.Preemptions, 100*r.SLOAttainment, r.Completed)
		if r.Preemptions > 0 || r.SLOAttainment < 0.99 {
			t.Errorf("%s, seed %d of 24 hours: %d preemptions, %.2f %% within the SLO; want none and 99 %%",
				tn.Replicas[0].Instance, seed, r.Preemptions, 100*r.SLOAttainment)
		}
	}
}

// loopEntries is the tandem's chance at the places, times the arrivals of the horizon.
func TestLoopEntries(t *testing.T) {
	// One place, no decode: an arrival finds the one prefill busy, (1−ρ)ρ.
	if got, want := loopEntries(0.5, 1, 1, 1, 0, 100), 100*0.5*0.5*0.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("one place: %g entries, want %g", got, want)
	}
	// Two places, ρ = 0.5, one decode in flight on average: Σ_j Pois(j; 1)(1−ρ)ρ^(2−j).
	want := 10 * 0.5 * math.Exp(-1) * 0.5 * (0.25 + 0.5 + 0.5)
	if got := loopEntries(0.5, 1, 2, 1, 2, 10); math.Abs(got-want) > 1e-9 {
		t.Errorf("two places: %g entries, want %g", got, want)
	}
	if got := loopEntries(1, 1, 4, 1, 1, 10); !math.IsInf(got, 1) {
		t.Errorf("prefill at its capacity: %g entries, want +Inf", got)
	}
	// n replicas at lam share it: each at lam/n, the arrivals of all.
	if one, two := loopEntries(0.2, 1, 4, 1, 3, 86400), loopEntries(0.4, 2, 4, 1, 3, 86400); math.Abs(two-2*one) > 1e-9*two {
		t.Errorf("two replicas at twice the rate: %g entries, want twice one's %g", two, one)
	}
}

// While one replica is in the first-chunk loop the others carry the rest at their full slots'
// rate (fullServes), not at the slots' rate of the tenant's own mean step, which is a light
// load's: two replicas of llama-3.1-8b on an H100-SXM5-80GB at --max-num-seqs 16 above their 14
// places, 30,000 + 256 tokens, at 0.946 req/s (0.7 of saturation), were spared the budget of
// entries (loopDrain) at 2.36 req/s a replica where one saturates at 0.676, and every run falls
// into the loop and stays (14–59 % of about 2,500 requests within a TTFT of 60 s; 0.4–2.5 % of a
// day's). A TPOT target of 150 ms (the model's 80.8 ms) accepted them. Nor is one replica in the
// loop beside full ones the whole of it: the least-loaded router spreads a burst over both, they
// fill together, and at 0.70 req/s (0.52 of saturation), which that reading spares, 24-hour runs
// keep 17.8–82.2 % of the requests within the SLO at seeds 1–3: each replica must drain at its
// own loop rate. ADR 0099.
func TestFirstChunkLoopOthersAtFullSlots(t *testing.T) {
	s := longTPOTShape{"llama-3.1-8b", "H100-SXM5-80GB", 30000, 256, 16, 2, 0.7}
	q, flags := longTPOTModel(t, s)
	if !q.kvBound || q.capped || q.slots != 14 || q.k != 4 {
		t.Fatalf("%v: %d slots (KV-bound %v, capped %v), %g chunks; want 14 KV-bound uncapped, 4", s, q.slots, q.kvBound, q.capped, q.k)
	}
	sat := saturationRate(q)
	if fs := q.fullServes(); math.Abs(fs/sat-1) > 0.02 {
		t.Errorf("a full replica serves %.4f req/s, want its saturation rate %.4f within 2 %%", fs, sat)
	}
	rate := 0.9462
	if st := q.state(rate, s.n); st.limit != perf.LimitKV {
		t.Errorf("%.4f req/s over %d replicas: limit %q (TPOT p99 %.1f ms), want %q", rate, s.n, st.limit, st.tpot*1e3, perf.LimitKV)
	}
	if q.admits(rate, s.n, perf.SLO{TTFT: 60 * time.Second, TPOT: 150 * time.Millisecond}) {
		t.Errorf("%.4f req/s over %d replicas admitted within TTFT 60 s, TPOT 150 ms", rate, s.n)
	}
	r := simulate(t, longTPOTPool(t, s, rate), exclusivePlan(t, s, flags), time.Duration(2500/rate*1e9), 1).Report.Tenants[0]
	t.Logf("simulator, seed 1: %d preemptions, TTFT p99 %.0f s, %.2f %% within the SLO", r.Preemptions, r.TTFT.P99/1e3, 100*r.SLOAttainment)
	if r.SLOAttainment >= 0.99 {
		t.Errorf("the simulator meets the SLO for %.2f %% of the requests: the shape no longer shows the loop", 100*r.SLOAttainment)
	}
	burst := 0.7056
	if q.admits(burst, s.n, perf.SLO{TTFT: 60 * time.Second, TPOT: 150 * time.Millisecond}) {
		t.Errorf("%.4f req/s over %d replicas admitted: both fill in one burst and stay in the loop", burst, s.n)
	}
	r = simulate(t, longTPOTPool(t, s, burst), exclusivePlan(t, s, flags), 24*time.Hour, 3).Report.Tenants[0]
	t.Logf("simulator at %.4f req/s, 24 hours, seed 3: %d preemptions, TTFT p99 %.0f s, %.2f %% within the SLO", burst, r.Preemptions, r.TTFT.P99/1e3, 100*r.SLOAttainment)
	if r.SLOAttainment >= 0.99 {
		t.Errorf("the simulator meets the SLO at %.4f req/s for %.2f %% of a day's requests: the shape no longer shows the burst", burst, 100*r.SLOAttainment)
	}
}

// A first-chunk loop that loopDrain spares as left is not harmless to a TPOT target between the
// model's p99 and the loop's step: inside it every step carries a chunk, the thrown-away one or
// a prompt's. llama-3.1-8b on four single H100-SXM5-80GB at --max-num-seqs 16 above their 14
// places, 30,000 + 64 tokens at 2.476 req/s, was accepted within a 250 ms TPOT at the model's
// 221.7 ms, where seed 1 of a 10-minute run enters the loop (16 preemptions, TPOT p99 278.5 ms,
// 96.93 % of requests within the SLO). The model counts 283 entries a day, each taking the
// slots' requests into the loop: 1.86 % of the requests, above the p99's 1 % (loopTPOTShare), so
// the TPOT is the loop's step (loopTPOT, ADR 0100), at or above the simulator's. Where the share
// is below it the TPOT is unchanged: the same model on two A100-SXM4-80GB at 30,000 + 256 tokens
// (0.80 %) and qwen2.5-3b's two 1g.10gb at 8,000 + 150 tokens (0.41 %; TestLongPromptKVThrash
// meets the SLO there). Planned with maxReplicas 4, the tenant takes two TP-2 replicas, which
// meet the SLO.
func TestFirstChunkLoopTPOT(t *testing.T) {
	s := longTPOTShape{"llama-3.1-8b", "H100-SXM5-80GB", 30000, 64, 16, 4, 0.7}
	q, flags := longTPOTModel(t, s)
	if !q.kvBound || q.capped || q.slots != 14 || q.k != 4 {
		t.Fatalf("%v: %d slots (KV-bound %v, capped %v), %g chunks; want 14 KV-bound uncapped, 4", s, q.slots, q.kvBound, q.capped, q.k)
	}
	rate, slo := 2.476, perf.SLO{TTFT: 60 * time.Second, TPOT: 250 * time.Millisecond}
	st := q.state(rate, s.n)
	r := simulate(t, longTPOTPool(t, s, rate), exclusivePlan(t, s, flags), 10*time.Minute, 1).Report.Tenants[0]
	t.Logf("%.3f req/s over %d replicas: model TPOT p99 %.1f ms (%q); simulator, seed 1 of 10 minutes: %d preemptions, TPOT p99 %.1f ms",
		rate, s.n, st.tpot*1e3, st.limit, r.Preemptions, r.TPOT.P99)
	if r.Preemptions == 0 || r.TPOT.P99 <= slo.TPOT.Seconds()*1e3 {
		t.Errorf("the simulator's run does not enter the loop past the target (%d preemptions, TPOT p99 %.1f ms): the shape no longer shows it",
			r.Preemptions, r.TPOT.P99)
	}
	if st.limit != perf.LimitNone || st.tpot*1e3 < r.TPOT.P99 {
		t.Errorf("model TPOT p99 %.1f ms (%q), below the simulator's %.1f ms in the loop", st.tpot*1e3, st.limit, r.TPOT.P99)
	}
	if q.admits(rate, s.n, slo) {
		t.Errorf("%.3f req/s over %d replicas admitted within TPOT %v", rate, s.n, slo.TPOT)
	}
	for _, c := range []struct {
		name string
		q    *qmodel
		lam  float64
		n    int
	}{
		{"llama-3.1-8b, two A100-SXM4-80GB, 30,000 + 256", func() *qmodel {
			q, _ := longTPOTModel(t, longTPOTShape{"llama-3.1-8b", "A100-SXM4-80GB", 30000, 256, 16, 2, 0.7})
			return q
		}(), 0.3665, 2},
		{"qwen2.5-3b, two H100 1g.10gb, 8,000 + 150", migModel(t, "qwen2.5-3b", "H100-SXM5-80GB", "1g.10gb", 8000, 150, 256), 0.4426, 2},
	} {
		tm, ok := c.q.meanStep(c.lam / float64(c.n))
		if !ok {
			t.Fatalf("%s at %.4f req/s: saturated", c.name, c.lam)
		}
		if lt := c.q.loopTPOT(c.lam, c.n, tm, 0); lt != 0 {
			t.Errorf("%s at %.4f req/s: TPOT priced at the loop's %.1f ms, where the share in the loop is below 1 %%", c.name, c.lam, lt*1e3)
		}
	}
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: looptpot}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100-SXM5-80GB, count: 8}]
tenants:
- name: t
  isolation: shared
  model: {name: llama-3.1-8b}
  traffic: {rps: 2.476, inputTokens: 30000, outputTokens: 64}
  slo: {ttftP99: 60000ms, tpotP99: 250ms}
  concurrency: 16
  maxReplicas: 4
`))
	if err != nil {
		t.Fatal(err)
	}
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible || len(tn.Replicas) == 0 {
		t.Fatalf("maxReplicas 4: infeasible or unplaced: %v", tn.Reasons)
	}
	r = simulate(t, pool, pl, 10*time.Minute, 1).Report.Tenants[0]
	t.Logf("maxReplicas 4: %d replicas (model TPOT p99 %v); seed 1 of 10 minutes: %d preemptions, TPOT p99 %.1f ms, %.2f %% within the SLO",
		len(tn.Replicas), tn.Predicted.TPOTP99, r.Preemptions, r.TPOT.P99, 100*r.SLOAttainment)
	if r.SLOAttainment < 0.99 {
		t.Errorf("maxReplicas 4: the plan meets the SLO for %.2f %% of seed 1's requests", 100*r.SLOAttainment)
	}
}

// One replica above loopDrain's edge was accepted where loopEntries' tandem counted at most 10⁻³
// entries a day (ADR 0096's budget): llama-3.1-8b on one H100-SXM5-80GB at --max-num-seqs 16
// above its 14 places, 30,000 + 256 tokens, up to 0.246 req/s, where 24-hour runs at seeds 1–3
// preempt 260, 204 and 48,374 times and seed 3 collapses (36.9 % within the SLO). The tandem
// is light there by orders of magnitude; without the budget on one replica the rule accepts
// loopDrain's edge (0.7 of loopServes' 0.330 req/s), where seed 3 of a day meets the SLO (ADR
// 0100).
func TestFirstChunkLoopOneReplicaAtDrain(t *testing.T) {
	s := longTPOTShape{"llama-3.1-8b", "H100-SXM5-80GB", 30000, 256, 16, 1, 0.7}
	q, flags := longTPOTModel(t, s)
	if !q.kvBound || q.capped || q.slots != 14 || q.k != 4 {
		t.Fatalf("%v: %d slots (KV-bound %v, capped %v), %g chunks; want 14 KV-bound uncapped, 4", s, q.slots, q.kvBound, q.capped, q.k)
	}
	rate, edge := thrashRate(q), loopDrain*q.loopServes()
	if rate > edge+1e-4 {
		t.Errorf("one replica accepted up to %.4f req/s, above loopDrain's edge %.4f (0.246 collapses in one 24-hour run of three)", rate, edge)
	}
	r := simulate(t, longTPOTPool(t, s, rate), exclusivePlan(t, s, flags), 24*time.Hour, 3).Report.Tenants[0]
	t.Logf("one replica at the model's %.4f req/s, 24 hours, seed 3: %d preemptions, TTFT p99 %.1f s, %.2f %% of %d requests within the SLO",
		rate, r.Preemptions, r.TTFT.P99/1e3, 100*r.SLOAttainment, r.Completed)
	if r.SLOAttainment < 0.99 {
		t.Errorf("at the model's %.4f req/s seed 3 of a day meets the SLO for %.2f %% of the requests", rate, 100*r.SLOAttainment)
	}
}

// ADR 0100's refusal of one replica above loopDrain's edge was calibrated at 14 places; at many
// places (ADR 0106) one replica is refused above loopEdgeMany instead: loopWide (0.85) of
// loopServes from 40 places, loopWideNear (0.75) below, and at most loopDrain of fullServes.
// 24-hour runs at seeds 1–3 of one uncapped KV-bound MIG replica (concurrency unset, the
// engine's --max-num-seqs 256; perf's admission rule gives a place more than the full length)
// meet the SLO at the planner's rate. Where the outputs are long the loop's rate is the lower and
// the edge rises (qwen2.5-3b on a B200 1g.23gb at 4,000 + 800 tokens, 84 places: 1.209 → 1.468
// req/s; llama-3.1-8b on a 1g.45gb at 4,000 + 300, 46 places: 1.427 → 1.734; at 8,000 + 800, 23
// places: 0.253 → 0.271). Where the prompts are long and the outputs short the full replica's
// prefill is the lower, and it binds: llama-3.2-1b on a 1g.23gb at the efficiency clock, 8,000 +
// 300 (66 places), was given loopDrain's edge, 3.549 req/s, where 24-hour runs met the SLO for
// 92.2–93.9 % of the requests; now 2.739. llama-3.2-3b on a 1g.45gb at 8,000 + 300 (37 places,
// loopServes 2.474 just below fullServes 2.573) moves from 1.731 to 1.800 and misses at 0.8 of
// loopServes (97.6–98.1 %, some 10,000 preemptions a day): the room above is thin.
func TestFirstChunkLoopManyPlaces(t *testing.T) {
	for _, c := range []struct {
		name, board, model, traffic, slo, class string
		edge, planned                           float64 // loopEdgeMany (the planner's maxRps); the rate planned
		wide                                    float64 // loopServes, where a run misses at 0.8 of it; 0 unchecked
	}{
		{"qwen2.5-3b B200 1g.23gb, 4,000 + 800, 84 places", "B200", "qwen2.5-3b",
			"inputTokens: 4000, outputTokens: 800", "{ttftP99: 1800ms, tpotP99: 100ms}", "", 1.468, 0.1, 0},
		{"llama-3.1-8b B200 1g.45gb, 8,000 + 800, 23 places", "B200", "llama-3.1-8b",
			"inputTokens: 8000, outputTokens: 800", "{e2eP99: 120s}", "", 0.271, 0.1, 0},
		{"llama-3.1-8b B200 1g.45gb, 4,000 + 300, 46 places", "B200", "llama-3.1-8b",
			"inputTokens: 4000, outputTokens: 300", "{ttftP99: 4000ms, tpotP99: 60ms}", "", 1.734, 0.3, 0},
		{"llama-3.2-1b B200 1g.23gb efficiency, 8,000 + 300, 66 places", "B200", "llama-3.2-1b",
			"inputTokens: 8000, outputTokens: 300", "{ttftP99: 2300ms, tpotP99: 150ms}", "efficiency", 2.739, 0.1, 0},
		{"llama-3.2-3b B200 1g.45gb, 8,000 + 300, 37 places", "B200", "llama-3.2-3b",
			"inputTokens: 8000, outputTokens: 300", "{ttftP99: 5000ms, tpotP99: 100ms}", "", 1.800, 0.8, 2.474},
	} {
		pool := func(rps float64) *v1.Pool {
			p, err := v1.LoadPool([]byte(fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: many}
fleet:
  nodes:
  - name: n0
    gpus: [{board: %s, count: 1}]
policy: {burstPoolPercent: 0, allowedModes: [mig]}
tenants:
- name: t
  isolation: soft
  model: {name: %s}
  maxContext: 8800
  traffic: {rps: %g, %s, lengths: fixed}
  slo: %s
  replicas: 1
  energyClass: %s
`, c.board, c.model, rps, c.traffic, c.slo, cmp.Or(c.class, "balanced"))))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		pl := build(t, pool(c.planned))
		tn := pl.Tenants[0]
		if tn.Infeasible || len(tn.Replicas) != 1 {
			t.Fatalf("%s: infeasible or not one replica: %v", c.name, tn.Reasons)
		}
		rate := tn.Predicted.MaxRPS
		if math.Abs(rate-c.edge) > 2e-3 {
			t.Errorf("%s on %s: maxRps %.4f, want loopEdgeMany's %.4f", c.name, tn.Replicas[0].Instance, rate, c.edge)
		}
		worst := 1.0
		for seed := uint64(1); seed <= 3; seed++ {
			r := simulate(t, pool(rate), pl, 24*time.Hour, seed).Report.Tenants[0]
			t.Logf("%s on %s at the model's %.4f req/s, seed %d of 24 hours: %d preemptions, TPOT p99 %.1f ms, %.2f %% of %d requests within the SLO",
				c.name, tn.Replicas[0].Instance, rate, seed, r.Preemptions, r.TPOT.P99, 100*r.SLOAttainment, r.Completed)
			if r.SLOAttainment < 0.99 {
				t.Errorf("%s: at the model's %.4f req/s seed %d of a day meets the SLO for %.2f %% of the requests", c.name, rate, seed, 100*r.SLOAttainment)
			}
		}
		if c.wide == 0 {
			continue
		}
		wide := c.wide * 0.8
		for seed := uint64(1); seed <= 3; seed++ {
			r := simulate(t, pool(wide), pl, 24*time.Hour, seed).Report.Tenants[0]
			t.Logf("%s at 0.8 of loopServes, %.4f req/s, seed %d of 24 hours: %d preemptions, %.2f %% within the SLO", c.name, wide, seed, r.Preemptions, 100*r.SLOAttainment)
			worst = math.Min(worst, r.SLOAttainment)
		}
		if worst >= 0.99 {
			t.Errorf("%s: at 0.8 of loopServes (%.4f req/s) every 24-hour run meets the SLO (worst %.2f %%): a wider edge for many places may hold", c.name, wide, 100*worst)
		}
	}
}
