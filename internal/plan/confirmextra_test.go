package plan

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

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
// judged on 18 runs more by their own spread and pass.
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
		// near 99.7 % with little spread: the floor fails it on nine runs, its own spread on 27 passes it
		{"floor only", append([]float64{0.9985, 0.9975, 0.9990, 0.9965, 0.9970, 0.9968, 0.9972, 0.9966, 0.9970},
			0.9970, 0.9968, 0.9972, 0.9969, 0.9971, 0.9967, 0.9970, 0.9973, 0.9969, 0.9970, 0.9968, 0.9971, 0.9970, 0.9969, 0.9972, 0.9970, 0.9968, 0.9971), false, 27, "in 27 simulated runs"},
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

var _ = v1.ReasonSimulated
