package plan

import (
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// busyCand is the exclusive single-GPU H200 candidate of testdata/busy-longprompt.yaml's tenant
// and the tenant, evaluated as the planner evaluates them.
func busyCand(t *testing.T) (*tenant, *cand) {
	t.Helper()
	p, err := newPlanner(loadPool(t, "testdata/busy-longprompt.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	tn := p.tenants[0]
	for _, c := range tn.feasible {
		if c.kind == v1.SliceExclusive && c.tp == 1 && c.ev != nil && c.ev.q != nil {
			return tn, c
		}
	}
	t.Fatalf("no exclusive single-GPU candidate among %d", len(tn.feasible))
	return nil, nil
}

// saturatedAt is the highest rate n replicas of q carry without the model saturating them (no
// SLO), by bisection: the quantity busyAt compares against, found independently of it.
func saturatedAt(q *qmodel, n int) float64 {
	lo, hi := 0.0, 1.0
	for q.state(hi, n).limit == perf.LimitNone {
		lo, hi = hi, 2*hi
	}
	for range 60 {
		mid := (lo + hi) / 2
		if q.state(mid, n).limit == perf.LimitNone {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// busyAt is true exactly where the rate is above confirmBusyLoad of what the count sustains at
// any latency (ADR 0128): the pool's tenant at its model count of three (0.97 of saturation) is
// busy, at four it is not, and over counts 1-5 and rates from 0.5 to 1.2 of each count's
// saturation the answer follows the bisection's.
func TestBusyAtSaturation(t *testing.T) {
	tn, c := busyCand(t)
	q := c.ev.q
	lam := peakRate(tn.t.Traffic)
	if c.replicas != 3 {
		t.Fatalf("model count %d, want 3 (the pool's premise)", c.replicas)
	}
	if !busyAt(q, lam, 3) || busyAt(q, lam, 4) {
		t.Errorf("busy at 3 replicas %t, at 4 %t: want true, false (saturation %.3f and %.3f req/s, rate %.3f)",
			busyAt(q, lam, 3), busyAt(q, lam, 4), saturatedAt(q, 3), saturatedAt(q, 4), lam)
	}
	for n := 1; n <= 5; n++ {
		sat := saturatedAt(q, n)
		for _, f := range []float64{0.5, 0.7, 0.78, 0.82, 0.9, 1, 1.2} {
			r := f * sat
			if got, want := busyAt(q, r, n), f > confirmBusyLoad; got != want {
				t.Errorf("%d replicas at %.2f of saturation (%.3f of %.3f req/s): busy %t, want %t", n, f, r, sat, got, want)
			}
		}
	}
	if busyAt(nil, lam, 3) || busyAt(q, 0, 3) || busyAt(q, lam, 0) {
		t.Error("busy without a model, a rate or a replica")
	}
}

// A busy tenant's long runs decide by the share of their requests within the SLO and by the
// estimated chance that a run of 2,000 requests falls below 99 % (from the long runs' own
// spread), whatever the first runs said: 99.23 % over them is short; 99.89 % over four runs of
// 50,000 that spread as stream 60's pool 74 t7's (one 99.69 %, misses in rare spells) is short
// by the estimate; 99.9 % in every run, spread as independent requests would be, passes.
func TestBusyShort(t *testing.T) {
	long := func(atts ...float64) []map[string]SimTenant {
		var reps []map[string]SimTenant
		for _, a := range atts {
			reps = append(reps, map[string]SimTenant{"t": {Attainment: a, Judged: 50_000}})
		}
		return reps
	}
	st := confirmState{judged: true, att: 1, worst: 1}
	if st.short() {
		t.Fatal("short on clean runs without long runs")
	}
	st.tallyBusy("t", time.Hour, long(0.9923, 0.9923, 0.9923, 0.9923))
	if !st.short() || !strings.Contains(st.bar(), "long runs") || !strings.Contains(st.inRuns(), "99.23 %") {
		t.Errorf("99.23 %% over the long runs: short %t, bar %q, entry %q; want short, named", st.short(), st.bar(), st.inRuns())
	}
	st.tallyBusy("t", time.Hour, long(0.9969, 1, 0.9987, 1))
	if !st.short() || st.busyMiss <= confirmMissMax {
		t.Errorf("99.89 %% over spread long runs: short %t, estimated %.2f %%; want short above %.0f %%", st.short(), 100*st.busyMiss, 100*confirmMissMax)
	}
	st.tallyBusy("t", time.Hour, long(0.9989, 0.9991, 0.999, 0.999))
	if st.short() {
		t.Errorf("99.9 %% over evenly spread long runs: short (estimated %.2f %%)", 100*st.busyMiss)
	}
	if st.busyRuns != 4 || st.busyOver != 200_000 || len(st.busyWords) != 4 {
		t.Errorf("tallied %d runs of %.0f requests (%d words), want 4 of 200,000", st.busyRuns, st.busyOver, len(st.busyWords))
	}
	st.judged = false
	st.tallyBusy("t", time.Hour, long(0.9, 0.9))
	if st.short() {
		t.Error("short though not judged")
	}
}

// Stream 60's pool 87 t15 alone (testdata/busy-longprompt.yaml): its three replicas pass the
// first runs clean, but it is busy, and its long runs find 99.23 % of about 200,000 requests
// within the SLO, so it is raised to four (ADR 0128). Without ADR 0128 it was planned at three,
// where the simulator puts it below 99 % in 7 of 60 runs of the agreement suite's length. At a
// rate its three replicas carry at 0.75 of their saturation it is not busy: no long runs, three
// replicas.
func TestBusyTenantJudgedOnLongRuns(t *testing.T) {
	pool := loadPool(t, "testdata/busy-longprompt.yaml")
	pl := buildWith(t, pool, confirmed)
	tp := pl.Tenants[0]
	sim := simulatedReason(tp)
	if tp.Infeasible || len(tp.Replicas) != 4 || !strings.Contains(sim, "found short before on") || !strings.Contains(sim, "requests over 4 runs of") {
		t.Errorf("busy tenant: %d replicas (infeasible %t), Simulated %q; want 4, found short at 3 over its long runs", len(tp.Replicas), tp.Infeasible, sim)
	}
	_, c := busyCand(t)
	calm := loadPool(t, "testdata/busy-longprompt.yaml")
	calm.Tenants[0].Traffic.RPS = 0.75 * saturatedAt(c.ev.q, 3)
	pl = buildWith(t, calm, confirmed)
	tp = pl.Tenants[0]
	sim = simulatedReason(tp)
	if len(tp.Replicas) != 3 || strings.Contains(sim, "sustain at any latency") || !strings.Contains(sim, "in 3 simulated runs") {
		t.Errorf("calm tenant at %.3f req/s: %d replicas, Simulated %q; want 3, judged on its three runs alone", calm.Tenants[0].Traffic.RPS, len(tp.Replicas), sim)
	}
}

// simulatedReason is the message of pt's Simulated reason, "" when it has none.
func simulatedReason(pt v1.PlanTenant) string {
	for _, r := range pt.Reasons {
		if r.Code == v1.ReasonSimulated {
			return r.Message
		}
	}
	return ""
}
