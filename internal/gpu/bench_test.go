package gpu

import "testing"

func BenchmarkPlaceAllBalanced(b *testing.B) {
	h := mustBoard(b, "H100-SXM5-80GB")
	counts := map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
	for b.Loop() {
		if _, err := h.Place(counts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlaceManySmall: three 1g leave C(7,3) = 35 candidate layouts to score.
func BenchmarkPlaceManySmall(b *testing.B) {
	h := mustBoard(b, "H100-SXM5-80GB")
	counts := map[string]int{"1g.10gb": 3, "1g.20gb": 1}
	for b.Loop() {
		if _, err := h.Place(counts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlaceInfeasible(b *testing.B) {
	h := mustBoard(b, "H100-SXM5-80GB")
	counts := map[string]int{"2g.20gb": 3, "1g.10gb": 2}
	for b.Loop() {
		if _, err := h.Place(counts); err == nil {
			b.Fatal("placed an infeasible request")
		}
	}
}

func BenchmarkEnumerateBasic(b *testing.B) {
	h := mustBoard(b, "H100-SXM5-80GB")
	profiles := basicShapes(h)
	for b.Loop() {
		if _, err := h.Enumerate(profiles); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnumerateAll(b *testing.B) {
	h := mustBoard(b, "H100-SXM5-80GB")
	for b.Loop() {
		if _, err := h.Enumerate(nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnumerateAllRTXPro6000(b *testing.B) {
	r := mustBoard(b, "RTX-PRO-6000-Blackwell-96GB")
	for b.Loop() {
		if _, err := r.Enumerate(nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	h := mustBoard(b, "H100-SXM5-80GB")
	l := mustLayout(b, "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4")
	for b.Loop() {
		if err := h.Validate(l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookupNVML(b *testing.B) {
	for b.Loop() {
		if _, err := Lookup("NVIDIA H100 80GB HBM3"); err != nil {
			b.Fatal(err)
		}
	}
}
