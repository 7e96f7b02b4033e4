package render

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// mixedBoards are the boards the random mixed-board fleets draw from: MIG boards whose profile
// names meet (1g.10gb on A100-80GB and H100, 1g.5gb on A100-40GB and A30's 1g.6gb apart), and
// one without MIG, whose GPUs the device plugin always advertises as nvidia.com/gpu.
var mixedBoards = []string{"A30-24GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-141GB", "RTX-PRO-4500-Blackwell-32GB"}

// TestPlannedMixedBoardNodesRenderClean: on the device-plugin path the planner keeps every
// resource of a node with GPUs of two boards to one board (docs/planner.md, "Plans the device
// plugin can serve"), so small random pools on such nodes (1–12 synthetic tenants on 2–4 nodes
// of 1–4 GPUs of two or three boards, allowed modes exclusive and a random subset of the others) render with no problem at all, the
// renderer's mixed-board check included; and the plans do use both boards of a node (so the rule
// is exercised, not avoided by leaving such nodes empty).
func TestPlannedMixedBoardNodesRenderClean(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 12
	}
	rng := rand.New(rand.NewPCG(11, 7))
	bothBoards := 0
	allModes := []v1.Mode{v1.ModeExclusive, v1.ModeMIG, v1.ModeMPS, v1.ModeTimeSlice} // exclusive always: hard tenants need it or mig
	for i := range n {
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 1 + rng.IntN(12), GPUs: 8, Varied: i%2 == 1}, rng)
		pool.Fleet.Nodes = nil
		for k := range 2 + rng.IntN(3) {
			node := v1.Node{Name: fmt.Sprintf("node-%d", k)}
			boards := slices.Clone(mixedBoards)
			rng.Shuffle(len(boards), func(a, b int) { boards[a], boards[b] = boards[b], boards[a] })
			for _, b := range boards[:2+rng.IntN(2)] {
				node.GPUs = append(node.GPUs, v1.GPUGroup{Board: b, Count: 1 + rng.IntN(2)})
			}
			pool.Fleet.Nodes = append(pool.Fleet.Nodes, node)
		}
		pool.Policy.AllowedModes = []v1.Mode{v1.ModeExclusive}
		for _, m := range allModes[1:] {
			if rng.IntN(3) > 0 {
				pool.Policy.AllowedModes = append(pool.Policy.AllowedModes, m)
			}
		}
		zero := 0
		pool.Policy.BurstPoolPercent = &zero
		v1.Default(pool)
		if err := v1.Validate(pool); err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		pl, err := plan.Build(context.Background(), pool, plan.Options{})
		if err != nil {
			t.Fatalf("pool %d: %v", i, err)
		}
		_, err = Artifacts(pl, pool)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			t.Fatal(err)
		}
		for _, pr := range problemsOf(pe) {
			t.Errorf("pool %d (modes %v): %s", i, pool.Policy.AllowedModes, pr)
		}
		boardsUsed := map[string]map[string]bool{}
		for _, g := range pl.GPUs {
			if g.ReplicaCount() > 0 {
				if boardsUsed[g.Node] == nil {
					boardsUsed[g.Node] = map[string]bool{}
				}
				boardsUsed[g.Node][g.Board] = true
			}
		}
		for _, bs := range boardsUsed {
			if len(bs) > 1 {
				bothBoards++
			}
		}
	}
	if bothBoards == 0 {
		t.Error("no plan serves replicas on two boards of one node: the test no longer covers the rule")
	}
	t.Logf("%d nodes serve replicas on GPUs of more than one board", bothBoards)
}
