package plan

import (
	"context"
	"testing"
)

func TestZZExplore2(t *testing.T) {
	pool := synthPoolOn(1, 8)
	src := synthPool(1000).Tenants
	seen := map[string]bool{}
	for _, tn := range src {
		if seen[tn.Model.Name] {
			continue
		}
		seen[tn.Model.Name] = true
		tn.Isolation = "soft"
		tn.Path = ""
		pool.Tenants = append(pool.Tenants, tn)
	}
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx = context.Background()
	p.evaluate()
	for _, tn := range p.tenants {
		t.Logf("%s %s rps %.3g slo %v/%v in %d out %d group %q", tn.t.Name, tn.t.Model.Name, tn.t.Traffic.RPS, tn.slo.TTFT, tn.slo.TPOT, tn.work.InputTokens, tn.work.OutputTokens, tn.group)
		for _, c := range tn.cands {
			if c.ev == nil || c.ev.q == nil {
				continue
			}
			b, i := c.ev.q.trickle(), c.ev.q.bestCase().trickle()
			t.Logf("   %-28s rej %-10s n %d lb %d  busy tpot %.4f ttft %.4f idle tpot %.4f ttft %.4f", c.label(), c.reject, c.replicas, c.lbReplicas, b.tpot, b.ttft, i.tpot, i.ttft)
		}
	}
}
