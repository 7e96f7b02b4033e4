package plan

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// tpOf returns the tensor-parallel size in a replica's vLLM arguments, 0 without.
func tpOf(args []string) int {
	if i := slices.Index(args, "--tensor-parallel-size"); i >= 0 && i+1 < len(args) {
		n, _ := strconv.Atoi(args[i+1])
		return n
	}
	return 0
}

// Llama-3.1-70B in bf16 (141 GB of weights) fits no single H100: it is planned tensor-parallel
// over whole GPUs of one node, each replica listed under every GPU of its group with the same
// group, vLLM told the degree, the GPUs counted in gpusUsed and in the lower bound. The degree is
// chosen by cost: at 0.5 req/s one TP-2 replica (2 GPUs); at 2 req/s TP 2 needs 3 replicas
// (6 GPUs) where one TP-4 replica keeps up (4 GPUs).
func TestTensorParallelForAModelNoGPUHolds(t *testing.T) {
	for _, tc := range []struct {
		rps      float64
		wantSize int
	}{{0.5, 2}, {2, 4}} {
		pool := singleTenantPool(t, "llama-3.1-70b", 32, tc.rps, 1024, 256, "5s", "100ms", 16)
		pl := build(t, pool)
		tn := pl.Tenants[0]
		if tn.Infeasible {
			t.Fatalf("%g req/s: infeasible: %v", tc.rps, tn.Reasons)
		}
		groups := map[int]v1.TensorParallel{}
		for _, g := range pl.GPUs {
			for _, r := range g.Replicas {
				tp := r.TensorParallel
				if tp.Size != tc.wantSize || len(tp.GPUs) != tp.Size || !slices.Contains(tp.GPUs, g.Index) || g.Mode != v1.ModeExclusive {
					t.Fatalf("%g req/s: %s/%d: replica %d has tensorParallel %+v on a %s GPU, want size %d",
						tc.rps, g.Node, g.Index, r.Index, tp, g.Mode, tc.wantSize)
				}
				if n := tpOf(r.VLLMArgs); n != tp.Size {
					t.Errorf("%g req/s: replica %d: --tensor-parallel-size %d, group of %d", tc.rps, r.Index, n, tp.Size)
				}
				groups[r.Index] = tp
			}
		}
		if len(groups) != len(tn.Replicas) || len(groups) == 0 {
			t.Fatalf("%g req/s: %d groups for %d replicas", tc.rps, len(groups), len(tn.Replicas))
		}
		gpus := 0
		for _, tp := range groups {
			gpus += tp.Size
		}
		if pl.Summary.GPUsUsed != gpus {
			t.Errorf("%g req/s: gpusUsed %d, the groups hold %d GPUs", tc.rps, pl.Summary.GPUsUsed, gpus)
		}
		// no single GPU holds the model, so every plan uses at least one group of 2
		if lb := pl.Summary.LowerBound; lb < 2 || lb > gpus {
			t.Errorf("%g req/s: lower bound %d: want between 2 and the %d used", tc.rps, lb, gpus)
		}
		t.Logf("%g req/s: %d replicas of TP %d, %d GPUs, lower bound %d", tc.rps, len(groups), tc.wantSize, gpus, pl.Summary.LowerBound)
	}
}

// A model one GPU holds is not given tensor parallelism when whole GPUs one at a time serve it
// as cheaply.
func TestNoTensorParallelWhenOneGPUServes(t *testing.T) {
	pool := singleTenantPool(t, "qwen2.5-7b", 32, 4, 512, 256, "2s", "100ms", 16)
	pl := build(t, pool)
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if !r.TensorParallel.IsZero() || tpOf(r.VLLMArgs) != 0 {
				t.Errorf("%s/%d: replica %d runs tensor-parallel %+v", g.Node, g.Index, r.Index, r.TensorParallel)
			}
		}
	}
}

// A tensor-parallel group never spans nodes: with nodes of 2 H100s the 70B bf16 model is
// planned on groups of 2 only (the degrees 4 and 8 are not even candidates).
func TestTensorParallelNeverSpansNodes(t *testing.T) {
	pool := singleTenantPool(t, "llama-3.1-70b", 32, 0.5, 1024, 256, "5s", "100ms", 16)
	for i := range pool.Fleet.Nodes {
		pool.Fleet.Nodes[i].GPUs[0].Count = 2
	}
	pl := build(t, pool)
	if pl.Tenants[0].Infeasible {
		t.Fatalf("infeasible: %v", pl.Tenants[0].Reasons)
	}
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if r.TensorParallel.Size != 2 {
				t.Errorf("%s/%d: tensorParallel %+v on a node of 2", g.Node, g.Index, r.TensorParallel)
			}
		}
	}
}

// The simulator runs a tensor-parallel plan as one engine per group (perf's tensor-parallel
// model on the group's first GPU) and the planned 70B bf16 tenant meets both p99 SLOs there for
// at least 99 % of over 2,000 requests, at both degrees the cost picks.
func TestTensorParallelSimulated(t *testing.T) {
	for _, rps := range []float64{0.5, 2} {
		pool := singleTenantPool(t, "llama-3.1-70b", 32, rps, 1024, 256, "5s", "100ms", 16)
		pl := build(t, pool)
		if pl.Tenants[0].Infeasible {
			t.Fatalf("%g req/s: infeasible", rps)
		}
		d := time.Duration(2200/rps*1e9) + 30*time.Second
		s, err := sim.New(sim.Input{Pool: pool, Plan: pl}, sim.Config{Duration: d, Seed: 7})
		if err != nil {
			t.Fatalf("%g req/s: %v", rps, err)
		}
		res, err := s.Run(context.Background())
		if err != nil {
			t.Fatalf("%g req/s: %v", rps, err)
		}
		tr := res.Report.Tenants[0]
		if tr.Completed < 2000 || tr.SLOAttainment < 0.99 {
			t.Errorf("%g req/s: %d requests, attainment %.2f %% (TTFT p99 %.0f ms, TPOT p99 %.1f ms; predicted %s, %s)", rps,
				tr.Completed, 100*tr.SLOAttainment, tr.TTFT.P99, tr.TPOT.P99, pl.Tenants[0].Predicted.TTFTP99.Std(), pl.Tenants[0].Predicted.TPOTP99.Std())
		}
		t.Logf("%g req/s: %d GPUs, %d requests, attainment %.2f %%, TTFT p99 %.0f ms, TPOT p99 %.1f ms", rps,
			pl.Summary.GPUsUsed, tr.Completed, 100*tr.SLOAttainment, tr.TTFT.P99, tr.TPOT.P99)
	}
}

// Re-planning keeps a tensor-parallel group whole: against its own plan nothing moves, and when
// the load grows from one TP-2 replica to a TP-4 one, the migration lists one step for the
// replica (not one per GPU) and the new plan is valid. The node has GPUs that run nothing, so
// the TP-4 group starts there before the TP-2 group stops (a move, make-before-break), not on
// the TP-2 group's GPUs after it stops (a restart: regroupOnFree).
func TestTensorParallelReplan(t *testing.T) {
	pool := singleTenantPool(t, "llama-3.1-70b", 32, 0.5, 1024, 256, "5s", "100ms", 16)
	first := build(t, pool)
	again, err := Build(context.Background(), pool, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, again); err != nil {
		t.Fatal(err)
	}
	if steps := Migration(first, again, 1); len(steps) != 0 {
		t.Errorf("%d steps re-planning an unchanged pool: %+v", len(steps), steps)
	}
	more := singleTenantPool(t, "llama-3.1-70b", 32, 2, 1024, 256, "5s", "100ms", 16)
	next, err := Build(context.Background(), more, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(more, next); err != nil {
		t.Fatal(err)
	}
	reps := 0
	for _, s := range Migration(first, next, 1) {
		if s.Kind != StepGPU {
			reps++
			t.Logf("%s %s: %s -> %s", s.Kind, s.Tenant, s.From, s.To)
			// the TP-4 group starts on free GPUs, then the TP-2 group stops
			if s.Kind != StepMove || s.To != "n0/4,5,6,7" {
				t.Errorf("%s -> %s is a %s, want a move onto GPUs 4-7, which run nothing", s.From, s.To, s.Kind)
			}
		}
	}
	if reps != 1 {
		t.Errorf("%d replica steps from one TP-2 replica to one TP-4 replica, want 1", reps)
	}
}

// The baselines count a tenant that only tensor-parallel groups serve at its groups' GPUs, not
// one GPU per replica: none of them can undercut the plan by ignoring the group.
func TestTensorParallelBaselines(t *testing.T) {
	pool := singleTenantPool(t, "llama-3.1-70b", 32, 0.5, 1024, 256, "5s", "100ms", 16)
	pl := build(t, pool)
	for _, b := range pl.Summary.Baselines {
		if b.GPUs < pl.Summary.GPUsUsed {
			t.Errorf("baseline %s: %d GPUs, fewer than the plan's %d tensor-parallel GPUs", b.Name, b.GPUs, pl.Summary.GPUsUsed)
		}
	}
}
