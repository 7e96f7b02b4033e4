package plan

import (
	"math/rand/v2"
	"testing"
)

// TestConfirmUndoCounts checks that a snapshot's restore puts back the replicas of every
// feasible and fallback candidate, whatever a trial raised them to, and each candidate's cost
// with them.
func TestConfirmUndoCounts(t *testing.T) {
	pool := Synthetic(SyntheticOptions{Tenants: 200, GPUs: 200, Varied: true}, rand.New(rand.NewPCG(200, 5)))
	for i := 0; i < len(pool.Tenants); i += 3 { // a fixed count: candidates kept as fallback
		pool.Tenants[i].Replicas = new(int)
		*pool.Tenants[i].Replicas = 2
	}
	p := evaluated(t, pool)
	type was struct {
		n    int
		cost float64
	}
	before := map[*cand]was{}
	fallback := 0
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			before[c] = was{c.replicas, c.cost}
		}
		for _, c := range tn.fixedFallback {
			before[c] = was{c.replicas, c.cost}
			fallback++
		}
	}
	if len(before) < 100 || fallback < 10 {
		t.Fatalf("%d candidates, %d fallback: want more", len(before), fallback)
	}
	u := p.snapshot()
	for c := range before {
		p.setCandReplicas(c, c.replicas+3)
	}
	u.restore(p)
	for c, w := range before {
		if c.replicas != w.n || c.cost != w.cost {
			t.Fatalf("%s: restored to %d replicas (cost %g), want %d (cost %g)", c.label(), c.replicas, c.cost, w.n, w.cost)
		}
	}
	t.Logf("%d candidates, %d fallback", len(before), fallback)
}
