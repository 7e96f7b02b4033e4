package plansim

import (
	"context"
	"math/rand/v2"
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

// RunLoRA simulates one shared LoRA engine with internal/sim's LoRA engine simulator (the one
// gpupool lora and gpupool simulate run) and reports each of its adapters by tenant name.
var RunLoRA plan.LoRASimulator = runLoRA

func runLoRA(ctx context.Context, in plan.LoRASimInput) (map[string]plan.SimTenant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := in.LoRA
	cfg := sim.LoRAConfig{Engine: in.Engine, Cost: in.Cost, MaxLoRAs: e.MaxLoRAs, MaxRank: e.MaxRank, MaxCPULoRAs: e.MaxCPULoRAs, Duration: in.Duration}
	for _, a := range in.Adapters {
		cfg.Adapters = append(cfg.Adapters, sim.LoRAAdapter{Name: a.Tenant, RPS: a.RPS, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
			Lengths: a.Lengths, MaxContext: a.MaxContext, Bytes: a.Bytes, Rank: a.Rank, TTFT: a.SLO.TTFT, TPOT: a.SLO.TPOT})
	}
	r, err := sim.SimulateLoRA(cfg, rand.New(rand.NewPCG(in.Seed, in.Stream)))
	if err != nil {
		return nil, err
	}
	out := make(map[string]plan.SimTenant, len(r.Adapters))
	for _, a := range r.Adapters {
		out[a.Name] = plan.SimTenant{Judged: a.Arrived, Attainment: a.Attainment, TTFTP99: a.TTFTP99, TPOTP99: a.TPOTP99}
	}
	return out, nil
}
