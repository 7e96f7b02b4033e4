package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// edgePool is a pool of n copies of one tenant at the queueing model's edge (ADR 0104):
// qwen2.5-7b at 0.5 req/s of 4000+800 tokens, which four B200 mig 1g.23gb instances carry at
// 0.95 of the model's capacity (0.524 req/s), on gpus B200 GPUs. A replicas count, when set,
// fixes the tenants' counts.
func edgePool(t *testing.T, n, gpus int, replicas int) *v1.Pool {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata:\n  name: edge\nfleet:\n  nodes:\n")
	for i := 0; i < gpus; i += 8 {
		fmt.Fprintf(&b, "  - name: node-%03d\n    gpus:\n    - {board: B200, count: %d}\n", i/8, min(8, gpus-i))
	}
	b.WriteString("tenants:\n")
	for i := range n {
		fmt.Fprintf(&b, "- name: e%03d\n  path: org%d/team\n  isolation: soft\n  model: {name: qwen2.5-7b}\n  concurrency: 4\n", i, i)
		if replicas > 0 {
			fmt.Fprintf(&b, "  replicas: %d\n", replicas)
		}
		b.WriteString("  traffic: {rps: 0.5, inputTokens: 4000, outputTokens: 800, lengths: fixed}\n  slo: {ttftP99: 1300ms, tpotP99: 60ms}\n")
	}
	pool, err := v1.LoadPool([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestEdgeMarginAboveConfirmation (ADR 0104): in a pool of more than confirmMaxTenants tenants,
// which the confirmation does not simulate, a tenant's count carries its rate at most
// confirmRiskLoad of the queueing model's capacity when the planner has a simulator. The edge tenant is planned at the model's
// count (four 1g.23gb instances, 0.95 of their capacity) in a pool of confirmMaxTenants, and at
// one more (five) in a pool of one tenant more; alone on its slices the simulator finds the four
// below 99 % in one of three runs of about 2,500 requests, and the five within the SLO in all.
func TestEdgeMarginAboveConfirmation(t *testing.T) {
	count := func(pl *v1.Plan) (int, string) {
		pt := pl.Tenants[0]
		if pt.Infeasible || len(pt.Replicas) == 0 {
			t.Fatalf("%s is not served: %v", pt.Name, pt.Reasons)
		}
		for _, r := range pt.Replicas[1:] {
			if r.Instance.Profile != pt.Replicas[0].Instance.Profile {
				t.Fatalf("%s's replicas are on different slices: %v", pt.Name, pt.Replicas)
			}
		}
		return len(pt.Replicas), pt.Replicas[0].Instance.Profile
	}
	// With a simulator but no runs (gpupool plan --sim-requests -1), so that the pool of
	// confirmMaxTenants is not simulated either: the model's count, then the margin's.
	unconfirmed := Options{Simulate: simRun, ConfirmRequests: -1}
	edge, edgeOn := count(buildWith(t, edgePool(t, confirmMaxTenants, 160, 0), unconfirmed))
	if edge != 4 || edgeOn != "1g.23gb" {
		t.Fatalf("%d tenants: %d replicas on %s, want the model's 4 on 1g.23gb", confirmMaxTenants, edge, edgeOn)
	}
	big := edgePool(t, confirmMaxTenants+1, 160, 0)
	n, on := count(buildWith(t, big, unconfirmed))
	if n != edge+1 || on != edgeOn {
		t.Fatalf("%d tenants: %d replicas on %s, want %d on %s", confirmMaxTenants+1, n, on, edge+1, edgeOn)
	}
	if m, _ := count(buildWith(t, big, confirmed)); m != n {
		t.Errorf("%d tenants with the default budget: %d replicas, want %d", confirmMaxTenants+1, m, n)
	}
	// Without a simulator the caller asks for the queueing model's counts.
	if m, _ := count(buildWith(t, big, Options{})); m != edge {
		t.Errorf("%d tenants without a simulator: %d replicas, want the model's %d", confirmMaxTenants+1, m, edge)
	}

	// Alone on its slices, at each count, in three runs.
	attain := func(k int) []float64 {
		pool := edgePool(t, 1, 2, k)
		pl := buildWith(t, pool, Options{})
		if got, gotOn := count(pl); got != k || gotOn != edgeOn {
			t.Fatalf("alone: %d replicas on %s, want %d on %s", got, gotOn, k, edgeOn)
		}
		var out []float64
		for seed := uint64(1); seed <= 3; seed++ {
			res, err := simRun(context.Background(), SimInput{Pool: pool, Plan: pl, Duration: 5000 * time.Second, Seed: seed, Perf: perf.DefaultOptions()})
			if err != nil {
				t.Fatal(err)
			}
			st := res["e000"]
			if st.Judged < 2400 {
				t.Fatalf("%d replicas, seed %d: %d requests judged", k, seed, st.Judged)
			}
			out = append(out, st.Attainment)
		}
		return out
	}
	if a := attain(edge); min(a[0], a[1], a[2]) >= 0.99 {
		t.Errorf("the model's %d replicas met the SLO for %v of the requests in every run: the tenant is not at the edge", edge, a)
	}
	if a := attain(n); min(a[0], a[1], a[2]) < 0.99 {
		t.Errorf("%d replicas met the SLO for %v of the requests: below 99 %% in a run", n, a)
	}
}
