package plan

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// boardCapPool is n tenants of llama-3.1-70b at fp8, each of its own trust path, on one node of
// b200 B200s and one of eight A100 80GB: one replica fits a B200 (or its 3g.90gb half) but
// takes a tensor-parallel pair of A100s, so the B200s are every tenant's cheapest board and too
// few for all of them.
func boardCapPool(t testing.TB, n, b200 int) *v1.Pool {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: boardcap}
fleet:
  nodes:
  - name: b
    gpus: [{board: B200, count: %d}]
  - name: a
    gpus: [{board: A100-SXM4-80GB, count: 8}]
tenants:
`, b200)
	for i := range n {
		fmt.Fprintf(&b, `- name: t%d
  path: org%d/team
  model: {name: llama-3.1-70b, quantization: fp8}
  traffic: {rps: 0.02, inputTokens: 300, outputTokens: 150}
  slo: {ttftP99: 5000ms, tpotP99: 150ms}
`, i, i)
	}
	p, err := v1.DecodePool([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBoardCapBoundCountsScarceBoard: eight tenants whose cheapest slice is half a B200 (mig
// 3g.90gb) on a fleet of two B200s. Without the fleet's B200 count the bound is the four B200s
// they would take there; with it, the two B200s hold four of them and the other four take an
// A100 each, 2 + 4 = 6 GPUs, which is the plan. Then pools of 1–12 such tenants on 1–3 B200s:
// the bound is never above the plan, and the board limit lifts it in most of them.
func TestBoardCapBoundCountsScarceBoard(t *testing.T) {
	p, pl := planWith(t, boardCapPool(t, 8, 2), func(*planner) {})
	if err := checkPlan(p.pool, pl); err != nil {
		t.Fatal(err)
	}
	s := pl.Summary
	vol := 0
	p.atBoundCounts(func() { vol = max(p.volumeBound(), p.groupBound()) })
	t.Logf("%d GPUs used, lower bound %d, without the board limit %d", s.GPUsUsed, s.LowerBound, vol)
	if s.LowerBound > s.GPUsUsed {
		t.Errorf("lower bound %d above the plan's %d GPUs", s.LowerBound, s.GPUsUsed)
	}
	if vol != 4 || s.LowerBound != 6 || s.GPUsUsed != 6 {
		t.Errorf("lower bound %d (without the board limit %d), %d GPUs used; want 6 (4), 6", s.LowerBound, vol, s.GPUsUsed)
	}
	lifted, pools := 0, 0
	for n := 1; n <= 12; n++ {
		for b200 := 1; b200 <= 3; b200++ {
			p, pl := planWith(t, boardCapPool(t, n, b200), func(*planner) {})
			s := pl.Summary
			if len(pl.Summary.Baselines) == 0 && s.GPUsUsed == 0 {
				continue
			}
			pools++
			without, term := 0, 0.0
			p.atBoundCounts(func() { without, term = max(p.volumeBound(), p.groupBound()), p.boardCapBound() })
			if err := checkPlan(p.pool, pl); err != nil { // the bound at most the plan, where it serves every tenant
				t.Errorf("%d tenants on %d B200s: %v", n, b200, err)
			}
			if term > float64(s.GPUsUsed)+boundSlack {
				t.Errorf("%d tenants on %d B200s: board-limit term %.3f above the plan's %d GPUs", n, b200, term, s.GPUsUsed)
			}
			if s.LowerBound > without {
				lifted++
			}
		}
	}
	t.Logf("%d pools, the board limit lifts the bound in %d", pools, lifted)
	if lifted == 0 {
		t.Error("the board limit lifted no bound")
	}
}

// TestBoardCapBoundBelowPlans plans pools of the synthetic generator (varied, 20–80 tenants) on
// fleets of H100, A100 80GB and B200 nodes in different proportions, and checks that the lower
// bound with the boards' limits never exceeds the planner's own plan, which validate accepts.
func TestBoardCapBoundBelowPlans(t *testing.T) {
	boards := []string{"H100", "A100-SXM4-80GB", "B200"}
	rng := rand.New(rand.NewPCG(98, 1))
	pools := 0
	for i := range 12 {
		n := 20 + rng.IntN(61)
		pool := Synthetic(SyntheticOptions{Tenants: n, GPUs: n, Varied: true}, rand.New(rand.NewPCG(uint64(i), 98)))
		nodes := pool.Fleet.Nodes
		// A few nodes of the scarce board first, the rest of the others in turn.
		scarce := rng.IntN(3)
		for j := range nodes {
			b := boards[(scarce+1+j%2)%3]
			if j < 1+rng.IntN(2) {
				b = boards[scarce]
			}
			nodes[j].GPUs = []v1.GPUGroup{{Board: b, Count: nodes[j].GPUs[0].Count}}
		}
		if i%2 == 1 {
			pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
		}
		p, pl := planWith(t, pool, func(*planner) {})
		pools++
		var cap float64
		p.atBoundCounts(func() { cap = p.boardCapBound() })
		s := pl.Summary
		if s.LowerBound > s.GPUsUsed {
			t.Errorf("pool %d (%d tenants, scarce %s): lower bound %d above the plan's %d GPUs", i, n, boards[scarce], s.LowerBound, s.GPUsUsed)
		}
		t.Logf("pool %d: %d tenants, scarce %s, %d GPUs used, bound %d (board-limit term %.2f)", i, n, boards[scarce], s.GPUsUsed, s.LowerBound, cap)
	}
	t.Logf("%d pools", pools)
}
