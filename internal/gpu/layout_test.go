package gpu

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustBoard(t testing.TB, name string) *Board {
	t.Helper()
	b, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustLayout(t testing.TB, s string) Layout {
	t.Helper()
	l, err := ParseLayout(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseLayout(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4", want: "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"},
		{in: "2g.20gb@0,1g.10gb@2, 3g.40gb@4", want: "2g.20gb@0 1g.10gb@2 3g.40gb@4"},
		{in: "  ", want: ""},
		{in: "1g.10gb+me@6", want: "1g.10gb+me@6"},
		{in: "3g.40gb", err: `parse instance "3g.40gb": missing "@start"`},
		{in: "3g.40gb@x", err: `start "x" is not a number in 0..63`},
		{in: "3g.40gb@-1", err: `start "-1" is not a number`},
		{in: "3g.40gb@+1", err: `start "+1" is not a number`},
		{in: "3g.40gb@64", err: `start "64" is not a number`},
		{in: "@4", err: `bad profile name ""`},
		{in: "a@b@1", err: `start "b@1"`},
		{in: "x@1 y 3g@z", err: "missing \"@start\""}, // both errors are joined
	} {
		l, err := ParseLayout(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLayout(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || l.String() != tc.want {
			t.Errorf("ParseLayout(%q) = %q, %v; want %q", tc.in, l, err, tc.want)
		}
	}
	_, err := ParseLayout("x@1 y 3g@z")
	if n := strings.Count(err.Error(), "parse instance"); n != 2 {
		t.Errorf("want 2 joined errors, got %d: %v", n, err)
	}
}

func TestLayoutHelpers(t *testing.T) {
	b := mustBoard(t, "H100-SXM5-80GB")
	l := mustLayout(t, "3g.40gb@4 1g.10gb@3 2g.20gb@0")
	if got := l.Sorted().String(); got != "2g.20gb@0 1g.10gb@3 3g.40gb@4" {
		t.Errorf("Sorted = %s", got)
	}
	if got := b.FreeSlices(l); !slices.Equal(got, []int{2}) { // 2g covers 0-1, 1g 3, 3g 4-7: only 2 is free
		t.Errorf("FreeSlices = %v, want [2]", got)
	}
	if got := b.ComputeUsed(l); got != 6 { // 3 + 1 + 2
		t.Errorf("ComputeUsed = %d, want 6", got)
	}
	if got, _ := b.FreeStarts(l, "1g.10gb"); !slices.Equal(got, []int{2}) {
		t.Errorf("FreeStarts(1g.10gb) = %v, want [2]", got)
	}
	if got, _ := b.FreeStarts(l, "2g.20gb"); len(got) != 0 { // 2g@2 would cover slice 3
		t.Errorf("FreeStarts(2g.20gb) = %v, want none", got)
	}
	if _, err := b.FreeStarts(l, "9g.1gb"); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("FreeStarts unknown profile: %v", err)
	}
	// The +me rule: with one +me instance, no start is free for another.
	me := mustLayout(t, "1g.10gb+me@0")
	if got, _ := b.FreeStarts(me, "1g.10gb+me"); len(got) != 0 {
		t.Errorf("second +me allowed at %v", got)
	}
	if got := b.CreationOrder(mustLayout(t, "1g.10gb@2 1g.10gb@3 2g.20gb@0 3g.40gb@4")).String(); got != "3g.40gb@4 2g.20gb@0 1g.10gb@2 1g.10gb@3" {
		t.Errorf("CreationOrder = %s", got)
	}
	if got := MultisetKey(map[string]int{"2g.20gb": 1, "1g.10gb": 2, "3g.40gb": 0}); got != "{1g.10gb: 2, 2g.20gb: 1}" {
		t.Errorf("MultisetKey = %s", got)
	}
}

func TestValidate(t *testing.T) {
	b := mustBoard(t, "H100-SXM5-80GB")
	for _, tc := range []struct {
		layout string
		want   []string // one substring per expected problem
	}{
		{"", nil},
		{"2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4", nil},                               // mig-parted all-balanced
		{"4g.40gb@0 3g.40gb@4", nil},                                                   // 4 + 3 = 7 compute, allowed since R510
		{"1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.20gb@6", nil}, // 6 + 1 = 7 compute, slot 7 via 1g.20gb@6
		{"7g.80gb@0", nil},
		{"4g.20gb@0", []string{`4g.20gb@0: profile "4g.20gb" does not exist on H100-SXM5-80GB (valid: 1g.10gb,`}},
		{"3g.40gb@2", []string{"H100-SXM5-80GB: 3g.40gb@2: start 2 is not legal for 3g.40gb (legal starts: 0, 4)"}},
		{"1g.10gb@7", []string{"1g.10gb@7: start 7 is not legal for 1g.10gb (legal starts: 0, 1, 2, 3, 4, 5, 6)"}},
		{"2g.20gb@1", []string{"start 1 is not legal for 2g.20gb (legal starts: 0, 2, 4)"}},
		{"3g.40gb@4 2g.20gb@4", []string{"H100-SXM5-80GB: 2g.20gb@4 overlaps 3g.40gb@4 on memory slices 4, 5; move one of them"}},
		{"4g.40gb@0 3g.40gb@0", []string{"3g.40gb@0 overlaps 4g.40gb@0 on memory slices 0, 1, 2, 3"}},
		// 3g.40gb@0 twice: overlap, and (3 + 3 + 3 = 9 compute) and 3 > max 2 instances.
		{"3g.40gb@0 3g.40gb@4 3g.40gb@0", []string{"3g.40gb@0 overlaps 3g.40gb@0", "3 instances of 3g.40gb, at most 2 per GPU",
			"the instances use 9 compute slices, the board has 7"}},
		{"1g.10gb+me@0 1g.10gb+me@1", []string{"2 instances of 1g.10gb+me, at most 1 per GPU",
			"2 media-extension instances (1g.10gb+me@0, 1g.10gb+me@1), at most 1 per GPU"}},
		// 8 x 1g: slot 7 is illegal for 1g, and 8 > 7 instances / max count / compute.
		{"1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6 1g.10gb@6", []string{
			"1g.10gb@6 overlaps 1g.10gb@6 on memory slice 6", "8 instances of 1g.10gb, at most 7 per GPU",
			"8 instances, at most 7 per GPU", "use 8 compute slices, the board has 7"}},
	} {
		err := b.Validate(mustLayout(t, tc.layout))
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("Validate(%q) = %v, want nil", tc.layout, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Validate(%q) = nil, want %d problems", tc.layout, len(tc.want))
			continue
		}
		msg := err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("Validate(%q) = %q\n lacks %q", tc.layout, msg, w)
			}
		}
		if lines := strings.Count(msg, "\n") + 1; lines != len(tc.want) {
			t.Errorf("Validate(%q) reported %d problems, want %d:\n%s", tc.layout, lines, len(tc.want), msg)
		}
	}
}

func TestValidateFourSliceBoard(t *testing.T) {
	b := mustBoard(t, "A30")
	if err := b.Validate(mustLayout(t, "2g.12gb@0 1g.6gb@2 1g.6gb@3")); err != nil {
		t.Errorf("A30 all-balanced: %v", err)
	}
	if err := b.Validate(mustLayout(t, "2g.12gb@1")); err == nil {
		t.Error("A30 2g.12gb@1 accepted")
	}
	if err := b.Validate(mustLayout(t, "1g.6gb+me@0 2g.12gb+me@2")); err == nil || !strings.Contains(err.Error(), "2 media-extension instances") {
		t.Errorf("A30 two +me profiles: %v", err)
	}
}
