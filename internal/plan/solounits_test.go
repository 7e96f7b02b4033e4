package plan

import (
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
)

// soloUnits makes ceil(replicas / share) units of the candidate's group (one for all where the
// share is not positive), each full but the last, every replica the tenant's; and a replica
// appended to one unit lands in no other unit (the units' replicas share one array).
func TestSoloUnitsLayout(t *testing.T) {
	tn, other := &tenant{group: "g"}, &tenant{group: "g"}
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ replicas, share, units int }{
		{0, 1, 0}, {1, 1, 1}, {3, 1, 3}, {4, 2, 2}, {5, 2, 3}, {7, 8, 1}, {9, 8, 2}, {5, 0, 1},
	} {
		c := &cand{replicas: tc.replicas, share: tc.share, board: b}
		us := soloUnits(tn, c)
		if len(us) != tc.units {
			t.Fatalf("%d replicas at share %d: %d units, want %d", tc.replicas, tc.share, len(us), tc.units)
		}
		n := 0
		for i, u := range us {
			full := tc.share
			if tc.share <= 0 || i == len(us)-1 {
				full = tc.replicas - n
			}
			if len(u.reps) != full || u.c != c || u.key != keyOf(tn, c) {
				t.Fatalf("%d replicas at share %d: unit %d has %d replicas, want %d (candidate and key its own)", tc.replicas, tc.share, i, len(u.reps), full)
			}
			for _, r := range u.reps {
				if r.tn != tn {
					t.Fatalf("unit %d holds another tenant's replica", i)
				}
			}
			n += len(u.reps)
		}
		for i := range us {
			us[i].reps = append(us[i].reps, replica{tn: other})
			for j, u := range us {
				for k, r := range u.reps {
					if r.tn == other && (j != i || k != len(u.reps)-1) {
						t.Fatalf("%d replicas at share %d: a replica appended to unit %d landed in unit %d at %d", tc.replicas, tc.share, i, j, k)
					}
				}
			}
			us[i].reps = us[i].reps[:len(us[i].reps)-1]
		}
	}
}
