package plan

import (
	"context"
	"reflect"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// chosenPlanner is a planner of pool that has evaluated, chosen and packed: what result reads.
func chosenPlanner(tb testing.TB, pool *v1.Pool) *planner {
	tb.Helper()
	return chosenPlannerWith(tb, pool, Options{}, func(*planner) {})
}

// chosenPlannerWith is chosenPlanner with options o and set applied to the planner before it
// evaluates.
func chosenPlannerWith(tb testing.TB, pool *v1.Pool, o Options, set func(*planner)) *planner {
	tb.Helper()
	p, err := newPlanner(pool, o)
	if err != nil {
		tb.Fatal(err)
	}
	set(p)
	p.evaluate()
	if err := p.optimise(); err != nil {
		tb.Fatal(err)
	}
	if err := p.confirm(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestResultConcurrentBound: result computes the lower bound on a goroutine of its own while it
// predicts the tenants' latencies and rates; the plan is the one of the steps one after the
// other (draft, then the bound, then the baselines), whichever finishes first. Run it with
// -race too: the bound and the predictions must share nothing that either writes.
func TestResultConcurrentBound(t *testing.T) {
	for _, pool := range []*v1.Pool{distinctShapesPool(t, 60), distinctShapesOn(t, 80, 16), synthPool(100)} {
		got, err := chosenPlanner(t, pool).result()
		if err != nil {
			t.Fatal(err)
		}
		p := chosenPlanner(t, pool)
		want := p.draft()
		want.Summary.LowerBound = p.lowerBound()
		want.Summary.Baselines = p.baselines()
		if want.Summary.LowerBound == 0 || len(want.Tenants) == 0 || want.Tenants[0].Predicted.MaxRPS == 0 {
			t.Fatalf("%s: a plan without a bound or predictions proves nothing: %+v", pool.Metadata.Name, want.Summary)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: result differs from draft, bound and baselines one after the other", pool.Metadata.Name)
		}
	}
}

// TestResultCancelled: a run cancelled while the result is computed returns the context's
// error, after the bound's goroutine has finished.
func TestResultCancelled(t *testing.T) {
	p := chosenPlanner(t, distinctShapesPool(t, 30))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.ctx = ctx
	if _, err := p.result(); err == nil || ctx.Err() == nil {
		t.Fatalf("cancelled result: error %v", err)
	}
}

// BenchmarkResultDistinct is the result of 200 tenants of distinct request shapes, chosen and
// packed: the GPUs, the tenants' predictions, the lower bound (on its own goroutine) and the
// baselines. Each iteration starts from a fresh planner, since the predictions fill memos.
func BenchmarkResultDistinct(b *testing.B) {
	pool := distinctShapesPool(b, 200)
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		p := chosenPlanner(b, pool)
		b.StartTimer()
		if _, err := p.result(); err != nil {
			b.Fatal(err)
		}
	}
}
