package plan

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// boundsPool is a fixed count of one llama-3.1-8b replica at 12 req/s on A100s and H200s, a
// tenant capped by maxReplicas below its need, and a redundant fixed count. One replica misses
// the SLO on every A100 slice (on the cheapest, a 1g.20gb, even a lone request misses the TTFT
// target) and meets it on a whole H200.
func boundsPool(t testing.TB, boards string) *v1.Pool {
	t.Helper()
	doc := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: bounds}
fleet:
  nodes:
` + boards + `policy: {burstPoolPercent: 0}
tenants:
- name: fixed-low
  path: t/one
  model: {name: llama-3.1-8b}
  traffic: {rps: 12, inputTokens: 1200, outputTokens: 300}
  slo: {ttftP99: 600ms, tpotP99: 45ms}
  replicas: 1
- name: max-cap
  isolation: shared
  model: {name: mistral-7b-v0.1}
  concurrency: 8
  traffic: {rps: 15, inputTokens: 900, outputTokens: 400}
  slo: {ttftP99: 800ms, tpotP99: 40ms}
  maxReplicas: 2
- name: fixed-redund
  isolation: hard
  model: {name: llama-3.2-1b}
  traffic: {rps: 0.5, inputTokens: 300, outputTokens: 60}
  slo: {e2eP99: 5s}
  replicas: 2
  redundancy: true
`
	pool, err := v1.LoadPool([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

const (
	a100Node = "  - name: a100-a\n    gpus: [{board: A100-SXM4-80GB, count: 4}]\n"
	h200Node = "  - name: h200-b\n    gpus: [{board: H200, count: 4}]\n"
)

func planTenantOf(t *testing.T, pl *v1.Plan, name string) v1.PlanTenant {
	t.Helper()
	for _, pt := range pl.Tenants {
		if pt.Name == name {
			return pt
		}
	}
	t.Fatalf("no tenant %s in the plan", name)
	return v1.PlanTenant{}
}

// A fixed count is planned on a slice kind where it meets the SLO when there is one, not on a
// cheaper one where it misses (a 1g.20gb, where even one request alone misses the TTFT target).
func TestFixedCountPrefersMeetingSlice(t *testing.T) {
	pl := build(t, boundsPool(t, a100Node+h200Node))
	tn := planTenantOf(t, pl, "fixed-low")
	if tn.Infeasible || len(tn.Replicas) != 1 {
		t.Fatalf("fixed-low: infeasible %v, %d replicas; reasons %v", tn.Infeasible, len(tn.Replicas), tn.Reasons)
	}
	if tn.Predicted.TTFTP99.Std() > 570e6 || tn.Reasons[0].Code == v1.ReasonSLOUnmet {
		t.Errorf("fixed-low on %v: TTFT p99 %s, reasons %v", tn.Replicas[0], tn.Predicted.TTFTP99.Std(), tn.Reasons)
	}
	for _, r := range tn.Replicas {
		if r.Slice == v1.SliceMIG && r.GPU.Node == "a100-a" {
			t.Errorf("fixed-low placed on an A100 MIG instance: %v", r)
		}
	}
}

// Where no slice lets the fixed count meet the SLO (60 req/s on A100s, which even a
// tensor-parallel group of four needs three replicas for), the count is still planned as given,
// on the slice where one replica carries the most within the SLO, the tenant is infeasible, and the first
// reason (SLOUnmet) names the fixed count and the count the SLO needs; no reason says the SLO
// holds, and none prints the zero latencies of a saturated state.
func TestFixedCountBelowNeedIsInfeasible(t *testing.T) {
	pool := boundsPool(t, a100Node)
	pool.Tenants[0].Traffic.RPS = 60
	pl := build(t, pool)
	tn := planTenantOf(t, pl, "fixed-low")
	if !tn.Infeasible || len(tn.Replicas) != 1 {
		t.Fatalf("fixed-low on A100s: infeasible %v, %d replicas; reasons %v", tn.Infeasible, len(tn.Replicas), tn.Reasons)
	}
	r := tn.Reasons[0]
	if r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "the fixed 1 replica(s)") ||
		!strings.Contains(r.Message, "it needs") || !strings.Contains(r.Message, "on no allowed slice") {
		t.Errorf("first reason %s: %s; want SLOUnmet naming the fixed count and the need", r.Code, r.Message)
	}
	for _, r := range tn.Reasons {
		if strings.Contains(r.Message, "SLO holds") || strings.Contains(r.Message, "TTFT 0s") {
			t.Errorf("reason %s contradicts the SLOUnmet headline: %s", r.Code, r.Message)
		}
	}
	// not on a slice where no count meets the SLO (a 1g.20gb, where a lone request misses the
	// TTFT target) while more replicas would meet it elsewhere
	if rep := tn.Replicas[0]; rep.Slice == v1.SliceMIG && rep.Instance.Profile == "1g.20gb" {
		t.Errorf("fixed-low on a 1g.20gb: %v", rep)
	}
	// on A100s alone at 12 req/s the count meets the SLO on a tensor-parallel pair, not on the
	// cheaper 1g.20gb where a lone request misses the TTFT target
	rep := planTenantOf(t, build(t, boundsPool(t, a100Node)), "fixed-low")
	if rep.Infeasible || rep.Replicas[0].Slice != v1.SliceExclusive {
		t.Errorf("fixed-low at 12 req/s on A100s: infeasible %v on %v", rep.Infeasible, rep.Replicas)
	}

	// A fixed count that meets the SLO is feasible and says nothing of SLOUnmet.
	tn = planTenantOf(t, pl, "fixed-redund")
	if tn.Infeasible && tn.Reasons[0].Code == v1.ReasonSLOUnmet {
		t.Errorf("fixed-redund: %v", tn.Reasons[0])
	}
}

// maxReplicas below every slice's need: the headline names the bound that decided, not the
// slices where no count meets the SLO.
func TestOverCapHeadlineNamesBound(t *testing.T) {
	pl := build(t, boundsPool(t, a100Node+h200Node))
	tn := planTenantOf(t, pl, "max-cap")
	if !tn.Infeasible {
		t.Fatalf("max-cap served: %v", tn.Replicas)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonOverCap || !strings.Contains(r.Message, "maxReplicas 2") {
		t.Errorf("first reason %s: %s; want OverCap naming maxReplicas 2", r.Code, r.Message)
	}
}

// predicted.maxRps is the highest rate the planned replicas carry within the SLO, behind one
// router: at least the rate a feasible tenant sized from its traffic is offered, on every example
// pool and a synthetic one.
func TestMaxRPSCarriesOfferedRate(t *testing.T) {
	var pools []*v1.Pool
	files, _ := filepath.Glob("../../examples/*.yaml")
	fair, _ := filepath.Glob("../../examples/fair/*.yaml")
	for _, f := range append(files, fair...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if testing.Short() && strings.Contains(f, "lora-200") {
			continue
		}
		if pool, err := v1.LoadPool(data); err == nil {
			pools = append(pools, pool)
		}
	}
	if len(pools) < 4 {
		t.Fatalf("only %d example pools", len(pools))
	}
	pools = append(pools, Synthetic(SyntheticOptions{Tenants: 40, GPUs: 40, Varied: true}, rand.New(rand.NewPCG(40, 7))))
	checked := 0
	for _, pool := range pools {
		pl := build(t, pool)
		spec := map[string]v1.Tenant{}
		for _, tn := range pool.Tenants {
			spec[tn.Name] = tn
		}
		for _, pt := range pl.Tenants {
			s, ok := spec[pt.Name]
			if !ok || pt.Infeasible || s.Replicas != nil || s.Traffic.RPS <= 0 || len(pt.Replicas) == 0 {
				continue
			}
			checked++
			if pt.Predicted.MaxRPS < s.Traffic.RPS {
				t.Errorf("%s/%s: maxRps %.4g below the %.4g req/s it is offered (%d replicas)",
					pool.Metadata.Name, pt.Name, pt.Predicted.MaxRPS, s.Traffic.RPS, len(pt.Replicas))
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d tenants checked", checked)
	}
	t.Logf("%d tenants of %d pools checked", checked, len(pools))
}

// A redundant tenant's replicas run on more than one GPU: when no other GPU holds a slot of its
// kind, one replica goes to another GPU of the board with room for it, or to an idle one.
func TestRedundantSpreadsToAnotherGPU(t *testing.T) {
	for _, boards := range []string{a100Node + h200Node, a100Node} {
		pl := build(t, boundsPool(t, boards))
		tn := planTenantOf(t, pl, "fixed-redund")
		gpus := map[v1.GPURef]bool{}
		for _, r := range tn.Replicas {
			gpus[r.GPU] = true
		}
		if len(tn.Replicas) != 3 || len(gpus) < 2 || hasReason(tn, v1.ReasonRedundancy, "all 3 replicas run on") {
			t.Errorf("fleet %q: fixed-redund has %d replicas on %d GPU(s): %v; reasons %v", boards, len(tn.Replicas), len(gpus), tn.Replicas, tn.Reasons)
		}
		if err := v1.ValidatePlan(pl, boundsPool(t, boards)); err != nil {
			t.Errorf("fleet %q: %v", boards, err)
		}
	}
}

// The same for replicas that share a whole GPU by MPS: the second goes to an idle GPU.
func TestRedundantMPSSpreadsToIdleGPU(t *testing.T) {
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: mps-redund}
fleet:
  nodes:
  - name: n1
    gpus: [{board: H100, count: 2}]
policy: {burstPoolPercent: 0, allowedModes: [mps]}
tenants:
- name: small
  isolation: shared
  model: {name: qwen2.5-0.5b}
  traffic: {rps: 0.5, inputTokens: 300, outputTokens: 60}
  slo: {ttftP99: 2s}
  replicas: 1
  redundancy: true
`))
	if err != nil {
		t.Fatal(err)
	}
	pl := build(t, pool)
	tn := pl.Tenants[0]
	if len(tn.Replicas) != 2 || tn.Replicas[0].GPU == tn.Replicas[1].GPU || tn.Infeasible {
		t.Errorf("replicas %v, infeasible %v, reasons %v", tn.Replicas, tn.Infeasible, tn.Reasons)
	}
	if err := v1.ValidatePlan(pl, pool); err != nil {
		t.Error(err)
	}
}

func reviewPool(t *testing.T, name string) *v1.Pool {
	t.Helper()
	return loadPool(t, "../../testdata/review7/"+name)
}

// gpusOf counts the distinct GPUs a tenant's replicas use.
func gpusOf(tn v1.PlanTenant, pl *v1.Plan) int {
	n := 0
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if r.Tenant == tn.Name {
				n++
				break
			}
		}
	}
	return n
}

// The review's pool of ten tenants: fixed1-heavy (one replica of llama-3.1-8b at 40 req/s) meets
// its SLO only as tensor-parallel 8 on H100s, and the other tenants take GPUs of the one H100
// node. The fixed count falls back to the best kind that fits the idle GPUs, missing the SLO
// with reasons that say so, rather than go unplaced beside idle GPUs.
func TestFixedCountFallsBackWhenBestKindHasNoRoom(t *testing.T) {
	pool := reviewPool(t, "a-bounds-pool.yaml")
	pl := build(t, pool)
	tn := planTenantOf(t, pl, "fixed1-heavy")
	if len(tn.Replicas) != 1 || !tn.Infeasible {
		t.Fatalf("fixed1-heavy: %d replicas, infeasible %v; reasons %v", len(tn.Replicas), tn.Infeasible, tn.Reasons)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "the count meets it, but no GPU was free for it") ||
		!strings.Contains(r.Message, "falls back to the best kind that fits") {
		t.Errorf("first reason %s: %s; want SLOUnmet saying the meeting kind found no room", r.Code, r.Message)
	}
	if !hasReason(tn, v1.ReasonComputeBound, "the best slice kind for the count that fits") {
		t.Errorf("no reason names the fallback: %v", tn.Reasons)
	}
	// The best that fits: on the idle A100s a tensor-parallel group (one replica carries more
	// there than on the single idle H100).
	if got := gpusOf(tn, pl); got < 2 {
		t.Errorf("fixed1-heavy on %d GPU(s): %v", got, tn.Replicas)
	}
	for _, other := range pl.Tenants {
		if other.Name != tn.Name && hasReason(other, v1.ReasonNoCapacity, "") {
			t.Errorf("%s short of GPUs: %v", other.Name, other.Reasons)
		}
	}
	if err := v1.ValidatePlan(pl, pool); err != nil {
		t.Error(err)
	}
}

// One node of 8 H100s: the fixed count meets its SLO only as tensor-parallel 8, which takes the
// node and leaves a hard tenant of one replica without a GPU. The fixed count steps down to
// tensor-parallel 4 (the SLO missed, its reasons say for whom) and both are served.
func TestFixedCountStepsDownForOthers(t *testing.T) {
	pool := reviewPool(t, "a4-fixed-tp8-pool.yaml")
	pl := build(t, pool)
	other, fixed := planTenantOf(t, pl, "other"), planTenantOf(t, pl, "fixed1-heavy")
	if other.Infeasible || len(other.Replicas) != 1 {
		t.Errorf("other: infeasible %v, %d replicas; reasons %v", other.Infeasible, len(other.Replicas), other.Reasons)
	}
	if len(fixed.Replicas) != 1 || gpusOf(fixed, pl) != 4 {
		t.Errorf("fixed1-heavy: %d replicas on %d GPUs, want one tensor-parallel 4 group: %v", len(fixed.Replicas), gpusOf(fixed, pl), fixed.Replicas)
	}
	if r := fixed.Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "serves other in full") ||
		!strings.Contains(r.Message, "a fixed count is a count") {
		t.Errorf("first reason %s: %s; want SLOUnmet naming the step down and whom it served", r.Code, r.Message)
	}
	if err := v1.ValidatePlan(pl, pool); err != nil {
		t.Error(err)
	}
	// Alone on the node the fixed count keeps the kind where it meets the SLO.
	pool.Tenants = pool.Tenants[1:]
	alone := planTenantOf(t, build(t, pool), "fixed1-heavy")
	if alone.Infeasible || len(alone.Replicas) != 1 {
		t.Errorf("fixed1-heavy alone: infeasible %v, %d replicas; reasons %v", alone.Infeasible, len(alone.Replicas), alone.Reasons)
	}
}

// The step down's trials are each a packing and rescue of the whole pool, so that they share a
// budget of fixedStepPackings tenant-packings (ADR 0127): all 16 up to 4,000 tenants, 3 at
// 20,000, none above 64,000. On the pool above, with a budget of 2 tenant-packings (one trial of
// its 2 tenants) the step is made; with 1 (no trial) the fixed count keeps its tensor-parallel 8
// and the other tenant is short.
func TestFixedStepDownBudget(t *testing.T) {
	for _, c := range []struct{ tenants, tries int }{{1, 16}, {4000, 16}, {4001, 15}, {10000, 6}, {20000, 3}, {64000, 1}, {64001, 0}} {
		if got := fixedStepTries(c.tenants, fixedStepPackings); got != c.tries {
			t.Errorf("fixedStepTries(%d) = %d, want %d", c.tenants, got, c.tries)
		}
	}
	pool := reviewPool(t, "a4-fixed-tp8-pool.yaml")
	for _, c := range []struct {
		packings, gpus int
		short          bool
	}{{2, 4, false}, {1, 8, true}} {
		pl := buildWith(t, pool, Options{fixedStepPackings: c.packings})
		other, fixed := planTenantOf(t, pl, "other"), planTenantOf(t, pl, "fixed1-heavy")
		if other.Infeasible != c.short || gpusOf(fixed, pl) != c.gpus {
			t.Errorf("budget of %d tenant-packings: other infeasible %v, fixed1-heavy on %d GPUs; want %v and %d",
				c.packings, other.Infeasible, gpusOf(fixed, pl), c.short, c.gpus)
		}
	}
}

// Two H100s, where no slice lets one replica meet the SLO: the fixed replica goes to the slice
// that carries the most within the SLO (a tensor-parallel pair, 20.6 req/s), not the smallest
// (a 1g.20gb, 0.177 req/s), and the reason says why.
func TestFixedCountShortOfSLOTakesMostCapable(t *testing.T) {
	pool := reviewPool(t, "a2-fixed-short-pool.yaml")
	pl := build(t, pool)
	tn := planTenantOf(t, pl, "fixed1-heavy")
	if len(tn.Replicas) != 1 || !tn.Infeasible || gpusOf(tn, pl) != 2 || tn.Replicas[0].Slice != v1.SliceExclusive {
		t.Fatalf("fixed1-heavy: %d replicas on %d GPUs (%v), infeasible %v", len(tn.Replicas), gpusOf(tn, pl), tn.Replicas, tn.Infeasible)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "where one replica carries the most within the SLO") {
		t.Errorf("first reason %s: %s", r.Code, r.Message)
	}
}

// A fixed count that misses its SLO on every kind steps up only to kinds that carry no less per
// GPU: qwen2.5-7b held to one replica at 2 req/s (concurrency 4, 800 ms TTFT) carries a little
// more on a tensor-parallel group of B200s than on one B200, and took four of them for it.
func TestFixedCountStepUpKeepsRatePerGPU(t *testing.T) {
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: fixed-step-up}
fleet:
  nodes:
  - name: b1
    gpus: [{board: B200-180GB, count: 8}]
tenants:
- name: t7b
  isolation: shared
  model: {name: qwen2.5-7b}
  concurrency: 4
  traffic: {rps: 2, inputTokens: 100, outputTokens: 800, lengths: fixed}
  slo: {ttftP99: 800ms, tpotP99: 25ms}
  replicas: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	pl := build(t, pool)
	tn := planTenantOf(t, pl, "t7b")
	if len(tn.Replicas) != 1 || !tn.Infeasible || pl.Summary.GPUsUsed != 1 {
		t.Fatalf("t7b: %d replicas (%v) on a plan of %d GPUs, infeasible %v; reasons %v", len(tn.Replicas), tn.Replicas, pl.Summary.GPUsUsed, tn.Infeasible, tn.Reasons)
	}
	if r := tn.Reasons[0]; r.Code != v1.ReasonSLOUnmet || !strings.Contains(r.Message, "no less per GPU") {
		t.Errorf("first reason %s: %s", r.Code, r.Message)
	}
}
