package v1

import "testing"

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
