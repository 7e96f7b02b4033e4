package cost

import (
	"math"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestFromMeasured: a plan with two 3g.40gb instances on n/0 (tenants a and b) and n/1 idle.
// Over 10 s the agent saw 4,000 J on n/0, 1,050 J of it idle, a 2,000 J and b 950 J; n/1 was not
// measured. The bill has one device whose tenants and idle line add up to the 4,000 J, with each
// tenant's measured energy.
func TestFromMeasured(t *testing.T) {
	pl := &v1.Plan{Metadata: v1.Metadata{Name: "p"}, GPUs: []v1.PlanGPU{
		{Node: "n", Index: 0, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeMIG, Instances: []v1.PlanInstance{
			{Profile: "3g.40gb", Start: 0, Replicas: []v1.PlanReplica{{Tenant: "a"}}},
			{Profile: "3g.40gb", Start: 4, Replicas: []v1.PlanReplica{{Tenant: "b"}}}}},
		{Node: "n", Index: 1, Board: "H100-SXM5-80GB", Role: v1.RoleIdle, Mode: v1.ModeExclusive},
	}}
	o := MeasuredOptions{Seconds: 10, GPUs: map[string]MeasuredGPU{"n/0": {EnergyJ: 4000, IdleJ: 1050, Tenants: map[string]float64{"a": 2000, "b": 950},
		Split: "mig-activity-x-size"}},
		Tokens: map[string]float64{"a": 1000}, OutputTokens: map[string]float64{"a": 250}}
	devs, err := FromMeasured(pl, o)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compute(devs, fullPrices(v1.IdleNone))
	if err != nil {
		t.Fatal(err)
	}
	checkConservation(t, r)
	if len(devs) != 1 || r.Basis != Measured || math.Abs(r.Tenants[0].ActiveJ-2000) > 1e-9 || math.Abs(r.Tenants[1].ActiveJ-950) > 1e-9 ||
		math.Abs(r.Idle.IdleJ-1050) > 1e-9 || r.Tenants[0].JPerToken != 2 || r.Tenants[0].JPerOutputToken != 8 {
		t.Errorf("devices %d, basis %s, a %g J, b %g J, idle %g J, a J/token %g, J/output token %g", len(devs), r.Basis,
			r.Tenants[0].ActiveJ, r.Tenants[1].ActiveJ, r.Idle.IdleJ, r.Tenants[0].JPerToken, r.Tenants[0].JPerOutputToken)
	}
	// b's engines reported no output tokens: no per-output-token figure rather than a made-up one.
	if r.Tenants[1].JPerOutputToken != 0 || r.Tenants[1].CostPer1MOutput != nil {
		t.Errorf("b: J/output token %g, cost per 1M output %v: want none", r.Tenants[1].JPerOutputToken, r.Tenants[1].CostPer1MOutput)
	}
	if got := r.Attribution["activeSplit"]; got != "mig-activity-x-size on 1 GPU(s)" {
		t.Errorf("attribution activeSplit %q: want the agent's split named", got)
	}
	o.GPUs["n/0"].Tenants["c"] = 5
	if _, err := FromMeasured(pl, o); err == nil || err.Error() != "cost of measurements: 1 problem(s):\ngpu n/0: tenant c drew 5.0 J but has no replica there in the plan" {
		t.Errorf("err = %v", err)
	}
}
