package plan

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// busyRejectedPool is two tenants of one trust group on one node of eight H100s: a
// llama-3.1-8b tenant at 0.5 req/s with a TPOT target of 10 ms, which an MPS half of a GPU meets
// with an idle neighbour (about 8 ms a token at batch 1) but not with a busy one (about 12 ms),
// and a qwen2.5-1.5b tenant at 0.005 req/s, a neighbour idle almost all the time.
func busyRejectedPool(t *testing.T) *v1.Pool {
	t.Helper()
	pool := synthPoolOn(1, 8)
	src := synthPool(1000).Tenants
	pick := func(model string) v1.Tenant {
		i := slices.IndexFunc(src, func(tn v1.Tenant) bool { return tn.Model.Name == model })
		if i < 0 {
			t.Fatalf("no %s tenant in the synthetic pool", model)
		}
		return src[i]
	}
	a, b := pick("llama-3.1-8b"), pick("qwen2.5-1.5b")
	a.Name, b.Name = "tight", "quiet"
	a.Traffic.RPS, b.Traffic.RPS = 0.5, 0.005
	tpot := v1.Duration(10 * time.Millisecond)
	a.SLO.TPOTP99 = &tpot
	for _, tn := range []*v1.Tenant{&a, &b} {
		tn.Isolation, tn.Path = v1.IsolationSoft, "team"
	}
	pool.Tenants = []v1.Tenant{a, b}
	v1.Default(pool)
	return pool
}

// TestBoundCountsKindsRejectedUnderBusyNeighbours: the sizing rejects the tight tenant's MPS
// half (its TPOT at batch 1 with the other half busy is above the target), and every other
// kind it may use costs a whole GPU, so a bound over the feasible kinds alone is 2 GPUs. One GPU
// serves both tenants, each on an MPS half, and the simulator finds the tight tenant's SLO met
// there (its neighbour is idle but for 0.005 req/s). The bound counts the rejected half at its
// idle-neighbour count and is 1, the exact optimum of exactSharedGPUs. The tight tenant's
// rejected kinds whose decode step alone is above 10 ms (MIG instances up to 4g.40gb, MPS
// quarters) stay out of the bound, and the others (MPS halves and thirds) are in.
func TestBoundCountsKindsRejectedUnderBusyNeighbours(t *testing.T) {
	pool := busyRejectedPool(t)
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx = context.Background()
	p.evaluate()
	tight := p.tenants[0]
	half := func(tn *tenant) *cand {
		i := slices.IndexFunc(tn.cands, func(c *cand) bool { return c.kind == v1.SliceMPS && c.share == 2 })
		if i < 0 {
			t.Fatalf("%s: no MPS 1/2 candidate", tn.t.Name)
		}
		return tn.cands[i]
	}
	c := half(tight)
	if c.reject != v1.ReasonSLOUnmet || !slices.Contains(tight.boundExtra, c) || c.lbReplicas != 1 {
		t.Fatalf("tight on MPS 1/2: reject %q (%s), in the bound's extra kinds %v, bound's count %d; want SLOUnmet, true, 1",
			c.reject, c.why, slices.Contains(tight.boundExtra, c), c.lbReplicas)
	}
	// A kind whose decode step alone is above the target stays out: no neighbour load helps.
	for _, x := range tight.cands {
		if x.ev.q == nil {
			continue
		}
		pf, dec := x.ev.q.bestCase().floorTimes()
		in := slices.Contains(tight.boundExtra, x)
		t.Logf("tight on %s: reject %q, decode alone %.2f ms, prompt alone %.1f ms, counted by the bound %v (count %d)",
			x.label(), x.reject, 1e3*dec, 1e3*pf, in || x.reject == "", x.lbReplicas)
		if x.reject != "" && in != (dec <= 0.010) {
			t.Errorf("tight on %s: decode alone %.2f ms against the 10 ms target, yet counted by the bound: %v", x.label(), 1e3*dec, in)
		}
	}
	for _, tn := range p.tenants {
		if len(tn.feasible) > 0 {
			tn.choice = tn.feasible[0]
		}
	}
	t.Logf("tight: cheapest feasible %s (cost %.3g); MPS 1/2 rejected: %s", tight.feasible[0].label(), tight.feasible[0].cost, c.why)
	bound := p.lowerBound()
	extra := tight.boundExtra
	tight.boundExtra = nil
	old := p.lowerBound()
	tight.boundExtra = extra
	opt := exactSharedGPUs(t, p)
	t.Logf("lower bound %d, without the rejected kinds %d, exact optimum %d", bound, old, opt)
	if bound != 1 || old != 2 || opt != 1 {
		t.Errorf("bound %d, without the rejected kinds %d, optimum %d; want 1, 2, 1", bound, old, opt)
	}

	// The one-GPU plan: both tenants on MPS halves of one GPU.
	for _, tn := range p.tenants {
		h := half(tn)
		h.reject, h.why, h.replicas = "", "", 1
		h.cost = float64(h.replicas) / float64(h.share) * h.unitFrac
		tn.feasible, tn.choice = []*cand{h}, h
	}
	if err := p.optimise(); err != nil {
		t.Fatal(err)
	}
	pl, err := p.result()
	if err != nil {
		t.Fatal(err)
	}
	if pl.Summary.GPUsUsed != 1 {
		t.Fatalf("the forced plan uses %d GPUs, want 1", pl.Summary.GPUsUsed)
	}
	reps := simulatePlan(t, pool, pl, 4400*time.Second, 1) // about 2,200 of the tight tenant's requests
	rep, q := reps["tight"], reps["quiet"]
	t.Logf("one GPU, MPS halves: tight %d requests, SLO attainment %.2f %%; quiet %d requests, %.2f %%",
		rep.Completed, 100*rep.SLOAttainment, q.Completed, 100*q.SLOAttainment)
	if rep.Completed < 2000 || rep.SLOAttainment < 0.99 {
		t.Errorf("tight meets its SLO for %.2f %% of requests on the one-GPU plan: the example does not show a plan below the old bound", 100*rep.SLOAttainment)
	}
}
