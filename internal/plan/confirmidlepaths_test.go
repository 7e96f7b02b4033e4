package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// nodeSharePools are a pool of four llama-3.1-8b tenants of one trust path (t00–t03, mps 1/4:
// 25 % of the SMs each) and seven qwen2.5-0.5b of another (q0–q6), on H100s: node a (one GPU),
// node b (two), with spare node c (one), and node d (one). The plan in force runs t00–t03 on a/0
// (full), q0–q4 on b/1 (node b's device-plugin MPS setting: 5 references a GPU, 20 % each) and
// q5–q6 on d/0, and leaves b/0 and c/0 idle: planned with b/0, c/0 and d/0 as canary GPUs (all q
// on b/1), then q5–q6 moved to d/0. The re-pack runs the q on one GPU again, which moves
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

// boardSim is the simulator with big at 97 % within its SLO in every run whose plan runs it on
// fewer than h100 H100s, or fewer than b200 B200s (counting only the board it runs on).
func boardSim(h100, b200 int) Simulator {
	return func(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
		out, err := simRun(ctx, in)
		if err != nil {
			return nil, err
		}
		on := map[string]int{}
		for _, b := range bigOn(in.Plan) {
			on[strings.SplitN(b, "-", 2)[0]]++
		}
		h, b := on["H100"], on["B200"]
		if tr, ok := out["big"]; ok && tr.Judged > 0 && (h > 0 && h < h100 || b > 0 && b < b200) {
			tr.Attainment = min(tr.Attainment, 0.97)
			out["big"] = tr
		}
		return out, nil
	}
}

// bigOn is the boards of the GPUs pl runs big on, whole or in a MIG instance, in fleet order
// ("B200-180GB", …).
func bigOn(pl *v1.Plan) []string {
	var out []string
	isBig := func(r v1.PlanReplica) bool { return r.Tenant == "big" }
	for _, g := range pl.GPUs {
		if slices.ContainsFunc(g.Replicas, isBig) || slices.ContainsFunc(g.Instances, func(in v1.PlanInstance) bool { return slices.ContainsFunc(in.Replicas, isBig) }) {
			out = append(out, g.Board)
		}
	}
	return out
}

// weighPools are idlePools' tenant big on 2 of node h's 3 H100s in force, with b200 B200s, each
// on a node of its own (b0, b1, …), idle: planned with the B200s as canary GPUs, then those GPUs
// made idle. Only exclusive GPUs are allowed and no node holds two B200s, so big's replica more
// on B200s (neither a MIG instance nor a tensor-parallel pair) is a B200 more.
func weighPools(t *testing.T, h100, b200 int, rps string) (cur *v1.Plan, pool *v1.Pool) {
	t.Helper()
	var nodes, canary []string
	for i := range h100 {
		nodes = append(nodes, fmt.Sprintf("  - name: h%d\n    gpus: [{board: H100-80GB, count: 1}]\n", i))
	}
	for i := range b200 {
		nodes = append(nodes, fmt.Sprintf("  - name: b%d\n    gpus: [{board: B200-180GB, count: 1}]\n", i))
		canary = append(canary, fmt.Sprintf("b%d/0", i))
	}
	canaries := "  canaryGPUs: [" + strings.Join(canary, ", ") + "]\n"
	yaml := "apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: idle-weigh}\nfleet:\n  nodes:\n" +
		strings.Join(nodes, "") +
		"policy:\n  burstPoolPercent: 0\n  allowedModes: [exclusive]\n" + canaries + `tenants:
- name: big
  path: a/a
  isolation: hard
  model: {name: qwen2.5-14b, quantization: bf16}
  traffic: {rps: ` + rps + `, inputTokens: 1500, outputTokens: 300}
  slo: {ttftP99: 1500ms, tpotP99: 40ms}
`
	first, err := v1.LoadPool([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cur = build(t, first)
	if on := bigOn(cur); len(on) == 0 || slices.ContainsFunc(on, func(b string) bool { return b != "H100-SXM5-80GB" }) {
		t.Fatalf("setup: big in force on %v, want H100s", on)
	}
	for i := range cur.GPUs {
		if g := &cur.GPUs[i]; g.Role == v1.RoleCanary {
			g.Role, g.Reasons = v1.RoleIdle, []v1.Reason{v1.NewReason(v1.ReasonIdle, "not needed by this plan")}
		}
	}
	pool, err = v1.LoadPool([]byte(strings.Replace(yaml, canaries, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	return cur, pool
}

// The start on an idle GPU changes the weighing, without a move budget. weighPools' big runs on 2
// H100s in force (h0/0, h1/0; h2/0 idle). The simulator finds it short on fewer than 3 H100s and
// on fewer than 2 B200s, so the re-pack (big on B200s) is raised by Build's own confirmation to 2
// B200s, moving big. With a simulator that passes 2 H100s the kept plan wins that weighing (2
// GPUs each, no move) and is returned. Here its confirmation starts big's third replica on the
// idle h2/0, the plans are weighed again with the kept plan's 3 GPUs, and the re-pack's 2 win: the
// plan returned is the re-pack. (The converse, a kept plan that still wins on GPUs after its start,
// needs a re-pack on more GPUs than the kept plan has after it; a single tenant's re-pack gets
// there only by its confirmation finding the kept kind at the kept count short first, and then
// the kept plan no longer serves the tenant where it runs, keepServed places it anew, and no
// start on an idle GPU is made.)
func TestKeptPlanIdleStartWeighedAgainstRepack(t *testing.T) {
	if raceEnabled {
		t.Skip("simulates the pool several times")
	}
	cur, pool := weighPools(t, 3, 2, "12")
	if on := bigOn(cur); len(on) != 2 {
		t.Fatalf("setup: big in force on %v, want 2 H100s", on)
	}
	repack, err := Build(context.Background(), pool, Options{Current: cur, Simulate: boardSim(3, 2), repackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if on := bigOn(repack); len(on) != 2 || slices.ContainsFunc(on, func(b string) bool { return b != "B200-180GB" }) ||
		planTenantOf(t, repack, "big").Infeasible || repack.Summary.GPUsUsed != 2 || CountMoves(Migration(cur, repack, 1)) == 0 {
		t.Fatalf("setup: the re-pack runs big on %v (%d GPUs, %d moves), want 2 B200s", on, repack.Summary.GPUsUsed, CountMoves(Migration(cur, repack, 1)))
	}
	// with the kept plan's 2 H100s found enough, it wins the weighing
	kept, err := Build(context.Background(), pool, Options{Current: cur, Simulate: boardSim(2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if on := bigOn(kept); len(on) != 2 || on[0] != "H100-SXM5-80GB" || !strings.HasPrefix(lastReason(kept, "big"), "the plan in force is kept: re-packing would save no GPU (it runs the pool on 2 too)") {
		t.Fatalf("setup: with 2 H100s enough, big on %v, reason %q; want the kept plan", on, lastReason(kept, "big"))
	}
	var mu sync.Mutex
	raised := false // the simulator was given the kept plan with big's third replica on h2/0
	sim := func(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
		mu.Lock()
		raised = raised || slices.Equal(replicasOn(in.Plan, "big"), []string{"h0/0 exclusive", "h1/0 exclusive", "h2/0 exclusive"})
		mu.Unlock()
		return boardSim(3, 2)(ctx, in)
	}
	pl, err := Build(context.Background(), pool, Options{Current: cur, Simulate: sim})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	if !raised {
		t.Errorf("the kept plan was never raised onto h2/0")
	}
	big := planTenantOf(t, pl, "big")
	if on := bigOn(pl); !samePlacement(pl, repack) || len(on) != 2 || on[0] != "B200-180GB" || big.Infeasible || pl.Summary.GPUsUsed != 2 {
		t.Errorf("big on %v (%d GPUs, infeasible %v), want the re-pack's 2 B200s over the kept plan's 3 H100s", on, pl.Summary.GPUsUsed, big.Infeasible)
	}
	if slices.ContainsFunc(big.Reasons, func(x v1.Reason) bool { return x.Code == v1.ReasonMoveBudget }) {
		t.Errorf("the re-pack returned carries a kept plan's reason: %v", big.Reasons)
	}
}

// A short kept tenant already at its maxReplicas is not started on an idle GPU: idlePools' big
// with maxReplicas 2, found short on its 2 H100s with h/2 idle, stays on 2 and is marked short,
// its first reason naming the bound; h/2 stays idle.
func TestKeptPlanShortAtMaxReplicasNotStartedOnIdle(t *testing.T) {
	if raceEnabled {
		t.Skip("simulates the pool several times")
	}
	cur, pool := idlePools(t, "3")
	two := 2
	pool.Tenants[0].MaxReplicas = &two
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &zero, Simulate: h100Sim})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	big := planTenantOf(t, pl, "big")
	if !big.Infeasible || countOn(pl, "big") != 2 || pl.Summary.GPUsUsed != 2 || CountMoves(Migration(cur, pl, 1)) != 0 {
		t.Fatalf("big: infeasible %v on %d replicas, %d GPUs, %d moves; want short on its 2 in force", big.Infeasible, countOn(pl, "big"), pl.Summary.GPUsUsed, CountMoves(Migration(cur, pl, 1)))
	}
	first := big.Reasons[0]
	if first.Code != v1.ReasonOverCap || !strings.HasPrefix(first.Message, "this plan's simulation finds 2 replica(s) of exclusive GPU short of the SLO") ||
		!strings.HasSuffix(first.Message, "and maxReplicas 2 allows no more") {
		t.Errorf("big's first reason: %v", first)
	}
	if r := simReasonOf(pl, "big"); !strings.Contains(r, "not raised (maxReplicas 2)") {
		t.Errorf("big's Simulated reason: %q", r)
	}
	for _, g := range pl.GPUs {
		if g.Ref().String() == "h/2" && (g.Role != v1.RoleIdle || g.ReplicaCount() > 0) {
			t.Errorf("h/2: role %s with %d replicas, want idle", g.Role, g.ReplicaCount())
		}
	}
}

// canaryIdle is the pool of yaml and the plan in force for it: planned with canaries (the
// policy's canaryGPUs line, in yaml) as canary GPUs, then those GPUs made idle and the line
// dropped from the pool.
func canaryIdle(t *testing.T, yaml, canaries string) (cur *v1.Plan, pool *v1.Pool) {
	t.Helper()
	if !strings.Contains(yaml, canaries) {
		t.Fatalf("setup: the pool has no line %q", canaries)
	}
	first, err := v1.LoadPool([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cur = build(t, first)
	for i := range cur.GPUs {
		if g := &cur.GPUs[i]; g.Role == v1.RoleCanary {
			g.Role, g.Reasons = v1.RoleIdle, []v1.Reason{v1.NewReason(v1.ReasonIdle, "not needed by this plan")}
		}
	}
	pool, err = v1.LoadPool([]byte(strings.Replace(yaml, canaries, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	return cur, pool
}

// A short kept tenant whose slice kind in force is a MIG instance, or a tensor-parallel group, is
// not started on a GPU the plan leaves idle, though one of its board is: a MIG instance there
// would be a re-partition, a tensor-parallel replica several GPUs of one node. Each stays short,
// its first reason saying so. big runs in force on node h's H100s (the B200s canary GPUs, then
// idle): qwen2.5-14b on MIG 7g.80gb instances (only MIG allowed), or llama-3.1-70b, whose
// weights no H100 holds, tensor-parallel; the re-pack runs it on B200s, a move max-moves 0 does
// not allow, and the simulator finds it short on H100s at the count in force.
func TestKeptPlanShortMIGOrTPNotStartedOnIdle(t *testing.T) {
	if raceEnabled {
		t.Skip("simulates the pool several times")
	}
	for _, tc := range []struct {
		name, modes, model, traffic, label, why string
	}{
		{"mig", "[mig]", "qwen2.5-14b", "{rps: 4, inputTokens: 1500, outputTokens: 300}", "mig 7g.80gb", "nor a GPU it leaves idle (a MIG instance there is a re-partition: the re-pack's to make)"},
		{"tp", "[exclusive]", "llama-3.1-70b", "{rps: 1, inputTokens: 500, outputTokens: 100}", "tensor-parallel 2 GPUs", "nor a GPU it leaves idle (a tensor-parallel replica takes 2 GPUs of one node: the re-pack's to place)"},
	} {
		canaries := "  canaryGPUs: [b/0, b/1]\n"
		yaml := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: idle-kind}
fleet:
  nodes:
  - name: h
    gpus: [{board: H100-80GB, count: 4}]
  - name: b
    gpus: [{board: B200-180GB, count: 2}]
policy:
  burstPoolPercent: 0
  allowedModes: ` + tc.modes + "\n" + canaries + `tenants:
- name: big
  path: a/a
  isolation: hard
  model: {name: ` + tc.model + `, quantization: bf16}
  traffic: ` + tc.traffic + `
  slo: {ttftP99: 1500ms, tpotP99: 100ms}
`
		cur, pool := canaryIdle(t, yaml, canaries)
		n, replicas := countOn(cur, "big"), len(planTenantOf(t, cur, "big").Replicas) // a tensor-parallel replica is on each of its GPUs
		if on := bigOn(cur); len(on) == 0 || len(on) > 3 || slices.ContainsFunc(on, func(b string) bool { return !strings.HasPrefix(b, "H100") }) ||
			!strings.Contains(planTenantOf(t, cur, "big").Reasons[0].Message, tc.label) {
			t.Fatalf("%s: setup: big in force on %v (%d replicas), want %s on at most 3 of node h's 4 H100s: %v", tc.name, on, n, tc.label, planTenantOf(t, cur, "big").Reasons)
		}
		short := func(ctx context.Context, in SimInput) (map[string]SimTenant, error) {
			out, err := simRun(ctx, in)
			if tr, ok := out["big"]; err == nil && ok && tr.Judged > 0 && countOn(in.Plan, "big") <= n && slices.Contains(bigOn(in.Plan), "H100-SXM5-80GB") {
				tr.Attainment = min(tr.Attainment, 0.97)
				out["big"] = tr
			}
			return out, err
		}
		zero := 0
		pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &zero, Simulate: short})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatal(err)
		}
		big := planTenantOf(t, pl, "big")
		if !big.Infeasible || countOn(pl, "big") != n || CountMoves(Migration(cur, pl, 1)) != 0 || pl.Summary.GPUsUsed != cur.Summary.GPUsUsed {
			t.Fatalf("%s: big infeasible %v on %d replicas (%d GPUs, %d moves), want short on its %d in force", tc.name, big.Infeasible, countOn(pl, "big"), pl.Summary.GPUsUsed, CountMoves(Migration(cur, pl, 1)), n)
		}
		first := big.Reasons[0]
		if first.Code != v1.ReasonNoCapacity || !strings.HasPrefix(first.Message, fmt.Sprintf("this plan's simulation finds %d replica(s) of %s short of the SLO", replicas, tc.label)) ||
			!strings.Contains(first.Message, tc.why) {
			t.Errorf("%s: big's first reason: %v", tc.name, first)
		}
	}
}
