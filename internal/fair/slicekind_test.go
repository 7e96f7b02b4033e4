package fair

import (
	"slices"
	"testing"
)

func TestSliceVector(t *testing.T) {
	cases := []struct {
		kind      string
		canonical string
		sm, hbm   float64
		bandwidth float64
		estimated []string
	}{
		// MIG User Guide (`nvidia-smi mig -lgip` on H100 SXM5): 3g.40gb = 60 of 132 SMs, 40448 MiB,
		// 4 of 8 memory slices → 3350 GB/s · 4/8 = 1675 GB/s.
		{"H100-SXM5-80GB/3g.40gb", "H100-SXM5-80GB/3g.40gb", 60, 40448, 1675, nil},
		// 1g.10gb: 16 SMs, 1 of 8 memory slices → 3350/8 = 418.75 GB/s; the lookup is case-insensitive.
		{"h100-sxm5-80gb/1g.10gb", "H100-SXM5-80GB/1g.10gb", 16, 9984, 418.75, nil},
		// MPS 50%: half of 132 SMs, of 81559 MiB and of 3350 GB/s.
		{"H100-SXM5-80GB/mps-50", "H100-SXM5-80GB/mps-50", 66, 81559.0 / 2, 1675, nil},
		// The whole A100 80GB without MIG: 108 SMs, 81920 MiB, 2039 GB/s.
		{"A100-SXM4-80GB/exclusive", "A100-SXM4-80GB/exclusive", 108, 81920, 2039, nil},
		// B200 4g.90gb has no public SM count: 148 · 4/7 by proportion, flagged as an estimate.
		{"B200-180GB/4g.90gb", "B200-180GB/4g.90gb", 148.0 * 4 / 7, -1, 8000.0 * 4 / 8, []string{"sm"}},
	}
	for _, c := range cases {
		s, err := SliceVector(c.kind)
		if err != nil {
			t.Errorf("%s: %v", c.kind, err)
			continue
		}
		v := s.Vector
		if s.Kind != c.canonical || v[c.canonical] != 1 {
			t.Errorf("%s: kind %q count %v, want %q counted once", c.kind, s.Kind, v[c.canonical], c.canonical)
		}
		if v[ResourceSM] != c.sm || (c.hbm >= 0 && v[ResourceHBM] != c.hbm) || v[ResourceBandwidth] != c.bandwidth {
			t.Errorf("%s: sm %v hbm %v bandwidth %v, want %v %v %v", c.kind, v[ResourceSM], v[ResourceHBM],
				v[ResourceBandwidth], c.sm, c.hbm, c.bandwidth)
		}
		if !slices.Contains(s.Estimated, "sm") && len(c.estimated) > 0 || len(c.estimated) == 0 && len(s.Estimated) > 0 {
			t.Errorf("%s: estimated %v, want %v", c.kind, s.Estimated, c.estimated)
		}
	}
}

func TestSliceVectorErrors(t *testing.T) {
	for _, kind := range []string{"", "H100-SXM5-80GB", "H100-SXM5-80GB/", "/3g.40gb", "NoSuchBoard/3g.40gb",
		"H100-SXM5-80GB/9g.99gb", "H100-SXM5-80GB/mps-0", "H100-SXM5-80GB/mps-101", "H100-SXM5-80GB/mps-x"} {
		if _, err := SliceVector(kind); err == nil {
			t.Errorf("%q: no error", kind)
		}
	}
}

func TestSliceCapacity(t *testing.T) {
	// Two 3g.40gb and three 1g.10gb on H100 SXM5: sm 2·60 + 3·16 = 168; hbm 2·40448 + 3·9984 = 110848.
	c, _, err := SliceCapacity(map[string]int{"H100-SXM5-80GB/3g.40gb": 2, "H100-SXM5-80GB/1g.10gb": 3})
	if err != nil {
		t.Fatal(err)
	}
	if c["sm"] != 168 || c["hbm"] != 110848 || c["H100-SXM5-80GB/3g.40gb"] != 2 || c["H100-SXM5-80GB/1g.10gb"] != 3 {
		t.Errorf("capacity %v", c)
	}
	if _, _, err := SliceCapacity(map[string]int{"H100-SXM5-80GB/3g.40gb": -1}); err == nil {
		t.Error("negative count: no error")
	}
}

// TestSliceKindsAreConstraintsOnly: a tenant holding every 7g.80gb of a large pool is not
// "rich" because of the kind count; its share is its SMs and memory.
func TestSliceKindsAreConstraintsOnly(t *testing.T) {
	big, _ := SliceVector("H100-SXM5-80GB/7g.80gb")
	small, _ := SliceVector("H100-SXM5-80GB/1g.10gb")
	capv, _, err := SliceCapacity(map[string]int{big.Kind: 1, small.Kind: 70})
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := Allocate(Config{Capacity: capv, Tenants: []Tenant{
		{Name: "big", Task: big.Vector, Demand: 1},
		{Name: "small", Task: small.Vector, Demand: 70},
	}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Pool hbm = 81920-ish (7g) + 70 · 9984. big holds one 7g: its share is its memory or SMs
	// over the pool's, well below 1 although it holds 100% of the 7g kind.
	s := stateOf(t, a, "big")
	if s.Tasks != 1 || s.DominantShare >= 0.5 {
		t.Errorf("big: %+v", s)
	}
}
