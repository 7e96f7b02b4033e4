package plan

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// edgeSim is a simulator that reports t0 at the model's count with the attainment of its seed's
// entry in att (2,500 requests a run), and at any higher count within the SLO; it records the
// seeds it ran.
type edgeSim struct {
	model int
	att   []float64
	mu    sync.Mutex
	seeds map[uint64]bool
}

func (s *edgeSim) run(_ context.Context, in SimInput) (map[string]SimTenant, error) {
	s.mu.Lock()
	s.seeds[in.Seed] = true
	s.mu.Unlock()
	n := 0
	for _, pt := range in.Plan.Tenants {
		if pt.Name == "t0" {
			n = len(pt.Replicas)
		}
	}
	a := 1.0
	if n <= s.model && int(in.Seed) < len(s.att) {
		a = s.att[in.Seed]
	}
	return map[string]SimTenant{"t0": {Judged: 2500, Attainment: a}}, nil
}

// The pass rule of ADR 0078 on a tenant near the edge. Runs drawn around a mean of 99.6 % with a
// spread of 0.4 points a run (s7's Poisson twin's, testdata/review12) pass the three runs' rule
// (99.78 % over seeds 0–2, 99.65 % in the worst); they are borderline, so six runs more judge
// the tenant, and on all nine (99.54 %, 98.90 % in the worst) a run of 2,000 requests falls
// below 99 % too often: it is raised. Runs near the edge whose six more runs stay high pass
// after them at the model's count; runs well clear of the edge pass on the first three alone;
// runs near 99.7 % with little spread, which only the spread floor fails on nine runs, are
// judged on 40 runs of 2,000 requests more and pass when at most two of them fall below 99 %
// (ADR 0083); m1p's docs-qa, whose tail runs fall below 99 % five times in 40, is raised.
func TestConfirmBorderlineRule(t *testing.T) {
	pool := loadPool(t, "testdata/confirm-single.yaml")
	model := len(buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: -1}).Tenants[0].Replicas)
	for _, c := range []struct {
		name   string
		att    []float64
		raised bool
		seeds  int
		say    string
	}{
		{"raise", []float64{0.9990, 0.9980, 0.9965, 0.9920, 0.9970, 0.9890, 0.9960, 0.9950, 0.9960}, true, 9, "estimated"},
		{"extra runs pass", []float64{0.9990, 0.9980, 0.9965, 0.9995, 0.9990, 0.9985, 0.9995, 0.9990, 0.9990}, false, 9, "in 9 simulated runs"},
		{"clear", []float64{0.9995, 1, 0.9992, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9}, false, 3, "in 3 simulated runs"},
		// near 99.7 % with little spread: the floor fails it on nine runs, and its 40 tail runs
		// (ADR 0083), none below 99 %, pass it
		{"floor only", append([]float64{0.9985, 0.9975, 0.9990, 0.9965, 0.9970, 0.9968, 0.9972, 0.9966, 0.9970},
			0.9970, 0.9968, 0.9972, 0.9969, 0.9971, 0.9967, 0.9970, 0.9973, 0.9969, 0.9970, 0.9968, 0.9971, 0.9970, 0.9969, 0.9972, 0.9970, 0.9968, 0.9971), false, 49, "40 runs of"},
		// m1p's docs-qa (testdata/review12): its first nine runs (seeds 0–8 of its component)
		// and 40 runs of 2,000 requests at seeds 9–48, 5 of them below 99 %: raised
		{"heavy tail", append(slices.Clone(m1pFirst), m1pTail...), true, 49, "5 of 40 runs of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &edgeSim{model: model, att: c.att, seeds: map[uint64]bool{}}
			pl := buildWith(t, pool, Options{Simulate: s.run})
			got, r := len(pl.Tenants[0].Replicas), simReasonOf(pl, "t0")
			t.Logf("%d replicas (model %d): %s", got, model, r)
			if (got > model) != c.raised || pl.Tenants[0].Infeasible {
				t.Errorf("%d replicas (model %d), infeasible %v; raised want %v", got, model, pl.Tenants[0].Infeasible, c.raised)
			}
			if len(s.seeds) != c.seeds {
				t.Errorf("ran seeds %v, want %d of them", s.seeds, c.seeds)
			}
			if !strings.Contains(r, c.say) {
				t.Errorf("Simulated reason %q does not say %q", r, c.say)
			}
		})
	}
}

// missEstimate against the per-run attainments measured on testdata/review12's pools (ADR 0078):
// s7's Poisson twin at 2 replicas, 60 runs of about 2,480 requests, 4 below 99 % (6.7 %); a
// tenant of one run's spread at the binomial floor far above 99 %; and one below 99 %.
func TestMissEstimate(t *testing.T) {
	// mean 99.65 %, standard deviation 0.38 points a run of 2,480 requests
	var runs []runWord
	for i := range 60 {
		runs = append(runs, runWord{0.9965 + 0.0038*math.Sqrt2*math.Sin(2*math.Pi*float64(i)/60), 2480})
	}
	// at least what was measured (the floor of confirmSpreadFloor widens it), and not absurdly more
	if m := missEstimate(runs, confirmSpreadFloor); m < 0.067 || m > 0.2 {
		t.Errorf("s7's Poisson twin: estimated %.3f, measured 0.067", m)
	}
	if m := missEstimate([]runWord{{0.9995, 2500}, {1, 2500}, {0.9992, 2500}}, confirmSpreadFloor); m > 1e-4 {
		t.Errorf("clear of the edge: estimated %.3g", m)
	}
	if m := missEstimate([]runWord{{0.985, 2500}, {0.988, 2500}}, confirmSpreadFloor); m < 0.5 {
		t.Errorf("below 99 %%: estimated %.3f", m)
	}
	if m := missEstimate([]runWord{{1, 2500}}, confirmSpreadFloor); m != 1 {
		t.Errorf("one run: estimated %.3f, want 1 (no spread to judge by)", m)
	}
}

// m1pFirst and m1pTail are m1p's docs-qa (testdata/review12/m1p-mixed-boards-poisson.yaml) at 2
// exclusive H100s, its component alone: seeds 0–8 in runs of 26m25s (about 3,150 requests),
// and seeds 9–48 in runs of 2,000 requests (16m40s), 5 of them below 99 %; m1pMore is seeds
// 9–26 in runs of 26m25s, the 18 runs more that ADR 0078 judged it on.
var (
	m1pFirst = []float64{0.9988, 0.9981, 0.9997, 0.9972, 0.9968, 0.9956, 0.9928, 0.9959, 0.9956}
	m1pMore  = []float64{1.0000, 0.9965, 1.0000, 0.9997, 0.9990, 1.0000, 0.9956, 0.9984, 0.9994,
		0.9994, 0.9991, 0.9936, 0.9974, 0.9955, 0.9984, 0.9933, 1.0000, 0.9961}
	m1pTail = []float64{1.0000, 0.9946, 1.0000, 0.9995, 1.0000, 1.0000, 0.9941, 1.0000, 0.9990, 0.9995,
		0.9985, 1.0000, 0.9959, 0.9930, 0.9975, 0.9895, 1.0000, 0.9937, 1.0000, 0.9916,
		0.9943, 0.9887, 0.9884, 1.0000, 0.9985, 0.9979, 0.9924, 1.0000, 1.0000, 0.9873,
		0.9990, 1.0000, 1.0000, 0.9859, 0.9985, 0.9995, 0.9949, 1.0000, 0.9949, 0.9969}
)

// The decision on a run set like m1p's docs-qa (ADR 0083): mostly 99.5 % and above with a few
// at 98.x %. The normal estimate from the runs' own spread passes it, on the nine runs and on
// the 27 runs of ADR 0078 (seeds 0–26 of the confirmation's length, none below 99 %); the count of runs below 99 % (5 of 40, at most 2 pass) fails it. A tenant whose
// tail runs fall below 99 % twice passes.
func TestTailCountFailsHeavyTail(t *testing.T) {
	words := func(atts []float64, n int64) []runWord {
		var w []runWord
		for _, a := range atts {
			w = append(w, runWord{a, n})
		}
		return w
	}
	first := words(m1pFirst, 3150)
	if m := missEstimate(first, 1); m > confirmMissMax {
		t.Fatalf("own spread on nine runs: %.3f, want it to pass (at most %.2f) as it did", m, confirmMissMax)
	}
	if m := missEstimate(append(slices.Clone(first), words(m1pMore, 3150)...), 1); m > confirmMissMax {
		t.Fatalf("own spread on the 27 runs of ADR 0078: %.3f, want it to pass (at most %.2f) as it did", m, confirmMissMax)
	}
	tail := func(atts []float64) *confirmState {
		st := &confirmState{judged: true, att: 0.997, worst: 0.9928, extra: confirmExtraRuns, runs: first}
		var reps []map[string]SimTenant
		for _, a := range atts {
			reps = append(reps, map[string]SimTenant{"docs-qa": {Judged: 2000, Attainment: a}})
		}
		st.tallyTail("docs-qa", 1000*time.Second, reps)
		return st
	}
	st := tail(m1pTail)
	if st.tail != 40 || st.tailBelow != 5 || !st.short() {
		t.Errorf("m1p's tail: %d runs, %d below 99 %%, short %v; want 40, 5, short", st.tail, st.tailBelow, st.short())
	}
	if r := st.reason(2, nil).Message; !strings.Contains(r, "5 below 99 %") {
		t.Errorf("reason %q does not give the count", r)
	}
	two := slices.Clone(m1pTail)
	for i, a := range two {
		if a < confirmCheckKeep && slices.Index(two, a) > 21 {
			two[i] = 0.995
		}
	}
	if st := tail(two); st.tailBelow != 2 || st.short() {
		t.Errorf("two runs below 99 %%: %d below, short %v; want 2, passed", st.tailBelow, st.short())
	}
	// the count is the bar's own question: a share over the nine runs below 99.5 % (review
	// 3's r1-70b legal, 99.48 %) does not fail a tenant whose tail runs pass
	if st := tail(two); func() bool { st.att = 0.9948; return st.short() }() {
		t.Errorf("two runs below 99 %% at 99.48 %% over the nine: short, want passed")
	}
}

var _ = v1.ReasonSimulated
