package v1

import (
	"slices"
	"testing"
)

func TestPlanGPUReplicaCount(t *testing.T) {
	r := func(names ...string) []PlanReplica {
		out := make([]PlanReplica, len(names))
		for i, n := range names {
			out[i] = PlanReplica{Tenant: n, Index: i}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		gpu  PlanGPU
		want int
	}{
		{"empty", PlanGPU{Mode: ModeExclusive}, 0},
		{"idle MIG layout", PlanGPU{Mode: ModeMIG, Instances: []PlanInstance{{Profile: "3g.40gb"}, {Profile: "3g.40gb", Start: 4}}}, 0},
		{"whole GPU", PlanGPU{Mode: ModeTimeSlice, Replicas: r("a", "b", "c")}, 3},
		// 2 on the first instance + 0 + 1 on the third = 3.
		{"instances", PlanGPU{Mode: ModeMIG, Instances: []PlanInstance{
			{Profile: "2g.20gb", Replicas: r("a", "b")}, {Profile: "2g.20gb", Start: 2}, {Profile: "3g.40gb", Start: 4, Replicas: r("c")}}}, 3},
		// Replicas on the whole GPU and on instances are both counted (validation rejects this
		// shape, but the count does not hide it): 1 + 2 = 3.
		{"both", PlanGPU{Mode: ModeMIG, Replicas: r("a"), Instances: []PlanInstance{{Profile: "7g.80gb", Replicas: r("b", "c")}}}, 3},
	} {
		if got := tc.gpu.ReplicaCount(); got != tc.want {
			t.Errorf("%s: ReplicaCount() = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPlanTenantBoards(t *testing.T) {
	a := GPURef{Node: "n1", Index: 0}
	b := GPURef{Node: "n1", Index: 1}
	c := GPURef{Node: "n2", Index: 0}
	p := &Plan{
		GPUs:        []PlanGPU{{Node: "n1", Index: 0, Board: "H100-80GB"}, {Node: "n1", Index: 1, Board: "A100-80GB"}, {Node: "n2", Index: 0, Board: "B200-180GB"}},
		LoRAEngines: []PlanLoRAEngine{{Name: "e-0", GPU: c}},
		Tenants: []PlanTenant{
			// Two replicas on H100s and one on an A100: sorted, each board once.
			{Name: "x", Replicas: []ReplicaRef{{GPU: a}, {Index: 1, GPU: b}, {Index: 2, GPU: a}}},
			// An adapter tenant on a shared engine: the engine's GPU's board.
			{Name: "y", LoRAEngines: []string{"e-0"}},
			// No placement: no entry.
			{Name: "z", Infeasible: true},
		},
	}
	got := p.TenantBoards()
	want := map[string][]string{"x": {"A100-80GB", "H100-80GB"}, "y": {"B200-180GB"}}
	if len(got) != len(want) {
		t.Fatalf("TenantBoards() = %v, want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; !slices.Equal(g, w) {
			t.Errorf("TenantBoards()[%q] = %v, want %v", k, g, w)
		}
	}
}
