package k8s

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/control"
	"gpupool.dev/gpupool/internal/plan"
)

// The pool reconciler plans with its Planning, as `gpupool plan` does: from scratch and against
// the plan in force, a GPUPool's plan is confirmed by the simulator it is given (each tenant
// carries the Simulated reason), and with the zero Planning by the queueing model alone. A
// reconcile with the same inputs reuses the plan made last time.
func TestPoolReconcilerPlanning(t *testing.T) {
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: p}
fleet:
  nodes:
  - name: n1
    gpus: [{board: H100-SXM5-80GB, count: 2}]
policy: {burstPoolPercent: 0}
tenants:
- name: chat
  model: {name: qwen2.5-7b}
  traffic: {rps: 2, inputTokens: 500, outputTokens: 200}
  slo: {ttftP99: 1s, tpotP99: 50ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	sim := func(_ context.Context, in plan.SimInput) (map[string]plan.SimTenant, error) {
		runs.Add(1)
		out := map[string]plan.SimTenant{}
		for _, tn := range in.Pool.Tenants {
			out[tn.Name] = plan.SimTenant{Judged: 5000, Attainment: 1, TTFTP99: 10 * time.Millisecond, TPOTP99: 5 * time.Millisecond}
		}
		return out, nil
	}
	simulated := func(p *v1.Plan) bool {
		_, ok := p.Tenants[0].Reason(v1.ReasonSimulated)
		return ok
	}
	ctx := context.Background()
	in := &poolInputs{pool: pool}
	r := &PoolReconciler{Planning: control.Planning{Simulate: sim}}
	gp := &GPUPool{}
	first, _, err := r.build(ctx, gp, in)
	if err != nil || !simulated(first) || runs.Load() == 0 {
		t.Fatalf("from scratch: err %v, %d runs, reasons %+v; want a confirmed plan", err, runs.Load(), first.Tenants[0].Reasons)
	}
	if gp.Status.CurrentPlan, err = encodePlan(first); err != nil {
		t.Fatal(err)
	}
	before := runs.Load()
	again, note, err := r.build(ctx, gp, in)
	if err != nil || !simulated(again) || runs.Load() == before || note != "; re-planned against the plan in force" {
		t.Fatalf("against the plan in force: err %v, note %q, %d more runs; want a confirmed re-plan", err, note, runs.Load()-before)
	}
	// The same Pool document and plan in force: the plan made last time, without simulating again.
	before = runs.Load()
	same, _, err := r.build(ctx, gp, in)
	if err != nil || runs.Load() != before || !reflect.DeepEqual(same, again) {
		t.Fatalf("same inputs: err %v, %d more runs, equal plan %v; want the plan made last time", err, runs.Load()-before, reflect.DeepEqual(same, again))
	}
	// Another Pool document (a new rate) is planned again.
	other := *pool
	other.Tenants = slices.Clone(pool.Tenants)
	other.Tenants[0].Traffic.RPS = 3
	if _, _, err := r.build(ctx, gp, &poolInputs{pool: &other}); err != nil || runs.Load() == before {
		t.Fatalf("a new rate: err %v, %d more runs; want a new plan", err, runs.Load()-before)
	}
	plain, _, err := (&PoolReconciler{}).build(ctx, &GPUPool{}, in)
	if err != nil || simulated(plain) {
		t.Fatalf("zero Planning: err %v, simulated %v; want the model alone", err, simulated(plain))
	}
}
