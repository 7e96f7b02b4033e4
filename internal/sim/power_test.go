package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// sharedH100 is one H100 SXM5 (700 W) with n tenants of model at rps each (512 + 256 tokens).
func sharedH100(n int, model string, rps float64) *v1.Pool {
	p := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: "power"},
		Fleet: v1.Fleet{Nodes: []v1.Node{{Name: "n", GPUs: []v1.GPUGroup{{Board: "H100-SXM5-80GB", Count: 1}}}}}}
	for i := range n {
		p.Tenants = append(p.Tenants, v1.Tenant{Name: fmt.Sprintf("t%d", i), Path: "org/team", Isolation: v1.IsolationShared,
			Model: v1.Model{Name: model}, MaxContext: 4096,
			Traffic: v1.Traffic{RPS: rps, InputTokens: 512, OutputTokens: 256}})
	}
	v1.Default(p)
	return p
}

// runPower runs pool under a uniform plan of mode for d; with uncapped the GPUs' power cap is
// lifted (the accounting before it existed: every engine's steps summed).
func runPower(t *testing.T, pool *v1.Pool, mode v1.Mode, d time.Duration, uncapped bool) Report {
	t.Helper()
	plan, err := UniformPlan(pool, mode)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Input{Pool: pool, Plan: plan}, Config{Duration: d, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if uncapped {
		for _, g := range s.gpus {
			g.dynCap = math.Inf(1)
		}
	}
	res, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res.Report
}

// checkEnergyBooks: the GPU's energy is its idle power over the run plus its replicas' dynamic
// energy, and the tenants' energies add up to the GPU's less the idle power of SMs no tenant
// holds (MIG's unused slices; idleShare < 0 checks only that they lie between the dynamic and
// the GPU's energy).
func checkEnergyBooks(t *testing.T, r Report, idleShare float64) {
	t.Helper()
	g := r.GPUs[0]
	idle := 0.15 * 700 * r.DurationSeconds
	dyn, tenants := 0.0, 0.0
	for _, rp := range r.Replicas {
		dyn += rp.DynamicJoules
	}
	for _, tr := range r.Tenants {
		tenants += tr.EnergyJoules
	}
	if math.Abs(g.EnergyJoules-(idle+dyn)) > 1e-6*g.EnergyJoules+1 {
		t.Errorf("GPU energy %.1f J, idle %.1f J + replicas' dynamic %.1f J", g.EnergyJoules, idle, dyn)
	}
	if idleShare < 0 { // MIG: the tenants are charged their instances' SMs' idle power
		if tenants < dyn || tenants > g.EnergyJoules+1 {
			t.Errorf("tenants' energy %.1f J outside [dynamic %.1f J, GPU %.1f J]", tenants, dyn, g.EnergyJoules)
		}
		return
	}
	if want := idle*idleShare + dyn; math.Abs(tenants-want) > 1e-6*want+1 {
		t.Errorf("tenants' energy %.1f J, want %.1f J (idle share %.3f + dynamic)", tenants, want, idleShare)
	}
}

// TestMPSPowerAtMostTDP: four MPS clients of Qwen2.5-7B on one 700 W H100, driven past
// saturation, draw at most the board's TDP on average, with idle power counted once. Summing
// every client's step power, each at the whole GPU's memory power, as the simulator did before,
// gave 1,279 W.
func TestMPSPowerAtMostTDP(t *testing.T) {
	pool := sharedH100(4, "qwen2.5-7b", 20)
	r := runPower(t, pool, v1.ModeMPS, time.Minute, false)
	g := r.GPUs[0]
	t.Logf("MPS × 4 at saturation: %.1f W, %.4f J/token, utilisation %.3f, served %.3f of the offered tokens", g.AvgPowerWatts, g.JoulesPerToken, g.Utilization, r.Tenants[0].NormalisedThroughput)
	if nt := r.Tenants[0].NormalisedThroughput; nt > 0.9 {
		t.Errorf("not saturated: %.3f of the offered tokens served", nt)
	}
	if g.AvgPowerWatts > 700+1e-6 {
		t.Errorf("4 MPS clients average %.1f W on a 700 W board", g.AvgPowerWatts)
	}
	if g.AvgPowerWatts < 0.5*700 {
		t.Errorf("4 saturated MPS clients average only %.1f W", g.AvgPowerWatts)
	}
	checkEnergyBooks(t, r, 1)
	u := runPower(t, pool, v1.ModeMPS, time.Minute, true)
	t.Logf("without the per-GPU cap: %.1f W", u.GPUs[0].AvgPowerWatts)
}

// TestTimeSlicePower: four time-sliced contexts at saturation take turns on the GPU; a step draws
// nothing above idle while it waits for the others, so their steps' power adds up to what the
// running context draws: within the TDP without the per-GPU cap cutting anything (no note).
// They draw 580 W where one engine alone at the same load draws 531.6 W: with a quarter of the
// KV cache each, they preempt and recompute prompts, compute-bound work.
func TestTimeSlicePower(t *testing.T) {
	r := runPower(t, sharedH100(4, "qwen2.5-7b", 20), v1.ModeTimeSlice, time.Minute, false)
	g := r.GPUs[0]
	pre := int64(0)
	for _, rp := range r.Replicas {
		pre += rp.Preemptions
	}
	t.Logf("time-slicing × 4 at saturation: %.1f W (served %.3f of the offered tokens, %d preemptions)", g.AvgPowerWatts, r.Tenants[0].NormalisedThroughput, pre)
	if g.AvgPowerWatts > 700+1e-6 {
		t.Errorf("4 time-sliced contexts average %.1f W on a 700 W board", g.AvgPowerWatts)
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "capped at TDP") {
			t.Errorf("time-sliced steps were capped: %s", n)
		}
	}
	checkEnergyBooks(t, r, 1)
}

// TestExclusivePowerUnchanged: an engine alone on its GPU is never capped by the per-GPU
// accounting (perf caps each step at its slice's share): its report is the same, byte for byte,
// with the cap lifted.
func TestExclusivePowerUnchanged(t *testing.T) {
	pool := sharedH100(1, "qwen2.5-7b", 20)
	a := runPower(t, pool, v1.ModeExclusive, time.Minute, false)
	b := runPower(t, pool, v1.ModeExclusive, time.Minute, true)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("exclusive report changed by the per-GPU power cap:\n%+v\n%+v", a.GPUs, b.GPUs)
	}
	t.Logf("exclusive at saturation: %.1f W", a.GPUs[0].AvgPowerWatts)
	if a.GPUs[0].AvgPowerWatts > 700+1e-6 {
		t.Errorf("one engine averages %.1f W on a 700 W board", a.GPUs[0].AvgPowerWatts)
	}
	checkEnergyBooks(t, a, 1)
}

// TestMIGPowerAtMostTDP: seven 1g.10gb instances, each saturated, draw at most the board's TDP
// together; the instances' idle shares are their SMs'.
func TestMIGPowerAtMostTDP(t *testing.T) {
	pool := sharedH100(7, "qwen2.5-1.5b", 40)
	r := runPower(t, pool, v1.ModeMIG, time.Minute, false)
	g := r.GPUs[0]
	t.Logf("MIG 7 × %s at saturation: %.1f W, utilisation %.3f, served %.3f of the offered tokens", r.Replicas[0].Slice, g.AvgPowerWatts, g.Utilization, r.Tenants[0].NormalisedThroughput)
	if nt := r.Tenants[0].NormalisedThroughput; nt > 0.9 {
		t.Errorf("not saturated: %.3f of the offered tokens served", nt)
	}
	if len(r.Replicas) != 7 {
		t.Fatalf("%d replicas, want 7", len(r.Replicas))
	}
	if g.AvgPowerWatts > 700+1e-6 {
		t.Errorf("7 MIG instances average %.1f W on a 700 W board", g.AvgPowerWatts)
	}
	checkEnergyBooks(t, r, -1)
}

// TestPowerCapSharesExcess: while the steps in flight on one GPU ask for more than TDP − idle
// (595 W on an H100), the excess is taken off each in proportion to its power, from the
// replica, its tenant and the GPU alike; one step alone is never capped here.
func TestPowerCapSharesExcess(t *testing.T) {
	pool := sharedH100(4, "qwen2.5-7b", 1)
	plan, err := UniformPlan(pool, v1.ModeMPS)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Input{Pool: pool, Plan: plan}, Config{Duration: time.Minute, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := s.gpus[0]
	if math.Abs(g.dynCap-595) > 1e-9 {
		t.Fatalf("dynamic cap %.3f W, want 595", g.dynCap)
	}
	watts := []float64{100, 200, 300, 400} // 1,000 W asked: 405 W over the cap
	for i, ri := range []int32{0, 1, 2, 3} {
		r := s.replicas[ri]
		r.inStep, r.stepW = true, watts[i]
		g.stepping++
	}
	s.accountPower(0, 2e9) // two seconds
	for i, ri := range []int32{0, 1, 2, 3} {
		r := s.replicas[ri]
		want := -2 * 405 * watts[i] / 1000
		near := func(what string, got float64) {
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("replica %d %s: %.6f J taken off, want %.6f", i, what, got, want)
			}
		}
		near("dynJ", r.dynJ)
		near("tenant joules", s.tenants[r.tenant].stats.joules)
	}
	if math.Abs(g.dynJ+810) > 1e-9 || math.Abs(g.cappedJ-810) > 1e-9 {
		t.Errorf("GPU: %.6f J dynamic, %.6f J capped; want −810 and 810", g.dynJ, g.cappedJ)
	}
	// One step in flight, however much it asks, is perf's to cap.
	for _, ri := range []int32{1, 2, 3} {
		s.replicas[ri].inStep = false
	}
	g.stepping = 1
	s.replicas[0].stepW = 5000
	s.accountPower(0, 3e9)
	if math.Abs(g.cappedJ-810) > 1e-9 {
		t.Errorf("one step in flight was capped: %.6f J capped", g.cappedJ)
	}
}
