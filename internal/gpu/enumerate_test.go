package gpu

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// basicShapes returns the board's profiles with the 1g (1 memory slice), 2g, 3g, 4g and 7g
// shapes, leaving out +me and the 2-memory-slice 1g.
func basicShapes(b *Board) []string {
	var out []string
	for _, p := range b.Profiles {
		if p.MediaExtension || (p.ComputeSlices == 1 && p.MemorySlices != 1) || strings.ContainsAny(p.Name[2:], "+-") {
			continue
		}
		out = append(out, p.Name)
	}
	return out
}

// sizes renders a layout as its compute slices left to right, "2-1-1-3".
func sizes(b *Board, l Layout) string {
	parts := make([]string, len(l))
	for i, in := range l {
		parts[i] = strconv.Itoa(b.profile(in.Profile).ComputeSlices)
	}
	return strings.Join(parts, "-")
}

// TestEnumerateNineteenLayouts: with only the 1g, 2g, 3g, 4g and 7g shapes, every 8-slice board
// has 19 maximal layouts (NVIDIA's "19 combinations" on A100), 14 distinct multisets, and 11
// multisets that use all 7 compute slices (ParvaGPU's mig_config_set.sh list). The other three
// multisets (3-3, 3-2-1, 3-1-1-1) put a 3g at slot 0 and strand one compute slice; 16 of the 19
// layouts use all 7 (the 19 less those three).
func TestEnumerateNineteenLayouts(t *testing.T) {
	want := "1-1-1-1-1-1-1, 1-1-1-1-2-1, 1-1-1-1-3, 1-1-2-1-1-1, 1-1-2-2-1, 1-1-2-3, 2-1-1-1-1-1, " +
		"2-1-1-2-1, 2-1-1-3, 2-2-1-1-1, 2-2-2-1, 2-2-3, 3-1-1-1, 3-2-1, 3-3, 4-1-1-1, 4-2-1, 4-3, 7"
	eight := 0
	for _, b := range Boards() {
		if b.MemorySlices != 8 {
			continue
		}
		eight++
		t.Run(b.Name, func(t *testing.T) {
			profiles := basicShapes(b)
			if len(profiles) != 5 {
				t.Fatalf("basic shapes %v, want 5", profiles)
			}
			ls, err := b.Enumerate(profiles)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(ls))
			for i, l := range ls {
				got[i] = sizes(b, l)
			}
			if strings.Join(got, ", ") != want {
				t.Errorf("layouts\n got %s\nwant %s", strings.Join(got, ", "), want)
			}
			if s := b.Summarize(ls); s != (Summary{Layouts: 19, DistinctMultisets: 14, FullCompute: 11, FullComputeLayouts: 16}) {
				t.Errorf("summary %+v, want 19 layouts, 14 multisets, 11 full-compute multisets, 16 full-compute layouts", s)
			}
		})
	}
	if eight < 12 {
		t.Errorf("only %d 8-slice boards in the catalog", eight)
	}
}

// TestEnumerateFourSlice: on 4 slots with 1g, 2g and 4g there are 5 maximal layouts (1-1-1-1,
// 1-1-2, 2-1-1, 2-2, 4), 4 multisets, all using the 4 compute slices.
func TestEnumerateFourSlice(t *testing.T) {
	for _, name := range []string{"A30-24GB", "RTX-PRO-6000-Blackwell-96GB"} {
		b := mustBoard(t, name)
		ls, err := b.Enumerate(basicShapes(b))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range ls {
			got = append(got, sizes(b, l))
		}
		if strings.Join(got, ", ") != "1-1-1-1, 1-1-2, 2-1-1, 2-2, 4" {
			t.Errorf("%s: %v", name, got)
		}
		if s := b.Summarize(ls); s != (Summary{5, 4, 4, 5}) {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

func TestEnumerateAllProfiles(t *testing.T) {
	b := mustBoard(t, "H100-SXM5-80GB")
	ls, err := b.Enumerate(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Adding 1g.20gb and 1g.10gb+me to the 19 layouts multiplies the ways to fill slots.
	if s := b.Summarize(ls); s.Layouts != 239 || s.DistinctMultisets != 64 {
		t.Errorf("all profiles: %+v, want 239 layouts, 64 multisets", s)
	}
	seen := map[string]bool{}
	for _, l := range ls {
		if seen[l.String()] {
			t.Errorf("duplicate layout %s", l)
		}
		seen[l.String()] = true
		if !slices.IsSortedFunc(l, func(x, y Instance) int { return x.Start - y.Start }) {
			t.Errorf("layout %s not sorted by start", l)
		}
	}
	if !seen["1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.20gb@6"] {
		t.Error("missing the layout that reaches slot 7 through 1g.20gb@6")
	}
}

func TestEnumerateErrors(t *testing.T) {
	b := mustBoard(t, "H100")
	_, err := b.Enumerate([]string{"1g.10gb", "9g.1gb", "3g.20gb"})
	if !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("unknown profiles: %v", err)
	}
	for _, w := range []string{`enumerate layouts on H100-SXM5-80GB: profile "9g.1gb" does not exist`, `profile "3g.20gb" does not exist`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	// Duplicates and case are folded.
	ls, err := b.Enumerate([]string{"7G.80GB", "7g.80gb"})
	if err != nil || len(ls) != 1 || ls[0].String() != "7g.80gb@0" {
		t.Errorf("Enumerate(7g twice) = %v, %v", ls, err)
	}
}
