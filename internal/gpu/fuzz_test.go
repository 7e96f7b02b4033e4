package gpu

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseLayout: the parser never panics, and whatever it accepts prints and parses back to
// the same layout, and validates on a board without panicking.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{
		"2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4", "3g.40gb@4,1g.10gb@0", "", " , ", "7g.80gb@0",
		"1g.10gb+me@6", "x@", "@1", "a@b@c", "1g.10gb@99999999999999999999", "1g.10gb@-3", "1g\x00@1",
	} {
		f.Add(s)
	}
	b, _ := Lookup("H100-SXM5-80GB")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLayout(s)
		if err != nil {
			if l != nil {
				t.Fatalf("error %v with a layout %v", err, l)
			}
			return
		}
		back, err := ParseLayout(l.String())
		if err != nil || !slices.Equal(back, l) {
			t.Fatalf("%q parsed to %v, which prints as %q and parses to %v, %v", s, l, l.String(), back, err)
		}
		_ = b.Validate(l)
		_ = b.FreeSlices(l)
		_ = b.CreationOrder(l)
	})
}

// FuzzParseInstance: a parsed instance prints back to its canonical text.
func FuzzParseInstance(f *testing.F) {
	for _, s := range []string{"3g.40gb@4", "3g.40gb@04", "3g.40gb", "@", "a@63", "a@64", " 1g.5gb@0 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := ParseInstance(s)
		if err != nil {
			return
		}
		if in.Start < 0 || in.Start >= maxSlices || in.Profile == "" || strings.ContainsAny(in.Profile, " ,@") {
			t.Fatalf("%q gave %+v", s, in)
		}
		again, err := ParseInstance(in.String())
		if err != nil || again != in {
			t.Fatalf("%q: %+v prints as %q, parses to %+v, %v", s, in, in.String(), again, err)
		}
	})
}

// FuzzLookup: board and PCI-id lookups never panic, and a found board's own name finds it again.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"H100", "nvidia h100 80gb hbm3", "0x233010DE", "10de:2330", "", "-", "__", "NVIDIA "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if b, err := Lookup(s); err == nil {
			if again, _ := Lookup(b.Name); again != b {
				t.Fatalf("%q found %s, whose name finds %v", s, b.Name, again)
			}
		}
		for _, b := range ByPCIDeviceID(s) {
			if !slices.ContainsFunc(b.PCIDeviceIDs, func(id string) bool { return normalizePCI(id) == normalizePCI(s) }) {
				t.Fatalf("%q matched %s without its id", s, b.Name)
			}
		}
	})
}
