package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

func loadPool(t testing.TB, name string) *v1.Pool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p, err := v1.LoadPool(data)
	if err != nil {
		t.Fatalf("load pool %s: %v", name, err)
	}
	return p
}

// readTrace reads a trace file from testdata.
func readTrace(t testing.TB, name string, opts TraceOptions) *Trace {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadTrace(f, opts)
	if err != nil {
		t.Fatalf("read trace %s: %v", name, err)
	}
	return tr
}

func loadPlan(t testing.TB, name string) *v1.Plan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p, err := v1.DecodePlan(data)
	if err != nil {
		t.Fatalf("decode plan %s: %v", name, err)
	}
	return p
}

// runSim builds and runs a simulation, failing the test on any error.
func runSim(t testing.TB, in Input, cfg Config) (*Sim, *Result) {
	t.Helper()
	s, err := New(in, cfg)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	res, err := s.Run(context.Background())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return s, res
}

func small(t testing.TB, d time.Duration, seed uint64) (*Sim, *Result) {
	return runSim(t, Input{Pool: loadPool(t, "pool-small.yaml"), Plan: loadPlan(t, "plan-small.yaml")},
		Config{Duration: d, Seed: seed})
}

func tenantByName(r Report, name string) TenantReport {
	for _, t := range r.Tenants {
		if t.Name == name {
			return t
		}
	}
	return TenantReport{}
}
