package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// parvaPool turns ParvaGPU scenario k (0-based) into a Pool of A100-SXM4-80GB nodes of one GPU
// each (nodes GPUs in all), one soft tenant per model present with its rate and latency SLO,
// and the measured profiles keyed by tenant name. The pool takes the DRA device path, as the
// examples do: ParvaGPU's method is MPS inside MIG instances, which only the DRA driver runs.
func parvaPool(t *testing.T, k, nodes, per int) (*v1.Pool, map[string]*perf.Measured) {
	t.Helper()
	zero := 0
	pool := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: fmt.Sprintf("parvagpu-slo%d", k+1)},
		Policy: v1.Policy{BurstPoolPercent: &zero, KubernetesDeviceAPI: v1.DeviceAPIDRA}}
	for i := range nodes {
		pool.Fleet.Nodes = append(pool.Fleet.Nodes, v1.Node{Name: fmt.Sprintf("a100-%02d", i), GPUs: []v1.GPUGroup{{Board: "A100-SXM4-80GB", Count: per}}})
	}
	profiles := map[string]*perf.Measured{}
	for _, l := range parvaScenarios(t)[k] {
		e2e := v1.Duration(l.slo)
		pool.Tenants = append(pool.Tenants, v1.Tenant{Name: l.model, Model: v1.Model{Name: l.model}, Traffic: v1.Traffic{RPS: l.rate},
			SLO: v1.SLO{E2EP99: &e2e}, Profile: "profiles/" + l.model + ".csv"})
		profiles[l.model] = parvaTable(t, l.model)
	}
	v1.Default(pool)
	return pool, profiles
}

// ParvaGPU's six scenarios planned by Build from the measured profiles (Options.Profiles), on
// three nodes of eight A100-SXM4-80GB with no burst pool. Every tenant must be served, the plan
// must use no more GPUs than ParvaGPU deployed (2, 3, 5, 7, 13, 16), and every instance must
// carry its share of the load under ParvaGPU's rule (CheckMeasured), and every tenant's reasons
// name the measured profile.
func TestParvaGPUBuild(t *testing.T) {
	for k := range parvaDeployed {
		pool, profiles := parvaPool(t, k, 3, 8)
		pl, err := Build(context.Background(), pool, Options{Profiles: profiles})
		if err != nil {
			t.Fatal(err)
		}
		if err := v1.ValidatePlan(pl, pool); err != nil {
			t.Fatalf("scenario %d: invalid plan: %v", k+1, err)
		}
		t.Logf("scenario %d: %d GPUs (lower bound %d, ParvaGPU %d)", k+1, pl.Summary.GPUsUsed, pl.Summary.LowerBound, parvaDeployed[k])
		if pl.Summary.GPUsUsed > parvaDeployed[k] {
			t.Errorf("scenario %d: %d GPUs, ParvaGPU needed %d", k+1, pl.Summary.GPUsUsed, parvaDeployed[k])
		}
		for _, e := range CheckMeasured(pl, pool, profiles) {
			t.Errorf("scenario %d: %v", k+1, e)
		}
		for _, tn := range pl.Tenants {
			if len(tn.Reasons) < 2 || tn.Reasons[1].Code != v1.ReasonMeasuredProfile {
				t.Errorf("scenario %d: tenant %s: second reason is not %s: %v", k+1, tn.Name, v1.ReasonMeasuredProfile, tn.Reasons)
			}
		}
		// On the device-plugin path (no MIG+MPS) the plan needs more GPUs but keeps the rule too,
		// including a whole GPU or instance its tenant's replicas leave part-filled (a partial
		// unit runs fewer processes, each at that count's measured rate).
		pool.Policy.KubernetesDeviceAPI = ""
		dp, err := Build(context.Background(), pool, Options{Profiles: profiles})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scenario %d on the device-plugin path: %d GPUs (lower bound %d)", k+1, dp.Summary.GPUsUsed, dp.Summary.LowerBound)
		for _, e := range CheckMeasured(dp, pool, profiles) {
			t.Errorf("scenario %d, device-plugin path: %v", k+1, e)
		}
	}
}

// CheckMeasured fails on a plan that breaks the rule: the same scenario-6 plan against SLOs a
// thousand times tighter (no batch is that fast) and a rate ten times higher.
func TestCheckMeasuredFails(t *testing.T) {
	pool, profiles := parvaPool(t, 5, 3, 8)
	pl, err := Build(context.Background(), pool, Options{Profiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	tight := *pool
	tight.Tenants = slices.Clone(pool.Tenants)
	short := v1.Duration(time.Duration(tight.Tenants[0].SLO.E2EP99.Std() / 1000))
	tight.Tenants[0].SLO.E2EP99 = &short
	tight.Tenants[1].Traffic.RPS *= 10
	errs := CheckMeasured(pl, &tight, profiles)
	if len(errs) < 2 {
		t.Fatalf("want errors for %s (SLO) and %s (rate), got %q", tight.Tenants[0].Name, tight.Tenants[1].Name, errs)
	}
}

// Measured tenants the planner cannot serve, or cannot work with.
func TestMeasuredTenantEdges(t *testing.T) {
	table := "Mig instance,Batch size,Workload Number,Throughput,Latency\n" +
		"1,1,1,0,0\n" + // 1 GPC: not runnable (out of memory)
		"7,1,1,100,0.010\n7,8,1,400,0.020\n" // whole GPU: 10 ms at batch 1, 20 ms at batch 8
	m, err := perf.ParseParvaGPU("toy", strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	dur := func(d time.Duration) *v1.Duration { x := v1.Duration(d); return &x }
	zero := 0
	mk := func(slo *v1.Duration, rps float64) *v1.Pool {
		p := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: "toy"}, Policy: v1.Policy{BurstPoolPercent: &zero},
			Fleet:   v1.Fleet{Nodes: []v1.Node{{Name: "n", GPUs: []v1.GPUGroup{{Board: "A100-SXM4-80GB", Count: 4}}}}},
			Tenants: []v1.Tenant{{Name: "toy", Model: v1.Model{Name: "toy-cnn"}, Traffic: v1.Traffic{RPS: rps}, SLO: v1.SLO{E2EP99: slo}}}}
		v1.Default(p)
		return p
	}
	opts := Options{Profiles: map[string]*perf.Measured{"toy": m}}
	if _, err := Build(context.Background(), mk(nil, 10), opts); err == nil || !strings.Contains(err.Error(), "tenant toy") || !strings.Contains(err.Error(), "slo.e2eP99") {
		t.Errorf("no e2eP99: want an error naming the tenant and slo.e2eP99, got %v", err)
	}
	// SLO 100 ms: a batch may take 45 ms, so batch 8 (20 ms, 400 req/s) on a whole GPU or 7g.80gb;
	// 900 req/s needs ceil(900/400) = 3 replicas, on 3 GPUs.
	pl, err := Build(context.Background(), mk(dur(100*time.Millisecond), 900), opts)
	if err != nil {
		t.Fatal(err)
	}
	if tn := pl.Tenants[0]; tn.Infeasible || len(tn.Replicas) != 3 || pl.Summary.GPUsUsed != 3 || tn.Replicas[0].Instance.Profile == "1g.10gb" {
		t.Errorf("want 3 replicas on 3 GPUs, got %d on %d: %v", len(tn.Replicas), pl.Summary.GPUsUsed, tn.Reasons)
	}
	for _, g := range pl.GPUs {
		reps := slices.Clone(g.Replicas)
		for _, in := range g.Instances {
			reps = append(reps, in.Replicas...)
		}
		for _, r := range reps {
			if len(r.VLLMArgs) > 0 {
				t.Errorf("%s: a measured tenant gets no vLLM arguments, got %v", g.Ref(), r.VLLMArgs)
			}
		}
	}
	// SLO 20 ms: a batch may take 9 ms, and the fastest takes 10 ms: SLOUnmet.
	pl, err = Build(context.Background(), mk(dur(20*time.Millisecond), 10), opts)
	if err != nil {
		t.Fatal(err)
	}
	if tn := pl.Tenants[0]; !tn.Infeasible || tn.Reasons[0].Code != v1.ReasonSLOUnmet {
		t.Errorf("want infeasible with SLOUnmet, got %v", tn.Reasons)
	}
}
