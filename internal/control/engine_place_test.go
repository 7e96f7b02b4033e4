package control

import (
	"fmt"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// TestGrantsFollowPlan: with a plan applied, a tenant's replica is granted the slice the plan
// placed it on (node, GPU and kind: a MIG instance, an exclusive GPU, an MPS share with its
// limits, carried in the node's layout), and a tenant the plan does not place takes the slices
// the plan leaves free, even though it asks first and those slices come later by id.
func TestGrantsFollowPlan(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(EngineConfig{}, t0)
	mustReg := func(node string, gs ...GPU) {
		if _, err := e.Register(t0, node, Inventory{GPUs: gs}); err != nil {
			t.Fatal(err)
		}
	}
	mustReg("n1", GPU{UUID: "GPU-n1-0", Board: "H100-SXM5-80GB", MIG: "3g.40gb@0 3g.40gb@4", Slices: []string{"3g.40gb", "3g.40gb"}},
		GPU{UUID: "GPU-n1-1", Board: "H100-SXM5-80GB", Slices: []string{"exclusive"}})
	mustReg("n2", GPU{UUID: "GPU-n2-0", Board: "H100-SXM5-80GB", Slices: []string{"mps-50", "mps-25", "mps-25"}})
	mps := v1.Limits{SMPercent: 25, Memory: v1.Bytes(20 << 30)}
	p := &v1.Plan{Pool: "p", GPUs: []v1.PlanGPU{
		{Node: "n1", Index: 0, Board: b.Name, Role: v1.RolePool, Mode: v1.ModeMIG, Instances: []v1.PlanInstance{
			{Profile: "3g.40gb", Start: 0},
			{Profile: "3g.40gb", Start: 4, Replicas: []v1.PlanReplica{{Tenant: "mig"}}}}},
		{Node: "n1", Index: 1, Board: b.Name, Role: v1.RolePool, Mode: v1.ModeExclusive, Replicas: []v1.PlanReplica{{Tenant: "excl"}}},
		{Node: "n2", Index: 0, Board: b.Name, Role: v1.RolePool, Mode: v1.ModeMPS, Replicas: []v1.PlanReplica{{Tenant: "mps", Limits: mps}}},
	}}
	ops, err := e.ApplyPlan(t0, &v1.Pool{Metadata: v1.Metadata{Name: "p"}}, p)
	if err != nil || len(ops) != 0 {
		t.Fatalf("apply plan: %v, %d gate operations (the layouts are as planned)", err, len(ops))
	}
	if _, err := e.PutTenant(t0, Tenant{Name: "free", Demand: 3}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"excl", "mig", "mps"} {
		if _, err := e.PutTenant(t0, Tenant{Name: name, Demand: 1}); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, e)
	want := map[string]string{"excl": "n1/GPU-n1-1/0", "mig": "n1/GPU-n1-0/1", "mps": "n2/GPU-n2-0/1"}
	got := map[string][]string{}
	for _, g := range e.grants {
		got[g.Tenant] = append(got[g.Tenant], g.Slice)
		if w, ok := want[g.Tenant]; ok && g.Slice != w {
			t.Errorf("tenant %s granted %s, the plan placed it on %s", g.Tenant, g.Slice, w)
		}
		if (g.Tenant == "mps") != (g.Limits != nil) || g.Limits != nil && *g.Limits != mps {
			t.Errorf("grant %s of %s has limits %+v", g.ID, g.Tenant, g.Limits)
		}
	}
	if len(got["free"]) != 3 {
		t.Fatalf("tenant free holds %v, want 3 slices", got["free"])
	}
	l, _ := e.View(1).Layout("n2")
	var carried bool
	for _, s := range l.Slices {
		if s.Tenant == "mps" {
			carried = s.Limits != nil && *s.Limits == mps && s.Kind == "mps-25"
		}
	}
	if !carried {
		t.Errorf("n2's layout does not carry the MPS limits on the planned mps-25 share: %+v", l.Slices)
	}
}

// BenchmarkEnginePlacement compares, side by side, a demand change without a plan and with a plan
// that places a replica on each of the 256 slices (8 nodes × 8 GPUs × 4 time-sliced slices, 50
// tenants), and times the placement index's rebuild (after every change of the slices).
func BenchmarkEnginePlacement(b *testing.B) {
	for _, planned := range []bool{false, true} {
		e, _ := NewEngine(EngineConfig{}, t0)
		p := &v1.Plan{Pool: "p"}
		for i := range 8 {
			n := fmt.Sprintf("n%d", i)
			e.Register(t0, n, inv(8, 4, n))
			for g := range 8 {
				pg := v1.PlanGPU{Node: n, Index: g, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeTimeSlice}
				for k := range 4 {
					pg.Replicas = append(pg.Replicas, v1.PlanReplica{Tenant: fmt.Sprintf("t%d", (i*32+g*4+k)%50), Index: k})
				}
				p.GPUs = append(p.GPUs, pg)
			}
		}
		if planned {
			if _, err := e.ApplyPlan(t0, &v1.Pool{Metadata: v1.Metadata{Name: "p"}}, p); err != nil {
				b.Fatal(err)
			}
		}
		for i := range 50 {
			e.PutTenant(t0, Tenant{Name: fmt.Sprintf("t%d", i), Demand: 4})
		}
		e.Take()
		name := map[bool]string{false: "plan=none", true: "plan=256-replicas"}[planned]
		b.Run("SetDemand/"+name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				if _, err := e.SetDemand(t0, fmt.Sprintf("t%d", i%50), 2+i%5); err != nil {
					b.Fatal(err)
				}
				e.Take()
			}
		})
		if planned {
			b.Run("PlacementIndex/"+name, func(b *testing.B) { // rebuilt after a node report
				for b.Loop() {
					e.planned = nil
					if len(e.placement()) != 256 {
						b.Fatal("placement does not cover the 256 planned slices")
					}
				}
			})
		}
	}
}
