package plan

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

func synthPool(n int) *v1.Pool { return synthPoolOn(n, n) }

func synthPoolOn(n, gpus int) *v1.Pool {
	return Synthetic(SyntheticOptions{Tenants: n, GPUs: gpus}, rand.New(rand.NewPCG(uint64(n), 7)))
}

func benchPlan(b *testing.B, n, gpus int) { benchPlanOn(b, synthPoolOn(n, gpus)) }

// benchPlanDRA plans the same pool as benchPlan on the DRA device path, where MIG instances may
// be shared by MPS.
func benchPlanDRA(b *testing.B, n, gpus int) {
	pool := synthPoolOn(n, gpus)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	benchPlanOn(b, pool)
}

func benchPlanOn(b *testing.B, pool *v1.Pool) {
	b.ReportAllocs()
	var pl *v1.Plan
	for b.Loop() {
		var err error
		if pl, err = Build(context.Background(), pool, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	s := pl.Summary
	b.ReportMetric(float64(s.GPUsUsed), "gpus")
	b.ReportMetric(float64(s.LowerBound), "bound")
	if s.LowerBound > 0 {
		b.ReportMetric(float64(s.GPUsUsed)/float64(s.LowerBound), "gap")
	}
}

// BenchmarkPlanVaried1000 plans 1,000 tenants of the varied generator (lengths, SLOs,
// concurrency) on 1,000 GPUs.
func BenchmarkPlanVaried1000(b *testing.B) {
	pool := Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7)))
	var pl *v1.Plan
	for b.Loop() {
		var err error
		if pl, err = Build(context.Background(), pool, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pl.Summary.GPUsUsed), "gpus")
	b.ReportMetric(float64(pl.Summary.LowerBound), "bound")
}

// BenchmarkPlanVariedLaws1000 is BenchmarkPlanVaried1000's pool with a third of the tenants'
// lengths uniform and a third exponential (SyntheticOptions.Laws).
func BenchmarkPlanVariedLaws1000(b *testing.B) {
	benchPlanOn(b, Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true, Laws: true}, rand.New(rand.NewPCG(1000, 7))))
}

func BenchmarkPlan100(b *testing.B)   { benchPlan(b, 100, 100) }
func BenchmarkPlan1000(b *testing.B)  { benchPlan(b, 1000, 1000) }
func BenchmarkPlan10000(b *testing.B) { benchPlan(b, 10000, 10000) }

// The synthetic suite on the DRA path: the same pools with MIG+MPS among the candidates.
func BenchmarkPlanDRA100(b *testing.B)   { benchPlanDRA(b, 100, 100) }
func BenchmarkPlanDRA1000(b *testing.B)  { benchPlanDRA(b, 1000, 1000) }
func BenchmarkPlanDRA10000(b *testing.B) { benchPlanDRA(b, 10000, 10000) }

// BenchmarkPlan20000 is the large bar: 20,000 tenants on 10,000 GPUs.
func BenchmarkPlan20000(b *testing.B) { benchPlan(b, 20000, 10000) }

// TestSyntheticGap logs GPUs used against the lower bound per size and guards the gap measured
// (a regression guard, not the goal: the goal is 1.05×). The bound counts every tenant at the
// replicas that merely keep up with its load with idle neighbours (no SLO margin; the TTFT floor
// does not apply here, these tenants' slots are KV-bound), so it sits below what any plan
// meeting the SLOs needs; and shared MIG instances of one profile hold one trust group per node
// (the device plugin's pairing) on the device-plugin path, which fragments the soft tenants'
// ten groups; the compaction after packing fills part of what that leaves empty. On the DRA
// path, where MIG instances may be shared by MPS and each device is a claim with its own
// sharing (perClaim), the packer covers every way of a profile at once: measured 22 / 20 at 100
// tenants and 220 / 210 at 1,000 (23 and 223 with the node rules, 24 and 230 before the
// compaction); on the default (device-plugin) path, without MIG+MPS candidates (the bound reads
// the same candidates), 23 / 21 and 228 / 217 (231 before the choice emptied its groups' last
// units, emptyLastUnits). Before the bound's counts took idle neighbours (ADR 0032) the bounds
// at 1,000 tenants were 221 and 213, and 1,000 tenants met 1.05 on both paths against that
// (invalid) bound; now both do again, the DRA path at 1.048 and the device-plugin path at
// 228 / 218 = 1.046, its bound lifted from 217 by the sharing-group bound, which now runs on
// pools of up to 2,000 tenants (217.27). Measured now: 23 / 21 and 227 / 218 on the
// device-plugin path, 21 / 20 and 219 / 210 on the DRA path. At 100 tenants the device-plugin
// plan is as small as its slice kinds allow at the sized replica counts (the per-group figure
// there is 22.333, TestSynthetic100AtGroupFigure), so its gap is the SLO sizing, not the packing.
// Every tenant is served, every plan passes checkPlan, and GPUs used are guarded separately
// from the gap (most), at the counts measured.
func TestSyntheticGap(t *testing.T) {
	sizes := []int{100, 1000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	// 1,000 tenants: 1.05 until the bound counted MPS shares finer than 1/8 (ADR 0053): the
	// qwen2.5-1.5b tenants' replicas fit 1/14 of an H100, and the bound fell from 218 to 212
	// with the plan's 227 GPUs as they were (1.071); the planner's own shares finer than 1/8
	// (ADR 0056) took the plan to 224 (1.057), and the sharing-group bound's rounding to the
	// prices' grid and its second, deeper search of the groups it gave up on (ADR 0058) lifted
	// the bound to 214 (1.047; DRA 219 / 210 = 1.043). 100 tenants: 1.095 on the device-plugin
	// path, the SLO sizing (TestSynthetic100AtGroupFigure): no plan at the sized counts takes
	// 22 GPUs, their exact least memory being 22.5 (TestSynthetic100MemoryExact, ADR 0087).
	limit := map[int]float64{100: 1.10, 1000: 1.05}
	// GPUs used, whatever the bound: the plans as measured, never more.
	type sized struct {
		n   int
		api v1.KubernetesDeviceAPI
	}
	most := map[sized]int{{100, ""}: 23, {1000, ""}: 224, {100, v1.DeviceAPIDRA}: 21, {1000, v1.DeviceAPIDRA}: 219}
	for _, n := range sizes {
		for _, api := range []v1.KubernetesDeviceAPI{"", v1.DeviceAPIDRA} {
			pool := synthPool(n)
			pool.Policy.KubernetesDeviceAPI = api
			pl := build(t, pool)
			s := pl.Summary
			if err := checkPlan(pool, pl); err != nil {
				t.Errorf("%d tenants (%q): %v", n, api, err)
			}
			// The DRA path sets sharing per claim and device: a node may use a profile two ways there.
			if c := sharingConflicts(pl); c > 0 && api != v1.DeviceAPIDRA {
				t.Errorf("%d tenants (%q): %d node/profile pairs shared two ways", n, api, c)
			}
			for _, tn := range pl.Tenants {
				if tn.Infeasible {
					t.Errorf("%d tenants (%q): tenant %s not served", n, api, tn.Name)
				}
			}
			gap := float64(s.GPUsUsed) / float64(max(s.LowerBound, 1))
			t.Logf("%d tenants, device API %q: %d GPUs used, lower bound %d, gap %.3f; node/profile pairs shared two ways %d; baselines %v",
				n, api, s.GPUsUsed, s.LowerBound, gap, sharingConflicts(pl), s.Baselines)
			if gap > limit[n]+1e-9 {
				t.Errorf("%d tenants (%q): gap %.3f above %.3f", n, api, gap, limit[n])
			}
			if m := most[sized{n, api}]; s.GPUsUsed > m {
				t.Errorf("%d tenants (%q): %d GPUs used, at most %d before", n, api, s.GPUsUsed, m)
			}
		}
	}
}

// TestSyntheticVariedGap plans the varied generator's 1,000 tenants (lengths, SLOs and a third
// of the tenants with concurrency 1–64) and guards the gaps measured: on the default
// (device-plugin) path 311 / 254 = 1.224 (310 before ADR 0034's slot wait beside shared neighbours, 314 before emptyLastUnits), on the DRA path 301 / 245 = 1.229 (300 before ADR 0034; 303 GPUs with the
// device plugin's node rules, which the DRA path no longer keeps; 314 / 261 and 303 / 252 before
// the bound's counts took idle neighbours, ADR 0032; 302 GPUs before the slot wait's spread
// replaced the ceiling on busy slots, ADR 0031; 302 / 235 = 1.29 before the bound's TTFT floor,
// 313 GPUs before the compaction). Tenants whose replicas queue for their few slots
// (max-num-seqs, or what the KV cache runs) are planned with a margin on their slot wait (larger
// above 75 % busy) to meet their TTFT; the bound counts them at the larger of 100 % busy and the
// TTFT floor (lbfloor.go), which holds for any schedule. (When the memory fit still asked for
// concurrency × context of KV cache, 18 tenants ran tensor-parallel on two GPUs each and the
// plan took 397 GPUs against a bound of 314.) Every plan is checked (checkPlan) on the way.
func TestSyntheticVariedGap(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 tenants")
	}
	pool := Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7)))
	conc := 0
	for _, tn := range pool.Tenants {
		if tn.Concurrency > 0 {
			conc++
		}
	}
	if conc < 250 || conc > 420 {
		t.Errorf("%d of 1,000 tenants set concurrency, want about a third", conc)
	}
	// The device-plugin path's 1.24 became 1.27 when the bound counted MPS shares finer than
	// 1/8 (ADR 0053): 310 GPUs against a bound of 246 where it was 256 (1.211); 1.24 again when
	// the planner tried them itself (ADR 0056): 306 GPUs against 247.
	limit := map[v1.KubernetesDeviceAPI]float64{"": 1.24, v1.DeviceAPIDRA: 1.24}
	for _, api := range []v1.KubernetesDeviceAPI{"", v1.DeviceAPIDRA} {
		pool.Policy.KubernetesDeviceAPI = api
		s := build(t, pool).Summary
		gap := float64(s.GPUsUsed) / float64(max(s.LowerBound, 1))
		t.Logf("varied 1,000 tenants, device API %q: %d GPUs used, lower bound %d, gap %.3f; baselines %v", api, s.GPUsUsed, s.LowerBound, gap, s.Baselines)
		if gap > limit[api] {
			t.Errorf("device API %q: gap %.3f above %.3f", api, gap, limit[api])
		}
	}
}

// TestGapDecomposition says which side of the gap to the lower bound is loose. It computes the
// same bound machinery (volume, per-group and LP bounds) once more with every candidate counted at
// the replicas the queueing model sizes for the SLO instead of the bound's counts (those that
// merely keep up with the load, or the TTFT floor). That figure is NOT a lower bound (the SLO count is an approximation the simulator may
// beat by up to 25 %, see the agreement bar); it splits used / bound into
// (SLO-count volume / bound), the SLO margin, times (used / SLO-count volume), the packing and
// pairing loss.
func TestGapDecomposition(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 tenants")
	}
	pools := []struct {
		name string
		pool *v1.Pool
	}{
		{"synthetic 100", synthPool(100)},
		{"synthetic 1,000", synthPool(1000)},
		{"varied 1,000", Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7)))},
		{"synthetic 100, DRA", synthPoolOn(100, 100)},
		{"synthetic 1,000, DRA", synthPoolOn(1000, 1000)},
	}
	pools[3].pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	pools[4].pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	for _, tc := range pools {
		p, pl := planWith(t, tc.pool, func(*planner) {})
		slo := max(p.volumeBound(), p.groupBound())
		if v, ok := p.lpBound(); ok {
			slo = max(slo, v)
		}
		// The per-sharing-group bound on any pool size (the planner runs it up to 400 tenants),
		// at the volume bound's best prices and at memory prices (λ = 1), where MIG instances of
		// an H100 pool that is short of memory, not compute, are priced as they pack.
		grp := p.groupBoundAt(append(p.bestLambdas(groupBoundLambdas), 1))
		slo = max(slo, int(math.Ceil(grp-boundSlack)))
		used, lb := pl.Summary.GPUsUsed, pl.Summary.LowerBound
		if float64(used) < grp-boundSlack {
			t.Errorf("%s: %d GPUs used, below the per-group figure %.3f at the plan's own counts", tc.name, used, grp)
		}
		if slo < lb {
			t.Errorf("%s: SLO-count volume %d below the bound %d", tc.name, slo, lb)
		}
		infeasible, tp := 0, 0
		for _, tn := range p.tenants {
			if tn.choice == nil {
				infeasible++
			} else if tn.choice.tp > 1 {
				tp++
			}
		}
		t.Logf("%s: used %d, bound %d (gap %.3f) = SLO margin %d/%d (%.3f) × packing %d/%d (%.3f); per-group figure %.3f; %d tenants infeasible, %d tensor-parallel",
			tc.name, used, lb, float64(used)/float64(lb), slo, lb, float64(slo)/float64(lb), used, slo, float64(used)/float64(slo), grp, infeasible, tp)
	}
}

// lengthLawPool is one tenant of long prompts (8,000 tokens) whose request lengths follow law,
// the case where the TPOT tail over the output law (tpotSpread, compoundTail) dominates planning.
func lengthLawPool(b *testing.B, law string) *v1.Pool {
	p, err := v1.DecodePool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: lengths}
fleet:
  nodes:
  - name: n1
    gpus: [{board: H100, count: 8}]
  - name: n2
    gpus: [{board: A100-SXM4-80GB, count: 8}]
tenants:
- name: long-prompt
  model: {name: llama-3.2-1b}
  traffic: {rps: 0.3, inputTokens: 8000, outputTokens: 20, lengths: ` + law + `}
  slo: {ttftP99: 5000ms, tpotP99: 150ms}
`))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkPlanLengthsUniform and BenchmarkPlanLengthsExponential plan one tenant whose lengths
// vary (see lengthLawPool); BenchmarkPlanLengthsFixed is the same tenant at fixed lengths.
func BenchmarkPlanLengthsUniform(b *testing.B)     { benchPlanOn(b, lengthLawPool(b, "uniform")) }
func BenchmarkPlanLengthsExponential(b *testing.B) { benchPlanOn(b, lengthLawPool(b, "exponential")) }
func BenchmarkPlanLengthsFixed(b *testing.B)       { benchPlanOn(b, lengthLawPool(b, "fixed")) }
