package plan

import (
	"context"
	"math/rand/v2"
	"testing"
)

// evalAt is the evaluation memoised at k, if any.
func (c *evalCache) evalAt(k evalKey) (*evalResult, bool) {
	r, ok := c.memo(k.shape).evals[k.slot()]
	return r, ok
}

// qmodelAt is the queueing model memoised at k (its shape the one without the SLO), if any.
func (c *evalCache) qmodelAt(k evalKey) (*qmodel, bool) {
	q, ok := c.memo(k.shape).qs[k.slot()]
	return q, ok
}

// sizeAt is the sizing memoised at k, if any.
func (c *evalCache) sizeAt(k sizeKey) (sizing, bool) {
	r, ok := c.memo(k.shape).sizes[sizeSlot{k.slot(), k.rps, k.edge}]
	return r, ok
}

// qmodels lists every memoised queueing model.
func (c *evalCache) qmodels() []*qmodel {
	var qs []*qmodel
	for _, m := range c.byShape {
		if m == nil {
			continue
		}
		for _, q := range m.qs {
			qs = append(qs, q)
		}
	}
	return qs
}

// TestEvalCacheByShape: the memos kept by shape number (evalCache.byShape) hold every
// evaluation, sizing and queueing model of a pool of distinct shapes, each tenant's candidates
// read the very entries the memos keep, and tenants of one shape share them.
func TestEvalCacheByShape(t *testing.T) {
	pool := distinctShapesPool(t, 72)
	// two tenants of each of the first shapes: the same model, options, request shape and SLO
	for i := range 8 {
		twin := pool.Tenants[i]
		twin.Name += "-twin"
		pool.Tenants = append(pool.Tenants, twin)
	}
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	checked, shared := 0, 0
	seen := map[*evalResult]bool{}
	for ti, tn := range p.tenants {
		for _, c := range tn.cands {
			if c.ev == nil {
				continue
			}
			k := p.cache.key(tn, c)
			if ev, ok := p.cache.evalAt(k); !ok || ev != c.ev {
				t.Fatalf("tenant %d (%s) on %s: the evaluation memo lost its entry", ti, tn.t.Name, c.label())
			}
			if seen[c.ev] {
				shared++
			}
			seen[c.ev] = true
			if c.ev.q != nil && c.tp <= 1 { // measure's models (measureTP keeps its own)
				if q, ok := p.cache.qmodelAt(p.cache.slotKey(p.cache.qshape(tn), c)); !ok || q != c.ev.q {
					t.Fatalf("tenant %d (%s) on %s: the queueing models' memo lost its entry", ti, tn.t.Name, c.label())
				}
			}
			if c.sz.at != nil {
				sk := sizeKey{k, peakRate(tn.t.Traffic), p.edgeMargin(tn)}
				if sz, ok := p.cache.sizeAt(sk); !ok || sz.at != c.sz.at {
					t.Fatalf("tenant %d (%s) on %s: the sizing memo lost its entry", ti, tn.t.Name, c.label())
				}
			}
			checked++
		}
	}
	if checked == 0 || shared == 0 {
		t.Fatalf("%d candidates checked, %d sharing an evaluation", checked, shared)
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
