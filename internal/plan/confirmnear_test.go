package plan

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// nearSim reports t0 at the model's count within the SLO for att of its requests in its first
// confirmRuns runs and for later of them in the runs after, with a p99 TPOT of tpot (of its
// 88 ms target in testdata/confirm-single.yaml) and a p99 TTFT of 0.3 of its 2,052 ms; at any
// higher count within the SLO, p99s at half their targets. It records the seeds it ran.
type nearSim struct {
	model      int
	att, later float64
	tpot       float64
	mu         sync.Mutex
	seeds      map[uint64]bool
}

func (s *nearSim) run(_ context.Context, in SimInput) (map[string]SimTenant, error) {
	s.mu.Lock()
	s.seeds[in.Seed] = true
	s.mu.Unlock()
	n := 0
	for _, pt := range in.Plan.Tenants {
		if pt.Name == "t0" {
			n = len(pt.Replicas)
		}
	}
	tpot, ttft := 44*time.Millisecond, 1026*time.Millisecond
	if n > s.model {
		return map[string]SimTenant{"t0": {Judged: 2500, Attainment: 1, TTFTP99: ttft, TPOTP99: tpot}}, nil
	}
	a := s.att
	if in.Seed >= confirmRuns {
		a = s.later
	}
	return map[string]SimTenant{"t0": {Judged: 2500, Attainment: a,
		TTFTP99: time.Duration(0.3 * 2052 * float64(time.Millisecond)),
		TPOTP99: time.Duration(s.tpot * 88 * float64(time.Millisecond))}}, nil
}

// A tenant whose first three runs are clear of the edge by their attainment (99.92 % in each)
// but whose p99 TPOT sits at 0.99 of its target is borderline (ADR 0089): review 13's d1 t9
// under other draws (99.92 %, 99.75 % in the worst, p99 TPOT 29.7 ms of 30 ms) falls below
// 99 % in 16 of 40 fresh runs. Six runs more judge it, and where they find it short (98.6 %)
// it is raised; the three runs' rule alone passed it. With its p99 at 0.8 of the target it is
// not run again; at 0.99 with six runs more as clear as the first, it passes after nine.
func TestConfirmNearP99IsBorderline(t *testing.T) {
	pool := loadPool(t, "testdata/confirm-single.yaml")
	model := len(buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: -1}).Tenants[0].Replicas)
	for _, c := range []struct {
		name   string
		tpot   float64
		later  float64
		raised bool
		seeds  int
		say    string
	}{
		{"near, short in more runs", 0.99, 0.986, true, 9, "of 9 runs, an estimated"},
		{"near, clear in more runs", 0.99, 0.9992, false, 9, "or a p99 above 90 % of its target), so 6 runs more"},
		{"clear of the target", 0.8, 0.986, false, 3, "in 3 simulated runs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &nearSim{model: model, att: 0.9992, later: c.later, tpot: c.tpot, seeds: map[uint64]bool{}}
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
