package plan

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// A cancelled context stops Build with the context's error and no plan; a deadline in the
// middle of a large run stops it well before the run would end.
func TestBuildCancelled(t *testing.T) {
	pool := synthPoolOn(200, 200)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if pl, err := Build(ctx, pool, Options{}); !errors.Is(err, context.Canceled) || pl != nil {
		t.Fatalf("Build(cancelled) = %v, %v; want no plan and context.Canceled", pl, err)
	}
	big := synthPoolOn(2000, 2000)
	start := time.Now()
	if _, err := Build(context.Background(), big, Options{}); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	ctx, cancel = context.WithTimeout(context.Background(), full/10)
	defer cancel()
	start = time.Now()
	_, err := Build(ctx, big, Options{})
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Build(deadline %v of a %v run) error = %v, want context.DeadlineExceeded", full/10, full, err)
	}
	if took > full*3/4 {
		t.Errorf("Build stopped after %v, the full run took %v: cancellation is not checked often enough", took, full)
	}
}

// A rate so small that rps / rate overflows int gives a bounded replica count, never a
// negative or tiny one.
func TestDemandReplicasChecked(t *testing.T) {
	ten := v1.Tenant{Traffic: v1.Traffic{RPS: v1.MaxRPS}}
	for _, rate := range []float64{1e-300, 1e-12, 5e-324} {
		if n := demandReplicas(ten, rate); n != maxDemandReplicas {
			t.Errorf("demandReplicas(rps %g, rate %g) = %d, want the bound %d", ten.Traffic.RPS, rate, n, maxDemandReplicas)
		}
	}
	if n := demandReplicas(ten, 10); n != 100_000 { // 1e6 / 10
		t.Errorf("demandReplicas(1e6, 10) = %d, want 100000", n)
	}
}
