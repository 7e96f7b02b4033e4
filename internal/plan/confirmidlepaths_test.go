package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// nodeSharePools are a pool of four llama-3.1-8b tenants of one trust path (t00–t03, mps 1/4:
// 25 % of the SMs each) and seven qwen2.5-0.5b of another (q0–q6), on H100s: node a (one GPU),
// node b (two), with spare node c (one), and node d (one). The plan in force runs t00–t03 on a/0
// (full), q0–q4 on b/1 (node b's device-plugin MPS setting: 5 references a GPU, 20 % each) and
// q5–q6 on d/0, and leaves b/0 and c/0 idle: planned with b/0, c/0 and d/0 as canary GPUs (all q
// on b/1), then q5–q6 moved to d/0. The re-pack runs the q apart no more, which moves
// replicas that max-moves 0 does not allow, so the kept plan is confirmed.
func nodeSharePools(t *testing.T, spare bool) (cur *v1.Plan, pool *v1.Pool) {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: idle-node-share}\nfleet:\n  nodes:\n" +
		"  - name: a\n    gpus: [{board: H100-SXM5-80GB, count: 1}]\n  - name: b\n    gpus: [{board: H100-SXM5-80GB, count: 2}]\n")
	canary := "[b/0, d/0]"
	if spare {
		b.WriteString("  - name: c\n    gpus: [{board: H100-SXM5-80GB, count: 1}]\n")
		canary = "[b/0, c/0, d/0]"
	}
	b.WriteString("  - name: d\n    gpus: [{board: H100-SXM5-80GB, count: 1}]\n")
	b.WriteString("policy: {burstPoolPercent: 0, allowedModes: [mps], canaryGPUs: " + canary + "}\ntenants:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "- name: t%02d\n  path: org/t\n  isolation: soft\n  model: {name: llama-3.1-8b}\n  maxContext: 8192\n  concurrency: 8\n"+
			"  traffic: {rps: 1, inputTokens: 256, outputTokens: 64}\n  slo: {ttftP99: 2s, tpotP99: 100ms}\n", i)
	}
	for i := range 7 {
		fmt.Fprintf(&b, "- name: q%d\n  path: org/q\n  isolation: soft\n  model: {name: qwen2.5-0.5b}\n"+
			"  traffic: {rps: 1.0, inputTokens: 400, outputTokens: 100}\n  slo: {ttftP99: 300ms, tpotP99: 30ms}\n", i)
	}
	var err error
	pool, err = v1.LoadPool([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	cur = build(t, pool)
	gpu := func(ref string) *v1.PlanGPU {
		at := slices.IndexFunc(cur.GPUs, func(g v1.PlanGPU) bool { return g.Ref().String() == ref })
		if at < 0 {
			t.Fatalf("setup: no GPU %s", ref)
		}
		return &cur.GPUs[at]
	}
	a0, b1, d0 := gpu("a/0"), gpu("b/1"), gpu("d/0")
	if len(a0.Replicas) != 4 || len(b1.Replicas) != 7 || b1.Mode != v1.ModeMPS || a0.Mode != v1.ModeMPS {
		t.Fatalf("setup: a/0 runs %d replicas, b/1 %d (%s), want 4 and 7 of MPS", len(a0.Replicas), len(b1.Replicas), b1.Mode)
	}
	keep := func(r v1.PlanReplica) bool { n := 0; fmt.Sscanf(r.Tenant, "q%d", &n); return n >= 5 }
	d0.Role, d0.Mode, d0.Reasons = v1.RolePool, v1.ModeMPS, slices.Clone(b1.Reasons)
	for _, r := range b1.Replicas {
		if keep(r) {
			d0.Replicas = append(d0.Replicas, r)
		}
	}
	b1.Replicas = slices.DeleteFunc(b1.Replicas, keep)
	for i := range cur.Tenants {
		for k := range cur.Tenants[i].Replicas {
			if r := &cur.Tenants[i].Replicas[k]; keep(v1.PlanReplica{Tenant: cur.Tenants[i].Name}) {
				r.GPU = d0.Ref()
			}
		}
	}
	for i := range cur.GPUs {
		if g := &cur.GPUs[i]; g.Role == v1.RoleCanary {
			g.Role, g.Reasons = v1.RoleIdle, []v1.Reason{v1.NewReason(v1.ReasonIdle, "not needed by this plan")}
		}
	}
	cur.Summary.GPUsUsed = usedGPUs(cur.GPUs)
	pool.Policy.CanaryGPUs = nil
	if err := v1.ValidatePlan(cur, pool); err != nil {
		t.Fatalf("setup: the plan in force: %v", err)
	}
	return cur, pool
}

// nodeShareBudget is the simulation budget (Options.ConfirmRequests) of the node-share pools: 600
// requests a tenant a run over their 11 req/s, 1,800 over the three runs, enough to judge each
// (confirmMinJudged) in a fifth of the default's time.
const nodeShareBudget = 6600

// splitQ reports whether pl runs q0 on b/1 and q5 on d/0, as the plan in force does.
func splitQ(pl *v1.Plan) bool {
	return slices.Contains(replicasOn(pl, "q0"), "b/1 mps") && slices.Contains(replicasOn(pl, "q5"), "d/0 mps")
}

// t00Sim is the simulator with t00 at 97 % within its SLO in every run whose plan runs it on one
// replica beside the q split as in force (splitQ): the kept plan's count, which the queueing
// model passes, is found short, the re-pack's is not.
func t00Sim(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
	out, err := simRun(ctx, in)
	if tr, ok := out["t00"]; err == nil && ok && tr.Judged > 0 && countOn(in.Plan, "t00") == 1 && splitQ(in.Plan) {
		tr.Attainment = min(tr.Attainment, 0.97)
		out["t00"] = tr
	}
	return out, err
}

// A short MPS tenant whose busy GPU is full (t00 on a/0, four clients of 1/4) is not started on
// the one GPU the kept plan leaves idle, b/0, as its 25 % would break node b's device-plugin MPS
// setting (5 references a GPU: 20 % each): it stays short, its first reason naming b/0 and the
// setting. With a GPU of node c idle too, the start skips b/0 and takes c/0, the next idle GPU of
// its board, on a node with no MPS setting of its own.
func TestKeptPlanShortIdleGPUBreaksNodeMPSSetting(t *testing.T) {
	if raceEnabled {
		t.Skip("simulates the pool several times")
	}
	zero := 0
	cur, pool := nodeSharePools(t, false)
	pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &zero, Simulate: t00Sim, ConfirmRequests: nodeShareBudget})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	t00 := planTenantOf(t, pl, "t00")
	if !t00.Infeasible || countOn(pl, "t00") != 1 || CountMoves(Migration(cur, pl, 1)) != 0 || pl.Summary.GPUsUsed != 3 {
		t.Fatalf("t00: infeasible %v on %d replicas, %d moves, %d GPUs; want short on 1, nothing moved or added (q0 %v) %v",
			t00.Infeasible, countOn(pl, "t00"), CountMoves(Migration(cur, pl, 1)), pl.Summary.GPUsUsed, replicasOn(pl, "q0"), t00.Reasons)
	}
	first := t00.Reasons[0]
	if first.Code != v1.ReasonNoCapacity || !strings.HasPrefix(first.Message, "this plan's simulation finds 1 replica(s) of mps 1/4 short of the SLO") ||
		!strings.Contains(first.Message, "nor a GPU it leaves idle of H100-SXM5-80GB that keeps its node's device-plugin MPS setting: not b/0 (node b's device-plugin MPS setting would cut its clients' share)") {
		t.Errorf("t00's first reason: %v", first)
	}

	cur, pool = nodeSharePools(t, true)
	pl, err = Build(context.Background(), pool, Options{Current: cur, MaxMoves: &zero, Simulate: t00Sim, ConfirmRequests: nodeShareBudget})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	t00 = planTenantOf(t, pl, "t00")
	if t00.Infeasible || countOn(pl, "t00") != 2 || !slices.Contains(replicasOn(pl, "t00"), "c/0 mps") {
		t.Fatalf("with c/0 idle: t00 infeasible %v on %v, want served on a/0 and c/0: %v", t00.Infeasible, replicasOn(pl, "t00"), t00.Reasons)
	}
	if !slices.ContainsFunc(t00.Reasons, func(x v1.Reason) bool {
		return x.Code == v1.ReasonMoveBudget && strings.HasPrefix(x.Message, "tenant t00 starts 1 replica more on c/0, a GPU the plan it keeps leaves idle (mps 1/4 of H100-SXM5-80GB")
	}) {
		t.Errorf("t00's reasons do not say its raise starts on c/0: %v", t00.Reasons)
	}
}
