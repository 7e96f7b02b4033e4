package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// withoutNeighbours is pool and plan with only tenant keep: the other tenants and the MIG
// instances that ran them are gone, the rest of the layout is unchanged.
func withoutNeighbours(pool *v1.Pool, plan *v1.Plan, keep string) (*v1.Pool, *v1.Plan) {
	p, q := *pool, *plan
	p.Tenants = nil
	for _, t := range pool.Tenants {
		if t.Name == keep {
			p.Tenants = append(p.Tenants, t)
		}
	}
	q.Tenants = nil
	for _, t := range plan.Tenants {
		if t.Name == keep {
			q.Tenants = append(q.Tenants, t)
		}
	}
	q.GPUs = nil
	for _, g := range plan.GPUs {
		var ins []v1.PlanInstance
		for _, in := range g.Instances {
			if len(in.Replicas) > 0 && in.Replicas[0].Tenant == keep {
				ins = append(ins, in)
			}
		}
		g.Instances = ins
		q.GPUs = append(q.GPUs, g)
	}
	return &p, &q
}

// TestMIGNeighboursDoNotDecideTheMiss: t00050 of short-150-on-60 (llama-3.2-3b, 2 req/s of
// 4,000 + 150 tokens on two 1g.18gb of an H200) misses its SLO at some seeds; whether it does is
// decided by its own arrivals, not by the five busy instances beside it. On its own stream it
// meets the SLO at seed 12 and falls into a preemption loop at seed 22 (a 17th request admitted
// by its first chunk preempts itself at its second; docs/planner.md, "Not done yet") with its
// neighbours and without them alike, and its attainment and preemptions hardly move: MIG
// neighbours reach it only through the board's power limit.
func TestMIGNeighboursDoNotDecideTheMiss(t *testing.T) {
	pool, plan := loadPool(t, "pool-mig-neighbours.yaml"), loadPlan(t, "plan-mig-neighbours.yaml")
	alonePool, alonePlan := withoutNeighbours(pool, plan, "t00050")
	for _, c := range []struct {
		seed     uint64
		collapse bool
	}{{12, false}, {22, true}} {
		cfg := Config{Duration: 30 * time.Minute, Seed: c.seed}
		_, beside := runSim(t, Input{Pool: pool, Plan: plan}, cfg)
		_, alone := runSim(t, Input{Pool: alonePool, Plan: alonePlan}, cfg)
		b, a := tenantByName(beside.Report, "t00050"), tenantByName(alone.Report, "t00050")
		t.Logf("seed %d: attainment %.4f beside its neighbours, %.4f alone; preemptions %d, %d; TTFT p99 %.0f, %.0f ms",
			c.seed, b.SLOAttainment, a.SLOAttainment, b.Preemptions, a.Preemptions, b.TTFT.P99, a.TTFT.P99)
		for _, r := range []struct {
			how string
			tr  TenantReport
		}{{"beside its neighbours", b}, {"alone", a}} {
			if got := r.tr.SLOAttainment < 0.95; got != c.collapse {
				t.Errorf("seed %d %s: attainment %.4f, want a preemption loop %v", c.seed, r.how, r.tr.SLOAttainment, c.collapse)
			}
		}
		if d := b.SLOAttainment - a.SLOAttainment; d < -0.01 || d > 0.01 {
			t.Errorf("seed %d: attainment %.4f beside its neighbours, %.4f alone: more than 1 point apart", c.seed, b.SLOAttainment, a.SLOAttainment)
		}
		if lo, hi := min(b.Preemptions, a.Preemptions), max(b.Preemptions, a.Preemptions); float64(hi) > 1.05*float64(lo)+5 {
			t.Errorf("seed %d: %d preemptions beside its neighbours, %d alone", c.seed, b.Preemptions, a.Preemptions)
		}
	}
}

// TestCappedMaxNumSeqsEndsTheLoop: the replica's own --max-num-seqs limits the requests it runs
// at once. t00050's two replicas of the fixture started with --max-num-seqs 16, the requests
// their KV cache holds at full length (what the planner now gives such replicas), admit no 17th
// request, so seed 22, where the default 256 falls into the preemption loop, has no preemption
// and meets the SLO. The replica keeps the KV cache the plan computed (ADR 0088, amended).
func TestCappedMaxNumSeqsEndsTheLoop(t *testing.T) {
	pool, plan := loadPool(t, "pool-mig-neighbours.yaml"), loadPlan(t, "plan-mig-neighbours.yaml")
	if got := maxNumSeqs([]string{"--max-num-seqs", "256", "--max-num-seqs=16", "--max-model-len", "8192"}); got != 16 {
		t.Fatalf("maxNumSeqs: %d, want the last one, 16", got)
	}
	capped := *plan
	capped.GPUs = nil
	n := 0
	for _, g := range plan.GPUs {
		g.Instances = slices.Clone(g.Instances)
		for i, in := range g.Instances {
			in.Replicas = slices.Clone(in.Replicas)
			for j, r := range in.Replicas {
				if r.Tenant != "t00050" {
					continue
				}
				r.VLLMArgs = slices.Clone(r.VLLMArgs)
				for k := range r.VLLMArgs {
					if r.VLLMArgs[k] == "--max-num-seqs" && k+1 < len(r.VLLMArgs) {
						r.VLLMArgs[k+1] = "16"
						n++
					}
				}
				in.Replicas[j] = r
			}
			g.Instances[i] = in
		}
		capped.GPUs = append(capped.GPUs, g)
	}
	if n != 2 {
		t.Fatalf("capped %d replicas of t00050, want 2", n)
	}
	cfg := Config{Duration: 30 * time.Minute, Seed: 22}
	_, def := runSim(t, Input{Pool: pool, Plan: plan}, cfg)
	_, cap16 := runSim(t, Input{Pool: pool, Plan: &capped}, cfg)
	d, c := tenantByName(def.Report, "t00050"), tenantByName(cap16.Report, "t00050")
	t.Logf("seed 22: attainment %.4f at max-num-seqs 256, %.4f at 16; preemptions %d, %d; TTFT p99 %.0f, %.0f ms",
		d.SLOAttainment, c.SLOAttainment, d.Preemptions, c.Preemptions, d.TTFT.P99, c.TTFT.P99)
	if d.SLOAttainment >= 0.95 {
		t.Errorf("at the default 256 attainment %.4f: the fixture no longer falls into the loop", d.SLOAttainment)
	}
	if c.Preemptions != 0 || c.SLOAttainment < 0.99 {
		t.Errorf("at max-num-seqs 16: attainment %.4f, %d preemptions, want at least 0.99 and none", c.SLOAttainment, c.Preemptions)
	}
	for _, r := range cap16.Report.Replicas {
		if strings.HasPrefix(r.Name, "t00050/") && (r.MaxSeqs != 16 || r.KVCapacityTokens <= 16*4150) {
			t.Errorf("replica %s runs %d sequences with %d tokens of KV cache, want 16 and room for 16 at full length", r.Name, r.MaxSeqs, r.KVCapacityTokens)
		}
	}
	for _, name := range []string{"t00038", "t00010"} {
		a, b := tenantByName(def.Report, name), tenantByName(cap16.Report, name)
		if a.SLOAttainment != b.SLOAttainment || a.Preemptions != b.Preemptions {
			t.Errorf("%s: attainment %.4f, %d preemptions with t00050 capped, %.4f, %d without", name, b.SLOAttainment, b.Preemptions, a.SLOAttainment, a.Preemptions)
		}
	}
}
