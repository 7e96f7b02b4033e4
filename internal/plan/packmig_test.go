package plan

import (
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// packMIGUnits packs units on two nodes of one H100 each, with the device plugin's node rules
// (perClaim false) or per claim, and returns the GPUs that got instances.
func packMIGUnits(t *testing.T, perClaim bool, units []*unit) []*gpuPlan {
	t.Helper()
	board, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p := &planner{o: Options{ExactUnits: DefaultExactUnits}, perClaim: perClaim,
		nodeUse: map[string]map[string]migUse{}, blocked: map[*unit]blockage{}}
	var gs []*gpuPlan
	for _, node := range []string{"node-a", "node-b"} {
		gs = append(gs, &gpuPlan{fg: fleetGPU{ref: v1.GPURef{Node: node}, board: board}, role: v1.RoleIdle})
	}
	free := map[string][]*gpuPlan{board.Name: append([]*gpuPlan(nil), gs...)}
	left, err := p.packMIG(board, units, free, newPatternCache())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("perClaim %v: %d units left without a GPU", perClaim, len(left))
	}
	var used []*gpuPlan
	placed := 0
	for _, g := range gs {
		if len(g.insts) == 0 {
			continue
		}
		used = append(used, g)
		var l gpu.Layout
		for _, pi := range g.insts {
			l = append(l, pi.in)
			if pi.u != nil {
				placed++
				if pi.u.c.profile.Name != pi.in.Profile {
					t.Errorf("perClaim %v: a %s unit on a %s instance", perClaim, pi.u.c.profile.Name, pi.in.Profile)
				}
			}
		}
		if err := board.Validate(l); err != nil {
			t.Errorf("perClaim %v: %s: %v", perClaim, g.fg.ref.Node, err)
		}
	}
	if placed != len(units) {
		t.Errorf("perClaim %v: %d of %d units placed", perClaim, placed, len(units))
	}
	return used
}

// Six 1g.10gb instances shared by MPS two ways (three per trust path) and one unshared 1g.20gb
// fill one H100 (8 of 8 memory slices, 7 of 7 compute slices). Under the device plugin's node
// rules the two trust paths cannot share a node's 1g.10gb instances, so they take two GPUs on
// two nodes; per claim (the DRA path) the packer covers both ways at once and uses one GPU.
func TestPackMIGPerClaim(t *testing.T) {
	board, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p10, err := board.Profile("1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	p20, err := board.Profile("1g.20gb")
	if err != nil {
		t.Fatal(err)
	}
	mk := func() []*unit {
		var us []*unit
		for _, path := range []string{"org/a", "org/b"} {
			tn := &tenant{t: v1.Tenant{Name: path, Path: path, Isolation: v1.IsolationSoft}}
			c := &cand{board: board, kind: v1.SliceMIGMPS, profile: p10, share: 2}
			for range 3 {
				us = append(us, &unit{c: c, reps: []replica{{tn}, {tn}}})
			}
		}
		tn := &tenant{t: v1.Tenant{Name: "solo", Isolation: v1.IsolationHard}}
		return append(us, &unit{c: &cand{board: board, kind: v1.SliceMIG, profile: p20, share: 1}, reps: []replica{{tn}}})
	}
	if used := packMIGUnits(t, false, mk()); len(used) != 2 {
		t.Errorf("with the node rules: %d GPUs, want 2 (one per trust path's node)", len(used))
	}
	used := packMIGUnits(t, true, mk())
	if len(used) != 1 {
		t.Fatalf("per claim: %d GPUs, want 1", len(used))
	}
	ways := map[string]bool{}
	for _, pi := range used[0].insts {
		if pi.u != nil && pi.u.c.profile == p10 {
			ways[pairGroup(pi.u)] = true
		}
	}
	if len(ways) != 2 {
		t.Errorf("per claim: the GPU's 1g.10gb instances are used %d ways, want both trust paths", len(ways))
	}
}
