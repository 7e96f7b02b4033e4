package control

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"gpupool.dev/gpupool/internal/gpu"
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

// TestEngineInvariantsProperty: under any sequence of tenant, demand, node (reports for the
// node's epoch or a stale one, standbys ready or failed, cordons) and clock changes, no
// slice holds two grants, every grant sits on a live slice, no tenant holds more than its demand,
// grants never exceed live slices, and a restore from the same state keeps the invariants,
// never gives a tenant more than it held (ids stay unique) and keeps every replica on a live slice.
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
			switch rapid.IntRange(0, 8).Draw(rt, "op") {
			case 0: // a report for the node's epoch, or now and then a stale one (refused)
				n := rapid.SampledFrom(nodes).Draw(rt, "node")
				in := inv(rapid.IntRange(0, 3).Draw(rt, "gpus"), rapid.IntRange(1, 3).Draw(rt, "per"), n)
				if nd, ok := e.nodes[n]; ok {
					in.Epoch = nd.Epoch
					if nd.Epoch > 0 && rapid.Bool().Draw(rt, "stale") {
						in.Epoch--
					}
				}
				e.Register(now, n, in)
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
			case 6: // an operator asks a GPU for a new MIG layout
				n := rapid.SampledFrom(nodes).Draw(rt, "node")
				if nd, ok := e.nodes[n]; ok && len(nd.Inventory.GPUs) > 0 {
					g := nd.Inventory.GPUs[rapid.IntRange(0, len(nd.Inventory.GPUs)-1).Draw(rt, "gpu")]
					e.RequestLayout(now, n, g.UUID, rapid.SampledFrom([]string{"7g.80gb@0", "3g.40gb@0 3g.40gb@4", "2g.20gb@0 2g.20gb@2 3g.40gb@4", ""}).Draw(rt, "layout"))
				}
			case 7: // a node's agent reports: standbys ready, applied layouts done or failed
				n := rapid.SampledFrom(nodes).Draw(rt, "node")
				nd, ok := e.nodes[n]
				if !ok {
					continue
				}
				in := Inventory{GPUs: slices.Clone(nd.Inventory.GPUs), Epoch: nd.Epoch}
				ready, failed := rapid.Bool().Draw(rt, "ready"), rapid.Bool().Draw(rt, "failed")
				for _, g := range e.grants {
					if g.Node == n && g.Replaces != "" {
						switch {
						case ready:
							in.Ready = append(in.Ready, g.ID)
						case failed:
							in.Failed = append(in.Failed, g.ID)
						}
					}
				}
				fail := rapid.Bool().Draw(rt, "fail")
				for _, op := range nd.Gates {
					if op.State != GateApplying {
						continue
					}
					for i := range in.GPUs {
						if in.GPUs[i].UUID != op.GPU {
							continue
						}
						if fail {
							in.GPUs[i].Gate = &GateReport{Op: op.ID, Attempt: op.Attempts, Code: "GateRolledBack"}
							continue
						}
						l, _ := gpu.ParseLayout(op.Layout)
						in.GPUs[i].MIG, in.GPUs[i].Slices = op.Layout, nil
						for _, x := range l {
							in.GPUs[i].Slices = append(in.GPUs[i].Slices, x.Profile)
						}
					}
				}
				e.Register(now, n, in)
			case 8: // an operator cordons or uncordons a node
				e.Cordon(now, rapid.SampledFrom(nodes).Draw(rt, "node"), rapid.Bool().Draw(rt, "on"))
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
		// A restart moves nothing that need not move: every replica on a live slice is kept
		// (review 11 M1: 16 of 2,000 restores stopped one before).
		for id, g := range e.grants {
			if _, live := e.slices[g.Slice]; live && g.Replaces == "" {
				if _, ok := r.grants[id]; !ok {
					rt.Fatalf("restore stopped grant %s of %s on live slice %s", id, g.Tenant, g.Slice)
				}
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
	standbys, onLive := 0, 0
	for id, g := range e.grants {
		if other, dup := perSlice[g.Slice]; dup {
			t.Fatalf("slice %s holds grants %s and %s", g.Slice, other, id)
		}
		perSlice[g.Slice] = id
		if _, ok := e.slices[g.Slice]; ok {
			onLive++
		} else if !e.drainingSlice(g.Slice) || g.Replaces != "" {
			t.Fatalf("grant %s on slice %s that is neither live nor draining", id, g.Slice)
		}
		if g.Replaces != "" {
			if old, ok := e.grants[g.Replaces]; !ok || old.Tenant != g.Tenant || !e.drainingSlice(old.Slice) {
				t.Fatalf("standby %s stands in for %s, not a draining grant of %s", id, g.Replaces, g.Tenant)
			}
			standbys++
			continue
		}
		perTenant[g.Tenant]++
	}
	for name, n := range perTenant {
		if tn, ok := e.tenants[name]; !ok || n > tn.Demand {
			t.Fatalf("tenant %s holds %d grants, tenant %v", name, n, tn)
		}
	}
	if onLive > len(e.slices) {
		t.Fatalf("%d grants on %d live slices", onLive, len(e.slices))
	}
	if len(e.taskGrant) != len(e.grants)-standbys {
		t.Fatalf("%d tasks for %d grants: %v", len(e.taskGrant), len(e.grants), fmt.Sprint(e.taskGrant))
	}
}
