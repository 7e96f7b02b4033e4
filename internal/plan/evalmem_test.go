package plan

import (
	"math"
	"testing"
	"unsafe"

	"gpupool.dev/gpupool/internal/perf"
)

// TestSharedLoadModels: the queueing models of a pool of distinct request shapes share their
// engine and step-time rates (evalCache.atLoad) where the placed engine, the memory fit's KV
// capacity and the neighbours' load are the same, and each answers bit for bit as a model built
// on its own copy of the engine: the step times, the states at rates around its highest, with
// busy and with idle neighbours (bestCase, whose step times are shared too), and that rate.
func TestSharedLoadModels(t *testing.T) {
	pool := distinctShapesPool(t, 48)
	for i := range pool.Tenants { // contexts that give the same engine other KV capacities
		pool.Tenants[i].MaxContext = []int{0, 4096, 24576}[i/4%3]
	}
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.evaluate()
	byAt := map[*perf.AtLoad]*qmodel{}
	models, shared := 0, 0
	for _, tn := range p.tenants {
		for _, c := range tn.cands {
			if c.ev == nil || c.ev.q == nil || c.tp > 1 {
				continue
			}
			q := c.ev.q
			models++
			if q.at.Engine() != q.e {
				t.Fatalf("%s on %s: the model's step times are another engine's", tn.t.Name, c.label())
			}
			if o, ok := byAt[q.at]; ok && o != q {
				shared++
				if o.e.KVCapacityTokens() != q.e.KVCapacityTokens() || o.l != q.l {
					t.Fatalf("%s on %s: shares step times with a model of %d KV tokens at %+v, its own %d at %+v",
						tn.t.Name, c.label(), o.e.KVCapacityTokens(), o.l, q.e.KVCapacityTokens(), q.l)
				}
			}
			byAt[q.at] = q
			// the model as measure builds it on a cache of its own, which shares nothing
			shared := p.cache
			p.cache = newEvalCache()
			fresh := p.measure(tn, c)
			p.cache = shared
			p.cache.shape(tn)
			own := fresh.q
			if own == nil || own.e == q.e || own.at == q.at {
				t.Fatalf("%s on %s: no model of its own", tn.t.Name, c.label())
			}
			own.idleAt = nil // its idle neighbours' step times computed from its own engine
			for _, b := range [][2]int{{0, 0}, {1, 0}, {7, 1}, {33, 2}, {q.slots, 1}} {
				if g, w := q.stepTime(b[0], b[1]), own.stepTime(b[0], b[1]); math.Float64bits(g) != math.Float64bits(w) {
					t.Fatalf("%s on %s: step of %v is %v shared, %v on its own engine", tn.t.Name, c.label(), b, g, w)
				}
			}
			rate, _ := own.maxRate(tn.slo)
			if got, _ := q.maxRate(tn.slo); math.Float64bits(got) != math.Float64bits(rate) {
				t.Fatalf("%s on %s: highest rate %v shared, %v on its own engine", tn.t.Name, c.label(), got, rate)
			}
			for _, lam := range []float64{rate / 2, rate, 1.5 * rate} {
				for _, n := range []int{1, 3} {
					if g, w := q.state(lam, n), own.state(lam, n); g != w {
						t.Fatalf("%s on %s: state at %v req/s on %d replicas %+v shared, %+v on its own engine", tn.t.Name, c.label(), lam, n, g, w)
					}
					if g, w := q.bestCase().state(lam, n), own.bestCase().state(lam, n); g != w {
						t.Fatalf("%s on %s: with idle neighbours, state at %v req/s on %d replicas %+v shared, %+v on its own engine", tn.t.Name, c.label(), lam, n, g, w)
					}
				}
			}
		}
	}
	kvs := map[*perf.Engine]map[int64]bool{} // the KV capacities each placed engine's models have
	for k := range p.cache.loads {
		if kvs[k.e] == nil {
			kvs[k.e] = map[int64]bool{}
		}
		kvs[k.e][k.kv] = true
	}
	several := 0
	for _, m := range kvs {
		if len(m) > 1 {
			several++
		}
	}
	if models == 0 || shared == 0 || several == 0 {
		t.Fatalf("%d models, %d sharing step times with another, %d engines with several KV capacities", models, shared, several)
	}
}

// TestEvalMemoSizes: the evaluation keeps one queueing model per tenant shape and slice and
// dozens of candidates per tenant, so their sizes are most of its memory: a model stays within
// the allocator's 448-byte class, a candidate within 392 bytes, and a slab of candidates
// (newCand) within whole pages, using all but less than one candidate of them.
func TestEvalMemoSizes(t *testing.T) {
	if s := unsafe.Sizeof(qmodel{}); s > 448 {
		t.Errorf("a queueing model takes %d bytes, more than 448", s)
	}
	c := int(unsafe.Sizeof(cand{}))
	if c > 392 {
		t.Errorf("a candidate takes %d bytes, more than 392", c)
	}
	if used := candSlabLen * c; used > candSlabBytes || candSlabBytes-used >= c || candSlabBytes%8192 != 0 {
		t.Errorf("a slab of %d candidates of %d bytes uses %d of its %d bytes", candSlabLen, c, used, candSlabBytes)
	}
}
