package plansim

import (
	"context"
	"time"

	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/sim"
)

// Run simulates in.Plan on in.Pool with internal/sim and reports every tenant by name.
var Run plan.Simulator = run

func run(ctx context.Context, in plan.SimInput) (map[string]plan.SimTenant, error) {
	s, err := sim.New(sim.Input{Pool: in.Pool, Plan: in.Plan, Models: in.Models, Profiles: in.Profiles},
		sim.Config{Duration: in.Duration, Seed: in.Seed, Perf: in.Perf})
	if err != nil {
		return nil, err
	}
	res, err := s.Run(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]plan.SimTenant, len(res.Report.Tenants))
	for _, tr := range res.Report.Tenants {
		out[tr.Name] = plan.SimTenant{Judged: tr.SLOJudged, Attainment: tr.SLOAttainment,
			TTFTP99: time.Duration(tr.TTFT.P99 * float64(time.Millisecond)), TPOTP99: time.Duration(tr.TPOT.P99 * float64(time.Millisecond))}
	}
	return out, nil
}
