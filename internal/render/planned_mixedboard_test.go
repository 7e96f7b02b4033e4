package render

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// mixedBoards are the boards the random mixed-board fleets draw from, of sizes 24–141 GB, some of
// whose MIG profile names meet (1g.10gb on A100-SXM4-80GB and H100-SXM5-80GB). Every board of
// the catalog has MIG, so the rule's case of a board without it is not drawn.
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

// TestPlannedMixedBoardReviewPool: review5's p6-mixedboard.yaml (node mixed: an A30 and an H100;
// hard tenants big, Llama-3.1-70B fp8, which only the H100 holds, and small, Llama-3.1-8B; only
// exclusive GPUs allowed) plans big on the H100 and renders with no problem: the A30 goes into MIG
// mode with no instances, so the device plugin does not advertise it as nvidia.com/gpu beside
// the H100, and small is short of capacity with the node rule as its reason. With mig allowed
// too, small takes the A30 as one 4g.24gb instance and every tenant is served.
func TestPlannedMixedBoardReviewPool(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "review5", "p6-mixedboard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, withMIG := range []bool{false, true} {
		pool, err := v1.LoadPool(data)
		if err != nil {
			t.Fatal(err)
		}
		if withMIG {
			pool.Policy.AllowedModes = append(pool.Policy.AllowedModes, v1.ModeMIG)
		}
		pl, err := plan.Build(context.Background(), pool, plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Artifacts(pl, pool)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			t.Fatal(err)
		}
		for _, pr := range problemsOf(pe) {
			t.Errorf("mig allowed %v: %s", withMIG, pr)
		}
		where := map[string]string{}
		for _, g := range pl.GPUs {
			reps := slices.Clone(g.Replicas)
			for _, in := range g.Instances {
				reps = append(reps, in.Replicas...)
			}
			for _, r := range reps {
				where[r.Tenant] = fmt.Sprintf("%s/%d %s %s", g.Node, g.Index, g.Board, g.Mode)
			}
			if g.Board == "A30-24GB" && !withMIG && (g.Mode != v1.ModeMIG || len(g.Instances) > 0 ||
				!slices.ContainsFunc(g.Reasons, func(r v1.Reason) bool { return strings.Contains(r.Message, "does not advertise it as nvidia.com/gpu") })) {
				t.Errorf("mixed/0 A30: mode %s, %d instances, reasons %v; want MIG mode, no instances, the node rule as reason", g.Mode, len(g.Instances), g.Reasons)
			}
		}
		if where["big"] != "mixed/1 H100-SXM5-80GB exclusive" {
			t.Errorf("mig allowed %v: big on %q, want the H100 whole", withMIG, where["big"])
		}
		for _, tn := range pl.Tenants {
			if tn.Name != "small" {
				continue
			}
			switch {
			case withMIG && (tn.Infeasible || where["small"] != "mixed/0 A30-24GB mig"):
				t.Errorf("mig allowed: small infeasible %v on %q, want served on the A30 by MIG", tn.Infeasible, where["small"])
			case !withMIG && (!tn.Infeasible || !slices.ContainsFunc(tn.Reasons, func(r v1.Reason) bool {
				return r.Code == v1.ReasonNoCapacity && strings.Contains(r.Message, "keeps nvidia.com/gpu for its H100-SXM5-80GB GPUs")
			})):
				t.Errorf("small: infeasible %v, reasons %v; want short of capacity by the one-board rule", tn.Infeasible, tn.Reasons)
			}
		}
	}
}

// TestPlannedMixedBoardLoRAEngines: shared LoRA engines (placed on the GPUs the plan leaves idle)
// keep the same rule. On a node with an A30 and two H100s, beside a hard 70B tenant on an H100,
// and on a node with only idle GPUs of both boards, the engine takes an H100 and the A30 goes
// into MIG mode with no instances, so the plan renders with no problem; before, the engine took
// the A30 (the first idle GPU) beside the H100 whole and the renderer reported nvidia.com/gpu of
// two boards on the node.
func TestPlannedMixedBoardLoRAEngines(t *testing.T) {
	const head = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: mx-lora}
fleet:
  nodes:
  - name: mixed
    gpus:
    - {board: A30-24GB, count: 1}
    - {board: H100-SXM5-80GB, count: 2}
policy: {burstPoolPercent: 0}
tenants:
`
	const big = "- {name: big, path: a, isolation: hard, model: {name: llama-3.1-70b, quantization: fp8, kvCacheDtype: fp8}, maxContext: 4096, traffic: {rps: 0.2, inputTokens: 500, outputTokens: 100}, slo: {ttftP99: 4s, tpotP99: 120ms}}\n"
	adapters := ""
	for i, rps := range []float64{2, 1} {
		adapters += fmt.Sprintf("- {name: ad-%d, path: acme/x, isolation: soft, model: {name: llama-3.1-8b, quantization: bf16, adapter: {name: ad-%d-lora, repo: acme/ad-%d-lora, rank: 16}}, traffic: {rps: %g, inputTokens: 512, outputTokens: 128}, slo: {ttftP99: 1s, tpotP99: 50ms}}\n", i, i, i, rps)
	}
	for _, withBig := range []bool{true, false} {
		doc := head + adapters
		if withBig {
			doc = head + big + adapters
		}
		pool, err := v1.LoadPool([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		pl, _, err := plan.BuildWithLoRA(context.Background(), pool, plan.Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Artifacts(pl, pool)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			t.Fatal(err)
		}
		for _, pr := range problemsOf(pe) {
			t.Errorf("with big %v: %s", withBig, pr)
		}
		if len(pl.LoRAEngines) != 1 {
			t.Fatalf("with big %v: %d engines, want 1", withBig, len(pl.LoRAEngines))
		}
		for _, g := range pl.GPUs {
			if g.LoRAEngine != "" && g.Board != "H100-SXM5-80GB" {
				t.Errorf("with big %v: engine on %s/%d %s, want an H100", withBig, g.Node, g.Index, g.Board)
			}
			if g.Board == "A30-24GB" && g.Mode != v1.ModeMIG {
				t.Errorf("with big %v: the A30 in mode %s, want MIG mode with no instances", withBig, g.Mode)
			}
		}
		for _, tn := range pl.Tenants {
			if tn.Infeasible {
				t.Errorf("with big %v: %s not served: %v", withBig, tn.Name, tn.Reasons)
			}
		}
	}
}
