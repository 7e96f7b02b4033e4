package plan

import (
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// The first finding: a 7B model at 0.2 req/s with a 5 s TTFT target and concurrency 1
// on an idle H100 was infeasible ("limit max-seqs"). With the slots as a queue it is served, no
// reason blames the concurrency, and the count is within one of the fewest the simulator is
// satisfied with (one replica is busy half the time with 2.5 s requests: its p99 wait is longer
// than 5 s).
func TestConcurrencyOneIsFeasible(t *testing.T) {
	pool := singleTenantPool(t, "qwen2.5-7b", 1, 0.2, 512, 256, "5s", "100ms", 8)
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if tn.Infeasible {
		t.Fatalf("infeasible: %v", tn.Reasons)
	}
	if n, k := len(tn.Replicas), fewestSimulated(t, pool, 8, 2000); n > k+1 || n < k {
		t.Errorf("%d replicas planned, the simulator is satisfied with %d", n, k)
	}
	for _, r := range tn.Reasons {
		if strings.Contains(r.Message, "max-seqs") {
			t.Errorf("reason %s blames max-seqs: %s", r.Code, r.Message)
		}
	}
}

// A tenant is infeasible by its SLO only when a single request misses it, and the reason names
// the term: here a 1 ms TPOT target, which no batch-1 step meets.
func TestInfeasibleNamesTheTerm(t *testing.T) {
	pool := singleTenantPool(t, "qwen2.5-7b", 8, 1, 512, 256, "5s", "1ms", 8)
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if !tn.Infeasible {
		t.Fatalf("a 1 ms TPOT target was planned: %v", tn.Replicas)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "TPOT at batch 1") {
		t.Errorf("first reason %s: %s; want SLOUnmet naming TPOT at batch 1", r.Code, r.Message)
	}
	pool = singleTenantPool(t, "qwen2.5-7b", 8, 1, 512, 256, "1ms", "100ms", 8)
	if r := build(t, pool).Tenants[0].Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "TTFT at a trickle") {
		t.Errorf("first reason %s: %s; want SLOUnmet naming TTFT at a trickle", r.Code, r.Message)
	}
}

// replicas: fixes the count even when the SLO needs more (the tenant is then infeasible and its
// SLOUnmet headline says by how much); minReplicas raises the sized count (ReplicaBounds); maxReplicas below the need rejects
// every slice and the reason names the bound.
func TestReplicaCountsHonoured(t *testing.T) {
	base := func() *v1.Pool { return singleTenantPool(t, "qwen2.5-7b", 1, 4, 512, 256, "2s", "100ms", 32) }
	need := len(build(t, base()).Tenants[0].Replicas)
	if need < 3 {
		t.Fatalf("the load needs %d replicas; the test wants at least 3", need)
	}

	// below what every slice kind needs (tensor-parallel pairs need fewer replicas than whole
	// GPUs): planned as given, infeasible, and the headline names the fixed count and the need
	fixed := 2
	pool := base()
	pool.Tenants[0].Replicas = &fixed
	tn := build(t, pool).Tenants[0]
	if !tn.Infeasible || len(tn.Replicas) != fixed {
		t.Fatalf("fixed %d: infeasible %v, %d replicas", fixed, tn.Infeasible, len(tn.Replicas))
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "the fixed 2 replica(s)") || !strings.Contains(r.Message, "it needs") ||
		!hasReason(tn, v1.ReasonFixedReplicas, "fixed at") || !hasReason(tn, v1.ReasonComputeBound, "miss the SLO") {
		t.Errorf("fixed count below the need: reasons %v", tn.Reasons)
	}

	low := need + 3
	pool = base()
	pool.Tenants[0].MinReplicas = &low
	tn = build(t, pool).Tenants[0]
	if len(tn.Replicas) != low || !hasReason(tn, v1.ReasonReplicaBounds, "minReplicas") {
		t.Errorf("minReplicas %d: %d replicas, reasons %v", low, len(tn.Replicas), tn.Reasons)
	}

	// below what any slice kind needs: tensor-parallel groups, faster per replica, need fewer
	// replicas than whole GPUs (8 of TP 2 here), so the bound is set below all of them
	high := 2
	pool = base()
	pool.Tenants[0].MaxReplicas = &high
	tn = build(t, pool).Tenants[0]
	if !tn.Infeasible || !hasReason(tn, v1.ReasonOverCap, "maxReplicas") {
		t.Errorf("maxReplicas %d below the need %d: infeasible %v, reasons %v", high, need, tn.Infeasible, tn.Reasons)
	}
}

// redundancy adds its replica to the load's (or the fixed) count first and minReplicas is a
// floor on the sum, as docs/api-v1.md says; the reasons say which of them set the count: a
// floor met by load + 1 gets no ReplicaBounds reason, one above it does, and the Redundancy
// reason then says the floor decides.
func TestRedundancyAndFloors(t *testing.T) {
	base := func() *v1.Pool { return singleTenantPool(t, "qwen2.5-7b", 8, 0.2, 512, 256, "2s", "100ms", 8) }
	need := len(build(t, base()).Tenants[0].Replicas)
	if need != 1 {
		t.Fatalf("the load needs %d replicas; the test wants 1", need)
	}
	for _, tc := range []struct {
		name             string
		min, fixed       int
		want             int
		bounds           bool
		redundancyReason string
	}{
		{"min2", 2, 0, 2, false, "one replica beyond the 1 the load needs (2 in all)"},
		{"min3", 3, 0, 3, true, "within the 3 in all that minReplicas 3 sets"},
		{"fixed2", 0, 2, 3, false, "one replica beyond the 2 the pool fixes (3 in all)"},
	} {
		pool := base()
		tn := &pool.Tenants[0]
		tn.Redundancy = true
		if tc.min > 0 {
			tn.MinReplicas = &tc.min
		}
		if tc.fixed > 0 {
			tn.Replicas = &tc.fixed
		}
		got := build(t, pool).Tenants[0]
		if len(got.Replicas) != tc.want {
			t.Errorf("%s: %d replicas, want %d", tc.name, len(got.Replicas), tc.want)
		}
		if b := hasReason(got, v1.ReasonReplicaBounds, "minReplicas"); b != tc.bounds {
			t.Errorf("%s: ReplicaBounds reason %v, want %v: %v", tc.name, b, tc.bounds, got.Reasons)
		}
		if !hasReason(got, v1.ReasonRedundancy, tc.redundancyReason) {
			t.Errorf("%s: no Redundancy reason saying %q: %v", tc.name, tc.redundancyReason, got.Reasons)
		}
	}
}

func hasReason(tn v1.PlanTenant, code v1.ReasonCode, text string) bool {
	for _, r := range tn.Reasons {
		if r.Code == code && strings.Contains(r.Message, text) {
			return true
		}
	}
	return false
}

// The device plugin shares whole GPUs through MPS only on a node whose migStrategy is none, and
// never time-slices and MPS-shares on one node. Free GPUs n0/0, n1/0, n1/1, n0/1: a MIG GPU takes
// n0/0; a whole-GPU MPS unit then skips n0 for n1/0; a time-sliced GPU skips n1 (MPS) for n0/1;
// the next MPS unit takes n1/1, and one more finds no node it may join and is left unplaced.
func TestWholeMPSNotBesideMIG(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	p := &planner{nodeUse: map[string]map[string]migUse{}}
	free := map[string][]*gpuPlan{}
	for _, ref := range []v1.GPURef{{Node: "n0", Index: 0}, {Node: "n1", Index: 0}, {Node: "n1", Index: 1}, {Node: "n0", Index: 1}, {Node: "n0", Index: 2}} {
		free[b.Name] = append(free[b.Name], &gpuPlan{fg: fleetGPU{ref: ref, board: b}})
	}
	tn := &tenant{t: v1.Tenant{Name: "a", Isolation: v1.IsolationShared}, group: "shared"}
	whole := func(k v1.SliceKind) map[string]migUse {
		return wholeWant(&unit{key: groupKey{group: "shared"}, c: &cand{board: b, kind: k, share: 2}, reps: []replica{{tn}, {tn}}})
	}
	for i, c := range []struct {
		want map[string]migUse
		at   string // "" : not placed
	}{
		{map[string]migUse{"1g.10gb": {kind: v1.SliceMIG, share: 1}, migStrategyKey: {group: "mixed"}}, "n0/0"},
		{whole(v1.SliceMPS), "n1/0"},
		{whole(v1.SliceTimeSlice), "n0/1"},
		{whole(v1.SliceMPS), "n1/1"},
		{whole(v1.SliceMPS), ""},
	} {
		g := p.takeCompatible(b, free, c.want)
		got := ""
		if g != nil {
			got = g.fg.ref.String()
		}
		if got != c.at {
			t.Errorf("step %d: placed on %q, want %q", i, got, c.at)
		}
	}
}

// Bursty traffic is sized for its bursts (4 × rps): the prediction says so in burstRps, and
// maxRps, an instantaneous rate, covers the burst; a Poisson tenant has no burstRps.
func TestBurstRPSPredicted(t *testing.T) {
	pool := singleTenantPool(t, "qwen2.5-7b", 8, 5, 512, 256, "2s", "100ms", 16)
	if p := build(t, pool).Tenants[0].Predicted; p.BurstRPS != 0 || p.MaxRPS < 5 {
		t.Errorf("Poisson: predicted %+v, want no burstRps and maxRps ≥ 5", p)
	}
	pool.Tenants[0].Traffic.Pattern = v1.PatternBursty
	tn := build(t, pool).Tenants[0]
	if tn.Infeasible {
		t.Fatalf("bursty tenant infeasible: %v", tn.Reasons)
	}
	if p := tn.Predicted; p.BurstRPS != 20 || p.MaxRPS < p.BurstRPS {
		t.Errorf("bursty: predicted %+v, want burstRps 20 and maxRps ≥ it", p)
	}
}

// A board whose compute the catalog does not know holds a 7B model but sizes no replica. The
// tenant is NoFit, and the reason says the rate cannot be predicted, not that no slice holds the
// model (it said "no slice … holds it (the largest, exclusive GPU, has 47.79 GiB); at least 3 GPUs
// per replica would be needed" of 9.5 GiB). Every catalog board has its figures now
// (TestEveryBoardHasComputeFigures in package gpu), so the test takes the RTX PRO 5000's, as the
// catalog had it before: no TFLOPS, no SM count. With them the same tenant is planned.
func TestNoFitOnUnknownComputeNamesIt(t *testing.T) {
	pool := smallPool(v1.Tenant{Name: "a", Model: v1.Model{Name: "llama-2-7b", Quantization: "int8"}, Traffic: v1.Traffic{RPS: 0.5}})
	pool.Fleet.Nodes[0].GPUs[0] = v1.GPUGroup{Board: "RTX-PRO-5000-Blackwell-48GB", Count: 2}
	if tn := build(t, pool).Tenants[0]; tn.Infeasible {
		t.Fatalf("with the catalog's figures: infeasible: %v", tn.Reasons)
	}
	withoutCompute(t, "RTX-PRO-5000-Blackwell-48GB")
	tn := build(t, pool).Tenants[0]
	if !tn.Infeasible {
		t.Fatalf("without compute figures: planned %v", tn.Replicas)
	}
	r := tn.Reasons[0]
	if r.Code != v1.ReasonNoFit || !strings.Contains(r.Message, "rate cannot be predicted") || strings.Contains(r.Message, "no slice of") {
		t.Errorf("first reason %s: %s; want NoFit naming the unknown rate", r.Code, r.Message)
	}
}

// withoutCompute zeroes a catalog board's SM count and TFLOPS for the test, as for a board the
// catalog has no compute figures for, and restores them after. The catalog's boards are shared:
// tests that call it must not run in parallel.
func withoutCompute(t *testing.T, board string) {
	t.Helper()
	b, err := gpu.Lookup(board)
	if err != nil {
		t.Fatal(err)
	}
	sms, bf16, fp8 := b.SMs, b.BF16TFLOPS, b.FP8TFLOPS
	b.SMs, b.BF16TFLOPS, b.FP8TFLOPS = 0, 0, 0
	t.Cleanup(func() { b.SMs, b.BF16TFLOPS, b.FP8TFLOPS = sms, bf16, fp8 })
}

// qwen2.5-72b int4-awq at 0.022 req/s, bursty, with 2,000-token prompts and an e2e target of
// 20 s, on one A100 PCIe 80GB and one H20: the whole H20 meets the split targets (TTFT 2.8 s at a
// trickle against 5 s) with more replicas than the fleet holds, the H20's 4g.48gb meets them
// with no count. The headline named the 4g.48gb ("no allowed slice meets the SLO … no replica
// count helps"); the term is the fleet.
func TestNoCapacityBeatsSLOUnmetHeadline(t *testing.T) {
	zero, c := 0, 256
	e2e := v1.Duration(20 * time.Second)
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "e2e"},
		Fleet: v1.Fleet{Nodes: []v1.Node{{Name: "n0", GPUs: []v1.GPUGroup{{Board: "A100-PCIe-80GB", Count: 1}}},
			{Name: "n1", GPUs: []v1.GPUGroup{{Board: "H20-96GB", Count: 1}}}}},
		Policy: v1.Policy{BurstPoolPercent: &zero},
		Tenants: []v1.Tenant{{Name: "t5", Path: "team0/svc", Isolation: v1.IsolationSoft, Concurrency: c,
			Model:   v1.Model{Name: "qwen2.5-72b", Quantization: "int4-awq"},
			Traffic: v1.Traffic{RPS: 0.022, InputTokens: 2000, OutputTokens: 512, Pattern: v1.PatternBursty, Lengths: v1.LengthsUniform},
			SLO:     v1.SLO{E2EP99: &e2e}}}}
	v1.Default(pool)
	tn := build(t, pool).Tenants[0]
	if !tn.Infeasible {
		t.Fatalf("planned: %v", tn.Replicas)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonNoCapacity || !strings.Contains(r.Message, "no replica count meets it") {
		t.Errorf("first reason %s: %s; want NoCapacity naming the fleet", r.Code, r.Message)
	}
}

// qwen2.5-7b fp8 at 1.9 req/s on H20s with redundancy and maxReplicas 1: one replica meets the
// SLO, the spare makes two. The reasons said the SLO needs 2 ("the fewest replicas that do …
// are 2"); they now say one of the two is redundancy's spare.
func TestOverCapNamesTheSpare(t *testing.T) {
	zero, one, c := 0, 1, 64
	ttft, tpot := v1.Duration(800*time.Millisecond), v1.Duration(30*time.Millisecond)
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "spare"},
		Fleet:  v1.Fleet{Nodes: []v1.Node{{Name: "n0", GPUs: []v1.GPUGroup{{Board: "H20-96GB", Count: 4}}}}},
		Policy: v1.Policy{BurstPoolPercent: &zero},
		Tenants: []v1.Tenant{{Name: "t0", Isolation: v1.IsolationShared, Concurrency: c, Redundancy: true, MaxReplicas: &one,
			Model:   v1.Model{Name: "qwen2.5-7b", Quantization: "fp8"},
			Traffic: v1.Traffic{RPS: 1.916, InputTokens: 500, OutputTokens: 128, Pattern: v1.PatternConstant},
			SLO:     v1.SLO{TTFTP99: &ttft, TPOTP99: &tpot}}}}
	v1.Default(pool)
	tn := build(t, pool).Tenants[0]
	if !tn.Infeasible {
		t.Fatalf("planned: %v", tn.Replicas)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonOverCap || !strings.Contains(r.Message, "the spare redundancy asks for") {
		t.Errorf("first reason %s: %s; want OverCap naming the spare", r.Code, r.Message)
	}
	pool.Tenants[0].Redundancy = false
	if tn := build(t, pool).Tenants[0]; tn.Infeasible || len(tn.Replicas) != 1 {
		t.Errorf("without redundancy: infeasible %v, %d replicas; want 1", tn.Infeasible, len(tn.Replicas))
	}
}
