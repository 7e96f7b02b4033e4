package render

import (
	stdmaps "maps"
	"testing"
)

// TestAllocatable: the all-modes plan's nodes, counted by hand from its golden mig-parted and
// device-plugin configs (testdata/golden/all-modes): whole GPUs and MIG instances by name, shared
// resources renamed .shared with devices × replicas references, an unshared instance left as is.
func TestAllocatable(t *testing.T) {
	plan, pool := allModesPlan(t)
	got, err := Allocatable(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{
		"n0": {"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 2},
		"n1": {"nvidia.com/gpu.shared": 8},
		"n2": {"nvidia.com/gpu.shared": 2},
		"n3": {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb.shared": 4, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-3g.40gb.shared": 2},
	}
	if len(got) != len(want) {
		t.Errorf("nodes %v, want %v", got, want)
	}
	for n, w := range want {
		if !stdmaps.Equal(got[n], w) {
			t.Errorf("node %s: %v, want %v", n, got[n], w)
		}
	}
}
