package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// shareCand is an evaluated candidate of tn on a share 1/n of kind on b (prof nil) or on MIG
// instances of prof, built as candidates builds its own.
func shareCand(p *planner, tn *tenant, b *gpu.Board, kind v1.SliceKind, prof *gpu.Profile, n int) *cand {
	c := &cand{board: b, kind: kind, profile: prof, share: n, tp: 1, unitFrac: 1, memFrac: 1, compFrac: 1}
	if prof != nil {
		c.memFrac = float64(prof.MemorySlices) / float64(b.MemorySlices)
		c.compFrac = float64(prof.ComputeSlices) / float64(b.ComputeSlices)
		c.unitFrac = max(c.memFrac, c.compFrac)
	}
	p.evalCand(tn, c)
	return c
}

// rawBoundCount is the lower bound's own count of tn on c's slice, before the sizing's count
// clamps it (the larger of the saturation count and the TTFT floor with idle neighbours, with
// the pool's bounds), or -1 when the bound leaves the slice out (boundAdmits).
func rawBoundCount(p *planner, tn *tenant, c *cand) int {
	x := &cand{board: c.board, kind: c.kind, profile: c.profile, share: c.share, tp: 1, ev: c.ev}
	if !p.boundAdmits(tn, x) {
		return -1
	}
	return x.lbReplicas
}

// everyShare is tn's candidates and, for each whole-GPU MPS or time-slicing kind it has on a
// board, a candidate at every share from 2 to the finest that fits (finestShare) that the
// ladders leave out.
func everyShare(p *planner, tn *tenant) []*cand {
	out := slices.Clone(tn.cands)
	type kindOn struct {
		b    *gpu.Board
		kind v1.SliceKind
	}
	var kinds []kindOn
	have := map[string]bool{}
	for _, c := range tn.cands {
		if c.profile != nil || (c.kind != v1.SliceMPS && c.kind != v1.SliceTimeSlice) {
			continue
		}
		k := kindOn{c.board, c.kind}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
		have[fmt.Sprint(c.board.Name, c.kind, c.share)] = true
	}
	for _, k := range kinds {
		for n := 2; n <= p.finestShare(tn, k.b, nil, k.kind); n++ {
			if !have[fmt.Sprint(k.b.Name, k.kind, n)] {
				out = append(out, shareCand(p, tn, k.b, k.kind, nil, n))
			}
		}
	}
	return out
}

// ladderOf is the shares the planner tries for kind.
func ladderOf(kind v1.SliceKind) []int {
	switch kind {
	case v1.SliceMPS:
		return mpsShares
	case v1.SliceTimeSlice:
		return timeShares
	case v1.SliceMIGMPS:
		return migMPSShares
	}
	return migTimeShares
}

// TestBoundCountMonotoneInShare asserts what the bound's rounding of shares rests on
// (fineShareBound): on one GPU or MIG instance, a replica at any share 1/n (1/n of the memory,
// and under MPS 100/n % of the SMs) needs no fewer replicas by the bound's own count than the
// count the bound gives it, that of the finest share of the ladder no finer than 1/n, and a
// share the bound leaves out leaves every finer one out. Every share from 2 to the finest that
// fits is evaluated, for one tenant of each model of the synthetic generator (its rate and a
// tenth of it) and the review pools' llama-3.2-1b tenants, on whole H100 and A100 GPUs and on
// their MIG profiles, MPS and time-slicing. The count is monotone in the share from one share
// to the next except where the memory fit turns CUDA graphs off (--enforce-eager) at the finest
// shares, which gives the KV cache their memory: those steps are logged, and each stays above
// the ladder's count.
func TestBoundCountMonotoneInShare(t *testing.T) {
	src := synthPool(1000).Tenants
	var tenants []v1.Tenant
	seen := map[string]bool{}
	for _, x := range src {
		if seen[x.Model.Name] {
			continue
		}
		seen[x.Model.Name] = true
		for _, scale := range []float64{1, 0.1} {
			y := x
			y.Name = fmt.Sprintf("%s-%g", x.Name, scale)
			y.Traffic.RPS *= scale
			tenants = append(tenants, y)
		}
	}
	for _, f := range []string{"../../testdata/review6/h1-mps16-pool.yaml", "../../testdata/review6/h1-timeslice10-pool.yaml"} {
		tenants = append(tenants, loadPool(t, f).Tenants[0])
	}
	checked, rounded, dips := 0, 0, 0
	for _, board := range []string{"H100-SXM5-80GB", "A100-SXM4-80GB"} {
		for _, x := range tenants {
			pool := synthPoolOn(1, 8)
			pool.Fleet.Nodes[0].GPUs[0].Board = board
			pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA // MIG+MPS too
			x.Isolation, x.Path, x.LowFrequency = v1.IsolationShared, "p", true
			pool.Tenants = []v1.Tenant{x}
			v1.Default(pool)
			p, err := newPlanner(pool, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p.ctx = context.Background()
			tn := p.tenants[0]
			b := p.boards[0]
			profs := append([]*gpu.Profile{nil}, migProfiles(b)...)
			for _, prof := range profs {
				kinds := []v1.SliceKind{v1.SliceMPS, v1.SliceTimeSlice}
				if prof != nil {
					kinds = []v1.SliceKind{v1.SliceMIGMPS, v1.SliceMIGTimeSlice}
				}
				for _, kind := range kinds {
					top := p.finestShare(tn, b, prof, kind)
					prev, given := 0, 0 // given: the count of the ladder's finest share so far (-1: left out)
					var counts []int
					for n := 2; n <= top; n++ {
						got := rawBoundCount(p, tn, shareCand(p, tn, b, kind, prof, n))
						if slices.Contains(ladderOf(kind), n) && given >= 0 {
							given = got
						} else if given > 0 {
							rounded++
						}
						counts = append(counts, got)
						switch {
						case got >= 0 && given < 0:
							t.Errorf("%s on %s %s %s: share 1/%d counted at %d, but the ladder's share the bound rounds it to is left out", x.Name, board, kind, profName(prof), n, got)
						case got >= 0 && got < given:
							t.Errorf("%s on %s %s %s: bound's count %d at share 1/%d, below the %d the bound gives it", x.Name, board, kind, profName(prof), got, n, given)
						}
						if got >= 0 && got < prev {
							dips++
							t.Logf("%s on %s %s %s: count %d at 1/%d after %d at 1/%d (the memory fit's choice of CUDA graphs)", x.Name, board, kind, profName(prof), got, n, prev, n-1)
						}
						checked++
						prev = got
					}
					if len(counts) > 0 {
						t.Logf("%s on %s %s %s (finest fitting share 1/%d): counts from 1/2 %v", x.Name, board, kind, profName(prof), top, counts)
					}
				}
			}
		}
	}
	t.Logf("%d shares checked, %d of them between or past the ladder's shares, %d dips from one share to the next", checked, rounded, dips)
	if checked < 500 || rounded < 100 {
		t.Fatalf("checked %d shares, %d rounded; the cases do not test the rounding", checked, rounded)
	}
}

// TestFineSharesReview6H1 plans the review's two pools whose optimum shares a GPU finer than
// 1/8: 16 soft llama-3.2-1b tenants of one trust path at 0.2 req/s, which one H100 serves as MPS
// 1/16 (every SLO met in simulation, testdata/review6/README.md H1), and 20 low-frequency shared
// tenants that two A100s serve time-sliced ten ways. The plans use 1 and 2 GPUs, as the hand
// plans do (2 and 3 while the planner's ladders stopped at 1/8, ADR 0056), and the lower bound,
// which counts every share, is no more than those (it was 2 and 3, the plans' own counts,
// before it counted them, ADR 0053).
func TestFineSharesReview6H1(t *testing.T) {
	for _, tc := range []struct {
		file     string
		hand     int // GPUs of the hand plan that meets every SLO in simulation
		planUsed int // the most the plan may use
	}{
		{"../../testdata/review6/h1-mps16-pool.yaml", 1, 1},
		{"../../testdata/review6/h1-timeslice10-pool.yaml", 2, 2},
	} {
		pool := loadPool(t, tc.file)
		pl, err := Build(context.Background(), pool, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Errorf("%s: %v", tc.file, err)
		}
		s := pl.Summary
		t.Logf("%s: %d GPUs, lower bound %d (hand plan %d)", tc.file, s.GPUsUsed, s.LowerBound, tc.hand)
		if s.LowerBound > tc.hand || s.LowerBound < 1 {
			t.Errorf("%s: lower bound %d, but a valid plan of %d GPUs meets every SLO", tc.file, s.LowerBound, tc.hand)
		}
		if s.GPUsUsed > tc.planUsed {
			t.Errorf("%s: the plan uses %d GPUs, want at most %d", tc.file, s.GPUsUsed, tc.planUsed)
		}
		for _, tp := range pl.Tenants {
			if tp.Infeasible {
				t.Errorf("%s: tenant %s infeasible", tc.file, tp.Name)
			}
		}
	}
}

// dropFinerColumns removes the lower bound's rounded share columns (fineShareBound) from p's
// tenants, leaving the ladders' own shares.
func dropFinerColumns(p *planner) {
	for _, tn := range p.tenants {
		tn.boundExtra = slices.DeleteFunc(slices.Clone(tn.boundExtra), func(c *cand) bool { return !slices.Contains(tn.cands, c) })
	}
}

// TestBoundBelowExactOptimumEveryShare checks the lower bound against an exact optimum that may
// share a GPU at every share up to the finest that fits, not only the planner's ladders: two or
// three tenants of small models (qwen2.5-1.5b and llama-3.2-3b of the synthetic generator,
// llama-3.2-1b of the review's pools; rates scaled by 0.2–20.2) in one trust group with
// exclusive and MPS allowed, or shared and low-frequency with exclusive and time-slicing, on
// one node of eight H100s. The optimum (exactSharedGPUsOver with everyShare) takes each share at
// the fewer of the sizing's count and the count the queueing model accepts with idle
// neighbours. The bound must never exceed it. A tenant held to 14 replicas (replicas: 14) of
// qwen2.5-1.5b, whose finest fitting share is 1/14 (between the ladder's 1/12 and 1/16), fits
// one GPU: the bound must say 1 there, and without its rounded columns it says 2.
func TestBoundBelowExactOptimumEveryShare(t *testing.T) {
	if testing.Short() {
		t.Skip("exhaustive search")
	}
	var small []v1.Tenant
	seen := map[string]bool{}
	for _, x := range synthPool(1000).Tenants {
		if (x.Model.Name == "qwen2.5-1.5b" || x.Model.Name == "llama-3.2-3b") && !seen[x.Model.Name] {
			seen[x.Model.Name] = true
			small = append(small, x)
		}
	}
	small = append(small, loadPool(t, "../../testdata/review6/h1-mps16-pool.yaml").Tenants[0])
	rng := rand.New(rand.NewPCG(11, 7))
	equal, pools := 0, 0
	for i := range 16 {
		pool := synthPoolOn(1, 8)
		ts := make([]v1.Tenant, 2+rng.IntN(2))
		for j := range ts {
			x := small[rng.IntN(len(small))]
			x.Name = fmt.Sprintf("t%d", j)
			x.Traffic.RPS *= 0.2 + 20*rng.Float64()
			if i%2 == 0 {
				x.Isolation, x.Path = v1.IsolationSoft, "team"
			} else {
				x.Isolation, x.Path, x.LowFrequency = v1.IsolationShared, "bots", true
			}
			ts[j] = x
		}
		pool.Tenants = ts
		pool.Policy.AllowedModes = []v1.Mode{v1.ModeExclusive, v1.ModeMPS}
		if i%2 == 1 {
			pool.Policy.AllowedModes = []v1.Mode{v1.ModeExclusive, v1.ModeTimeSlice}
		}
		v1.Default(pool)
		p := evaluated(t, pool)
		exact := exactSharedGPUsOver(t, p, func(tn *tenant) []*cand { return everyShare(p, tn) })
		if exact < 0 {
			continue
		}
		lb := p.lowerBound()
		pools++
		if lb == exact {
			equal++
		}
		t.Logf("pool %d (%v): bound %d, exact optimum over every share %d", i, pool.Policy.AllowedModes, lb, exact)
		if lb > exact {
			t.Errorf("pool %d: lower bound %d above the exact optimum %d over every share", i, lb, exact)
		}
	}
	t.Logf("%d pools: bound equal to the optimum in %d", pools, equal)

	// The rounded columns are what makes the bound cover shares between the ladder's.
	pool := synthPoolOn(1, 8)
	x := small[slices.IndexFunc(small, func(x v1.Tenant) bool { return x.Model.Name == "qwen2.5-1.5b" })]
	x.Name, x.Isolation, x.Path = "fixed14", v1.IsolationSoft, "team"
	x.Traffic.RPS = 0.1
	fixed := 14
	x.Replicas = &fixed
	slow := v1.Duration(10 * time.Second)
	x.SLO.TTFTP99, x.SLO.TPOTP99 = &slow, &slow
	pool.Tenants = []v1.Tenant{x}
	pool.Policy.AllowedModes = []v1.Mode{v1.ModeExclusive, v1.ModeMPS}
	v1.Default(pool)
	p := evaluated(t, pool)
	if top := p.finestShare(p.tenants[0], p.boards[0], nil, v1.SliceMPS); top != 14 {
		t.Fatalf("qwen2.5-1.5b's finest MPS share on an H100 is 1/%d; the case needs 1/14", top)
	}
	exact := exactSharedGPUsOver(t, p, func(tn *tenant) []*cand { return everyShare(p, tn) })
	lb := p.lowerBound()
	dropFinerColumns(p)
	ladder := p.lowerBound()
	t.Logf("14 fixed replicas of qwen2.5-1.5b: exact %d, bound %d, bound over the ladders' shares alone %d", exact, lb, ladder)
	if exact != 1 || lb != 1 || ladder != 2 {
		t.Errorf("14 fixed replicas of qwen2.5-1.5b: exact %d, bound %d, ladders alone %d; want 1, 1, 2", exact, lb, ladder)
	}
}
