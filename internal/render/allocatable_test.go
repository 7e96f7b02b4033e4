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

// TestDRADevices: the devices NVIDIA's DRA driver publishes for the all-modes plan's nodes,
// counted by hand from its golden mig-parted config (testdata/golden/all-modes: n0 runs GPU 0
// whole and two 3g.40gb on GPU 1, n3 a 1g.10gb ×2, 2g.20gb, 3g.40gb GPU and a whole GPU) and its
// device-plugin configs (n1's eight time-sliced references are two GPUs of four replicas, n2's two
// MPS references one GPU of two): a shared device is one device, not its references.
func TestDRADevices(t *testing.T) {
	plan, pool := allModesPlan(t)
	got, err := DRADevices(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{
		"n0": {"gpu": 1, "mig-3g.40gb": 2},
		"n1": {"gpu": 2},
		"n2": {"gpu": 1},
		"n3": {"gpu": 1, "mig-1g.10gb": 2, "mig-2g.20gb": 1, "mig-3g.40gb": 1},
	}
	if len(got) != len(want) {
		t.Errorf("nodes %v, want %v", got, want)
	}
	for n, w := range want {
		if !stdmaps.Equal(got[n], w) {
			t.Errorf("node %s: %v, want %v", n, got[n], w)
		}
	}
	if _, err := DRADevices(nil, pool); err == nil {
		t.Error("no plan: no error")
	}
}

// TestDRADeviceKey: a whole GPU is "gpu", a MIG device "mig-" and its profile as the driver
// writes it (attributes included), another type its own name.
func TestDRADeviceKey(t *testing.T) {
	for _, tc := range []struct{ typ, profile, want string }{
		{"gpu", "", "gpu"}, {"mig", "1g.10gb", "mig-1g.10gb"}, {"mig", "1g.10gb+me", "mig-1g.10gb+me"}, {"vfio", "", "vfio"},
	} {
		if got := DRADeviceKey(tc.typ, tc.profile); got != tc.want {
			t.Errorf("DRADeviceKey(%q, %q) = %q, want %q", tc.typ, tc.profile, got, tc.want)
		}
	}
}
