package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		board  string
		counts map[string]int
		want   string
	}{
		// mig-parted all-balanced: 3g must take slot 4 (3g@0 would leave only 6 for two 1g), then
		// the lowest starts: 2g@0, 1g@2, 1g@3.
		{"H100-SXM5-80GB", map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"},
		{"A100-SXM4-40GB", map[string]int{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "2g.10gb@0 1g.5gb@2 1g.5gb@3 3g.20gb@4"},
		// The creation-order quirk case (-cgi 19,19,14,9): the set itself is placeable.
		{"A100-SXM4-40GB", map[string]int{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "2g.10gb@0 1g.5gb@2 1g.5gb@3 3g.20gb@4"},
		// One 3g leaves the most room at slot 4: 0-3 still takes a 4g, 3g, two 2g or four 1g.
		{"H100-SXM5-80GB", map[string]int{"3g.40gb": 1}, "3g.40gb@4"},
		{"H100-SXM5-80GB", map[string]int{"3g.40gb": 1, "1g.10gb": 4}, "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 3g.40gb@4"},
		{"H100-SXM5-80GB", map[string]int{"4g.40gb": 1, "3g.40gb": 1}, "4g.40gb@0 3g.40gb@4"},
		{"H100-SXM5-80GB", map[string]int{"1g.20gb": 1, "1g.10gb": 6}, "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.20gb@6"},
		{"H100-SXM5-80GB", map[string]int{"1G.10GB": 7}, "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6"},
		{"H100-SXM5-80GB", map[string]int{"7g.80gb": 1}, "7g.80gb@0"},
		{"H100-SXM5-80GB", map[string]int{"2g.20gb": 0}, ""},
		{"H100-SXM5-80GB", nil, ""},
		{"A30-24GB", map[string]int{"1g.6gb": 2, "2g.12gb": 1}, "2g.12gb@0 1g.6gb@2 1g.6gb@3"},
		{"RTX-PRO-6000-Blackwell-96GB", map[string]int{"1g.24gb": 2, "2g.48gb": 1}, "2g.48gb@0 1g.24gb@2 1g.24gb@3"},
	} {
		l, err := mustBoard(t, tc.board).Place(tc.counts)
		if err != nil || l.String() != tc.want {
			t.Errorf("%s Place(%v) = %q, %v; want %q", tc.board, tc.counts, l, err, tc.want)
		}
		if err == nil && l == nil {
			t.Errorf("%s Place(%v) returned a nil layout", tc.board, tc.counts)
		}
	}
}

func TestPlaceErrors(t *testing.T) {
	h100 := mustBoard(t, "H100-SXM5-80GB")
	for _, tc := range []struct {
		counts      map[string]int
		want        string
		noPlacement bool
	}{
		// 2g takes 0, 2 and 4; 1g can start at 0..6 and 6 is the only free one, but two are needed.
		// 3 x 2 + 2 x 1 = 8 compute slices is one more than the board has.
		{map[string]int{"2g.20gb": 3, "1g.10gb": 2},
			"{2g.20gb: 3, 1g.10gb: 2} cannot be placed on H100-SXM5-80GB: after 2g.20gb@0,2,4 only start 6 is free for 1g.10gb (2 needed); the request needs 8 compute slices, the board has 7", true},
		// Two 3g fill all 8 slices: nothing is left for the 2-slice 1g.
		{map[string]int{"3g.40gb": 2, "1g.20gb": 1},
			"{3g.40gb: 2, 1g.20gb: 1} cannot be placed on H100-SXM5-80GB: after 3g.40gb@0,4 no start is free for 1g.20gb (1 needed)", true},
		// 4g takes slices 0-3; 2g starts at 0, 2 or 4, so only 4 is left for two 2g.
		{map[string]int{"4g.40gb": 1, "2g.20gb": 2},
			"after 4g.40gb@0 only start 4 is free for 2g.20gb (2 needed)", true},
		{map[string]int{"4g.20gb": 1, "1g.10gb": -1},
			`place {1g.10gb: -1, 4g.20gb: 1} on H100-SXM5-80GB: count of 1g.10gb is -1, must not be negative` + "\n" + `profile "4g.20gb" does not exist on H100-SXM5-80GB`, false},
		{map[string]int{"1g.10gb": 8},
			"1g.10gb: 8 requested, at most 7 per GPU on H100-SXM5-80GB\n8 instances requested, at most 7 per GPU on H100-SXM5-80GB", false},
		{map[string]int{"1g.10gb+me": 2},
			"1g.10gb+me: 2 requested, at most 1 per GPU", false},
	} {
		_, err := h100.Place(tc.counts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Place(%v) error\n %v\nwant it to contain\n %s", tc.counts, err, tc.want)
			continue
		}
		if got := errors.Is(err, ErrNoPlacement); got != tc.noPlacement {
			t.Errorf("Place(%v): errors.Is(ErrNoPlacement) = %v, want %v", tc.counts, got, tc.noPlacement)
		}
	}
	var pe *PlacementError
	_, err := h100.Place(map[string]int{"2g.20gb": 3, "1g.10gb": 2})
	if !errors.As(err, &pe) || pe.Profile != "1g.10gb" || pe.Needed != 2 || pe.Placed.String() != "2g.20gb@0 2g.20gb@2 2g.20gb@4" {
		t.Errorf("PlacementError fields: %+v", pe)
	}
}

// TestPlaceDeterministic: map iteration order must not leak into the result.
func TestPlaceDeterministic(t *testing.T) {
	b := mustBoard(t, "H200")
	want := ""
	for i := 0; i < 50; i++ {
		l, err := b.Place(map[string]int{"1g.18gb": 3, "2g.35gb": 1, "1g.35gb": 1, "1g.18gb+me": 1})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want = l.String()
		} else if l.String() != want {
			t.Fatalf("run %d: %s, first run %s", i, l, want)
		}
	}
}
