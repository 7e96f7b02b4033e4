package gpu

import (
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genBoard draws a catalog board.
func genBoard(t *rapid.T) *Board {
	return rapid.SampledFrom(Boards()).Draw(t, "board")
}

// genSubset draws a non-empty subset of the board's profile names.
func genSubset(t *rapid.T, b *Board) []string {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(b.ProfileNames()), 1, 4, rapid.ID[string]).Draw(t, "profiles")
	slices.Sort(names)
	return names
}

// contains reports whether layout big holds every instance of small.
func contains(big, small Layout) bool {
	for _, in := range small {
		if !slices.Contains(big, in) {
			return false
		}
	}
	return true
}

// covers reports whether some instances of l form the multiset counts.
func covers(l Layout, counts map[string]int) bool {
	have := l.Counts()
	for n, c := range counts {
		if have[n] < c {
			return false
		}
	}
	return true
}

// Every layout Enumerate returns is legal and maximal: no allowed profile has a free start.
func TestPropEnumerateLegalAndMaximal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBoard(t)
		profiles := genSubset(t, b)
		ls, err := b.Enumerate(profiles)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			t.Fatalf("%s %v: no layouts", b.Name, profiles)
		}
		for _, l := range ls {
			if err := b.Validate(l); err != nil {
				t.Fatalf("%s: enumerated %s is invalid: %v", b.Name, l, err)
			}
			for _, p := range profiles {
				if free, _ := b.FreeStarts(l, p); len(free) > 0 {
					t.Fatalf("%s: %s is not maximal: %s fits at %v", b.Name, l, p, free)
				}
			}
		}
	})
}

// Place returns a legal layout with exactly the requested multiset, or ErrNoPlacement exactly
// when no maximal layout over those profiles holds the multiset.
func TestPropPlaceAgreesWithEnumerate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBoard(t)
		profiles := genSubset(t, b)
		counts := map[string]int{}
		for _, p := range profiles {
			prof, _ := b.Profile(p)
			counts[p] = rapid.IntRange(0, prof.MaxCount).Draw(t, "count:"+p)
		}
		ls, err := b.Enumerate(profiles)
		if err != nil {
			t.Fatal(err)
		}
		feasible := slices.ContainsFunc(ls, func(l Layout) bool { return covers(l, counts) })
		l, err := b.Place(counts)
		switch {
		case err == nil:
			if verr := b.Validate(l); verr != nil {
				t.Fatalf("%s Place(%v) = %s, invalid: %v", b.Name, counts, l, verr)
			}
			if MultisetKey(l.Counts()) != MultisetKey(counts) {
				t.Fatalf("%s Place(%v) = %s: wrong multiset", b.Name, counts, l)
			}
			if !feasible {
				t.Fatalf("%s Place(%v) = %s, but no enumerated layout holds it", b.Name, counts, l)
			}
		case errors.Is(err, ErrNoPlacement):
			if feasible {
				t.Fatalf("%s Place(%v) failed (%v), but an enumerated layout holds the multiset", b.Name, counts, err)
			}
		default:
			// Request errors: only the instance, +me and MaxInstances limits can trip here.
			total, me := 0, 0
			for n, c := range counts {
				total += c
				if p, _ := b.Profile(n); p.MediaExtension {
					me += c
				}
			}
			if total <= b.MaxInstances && me <= 1 {
				t.Fatalf("%s Place(%v): unexpected error %v", b.Name, counts, err)
			}
		}
	})
}

// Validate accepts a random layout exactly when it is part of some maximal layout over all of the
// board's profiles: the two implementations of the rules agree.
func TestPropValidateAgreesWithEnumerate(t *testing.T) {
	all := map[string][]Layout{}
	for _, b := range Boards() {
		ls, err := b.Enumerate(nil)
		if err != nil {
			t.Fatal(err)
		}
		all[b.Name] = ls
	}
	rapid.Check(t, func(t *rapid.T) {
		b := genBoard(t)
		n := rapid.IntRange(0, b.MaxInstances+1).Draw(t, "n")
		l := Layout{}
		for i := 0; i < n; i++ {
			p := rapid.SampledFrom(b.Profiles).Draw(t, "profile")
			start := rapid.IntRange(0, b.MemorySlices-1).Draw(t, "start")
			l = append(l, Instance{Profile: p.Name, Start: start})
		}
		valid := b.Validate(l) == nil
		inSome := slices.ContainsFunc(all[b.Name], func(m Layout) bool { return len(m) >= len(l) && contains(m, l) && !hasDup(l) })
		if valid != inSome {
			t.Fatalf("%s %s: Validate ok = %v, part of an enumerated layout = %v", b.Name, l, valid, inSome)
		}
	})
}

func hasDup(l Layout) bool {
	for i := range l {
		if slices.Contains(l[i+1:], l[i]) {
			return true
		}
	}
	return false
}

// ParseLayout reads back what Layout.String writes.
func TestPropLayoutRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringMatching(`[0-9a-zA-Z.+_-]{1,12}`).Draw(t, "name")
		l := Layout{}
		for i := rapid.IntRange(0, 8).Draw(t, "n"); i > 0; i-- {
			l = append(l, Instance{Profile: name, Start: rapid.IntRange(0, maxSlices-1).Draw(t, "start")})
		}
		got, err := ParseLayout(l.String())
		if err != nil || !slices.Equal(got, l) {
			t.Fatalf("round trip %q: %v, %v", l, got, err)
		}
	})
}
