package plan

import (
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// CheckMeasured on hand-written plans for one measured tenant "toy" (SLO 100 ms, so a batch may
// take 0.45 × 100 = 45 ms) whose table has, on a whole A100 (7 GPCs) with one process, batch 1
// (10 ms, 100 req/s) and batch 8 (20 ms, 400 req/s), and on a 1g.10gb nothing runnable.
func TestCheckMeasuredTable(t *testing.T) {
	table := "Mig instance,Batch size,Workload Number,Throughput,Latency\n" +
		"1,1,1,0,0\n7,1,1,100,0.010\n7,8,1,400,0.020\n"
	m, err := perf.ParseParvaGPU("toy", strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	profiles := map[string]*perf.Measured{"toy": m}
	slo := v1.Duration(100 * time.Millisecond)
	pool := func(rps float64, e2e *v1.Duration) *v1.Pool {
		return &v1.Pool{Tenants: []v1.Tenant{
			{Name: "toy", Traffic: v1.Traffic{RPS: rps}, SLO: v1.SLO{E2EP99: e2e}},
			{Name: "llm", Traffic: v1.Traffic{RPS: 1}}}}
	}
	rep := func(names ...string) []v1.PlanReplica {
		var out []v1.PlanReplica
		for i, n := range names {
			out = append(out, v1.PlanReplica{Tenant: n, Index: i})
		}
		return out
	}
	whole := func(board string, names ...string) v1.PlanGPU {
		return v1.PlanGPU{Node: "n", Board: board, Mode: v1.ModeExclusive, Replicas: rep(names...)}
	}
	mig := func(profile string, names ...string) v1.PlanGPU {
		return v1.PlanGPU{Node: "n", Board: "A100-SXM4-80GB", Mode: v1.ModeMIG,
			Instances: []v1.PlanInstance{{Profile: profile, Replicas: rep(names...)}}}
	}
	served := []v1.PlanTenant{{Name: "toy"}, {Name: "llm"}}
	cases := []struct {
		name    string
		pool    *v1.Pool
		gpus    []v1.PlanGPU
		tenants []v1.PlanTenant
		want    []string // one substring per violation, in order
	}{
		// two whole GPUs × 400 req/s = 800 ≥ 700; the unmeasured tenant is not checked
		{"kept", pool(700, &slo), []v1.PlanGPU{whole("A100-SXM4-80GB", "toy"), whole("A100-SXM4-80GB", "toy"), whole("A100-SXM4-80GB", "llm")}, served, nil},
		// one whole GPU carries 400 < 700
		{"rate short", pool(700, &slo), []v1.PlanGPU{whole("A100-SXM4-80GB", "toy")}, served, []string{"carry 400.0 req/s, less than traffic.rps 700.0"}},
		// SLO 20 ms: a batch may take 9 ms, the fastest takes 10 ms; then nothing carries 1 req/s
		{"too slow", pool(1, durp(20*time.Millisecond)), []v1.PlanGPU{whole("A100-SXM4-80GB", "toy")}, served, []string{"no batch within 9ms", "carry 0.0 req/s"}},
		// 1g.10gb is measured out of memory
		{"not runnable", pool(1, &slo), []v1.PlanGPU{mig("1g.10gb", "toy")}, served, []string{"n/0/1g.10gb@0: 1 process(es) of toy", "carry 0.0"}},
		{"four processes", pool(1, &slo), []v1.PlanGPU{whole("A100-SXM4-80GB", "toy", "toy", "toy", "toy")}, served, []string{"4 processes of toy, more than 3", "carry 0.0"}},
		{"shared", pool(1, &slo), []v1.PlanGPU{whole("A100-SXM4-80GB", "llm", "toy")}, served, []string{"tenants llm and toy share it", "carry 0.0"}},
		{"no SLO", pool(1, nil), []v1.PlanGPU{whole("A100-SXM4-80GB", "toy")}, served, []string{"toy has no slo.e2eP99", "carry 0.0"}},
		{"unknown board", pool(1, &slo), []v1.PlanGPU{whole("X1", "toy")}, served, []string{"tenant toy: ", "carry 0.0"}},
		{"infeasible", pool(1, &slo), nil, []v1.PlanTenant{{Name: "toy", Infeasible: true}}, []string{"tenant toy: infeasible"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := CheckMeasured(&v1.Plan{GPUs: c.gpus, Tenants: c.tenants}, c.pool, profiles)
			if len(errs) != len(c.want) {
				t.Fatalf("want %d violations %q, got %d: %v", len(c.want), c.want, len(errs), errs)
			}
			for i, w := range c.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("violation %d: want %q in %q", i, w, errs[i])
				}
			}
		})
	}
}

func durp(d time.Duration) *v1.Duration { x := v1.Duration(d); return &x }
