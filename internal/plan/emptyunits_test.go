package plan

import (
	"math"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// emptyTestPlanner is a planner over n one-replica tenants of one trust path, each feasible on a
// whole GPU's MPS share of 8 (cost 1/8) and on an unshared 1g.10gb instance (1/7).
func emptyTestPlanner(t *testing.T, n int) *planner {
	t.Helper()
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := b.Profile("1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	p := &planner{ids: newKeyIDs()}
	for i := range n {
		mps := &cand{board: b, kind: v1.SliceMPS, share: 8, replicas: 1, unitFrac: 1, memFrac: 1, compFrac: 1, cost: 1.0 / 8}
		mig := &cand{board: b, kind: v1.SliceMIG, profile: prof, share: 1, replicas: 1,
			memFrac: 1.0 / 8, compFrac: 1.0 / 7, unitFrac: 1.0 / 7, cost: 1.0 / 7}
		p.tenants = append(p.tenants, &tenant{idx: i, group: "soft:team", feasible: []*cand{mps, mig}})
	}
	return p
}

func onKind(p *planner, k v1.SliceKind) int {
	n := 0
	for _, tn := range p.tenants {
		if tn.choice.kind == k {
			n++
		}
	}
	return n
}

// Ten tenants on MPS shares of 8 take two GPUs, the second for two replicas; one tenant at a
// time leaving it frees nothing, so the local search alone keeps them. emptyLastUnits moves the
// two together to 1g.10gb instances (1 + 2/7 instead of 2). With fifteen, the last unit holds
// seven, and seven 1g.10gb instances cost as much as the GPU they free: nothing moves.
func TestEmptyLastUnits(t *testing.T) {
	for _, tc := range []struct {
		n, onMPS int
		value    float64
	}{{10, 8, 1 + 2.0/7}, {15, 15, 2}, {16, 16, 2}, {3, 0, 3.0 / 7}} {
		p := emptyTestPlanner(t, tc.n)
		p.chooseFrom(false, false, nil)
		if got := onKind(p, v1.SliceMPS); got != tc.onMPS {
			t.Errorf("%d tenants: %d on MPS, want %d", tc.n, got, tc.onMPS)
		}
		if got := p.chosenValue(false); math.Abs(got-tc.value) > 1e-9 {
			t.Errorf("%d tenants: objective %.4f, want %.4f", tc.n, got, tc.value)
		}
		// Without the step, the local search keeps every tenant on its cheapest kind.
		p = emptyTestPlanner(t, tc.n)
		f := newFractional(p.ids)
		for _, tn := range p.tenants {
			tn.choice = tn.feasible[0]
			f.move(p.ids.of(tn, tn.choice), tn.choice, 1)
		}
		p.localSearch(f)
		if tc.n == 10 && onKind(p, v1.SliceMPS) != 10 {
			t.Errorf("the local search alone moved %d tenants off MPS; the test no longer shows the step", 10-onKind(p, v1.SliceMPS))
		}
	}
}

// A leaver stays on its board: with their only other candidate on another board, the ten
// tenants of TestEmptyLastUnits stay on their two MPS GPUs, and with it on the same board two
// of them leave (the first case there).
func TestEmptyLastUnitsStaysOnBoard(t *testing.T) {
	other, err := gpu.Lookup("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := other.Profile("1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	p := emptyTestPlanner(t, 10)
	for _, tn := range p.tenants {
		mig := tn.feasible[1]
		mig.board, mig.profile = other, prof
	}
	p.chooseFrom(false, false, nil)
	if got := onKind(p, v1.SliceMPS); got != 10 {
		t.Errorf("%d of 10 on MPS, want 10: a leaver changed boards", got)
	}
}
