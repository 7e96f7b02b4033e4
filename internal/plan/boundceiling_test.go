package plan

import (
	"slices"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// boundAtCounts is p's lower bound with every candidate counted at the planner's sized count
// (replicas), except the candidates of keep (tenant → slice labels), which stay at the bound's
// own count (lbReplicas): the bound that a per-tenant argument proving every other count would
// give.
func boundAtCounts(t *testing.T, api v1.KubernetesDeviceAPI, keep map[string][]string) int {
	t.Helper()
	pool := synthPool(100)
	pool.Policy.KubernetesDeviceAPI = api
	p := evaluated(t, pool)
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			if !slices.Contains(keep[tn.t.Name], c.label()) {
				c.lbReplicas = c.replicas
			}
		}
	}
	return p.lowerBound()
}

// TestBoundCountsAtSimulatorEdge is how far per-tenant arguments could lift the lower bound of
// the synthetic 100-tenant pool on the device-plugin path, 21 (docs/planner.md, "What the bound
// lacks"). Six candidates meet the SLO in simulation at the bound's own count in the most
// favourable plan (each replica alone on its GPU or instance, idle neighbours; three runs of
// about 4,000 requests each), so no lower bound may count them higher. Until ADR 0114, with
// those six at the bound's count and every other candidate of every tenant raised to the
// planner's own sized count, t-00025's single 2g.20gb instance aside, the bound was still 21,
// and only with t-00025 (llama-2-13b, 0.414 req/s) counted at two 2g.20gb instances as well was
// it 22; one such instance is at the SLO's edge in simulation (98.7–99.2 % of the requests meet
// it in the three runs, logged, and one 1g.20gb instance 98.5–99.1 %). Since the group bound's
// search prices each unit kind by the replicas its group can put there (ADR 0114), the bound
// with the six at their count and every other count raised is 22 whether t-00025's instance is
// counted at one or two (and with any one of the 33 candidates whose count would be raised kept
// at its bound's count instead, a one-off run): a per-tenant argument proving the sized counts
// of the other candidates would lift it to 22, and none is known. The test fails if either
// figure moves.
func TestBoundCountsAtSimulatorEdge(t *testing.T) {
	accepted := map[string][]string{
		"t-00000": {"mps 1/2"}, // qwen2.5-14b, 7.78 req/s
		"t-00005": {"mps 1/4"}, // llama-3.1-8b, 1.55 req/s
		"t-00011": {"mps 1/4"}, // llama-2-13b, 0.831 req/s
		"t-00013": {"mps 1/4"}, // llama-2-13b, 0.724 req/s
		"t-00031": {"mig 1g.20gb"},
		"t-00032": {"mig 1g.20gb"},
	}
	seeds := uint64(3)
	if testing.Short() || raceEnabled {
		seeds = 1
	}
	pool := synthPool(100)
	pl := build(t, synthPool(100))
	p, _ := planWith(t, pool, func(*planner) {})
	attain := func(tn v1.Tenant, label string, r int, seed uint64) float64 {
		tc := boundCase{pool: "synthetic 100", t: tn, bound: r, busy: r}
		sp := singleOn(tc)
		best := bestCasePlan(t, sp, label, r)
		if best == nil {
			t.Fatalf("%s: no plan of %d replicas on %s", tn.Name, r, label)
		}
		rep := simulate(t, sp, best, time.Duration(4000/tn.Traffic.RPS*1e9), seed).Report.Tenants[0]
		if rep.Completed < 3500 {
			t.Fatalf("%s on %s: %d requests completed", tn.Name, label, rep.Completed)
		}
		return rep.SLOAttainment
	}
	for _, tn := range p.tenants {
		labels, ok := accepted[tn.t.Name]
		if !ok {
			continue
		}
		for _, label := range labels {
			i := slices.IndexFunc(tn.feasible, func(c *cand) bool { return c.label() == label })
			if i < 0 {
				t.Fatalf("%s: no candidate %s", tn.t.Name, label)
			}
			c := tn.feasible[i]
			if c.lbReplicas >= c.replicas {
				t.Errorf("%s on %s: the bound's count %d is the sized one: nothing to check", tn.t.Name, label, c.lbReplicas)
			}
			for seed := range seeds {
				a := attain(tn.t, label, c.lbReplicas, seed+1)
				t.Logf("%s (%.3g req/s) on %s: %d replicas (the bound's count; sized %d) attain %.2f %%", tn.t.Name, tn.t.Traffic.RPS, label, c.lbReplicas, c.replicas, 100*a)
				if a < 0.99 {
					t.Errorf("%s on %s: the bound's count %d misses the SLO in simulation (%.2f %%): the argument rests on it", tn.t.Name, label, c.lbReplicas, 100*a)
				}
			}
		}
	}
	edge := map[string][]string{"t-00025": {"mig 2g.20gb"}}
	for k, v := range accepted {
		edge[k] = v
	}
	got := boundAtCounts(t, v1.DeviceAPIDevicePlugin, edge)
	without := boundAtCounts(t, v1.DeviceAPIDevicePlugin, accepted)
	t.Logf("lower bound %d; every count raised to the sized one but those six and t-00025's single 2g.20gb instance: %d; that raised too: %d",
		pl.Summary.LowerBound, got, without)
	if got != 22 || without != 22 || pl.Summary.LowerBound != 21 {
		t.Errorf("lower bound %d; with every other count raised to the sized one %d (t-00025's instance at one) and %d (at two), want 21, 22 and 22 (docs/planner.md, \"What the bound lacks\")", pl.Summary.LowerBound, got, without)
	}
	i := slices.IndexFunc(pool.Tenants, func(x v1.Tenant) bool { return x.Name == "t-00025" })
	for seed := range seeds {
		for _, label := range []string{"mig 1g.20gb", "mig 2g.20gb"} {
			t.Logf("t-00025 (%.3g req/s) on one %s, seed %d: %.2f %%", pool.Tenants[i].Traffic.RPS, label, seed+1, 100*attain(pool.Tenants[i], label, 1, seed+1))
		}
	}
}
