package cost

import (
	"math"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
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

// An engine's GPU billed to its adapters by AddLoRAEngines gives, under every idle policy, the
// same hardware, energy and carbon as the same GPU billed to one tenant holding it whole (to
// 1e-9), each adapter the part of it its tokens are of the engine's.
func TestAddLoRAEnginesSplitsByTokens(t *testing.T) {
	pl := &v1.Plan{GPUs: []v1.PlanGPU{{Node: "n", Index: 0, Board: "H100-SXM5-80GB", Role: v1.RolePool, Mode: v1.ModeExclusive, LoRAEngine: "e"}},
		LoRAEngines: []v1.PlanLoRAEngine{{Name: "e", GPU: v1.GPURef{Node: "n"}, Adapters: []v1.PlanLoRAAdapter{{Tenant: "a"}, {Tenant: "b"}, {Tenant: "c"}}}}}
	tokens := map[string]int64{"a": 1_000_003, "b": 250_000, "c": 7}
	use := map[string]EngineUse{"e": {DynamicJ: 4.2e5, Tokens: tokens, OutputTokens: map[string]int64{"a": 200_000, "b": 50_000, "c": 1}}}
	energy, pue, carbon := 0.08, 1.5, 390.0
	for _, policy := range []v1.IdlePolicy{v1.IdleNone, v1.IdleReservation, v1.IdleUse} {
		prices := Prices{Currency: "USD", Hourly: map[string]float64{"H100-SXM5-80GB": 0.685}, EnergyPerKWh: &energy, PUE: &pue,
			CarbonLocation: &carbon, IdlePolicy: policy}
		devs, err := FromRun(pl, RunOptions{Basis: Simulated, Seconds: 3600, IdlePowerFraction: 0.15})
		if err != nil {
			t.Fatal(err)
		}
		if err := AddLoRAEngines(devs, pl, use, 0.15); err != nil {
			t.Fatal(err)
		}
		split, err := Compute(devs, prices)
		if err != nil {
			t.Fatal(err)
		}
		// The reference: one tenant holding the whole GPU with the engine's activity.
		ref := []Device{{GPU: "n/0", Board: "H100-SXM5-80GB", Basis: Simulated, Seconds: 3600, IdleWatts: 0.15 * 700,
			EnergyJ: 0.15*700*3600 + 4.2e5, Slices: []Slice{{Tenant: "engine", Reserved: 1, Active: 4.2e5 / (700 * 0.85), Tokens: 1_250_010, OutputTokens: 250_001}}}}
		whole, err := Compute(ref, prices)
		if err != nil {
			t.Fatal(err)
		}
		w := whole.Tenants[0]
		var sum struct{ charge, show, kwh, co2 float64 }
		for _, l := range split.Tenants {
			sum.charge += *l.ChargebackPerHour
			sum.show += *l.ShowbackPerHour
			sum.kwh += l.ITEnergyKWh
			sum.co2 += *l.GCO2eLocation
			share := float64(tokens[l.Name]) / 1_250_010
			for _, c := range [][3]any{{"chargeback", *l.ChargebackPerHour, *w.ChargebackPerHour}, {"energy", l.ITEnergyKWh, w.ITEnergyKWh},
				{"carbon", *l.GCO2eLocation, *w.GCO2eLocation}} {
				if got, want := c[1].(float64), share*c[2].(float64); math.Abs(got-want) > 1e-9*max(1, want) {
					t.Errorf("%s: %s %s = %v, want %v (its tokens' share %v)", policy, l.Name, c[0], got, want, share)
				}
			}
		}
		for _, c := range [][3]any{{"chargeback", sum.charge, *w.ChargebackPerHour}, {"showback", sum.show, *w.ShowbackPerHour},
			{"energy", sum.kwh, w.ITEnergyKWh}, {"carbon", sum.co2, *w.GCO2eLocation}} {
			if got, want := c[1].(float64), c[2].(float64); math.Abs(got-want) > 1e-9*max(1, want) {
				t.Errorf("%s: adapters' %s add to %v, the whole engine's is %v", policy, c[0], got, want)
			}
		}
	}
	if err := AddLoRAEngines(nil, pl, use, 0.15); err == nil {
		t.Error("an engine on a GPU without a device: no error")
	}
}

// Several adapters with negative counts: the error names the first by name on every call.
func TestSplitByTokensNamesFirstBadAdapter(t *testing.T) {
	tokens := map[string]int64{"a": 5, "z": -1, "m": -2, "q": -3, "b": -4, "k": 7}
	for i := 0; i < 100; i++ {
		_, err := SplitByTokens(10, tokens)
		if err == nil || err.Error() != "split by tokens: adapter b: -4 tokens" {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}
