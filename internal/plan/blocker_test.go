package plan

import (
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// A hard tenant that cannot be placed beside time-sliced GPUs must not push out the shared
// tenants that can be (testdata/timeslice-hard-blocker.yaml: two H100-NVL on one node, four
// low-frequency shared tenants that time-slice one GPU, and a hard tenant wanting a whole
// GPU). The device plugin gives a node's nvidia.com/gpu one sharing setting, so the hard
// tenant's exclusive GPU and the time-sliced one never meet there. Packed exclusive units
// first, the hard tenant took the node and the time-slice unit was blocked; the retry then
// forbade time-slicing to the four, which took a GPU each: 2 of 5 served. Packing the blocked
// group first serves 4 of 5 on one GPU.
func TestBlockedGroupPacksFirst(t *testing.T) {
	p := plannedState(t, loadPool(t, "testdata/timeslice-hard-blocker.yaml"))
	var served, short []string
	for _, tn := range p.tenants {
		if servedInFull(tn) {
			served = append(served, tn.t.Name)
		} else {
			short = append(short, tn.t.Name)
		}
	}
	if !slices.Equal(short, []string{"x1"}) {
		t.Fatalf("served %v, short %v; want everyone but x1 served", served, short)
	}
	used := 0
	for _, g := range p.gpus {
		if g.role == v1.RolePool {
			used++
			if g.mode != v1.ModeTimeSlice || len(g.whole.reps) != 4 {
				t.Errorf("%s: mode %s with %d replicas, want the four shared tenants time-sliced", g.fg.ref, g.mode, len(g.whole.reps))
			}
		}
	}
	if used != 1 {
		t.Errorf("%d GPUs used, want 1", used)
	}
	x1 := p.tenants[4]
	if i := slices.IndexFunc(x1.infeas, func(r v1.Reason) bool { return r.Code == v1.ReasonNoCapacity }); i < 0 {
		t.Errorf("x1 has no NoCapacity reason: %v", x1.infeas)
	}
}

// Tenants of one trust path rescued one after the other onto the same shared candidate share
// its units, as the packer would have put them (testdata/dra-rescue-share.yaml, the DRA path:
// q7a and q7b, each an MPS 1/2 share of an A100-40GB once their H100 choice found no room, took
// a GPU each with one of its two client slots used, 7 GPUs where 6 carry the plan). With MPS
// shares finer than 1/8 (ADR 0056) the rescue also seats the short tenants of one sharing group
// together (rescueGroup): one at a time, b1 and b2 (llama-3.2-1b) took MPS 1/10 of an A100 and
// b3 (llama-3.2-3b, whose finest share there is 1/4) another GPU at 1/4, 7 GPUs again; all three
// fit one at 1/4.
func TestRescueJoinsOpenSlots(t *testing.T) {
	p := plannedState(t, loadPool(t, "testdata/dra-rescue-share.yaml"))
	used := 0
	on := map[string]string{}
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		used++
		for _, u := range g.units() {
			for _, r := range u.reps {
				on[r.tn.t.Name] = g.fg.ref.String()
			}
		}
	}
	for _, tn := range p.tenants {
		if !servedInFull(tn) {
			t.Errorf("%s short: %v", tn.t.Name, tn.infeas)
		}
	}
	if on["q7a"] == "" || on["q7a"] != on["q7b"] {
		t.Errorf("q7a on %q, q7b on %q: want one shared GPU", on["q7a"], on["q7b"])
	}
	if used != 6 {
		t.Errorf("%d GPUs used, want 6", used)
	}
}
