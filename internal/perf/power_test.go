package perf

import (
	"math"
	"testing"

	"gpupool.dev/gpupool/internal/llm"
)

// powerAt is a replica's mean power over one step of b: its idle share plus the step's dynamic
// energy over the step's time.
func powerAt(e *Engine, b Batch) float64 {
	return e.IdleWatts() + e.StepEnergy(b, Load{})/e.StepTime(b, Load{}).Seconds()
}

// A whole H100 (700 W) running a long prefill is compute-bound at the power-limited clock and
// draws nearly its TDP (host time and layer latency draw less); a batch-1 decode is
// memory-bound and draws idle + 0.7 of the dynamic range over the share of the step streaming,
// ≈ 400-450 W (ML.ENERGY measures Llama-3.1-8B at batch 8 on an H100 at 486 W: mlenergy_test.go).
func TestPowerByWhatBoundsTheStep(t *testing.T) {
	h := h100(t)
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: h})
	pre := powerAt(e, Batch{PrefillTokens: 8192, PrefillSeqs: 1})
	dec := powerAt(e, Batch{DecodeSeqs: 1, KVTokens: 512})
	t.Logf("H100 prefill 8192: %.0f W, decode b1: %.0f W (TDP %.0f W)", pre, dec, h.TDPWatts)
	if pre < 0.95*h.TDPWatts || pre > h.TDPWatts*1.0001 {
		t.Errorf("prefill draws %.0f W, want 95-100 %% of the %.0f W TDP", pre, h.TDPWatts)
	}
	if dec < 0.15*h.TDPWatts || dec > 0.7*h.TDPWatts {
		t.Errorf("batch-1 decode draws %.0f W, want between idle (105 W) and 70 %% of TDP", dec)
	}
	// A MIG 3g.40gb instance is charged its share of the idle power: 60 of 132 SMs.
	mig := mustEngine(t, mustModel(t, llama7B), Slice{Board: h, Profile: profile(t, h, "3g.40gb")})
	near(t, "3g.40gb idle W", mig.IdleWatts(), 0.15*700*60/132, 1e-9)
}

// The efficiency class locks the clock at 0.7 of boost. Compute-bound work slows by the clock
// ratio, 0.916 / 0.7 = 1.31× (a whole H100 under tensor load runs at (1/1.3)^(1/3) = 0.916 of
// boost), and its dynamic energy per unit of work falls with the clock squared, (0.7/0.916)² =
// 0.58×; memory-bound decode barely slows and uses less energy per token.
func TestEnergyClass(t *testing.T) {
	h := h100(t)
	m := mustModel(t, llama7B)
	cp, err := m.Options().ClockCap(EnergyEfficiency)
	if err != nil || cp != 0.7 {
		t.Fatalf("efficiency clock cap %v, %v", cp, err)
	}
	if _, err := m.Options().ClockCap("turbo"); err == nil {
		t.Error("unknown energy class accepted")
	}
	fast := mustEngine(t, m, Slice{Board: h})
	slow := mustEngine(t, m, Slice{Board: h, ClockCap: cp})
	pre := Batch{PrefillTokens: 8192, PrefillSeqs: 1}
	bf, bs := fast.Breakdown(pre, Load{}), slow.Breakdown(pre, Load{})
	c0 := math.Cbrt(1 / 1.3)
	near(t, "compute slowdown", bs.Compute.Seconds()/bf.Compute.Seconds(), c0/0.7, 0.001)
	if bs.Clock != 0.7 {
		t.Errorf("clock %v, want 0.7", bs.Clock)
	}
	ef, es := fast.StepEnergy(pre, Load{}), slow.StepEnergy(pre, Load{})
	if r := es / ef; math.Abs(r-math.Pow(0.7/c0, 2)) > 0.03 {
		t.Errorf("prefill dynamic energy ratio %.3f, want about %.3f (clock squared)", r, math.Pow(0.7/c0, 2))
	}
	w := Workload{InputTokens: 512, OutputTokens: 256, Concurrency: 32}
	rf, err := fast.Estimate(w, Load{})
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := slow.Estimate(w, Load{})
	t.Logf("32 in flight: %.3f J/token at %v TPOT, efficiency class %.3f J/token at %v", rf.JoulesPerToken, rf.TPOT, rs.JoulesPerToken, rs.TPOT)
	if rs.JoulesPerToken >= rf.JoulesPerToken || rs.TPOT.Seconds() > 1.15*rf.TPOT.Seconds() {
		t.Errorf("efficiency class: %.3f J/token, TPOT %v; balanced %.3f, %v: want fewer joules for under 15 %% slower tokens",
			rs.JoulesPerToken, rs.TPOT, rf.JoulesPerToken, rf.TPOT)
	}
}

// Batching amortises the weights: joules per output token fall as more requests run at once,
// until the steps are compute-bound (then each token's work costs the same energy).
func TestJoulesPerTokenFallWithBatch(t *testing.T) {
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, m, Slice{Board: h100(t)})
	prev := math.Inf(1)
	for _, c := range []int{1, 8, 64} {
		r, err := e.Estimate(Workload{InputTokens: 512, OutputTokens: 256, Concurrency: c}, Load{})
		if err != nil {
			t.Fatal(err)
		}
		if !(r.JoulesPerToken > 0 && r.JoulesPerToken < prev) || r.PowerWatts > 700 {
			t.Errorf("concurrency %d: %.3f J/token at %.0f W (previous %.3f)", c, r.JoulesPerToken, r.PowerWatts, prev)
		}
		prev = r.JoulesPerToken
	}
}

// MPS neighbours stretch a client's step, not its work: the step's dynamic energy is what its
// FLOPs and bytes cost on its slice (at the clock the shared GPU runs at), so k symmetric clients
// busy together draw no more than the board's dynamic range (TDP − idle) in all. Memory power
// follows the bandwidth the client's SMs pull (g(s/b)): a 25 % client alone streams at about half
// the whole GPU's rate and draws about half its memory power. Before, a client's memory power was
// that of the whole bandwidth over its stretched step, and four 25 % clients decoding together
// drew 1.3× the dynamic range.
func TestMPSNeighboursStretchStepsNotEnergy(t *testing.T) {
	h := h100(t)
	m := mustModel(t, llama7B)
	dyn := 0.85 * h.TDPWatts
	b := Batch{DecodeSeqs: 32, KVTokens: 32 * 640}
	pre := Batch{PrefillTokens: 4096, PrefillSeqs: 2}
	for _, k := range []int{2, 4} {
		pct := 100.0 / float64(k)
		e := mustEngine(t, m, Slice{Board: h, Mode: MPS, SMPercent: pct, Replicas: k})
		busy := Load{Active: k - 1, Duty: 1, SMPercent: pct}
		for _, c := range []struct {
			name string
			b    Batch
		}{{"decode", b}, {"prefill", pre}} {
			ta, ja := e.StepTimeEnergy(c.b, Load{})
			tb, jb := e.StepTimeEnergy(c.b, busy)
			sum := float64(k) * jb / tb.Seconds()
			t.Logf("%d × %.0f %% %s: alone %v %.2f J, with %d busy neighbours %v %.2f J; %d together %.0f W above idle (range %.0f W)",
				k, pct, c.name, ta, ja, k-1, tb, jb, k, sum, dyn)
			if tb <= ta {
				t.Errorf("%d × %.0f %% %s: busy neighbours do not slow the step (%v vs %v alone)", k, pct, c.name, tb, ta)
			}
			if jb > ja*1.0001 {
				t.Errorf("%d × %.0f %% %s: busy neighbours raise the step's energy from %.3f to %.3f J", k, pct, c.name, ja, jb)
			}
			if sum > dyn*1.0001 {
				t.Errorf("%d × %.0f %% %s: the clients together draw %.0f W above idle, more than the %.0f W range", k, pct, c.name, sum, dyn)
			}
		}
	}
	whole := mustEngine(t, m, Slice{Board: h})
	quarter := mustEngine(t, m, Slice{Board: h, Mode: MPS, SMPercent: 25, Replicas: 4})
	one := Batch{DecodeSeqs: 1, KVTokens: 512}
	pw, pq := whole.StepEnergy(one, Load{})/whole.StepTime(one, Load{}).Seconds(), quarter.StepEnergy(one, Load{})/quarter.StepTime(one, Load{}).Seconds()
	t.Logf("batch-1 decode above idle: whole GPU %.0f W, a 25 %% MPS client alone %.0f W", pw, pq)
	if pq > 0.75*pw {
		t.Errorf("a 25 %% MPS client alone draws %.0f W decoding, the whole GPU %.0f W: its memory power ignores the bandwidth it pulls", pq, pw)
	}
}
