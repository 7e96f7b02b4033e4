package cost

import (
	"math"
	"math/rand/v2"
	"testing"
)

// 1,000 J over tokens 100, 300 and 600: 100 J, 300 J and 600 J.
func TestSplitByTokens(t *testing.T) {
	got, err := SplitByTokens(1000, map[string]int64{"a": 100, "b": 300, "c": 600})
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range map[string]float64{"a": 100, "b": 300, "c": 600} {
		if math.Abs(got[n]-w) > 1e-9 {
			t.Errorf("%s: %v, want %v", n, got[n], w)
		}
	}
	// No tokens: equal parts.
	eq, _ := SplitByTokens(9, map[string]int64{"a": 0, "b": 0, "c": 0})
	if math.Abs(eq["a"]-3) > 1e-12 || math.Abs(eq["c"]-3) > 1e-12 {
		t.Errorf("equal split %v", eq)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := SplitByTokens(bad, map[string]int64{"a": 1}); err == nil {
			t.Errorf("amount %v accepted", bad)
		}
	}
	if _, err := SplitByTokens(1, map[string]int64{"a": -1}); err == nil {
		t.Error("negative tokens accepted")
	}
	if _, err := SplitByTokens(1, nil); err == nil {
		t.Error("no adapters accepted")
	}
}

// The parts add up to the amount to 1e-9 of it, for 200 adapters with power-law token counts
// and amounts over twelve orders of magnitude; no part is negative.
func TestSplitByTokensConserves(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		tokens := map[string]int64{}
		for i := range 1 + r.IntN(200) {
			tokens[string(rune('a'+i%26))+string(rune('a'+i/26))] = int64(1e6 / float64(i+1) * r.Float64())
		}
		amount := math.Pow(10, r.Float64()*12-3)
		parts, err := SplitByTokens(amount, tokens)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, v := range parts {
			if v < 0 {
				t.Fatalf("negative part %v", v)
			}
			sum += v
		}
		if math.Abs(sum-amount) > 1e-9*amount {
			t.Fatalf("Σ %v against %v (%d adapters)", sum, amount, len(tokens))
		}
	}
}
