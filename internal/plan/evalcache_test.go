package plan

import (
	"context"
	"math/rand/v2"
	"testing"
)

// TestEvalCacheReserve: the memos that evaluate sizes for the rest of the pool after its first
// reserveAfter tenants (evalCache.reserve) still hold every evaluation, sizing and queueing
// model made before, and every tenant's candidates read the very entries the memos keep.
func TestEvalCacheReserve(t *testing.T) {
	pool := distinctShapesPool(t, 2*reserveAfter+8)
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	checked := 0
	for ti, tn := range p.tenants {
		for _, c := range tn.cands {
			if c.ev == nil {
				continue
			}
			k := p.cache.key(tn, c)
			if ev, ok := p.cache.m[k]; !ok || ev != c.ev {
				t.Fatalf("tenant %d (%s) on %s: the evaluation memo lost its entry", ti, tn.t.Name, c.label())
			}
			if c.ev.q != nil && c.tp <= 1 { // measure's models (measureTP keeps its own)
				if q, ok := p.cache.qs[p.cache.slotKey(p.cache.qshape(tn), c)]; !ok || q != c.ev.q {
					t.Fatalf("tenant %d (%s) on %s: the queueing models' memo lost its entry", ti, tn.t.Name, c.label())
				}
			}
			if c.sz.at != nil {
				sk := sizeKey{k, peakRate(tn.t.Traffic), p.edgeMargin(tn)}
				if sz, ok := p.cache.sizes[sk]; !ok || sz.at != c.sz.at {
					t.Fatalf("tenant %d (%s) on %s: the sizing memo lost its entry", ti, tn.t.Name, c.label())
				}
			}
			if ti < reserveAfter {
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no candidate of the tenants evaluated before the memos were sized")
	}
}

// BenchmarkEvaluateVaried1000 is the evaluation alone (every tenant's candidates fitted and
// sized) of BenchmarkPlanVaried1000's pool: the memos (evalCache), the queueing models' step
// times (stepDense) and mean steps (meanStep) are its hot paths.
func BenchmarkEvaluateVaried1000(b *testing.B) {
	pool := Synthetic(SyntheticOptions{Tenants: 1000, GPUs: 1000, Varied: true}, rand.New(rand.NewPCG(1000, 7)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := newPlanner(pool, Options{})
		if err != nil {
			b.Fatal(err)
		}
		p.ctx = context.Background()
		p.evaluate()
	}
}
