package plan

import (
	"context"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

func synthPool(n int) *v1.Pool { return synthPoolOn(n, n) }

func synthPoolOn(n, gpus int) *v1.Pool {
	return Synthetic(SyntheticOptions{Tenants: n, GPUs: gpus}, rand.New(rand.NewPCG(uint64(n), 7)))
}

func benchPlan(b *testing.B, n, gpus int) {
	pool := synthPoolOn(n, gpus)
	var pl *v1.Plan
	for b.Loop() {
		var err error
		if pl, err = Build(context.Background(), pool, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	s := pl.Summary
	b.ReportMetric(float64(s.GPUsUsed), "gpus")
	b.ReportMetric(float64(s.LowerBound), "bound")
	if s.LowerBound > 0 {
		b.ReportMetric(float64(s.GPUsUsed)/float64(s.LowerBound), "gap")
	}
}

func BenchmarkPlan100(b *testing.B)   { benchPlan(b, 100, 100) }
func BenchmarkPlan1000(b *testing.B)  { benchPlan(b, 1000, 1000) }
func BenchmarkPlan10000(b *testing.B) { benchPlan(b, 10000, 10000) }

// BenchmarkPlan20000 is the large bar: 20,000 tenants on 10,000 GPUs.
func BenchmarkPlan20000(b *testing.B) { benchPlan(b, 20000, 10000) }

// TestSyntheticGap logs GPUs used against the lower bound per size (the bar is 1.02×)
// and checks it: 21 / 21 at 100 tenants (the group bound's choice, packed, meets the bound, so
// the plan is optimal for its candidates); at 1,000 the bar, 1.02× (measured 219 / 216
// under today's vLLM defaults, 222 / 220 under the 2023 engine constants).
func TestSyntheticGap(t *testing.T) {
	sizes := []int{100, 1000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	limit := map[int]float64{100: 1, 1000: 1.02}
	for _, n := range sizes {
		pool := synthPool(n)
		pl := build(t, pool)
		s := pl.Summary
		if c := sharingConflicts(pl); c > 0 {
			t.Errorf("%d tenants: %d node/profile pairs shared two ways", n, c)
		}
		gap := float64(s.GPUsUsed) / float64(max(s.LowerBound, 1))
		t.Logf("%d tenants: %d GPUs used, lower bound %d, gap %.3f; baselines %v", n, s.GPUsUsed, s.LowerBound, gap, s.Baselines)
		if gap > limit[n]+1e-9 {
			t.Errorf("%d tenants: gap %.3f above %.3f", n, gap, limit[n])
		}
	}
}
