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

// TestConservationOnPaths plans small random pools, bills each plan (planned, with the coarse
// estimate and with the step power model) and a short
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
		// The planned basis as the commands bill it: each replica through the step power model.
		dyn := plan.ReplicaPower(pool, pl, perf.DefaultOptions())
		if len(dyn) == 0 {
			t.Fatalf("seed %d: the step power model evaluated no replica", seed)
		}
		stepPlanned, err := FromPlan(pl, pool, PlanOptions{IdlePowerFraction: idleFrac, DynamicWatts: dyn})
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
			for _, devs := range [][]Device{planned, stepPlanned, simulated} {
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

// A tensor-parallel replica is listed under each GPU of its group; its energy and tokens are
// counted once, divided evenly over the group, on every path: a TP-4 replica that drew 4,000 J
// above idle in a run adds 1,000 J to each of its four GPUs, not 4,000; planned with 800 W at 1 req/s
// of 100 output tokens it adds 200 W to each, and the 10 s serve 1,000 output tokens in all.
func TestTensorParallelCountedOnce(t *testing.T) {
	rep := v1.PlanReplica{Tenant: "big", Index: 0, TensorParallel: v1.TensorParallel{Size: 4, GPUs: []int{0, 1, 2, 3}}}
	pl := &v1.Plan{Metadata: v1.Metadata{Name: "p"}, Tenants: []v1.PlanTenant{{Name: "big", Replicas: []v1.ReplicaRef{{Index: 0, GPU: v1.GPURef{Node: "n", Index: 0}}}}}}
	for i := range 4 {
		pl.GPUs = append(pl.GPUs, v1.PlanGPU{Node: "n", Index: i, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeExclusive, Replicas: []v1.PlanReplica{rep}})
	}
	run, err := FromRun(pl, RunOptions{Basis: Simulated, Seconds: 10, IdlePowerFraction: 0.15,
		Replicas: map[string]ReplicaUse{"big/0": {DynamicJ: 4000, OutputTokens: 100, Tokens: 500}}})
	if err != nil {
		t.Fatal(err)
	}
	pool := &v1.Pool{Tenants: []v1.Tenant{{Name: "big", Traffic: v1.Traffic{RPS: 1, InputTokens: 400, OutputTokens: 100}}}}
	planned, err := FromPlan(pl, pool, PlanOptions{Seconds: 10, IdlePowerFraction: 0.15, DynamicWatts: map[string]float64{"big/0": 800}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		devs      []Device
		dyn, outs float64
	}{{"run", run, 4000, 100}, {"planned", planned, 8000, 1000}} {
		var e, out float64
		for _, d := range c.devs {
			e += d.EnergyJ - d.IdleWatts*d.Seconds
			for _, s := range d.Slices {
				out += s.OutputTokens
			}
		}
		if math.Abs(e-c.dyn) > 1e-9*c.dyn || math.Abs(out-c.outs) > 1e-9*c.outs {
			t.Errorf("%s: %g J above idle and %g output tokens over the group, want %g and %g", c.name, e, out, c.dyn, c.outs)
		}
		r, err := Compute(c.devs, fullPrices(v1.IdleNone))
		if err != nil {
			t.Fatal(err)
		}
		checkConservation(t, r)
	}
}
