package plan

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// The TTFT floor (lbfloor.go) against the simulator: single tenants whose short TTFT targets
// leave a request holding its place past the target (concurrency 1–4, a 300–600 ms TTFT with
// 256 output tokens), exclusive H100s. The floor must never exceed k, the fewest replicas the
// simulator is satisfied with (≥ 99 % over 2,000 requests), and must be above the saturation
// count somewhere, or the test checks nothing.
func TestTTFTFloorAgainstSimulator(t *testing.T) {
	concs := []int{1, 2, 4}
	rates := []float64{1, 3}
	ttfts := []string{"300ms", "600ms"}
	requests := 2000
	if testing.Short() || raceEnabled {
		concs, ttfts, requests = []int{1, 4}, ttfts[:1], 1000
	}
	above := 0
	for _, c := range concs {
		for _, r := range rates {
			for _, ttft := range ttfts {
				pool := singleTenantPool(t, "qwen2.5-7b", c, r, 512, 256, ttft, "100ms", 128)
				p, pl := planWith(t, pool, func(*planner) {})
				tn := p.tenants[0]
				if tn.choice == nil {
					t.Errorf("concurrency %d, %g req/s, TTFT %s: infeasible", c, r, ttft)
					continue
				}
				ch := tn.choice
				floor := ch.ev.q.ttftFloor(floorRate(tn.t.Traffic), tn.slo)
				if floor > ch.sz.lowest {
					above++
				}
				n := len(pl.Tenants[0].Replicas)
				k := fewestSimulated(t, pool, n, requests)
				t.Logf("concurrency %d, %g req/s, TTFT %s: saturation %d, TTFT floor %d, simulator's fewest %d, planned %d",
					c, r, ttft, ch.sz.lowest, floor, k, n)
				if floor > k {
					t.Errorf("concurrency %d, %g req/s, TTFT %s: TTFT floor %d above the simulator's fewest %d", c, r, ttft, floor, k)
				}
				if ch.lbReplicas != max(floor, ch.sz.boundLowest) {
					t.Errorf("concurrency %d, %g req/s, TTFT %s: the bound counts %d replicas, want max(floor %d, saturation %d)",
						c, r, ttft, ch.lbReplicas, floor, ch.sz.boundLowest)
				}
			}
		}
	}
	if above == 0 {
		t.Error("the TTFT floor is above the saturation count nowhere: the test checks nothing")
	}
}

// The properties of perf's step time the TTFT floor rests on, over every engine the planner
// builds for the synthetic pool (exclusive, MIG, MPS, time-sliced and tensor-parallel slices):
// non-decreasing in each field of the batch and in the neighbours' load, so that pf and dec
// (whole prompt alone, one decode alone, idle neighbours) are the least a request's prefill and
// decode steps can take; and subadditive over the chunks of one prompt, so that a prompt cut into
// chunks takes no less than pf in all.
func TestStepTimeFloorProperties(t *testing.T) {
	p, _ := planWith(t, synthPool(100), func(*planner) {})
	seen := map[*qmodel]bool{}
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			q := c.ev.q
			if q == nil || seen[q] {
				continue
			}
			seen[q] = true
			checkStepProperties(t, c.label(), q)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d engines checked", len(seen))
	}
}

func checkStepProperties(t *testing.T, name string, q *qmodel) {
	t.Helper()
	st := func(b perf.Batch, l perf.Load) float64 { return q.e.StepTime(b, l).Seconds() }
	in := int(q.in)
	loads := []perf.Load{{}, {Active: 1, Duty: 1}, {Active: 3, Duty: 1, SMPercent: 25}, {BoardBusy: 0.5}, {Active: 2, Duty: 1, BoardBusy: 1}}
	const eps = 1e-12
	for _, l := range loads {
		if st(perf.Batch{DecodeSeqs: 1, KVTokens: int64(in)}, l) < st(perf.Batch{DecodeSeqs: 1, KVTokens: int64(in)}, perf.Load{})-eps {
			t.Errorf("%s: a decode step is faster under load %+v than alone", name, l)
		}
		pf := perf.Batch{PrefillTokens: in, PrefillSeqs: 1, PrefillPairs: perf.ChunkPairs(in, 0)}
		if st(pf, l) < st(pf, perf.Load{})-eps {
			t.Errorf("%s: a prefill step is faster under load %+v than alone", name, l)
		}
		for _, d := range []int{0, 1, 2, 7, 31, 128} {
			for _, ctx := range []int{in, 2 * in, 8 * in} {
				for _, pt := range []int{0, 1, in / 2, in} {
					b := perf.Batch{DecodeSeqs: d, KVTokens: int64(d * ctx)}
					if pt > 0 {
						b.PrefillTokens, b.PrefillSeqs, b.PrefillPairs = pt, 1, perf.ChunkPairs(pt, 0)
					}
					if b.DecodeSeqs+b.PrefillTokens == 0 {
						continue
					}
					base := st(b, l)
					more := []perf.Batch{b, b, b, b}
					more[0].DecodeSeqs, more[0].KVTokens = d+1, b.KVTokens+int64(ctx)
					more[1].KVTokens += int64(in)
					more[2].PrefillTokens, more[2].PrefillSeqs, more[2].PrefillPairs = pt+64, 1, perf.ChunkPairs(pt+64, 0)
					more[3].PrefillSeqs++
					if pt == 0 {
						more[3].PrefillTokens, more[3].PrefillPairs = 1, 1
					}
					for i, m := range more {
						if st(m, l) < base-eps {
							t.Errorf("%s: step time falls when batch field %d grows: %+v (%g s) → %+v (%g s)", name, i, b, base, m, st(m, l))
						}
					}
				}
			}
		}
	}
	// Subadditive over chunks: the chunks of one prompt (at their offsets) take at least the
	// whole prompt in one step, alone.
	whole := st(perf.Batch{PrefillTokens: in, PrefillSeqs: 1, PrefillPairs: perf.ChunkPairs(in, 0)}, perf.Load{})
	for _, cut := range []int{1, 2, 3, 8, 64} {
		size := max(1, in/cut)
		sum := 0.0
		for off := 0; off < in; off += size {
			c := min(size, in-off)
			sum += st(perf.Batch{PrefillTokens: c, PrefillSeqs: 1, PrefillPairs: perf.ChunkPairs(c, off)}, perf.Load{})
		}
		if sum < whole-eps {
			t.Errorf("%s: %d-token prompt in chunks of %d takes %g s, less than whole (%g s)", name, in, size, sum, whole)
		}
	}
}

// erlangBFewest is the fewest servers with Erlang B at most the loss asked for.
func TestErlangBFewest(t *testing.T) {
	for _, a := range []float64{0.01, 0.5, 2.8, 10, 97.3, 1000} {
		for _, loss := range []float64{0.01, 0.001} {
			n := erlangBFewest(a, loss)
			if erlangB(n, a) > loss || (n > 1 && erlangB(n-1, a) <= loss) {
				t.Errorf("a = %g, loss %g: %d servers (B = %g, B(n−1) = %g)", a, loss, n, erlangB(n, a), erlangB(n-1, a))
			}
		}
	}
	// Known values: B(8, 2.8) ≈ 0.0063 and B(7, 2.8) ≈ 0.0181.
	if n := erlangBFewest(2.8, 0.01); n != 8 {
		t.Errorf("a = 2.8: %d servers, want 8", n)
	}
}

// The queueing model's SLO count is never below the TTFT floor on the varied synthetic pool
// (short TTFT targets, concurrency 1–64): a count below a proven floor would be a sizing that
// cannot meet the SLO. The bound counts min(floor, sized) either way (setReplicas).
func TestSizingAboveTTFTFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 tenants")
	}
	p, _ := planWith(t, Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7))), func(*planner) {})
	active := 0
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			if c.ev.q == nil || c.sz.n == 0 {
				continue
			}
			f := c.ev.q.ttftFloor(floorRate(tn.t.Traffic), tn.slo)
			if f > c.sz.lowest {
				active++
			}
			if f > c.sz.n {
				t.Errorf("%s on %s: sized %d replicas, below the TTFT floor %d", tn.t.Name, c.label(), c.sz.n, f)
			}
		}
	}
	t.Logf("%d candidates with the TTFT floor above the saturation count", active)
	if active == 0 {
		t.Error("the floor is above the saturation count nowhere: the test checks nothing")
	}
}

// tpotFloor is the TPOT floor of docs/planner.md ("The lower bound"), kept in the tests because
// it never binds on the synthetic pools: the replicas a Poisson tenant needs so that 99 % of its
// requests meet TPOT target S. On one replica let y_j be the requests meeting S among the d_j
// decodes of step j, of length s_j ≥ T(y_j) (T: one step of that many decodes over the prompts'
// caches alone; non-decreasing, TestStepTimeFloorProperties). Over a time H, those requests' x·H
// tokens satisfy x·H = Σ y_j ≤ Σ s_j·g(y_j) with g(y) = y / T(y) ≤ ĝ(y), ĝ the non-decreasing
// concave majorant of g on [0, D] (D: the most decodes a step holds), so x ≤ ĝ(Ȳ) by Jensen,
// Ȳ = Σ s_j·y_j / H ≤ min(x·S, D) (each such request decodes within (O − 1)·S). So x ≤ z* :=
// max{z : ĝ(min(z·S, D)) ≥ z} on every replica, and the n replicas together carry at least
// 0.99·λ·(O − 1) such tokens: n ≥ 0.99·λ·(O − 1) / z*.
func tpotFloor(q *qmodel, lam float64, slo perf.SLO) int {
	if lam <= 0 || slo.TPOT <= 0 || q.out < 2 {
		return 0
	}
	S, in := slo.TPOT.Seconds(), int(q.in)
	D := q.e.MaxSeqs()
	if kv := q.e.KVCapacityTokens(); kv > 0 {
		D = min(D, int(kv/int64(in+1)))
	}
	if D < 1 {
		return 0
	}
	// The upper hull of (d, g(d)), d = 0…D, then ĝ non-decreasing past its top.
	hx, hy := []float64{0}, []float64{0}
	for d := 1; d <= D; d++ {
		x := float64(d)
		y := x / q.e.StepTime(perf.Batch{DecodeSeqs: d, KVTokens: int64(d * in)}, perf.Load{}).Seconds()
		for len(hx) >= 2 {
			x1, y1, x2, y2 := hx[len(hx)-2], hy[len(hy)-2], hx[len(hx)-1], hy[len(hy)-1]
			if (y2-y1)*(x-x1) > (y-y1)*(x2-x1) {
				break
			}
			hx, hy = hx[:len(hx)-1], hy[:len(hy)-1]
		}
		hx, hy = append(hx, x), append(hy, y)
	}
	ghat := func(d float64) float64 {
		best := 0.0
		for i := 1; i < len(hx); i++ {
			if d < hx[i] {
				return math.Max(best, hy[i-1]+(hy[i]-hy[i-1])*(d-hx[i-1])/(hx[i]-hx[i-1]))
			}
			best = math.Max(best, hy[i])
		}
		return best
	}
	// ĝ(z·S) / z falls with z: z* is where ĝ(d) = d / S (d ≤ D), or ĝ(D) when ĝ(D) ≥ D / S.
	z := ghat(float64(D))
	if z < float64(D)/S {
		lo, hi := 0.0, float64(D)
		for range 60 {
			if m := (lo + hi) / 2; ghat(m) >= m/S {
				lo = m
			} else {
				hi = m
			}
		}
		z = lo / S
	}
	if !(z > 0) {
		return math.MaxInt32
	}
	return int(math.Ceil(0.99*lam*(q.out-1)/z - 1e-9))
}

// The TPOT floor is never above the bound's count on the gap table's three pools (so it is not
// part of the bound; docs/planner.md, "The lower bound"), and never above the SLO count either.
// A failure here means it binds somewhere and should join the TTFT floor in setReplicas.
func TestTPOTFloorNeverBinds(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 tenants")
	}
	pools := map[string]*v1.Pool{
		"synthetic 100":   synthPool(100),
		"synthetic 1,000": synthPool(1000),
		"varied 1,000":    Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7))),
	}
	for name, pool := range pools {
		p, _ := planWith(t, pool, func(*planner) {})
		checked := 0
		for _, tn := range p.tenants {
			for _, c := range tn.feasible {
				if c.ev.q == nil || c.sz.n == 0 || floorRate(tn.t.Traffic) == 0 {
					continue
				}
				checked++
				if f := tpotFloor(c.ev.q, floorRate(tn.t.Traffic), tn.slo); f > c.lbReplicas {
					t.Errorf("%s: %s on %s: TPOT floor %d above the bound's count %d (sized %d)", name, tn.t.Name, c.label(), f, c.lbReplicas, c.sz.n)
				}
			}
		}
		if checked == 0 {
			t.Errorf("%s: no candidate checked", name)
		}
	}
}

// The TTFT floor against the simulator on shared slice kinds (MIG instances, MPS shares, where
// pf and dec are taken with idle neighbours): single tenants of few slots and short TTFT targets
// on one node of eight H100s; k is the fewest of the plan's own replicas the simulator is
// satisfied with (fewestOfPlan, whole slices kept).
func TestTTFTFloorOnSharedSlicesAgainstSimulator(t *testing.T) {
	cases := []struct {
		mode, model string
		conc        int
		rps         float64
		in, out     int
		ttft        string
	}{
		{"mig", "llama-3.2-3b", 1, 2, 400, 150, "300ms"},
		{"mig", "qwen2.5-7b", 2, 1, 512, 256, "500ms"},
		{"mps", "qwen2.5-7b", 2, 2, 512, 256, "400ms"},
		{"mps", "llama-3.2-3b", 1, 3, 400, 150, "300ms"},
	}
	if testing.Short() || raceEnabled {
		cases = cases[:2]
	}
	above := 0
	for _, c := range cases {
		doc := fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: single}
fleet:
  nodes:
%spolicy: {burstPoolPercent: 0, allowedModes: [%s]}
tenants:
- name: t
  model: {name: %s}
  concurrency: %d
  traffic: {rps: %g, inputTokens: %d, outputTokens: %d}
  slo: {ttftP99: %s, tpotP99: 150ms}
`, nodes(16), c.mode, c.model, c.conc, c.rps, c.in, c.out, c.ttft)
		pool, err := v1.LoadPool([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		p, pl := planWith(t, pool, func(*planner) {})
		tn := p.tenants[0]
		if tn.choice == nil {
			t.Errorf("%+v: infeasible", c)
			continue
		}
		ch := tn.choice
		floor := ch.ev.q.ttftFloor(floorRate(tn.t.Traffic), tn.slo)
		if floor > ch.sz.lowest {
			above++
		}
		d := time.Duration(2200/c.rps*1e9) + 30*time.Second
		if a := simulate(t, pool, pl, d, 1).Report.Tenants[0].SLOAttainment; a < 0.99 {
			t.Errorf("%+v: the plan attains %.2f %% in simulation", c, 100*a)
			continue
		}
		k := fewestOfPlan(t, pool, pl, d, 1)
		t.Logf("%s %s, concurrency %d, %g req/s, TTFT %s on %s: saturation %d, TTFT floor %d, simulator's fewest %d, planned %d",
			c.mode, c.model, c.conc, c.rps, c.ttft, ch.label(), ch.sz.lowest, floor, k, len(pl.Tenants[0].Replicas))
		if floor > k {
			t.Errorf("%+v on %s: TTFT floor %d above the simulator's fewest %d", c, ch.label(), floor, k)
		}
		if ch.lbReplicas > k {
			t.Errorf("%+v on %s: the bound's count %d above the simulator's fewest %d", c, ch.label(), ch.lbReplicas, k)
		}
	}
	if above == 0 {
		t.Error("the TTFT floor is above the saturation count nowhere: the test checks nothing")
	}
}

// The TTFT floor where the KV cache may preempt (its places are min(max-num-seqs, ⌈KV capacity /
// prompt⌉), the scheduler fact internal/sim's TestStartedRequestsBounded checks) against the
// simulator: for a sample of the candidates of the varied 1,000 and the synthetic 1,000 where
// that floor is above the saturation count, one replica fewer than the floor, each replica on a
// GPU or MIG instance of its own with idle neighbours (the most favourable plan of that count),
// misses the SLO in simulation (below 99 % of ≥ 2,000 requests).
func TestKVTTFTFloorAgainstSimulator(t *testing.T) {
	pools := []struct {
		name string
		pool *v1.Pool
	}{
		{"varied 1,000", Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7)))},
		{"synthetic 1,000", synthPool(1000)},
	}
	var cases []boundCase
	for _, pc := range pools {
		p, _ := planWith(t, pc.pool, func(*planner) {})
		for _, tn := range p.tenants {
			for _, c := range tn.feasible {
				if c.tp > 1 || c.ev == nil || c.ev.q == nil {
					continue
				}
				q := c.ev.q
				if float64(q.e.KVCapacityTokens()) >= float64(q.e.MaxSeqs())*(q.in+q.out) {
					continue // the cache never preempts: TestTTFTFloorAgainstSimulator's case
				}
				if f := q.ttftFloor(floorRate(tn.t.Traffic), tn.slo); f > c.sz.boundLowest {
					if f != c.lbReplicas {
						t.Errorf("%s %s on %s: the bound counts %d replicas, the floor %d", pc.name, tn.t.Name, c.label(), c.lbReplicas, f)
					}
					cases = append(cases, boundCase{pc.name, tn.t, c.label(), f, c.sz.lowest, c.replicas})
				}
			}
		}
	}
	keep := 16
	if testing.Short() || raceEnabled {
		keep = 4
	}
	if len(cases) < keep {
		t.Fatalf("the KV-capped floor is above the saturation count for only %d candidates", len(cases))
	}
	rng := rand.New(rand.NewPCG(11, 3))
	rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	// The largest floors first: there one replica fewer is still a plan of several.
	slices.SortStableFunc(cases, func(a, b boundCase) int { return cmp.Compare(b.bound, a.bound) })
	checked := 0
	for _, tc := range cases {
		if checked >= keep {
			break
		}
		pool := singleOn(tc)
		pl := bestCasePlan(t, pool, tc.label, tc.bound-1)
		if pl == nil {
			continue
		}
		a := bestCaseAttain(t, pool, pl)
		checked++
		tn := pool.Tenants[0]
		t.Logf("%s %s (%.3g req/s, %d + %d tokens, TTFT %s) on %s: floor %d, sized %d; %d replicas attain %.2f %%",
			tc.pool, tn.Name, tn.Traffic.RPS, tn.Traffic.InputTokens, tn.Traffic.OutputTokens, tn.SLO.TTFTP99,
			tc.label, tc.bound, tc.sized, tc.bound-1, 100*a)
		if a >= 0.99 {
			t.Errorf("%s %s on %s: %d replicas, one fewer than the floor, meet the SLO in simulation (%.2f %%)",
				tc.pool, tn.Name, tc.label, tc.bound-1, 100*a)
		}
	}
	t.Logf("%d of %d candidates checked", checked, len(cases))
}
