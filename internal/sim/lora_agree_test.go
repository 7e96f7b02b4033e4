package sim

import (
	"fmt"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/plan"
)

// loraAgreeMisses are scenarios where the planner's engines miss an objective in simulation,
// with why. A listed scenario that the planner gets right must leave the list.
var loraAgreeMisses = map[string]string{}

// TestLoRAPlannerAgainstSimulation plans four more groups (Llama-3.1-8B on H100s, 512/128 tokens,
// TTFT ≤ 1 s, TPOT ≤ 50 ms) and compares the planner's engine count with the fewest engines that
// meet every objective in simulation, found by trying 1, 2, … engines with the planner's
// grouping: the planner must be within 1.25× of it and, except for the listed misses, meet the
// objectives itself.
func TestLoRAPlannerAgainstSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates several groups")
	}
	base := loraExample(t)
	for _, sc := range []loraScenario{{100, 30, false}, {50, 120, true}, {300, 40, true}, {20, 10, false}} {
		name := sc.String()
		in := loraGroupOf(base, sc)
		p, err := plan.PlanLoRA(in)
		if err != nil {
			t.Fatal(err)
		}
		ok, worst, ttft, _ := simulateLoRAPlan(t, in, p, 300*time.Second)
		fewest := 0
		for m := 1; m <= 12 && fewest == 0; m++ {
			pm, _, err := plan.PlanLoRAWith(in, m)
			if err != nil {
				t.Fatal(err)
			}
			if okm, _, _, _ := simulateLoRAPlan(t, in, pm, 300*time.Second); okm {
				fewest = m
			}
		}
		t.Logf("%s: planner %d engines (in simulation: meets %v, worst attainment %.3f, TTFT p99 %v), fewest in simulation %d",
			name, len(p.Engines), ok, worst, ttft, fewest)
		if fewest == 0 || float64(len(p.Engines)) > 1.25*float64(fewest) {
			t.Errorf("%s: planner %d engines against %d in simulation", name, len(p.Engines), fewest)
		}
		_, listed := loraAgreeMisses[name]
		switch {
		case !ok && !listed:
			t.Errorf("%s: the planner's %d engines miss an objective in simulation", name, len(p.Engines))
		case ok && listed:
			t.Errorf("%s: the planner's engines meet the objectives now: take it off loraAgreeMisses", name)
		}
	}
}

// TestLoRAActiveP99AgainstSimulation holds the planner's 99th percentile of distinct adapters in
// flight between the simulator's time-weighted mean and its maximum, on each planned engine:
// below the mean it would undersize max_loras; above the maximum it would waste slots.
func TestLoRAActiveP99AgainstSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates several groups")
	}
	base := loraExample(t)
	for _, sc := range []loraScenario{{100, 30, false}, {100, 20, false}, {300, 40, true}, {20, 10, false}} {
		in := loraGroupOf(base, sc)
		p, err := plan.PlanLoRA(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, eng := range p.Engines {
			res := runLoRA(t, loraEngineConfig(in, eng, 300*time.Second), uint64(i)+1)
			t.Logf("%s, %s: planner p99 %d in flight (max_loras %d); simulation mean %.1f, most %d",
				in.Group.Key, eng.Name, eng.ActiveP99, eng.MaxLoRAs, res.ActiveMean, res.ActiveMax)
			if float64(eng.ActiveP99) < res.ActiveMean || eng.ActiveP99 > res.ActiveMax {
				t.Errorf("%s, %s: planner p99 %d outside the simulation's mean %.1f and most %d",
					in.Group.Key, eng.Name, eng.ActiveP99, res.ActiveMean, res.ActiveMax)
			}
		}
	}
}

// loraScenario is a group of n adapters with total req/s in all: equal rates, or Zipf (adapter k
// gets total × (1/k) / H(n)).
type loraScenario struct {
	n     int
	total float64
	zipf  bool
}

func (sc loraScenario) String() string {
	shape := "uniform"
	if sc.zipf {
		shape = "zipf"
	}
	return fmt.Sprintf("%d %s at %g req/s", sc.n, shape, sc.total)
}

// loraGroupOf is base's engine with sc's group of copies of base's first adapter.
func loraGroupOf(base plan.LoRAInput, sc loraScenario) plan.LoRAInput {
	n, total, zipf := sc.n, sc.total, sc.zipf
	in := base
	in.Group = plan.LoRAGroup{Key: sc.String()}
	var h float64
	for k := 1; k <= n; k++ {
		h += 1 / float64(k)
	}
	for k := 1; k <= n; k++ {
		a := base.Group.Adapters[0]
		a.Tenant, a.RPS = fmt.Sprintf("t%03d", k), total/float64(n)
		if zipf {
			a.RPS = total / float64(k) / h
		}
		in.Group.Adapters = append(in.Group.Adapters, a)
	}
	return in
}
