package cost

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/sim"
)

// TestConservationOnPaths plans small random pools, bills each plan (planned) and a short
// simulated run of it (simulated) under every idle policy, and checks that tenants plus the
// idle line add up to the devices, and the simulated devices to the simulator's own GPU energy.
func TestConservationOnPaths(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	idleFrac := perf.DefaultOptions().IdlePowerFraction
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 16))
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 4 + rng.IntN(5), GPUs: 8, Varied: true}, rng)
		pl, err := plan.Build(context.Background(), pool, plan.Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		planned, err := FromPlan(pl, pool, PlanOptions{IdlePowerFraction: idleFrac})
		if err != nil {
			t.Fatal(err)
		}
		s, err := sim.New(sim.Input{Pool: pool, Plan: pl}, sim.Config{Duration: 20 * time.Second, Seed: seed})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		res, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rep := res.Report
		simulated, err := FromRun(pl, RunOptions{Basis: Simulated, Seconds: rep.DurationSeconds, IdlePowerFraction: idleFrac, Replicas: SimUses(rep)})
		if err != nil {
			t.Fatal(err)
		}
		// The devices' energy is the simulator's GPU energy (which it rounds to 0.1 J).
		// GPUs the simulator leaves out (no replica) draw idle power only.
		simJ := map[string]float64{}
		for _, g := range rep.GPUs {
			simJ[g.GPU] = g.EnergyJoules
		}
		for _, d := range simulated {
			want, ran := simJ[d.GPU]
			if !ran {
				want = d.IdleWatts * d.Seconds
			}
			if math.Abs(d.EnergyJ-want) > 0.1+1e-6*want {
				t.Errorf("seed %d gpu %s: device %.3f J, simulator %.1f J (ran: %v)", seed, d.GPU, d.EnergyJ, want, ran)
			}
		}
		if len(simJ) == 0 {
			t.Fatalf("seed %d: the simulator ran no GPU", seed)
		}
		t.Logf("seed %d: %d tenants, %d replicas, gpus used %d, simulated energy gpu0 %.0f J", seed, len(pl.Tenants), len(rep.Replicas), pl.Summary.GPUsUsed, simulated[0].EnergyJ)
		for _, idle := range []v1.IdlePolicy{v1.IdleNone, v1.IdleReservation, v1.IdleUse} {
			for _, devs := range [][]Device{planned, simulated} {
				p := fullPrices(idle)
				r, err := Compute(devs, p)
				if err != nil {
					t.Fatal(err)
				}
				checkConservation(t, r)
				if idle != v1.IdleNone && r.Idle.ActiveJ+r.Idle.IdleJ+r.Idle.Chargeback != 0 && len(r.Tenants) > 0 {
					t.Errorf("seed %d %s %s: idle line left after spreading: %+v", seed, devs[0].Basis, idle, r.Idle.Figures)
				}
			}
		}
	}
}

// SimUses is what the command does with a simulator report: each replica's use by name.
func SimUses(rep sim.Report) map[string]ReplicaUse {
	out := map[string]ReplicaUse{}
	for _, r := range rep.Replicas {
		out[r.Name] = ReplicaUse{DynamicJ: r.DynamicJoules, OutputTokens: float64(r.OutputTokens), Tokens: float64(r.OutputTokens + r.PromptTokens)}
	}
	return out
}
