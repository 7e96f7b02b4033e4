package control

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// stateOf is what the store would hold for e.
func stateOf(e *Engine) State {
	st := State{Tokens: e.tokens, Events: e.events, NextGrant: e.nextGrant, NextEvent: e.nextEvent}
	for _, t := range e.tenants {
		st.Tenants = append(st.Tenants, *t)
	}
	for _, n := range e.nodes {
		st.Nodes = append(st.Nodes, *n)
	}
	for _, g := range e.grants {
		st.Grants = append(st.Grants, *g)
	}
	return st
}

// TestEngineInvariantsProperty: under any sequence of tenant, demand, node and clock changes, no
// slice holds two grants, every grant sits on a live slice, no tenant holds more than its demand,
// grants never exceed live slices, and a restore from the same state keeps the invariants and
// never gives a tenant more than it held (ids stay unique).
func TestEngineInvariantsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := t0
		cfg := EngineConfig{NodeTimeout: 10 * time.Second}
		if rapid.Bool().Draw(rt, "leases") {
			cfg.BurstPoolPercent, cfg.LeaseDuration = 20, 5*time.Second
		}
		e, _ := NewEngine(cfg, now)
		names := []string{"a", "b", "c", "d"}
		nodes := []string{"n1", "n2", "n3"}
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			now = now.Add(time.Duration(rapid.IntRange(0, 6).Draw(rt, "dt")) * time.Second)
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0:
				n := rapid.SampledFrom(nodes).Draw(rt, "node")
				e.Register(now, n, inv(rapid.IntRange(0, 3).Draw(rt, "gpus"), rapid.IntRange(1, 3).Draw(rt, "per"), n))
			case 1:
				e.Heartbeat(now, rapid.SampledFrom(nodes).Draw(rt, "node"))
			case 2:
				e.PutTenant(now, Tenant{Name: rapid.SampledFrom(names).Draw(rt, "tenant"), Demand: rapid.IntRange(0, 8).Draw(rt, "demand"),
					Weight: float64(rapid.IntRange(0, 3).Draw(rt, "weight")), Reservation: rapid.IntRange(0, 2).Draw(rt, "res")})
			case 3:
				e.SetDemand(now, rapid.SampledFrom(names).Draw(rt, "tenant"), rapid.IntRange(0, 8).Draw(rt, "demand"))
			case 4:
				e.DeleteTenant(now, rapid.SampledFrom(names).Draw(rt, "tenant"))
			case 5:
				if err := e.Tick(now); err != nil {
					rt.Fatal(err)
				}
			}
			checkEngine(rt, e)
		}
		r, err := restoreEngine(cfg, now, stateOf(e))
		if err != nil {
			rt.Fatal(err)
		}
		checkEngine(rt, r)
		for id, g := range r.grants {
			if old, ok := e.grants[id]; ok && old.Tenant != g.Tenant {
				rt.Fatalf("restore gave grant %s of %s to %s", id, old.Tenant, g.Tenant)
			}
		}
	})
}

type fataler interface {
	Fatalf(string, ...any)
}

func checkEngine(t fataler, e *Engine) {
	perSlice := map[string]string{}
	perTenant := map[string]int{}
	for id, g := range e.grants {
		if other, dup := perSlice[g.Slice]; dup {
			t.Fatalf("slice %s holds grants %s and %s", g.Slice, other, id)
		}
		perSlice[g.Slice] = id
		if _, ok := e.slices[g.Slice]; !ok {
			t.Fatalf("grant %s on slice %s that is not live", id, g.Slice)
		}
		perTenant[g.Tenant]++
	}
	for name, n := range perTenant {
		if tn, ok := e.tenants[name]; !ok || n > tn.Demand {
			t.Fatalf("tenant %s holds %d grants, tenant %v", name, n, tn)
		}
	}
	if len(e.grants) > len(e.slices) {
		t.Fatalf("%d grants on %d slices", len(e.grants), len(e.slices))
	}
	if len(e.taskGrant) != len(e.grants) {
		t.Fatalf("%d tasks for %d grants: %v", len(e.taskGrant), len(e.grants), fmt.Sprint(e.taskGrant))
	}
}
