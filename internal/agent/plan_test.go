package agent

import (
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

func TestApplyPlan(t *testing.T) {
	p := &v1.Plan{GPUs: []v1.PlanGPU{
		{Node: "n1", Index: 0, Board: "H100-SXM5-80GB", Mode: v1.ModeMIG,
			Instances: []v1.PlanInstance{{Profile: "3g.40gb", Start: 0}, {Profile: "3g.40gb", Start: 4}}},
		{Node: "n1", Index: 1, Board: "H100-SXM5-80GB", Mode: v1.ModeMPS, Replicas: []v1.PlanReplica{
			{Tenant: "a", Limits: v1.Limits{SMPercent: 60, Memory: 40 * v1.GiB}},
			{Tenant: "b", Limits: v1.Limits{SMPercent: 40, Memory: 30 * v1.GiB}}}},
		{Node: "n1", Index: 2, Board: "H100-SXM5-80GB", Mode: v1.ModeMIG, Instances: []v1.PlanInstance{{Profile: "7g.80gb", Start: 0}}},
		{Node: "n2", Index: 0, Board: "H100-SXM5-80GB", Mode: v1.ModeMIG, Instances: []v1.PlanInstance{{Profile: "7g.80gb", Start: 0}}},
	}}
	c := Config{Node: "n1", GPUs: []GPUConfig{{Index: 2, Layout: "1g.10gb@0"}}}
	s := Settings{Layouts: map[int]gpu.Layout{}}
	n, err := ApplyPlan(&c, &s, p)
	if err != nil || n != 3 {
		t.Fatalf("n %d err %v", n, err)
	}
	// GPU 0 from the plan; GPU 1 MPS with the smaller limits (40 %, 30 GiB = 30720 MiB); GPU 2 kept from the config.
	if len(c.GPUs) != 3 || c.GPUs[0].Layout != "3g.40gb@0 3g.40gb@4" || s.Layouts[0].String() != "3g.40gb@0 3g.40gb@4" {
		t.Fatalf("gpu 0: %+v", c.GPUs)
	}
	if m := c.GPUs[1].MPS; m == nil || m.ActiveThreadPercent != 40 || m.PinnedMemory != "30720M" {
		t.Fatalf("gpu 1 mps: %+v", m)
	}
	if c.GPUs[2].Layout != "1g.10gb@0" {
		t.Fatalf("gpu 2 overridden: %+v", c.GPUs[2])
	}
	// With mpsDaemons: cluster the device plugin or DRA driver runs the mps GPU's daemon: the
	// agent takes the layouts but starts no daemon of its own on that GPU.
	c = Config{Node: "n1", MPSDaemons: MPSDaemonsCluster}
	if _, err := ApplyPlan(&c, &Settings{Layouts: map[int]gpu.Layout{}}, p); err != nil || len(c.GPUs) != 3 {
		t.Fatalf("cluster: %+v %v", c.GPUs, err)
	}
	for _, g := range c.GPUs {
		if g.MPS != nil {
			t.Errorf("cluster: gpu %d gets an agent MPS daemon %+v", g.Index, g.MPS)
		}
	}
	if c.GPUs[0].Layout != "3g.40gb@0 3g.40gb@4" {
		t.Errorf("cluster: gpu 0 layout %q", c.GPUs[0].Layout)
	}
	bad := &v1.Plan{GPUs: []v1.PlanGPU{{Node: "n1", Index: 5, Board: "H100-SXM5-80GB", Mode: v1.ModeMIG,
		Instances: []v1.PlanInstance{{Profile: "4g.40gb", Start: 0}, {Profile: "4g.40gb", Start: 4}}}}}
	if _, err := ApplyPlan(&Config{Node: "n1"}, &Settings{Layouts: map[int]gpu.Layout{}}, bad); err == nil {
		t.Fatal("an illegal layout was accepted")
	}
}
