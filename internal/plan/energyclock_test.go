package plan

import (
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// A tenant of energy class efficiency runs on a GPU whose clocks are locked at 0.7 of boost (the
// agent locks them, the simulator runs them so), and is sized there. short-150-on-60's t00024
// (qwen2.5-7b, 0.02 req/s of 4,000 + 150 tokens, TTFT target 4 s) alone on one A100: sized at the
// boost clock it was planned on a 1g.20gb with a predicted TTFT p99 of 3.70 s, where the
// simulator's prefill alone takes 2.69 s (1.90 s unlocked), its p99 was 5.01 s and 96.6 % of
// 1,704 requests met the SLO in 24 hours. Sized at the locked clock the 1g.20gb's p99 is 4.98 s
// and the plan takes a 2g.20gb. Each run: at least 99 % within the SLO, and the simulator's TTFT
// p99 at most 10 % above the prediction. The same tenant without its energy class (balanced,
// boost clock) keeps the 1g.20gb and the same checks.
func TestEnergyClassSizedAtItsClock(t *testing.T) {
	for _, class := range []v1.EnergyClass{v1.EnergyEfficiency, ""} {
		pool := loadPool(t, "testdata/efficiency-trickle.yaml")
		pool.Tenants[0].EnergyClass = class
		pl := build(t, pool)
		tn := pl.Tenants[0]
		if tn.Infeasible || len(tn.Replicas) == 0 {
			t.Fatalf("class %q: infeasible or unpredicted: %v", class, tn.Reasons)
		}
		pred := tn.Predicted.TTFTP99.Std()
		for seed := uint64(1); seed <= 2; seed++ {
			res := simulate(t, pool, pl, 24*time.Hour, seed)
			r := res.Report.Tenants[0]
			sim := time.Duration(r.TTFT.P99 * float64(time.Millisecond))
			t.Logf("class %q on %d × %s: predicted TTFT p99 %v, seed %d: %v, %.2f %% of %d requests within the SLO",
				class, len(tn.Replicas), tn.Replicas[0].Instance, pred, seed, sim.Round(time.Millisecond), 100*r.SLOAttainment, r.Completed)
			if r.SLOAttainment < 0.99 {
				t.Errorf("class %q, seed %d: %.2f %% of requests within the SLO, want at least 99 %%", class, seed, 100*r.SLOAttainment)
			}
			if float64(sim) > 1.1*float64(pred) {
				t.Errorf("class %q, seed %d: simulated TTFT p99 %v more than 10 %% above the predicted %v", class, seed, sim, pred)
			}
		}
	}
}

// The evaluation cache keys a tenant's shape by its clock: two tenants alike but for their
// energy class are sized on engines of their own clocks, not on whichever was evaluated first.
func TestEnergyClassShapesApart(t *testing.T) {
	pool := loadPool(t, "testdata/efficiency-trickle.yaml")
	eff := pool.Tenants[0]
	bal := eff
	bal.Name, bal.Path, bal.EnergyClass = "t-balanced", "org25/team", v1.EnergyBalanced
	pool.Tenants = append(pool.Tenants, bal)
	pool.Fleet.Nodes[0].GPUs[0].Count = 2
	pl := build(t, pool)
	ttft := map[string]time.Duration{}
	for _, tn := range pl.Tenants {
		if tn.Infeasible {
			t.Fatalf("%s: infeasible or unpredicted: %v", tn.Name, tn.Reasons)
		}
		ttft[tn.Name] = tn.Predicted.TTFTP99.Std()
	}
	if ttft[eff.Name] == ttft[bal.Name] {
		t.Errorf("efficiency and balanced tenants of one shape predicted the same TTFT p99 %v", ttft[eff.Name])
	}
	o := perf.DefaultOptions()
	if cp, err := o.ClockCap(string(v1.EnergyEfficiency)); err != nil || cp != o.EfficiencyClock || cp >= 1 {
		t.Fatalf("efficiency clock cap %v (%v), want Options.EfficiencyClock below 1", cp, err)
	}
}

// Every candidate of an efficiency tenant, tensor-parallel ones included, is evaluated on an
// engine at the class's clock lock, and a balanced tenant's at none.
func TestEnergyClassEveryCandidateAtItsClock(t *testing.T) {
	pool := loadPool(t, "testdata/efficiency-trickle.yaml")
	pool.Fleet.Nodes[0].GPUs[0] = v1.GPUGroup{Board: "H100-SXM5-80GB", Count: 8}
	eff := pool.Tenants[0]
	eff.Model.Name = "llama-3.1-70b"
	bal := eff
	bal.Name, bal.Path, bal.EnergyClass = "t-balanced", "org25/team", v1.EnergyBalanced
	pool.Tenants = []v1.Tenant{eff, bal}
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	want := map[string]float64{eff.Name: perf.DefaultOptions().EfficiencyClock, bal.Name: 0}
	for _, tn := range p.tenants {
		tp := 0
		for _, c := range tn.cands {
			if c.ev == nil || c.ev.q == nil {
				continue
			}
			if c.tp > 1 {
				tp++
			}
			if got := c.ev.q.e.Slice().ClockCap; got != want[tn.t.Name] {
				t.Errorf("%s on %s: engine clock cap %v, want %v", tn.t.Name, c.label(), got, want[tn.t.Name])
			}
		}
		if tp == 0 {
			t.Errorf("%s: no tensor-parallel candidate evaluated", tn.t.Name)
		}
	}
}
