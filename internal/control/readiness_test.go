package control

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// TestStandbyReadinessFromHealth cordons n1 while alice's 2 replicas run there; their standbys
// start on n2, whose agent runs a replica process per grant and reports a standby ready only
// once its /health answers 200. The old replicas stop only then, not when the agent took the
// layout. A replica that never becomes healthy within the startup budget is reported failed:
// its standby stops and the old replica keeps running.
func TestStandbyReadinessFromHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for replica start-ups")
	}
	for _, c := range []struct {
		name    string
		startup time.Duration
	}{{"healthy after 600ms", 600 * time.Millisecond}, {"never healthy", -1}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, ServerConfig{})
			start := func(n string, run ReplicaRunner) *SimAgent {
				return h.simAgent(t, n, func(a *SimAgent) { a.Replicas, a.StartupBudget = run, 1500*time.Millisecond })
			}
			grants := func() []Grant {
				var gs []Grant
				json.Unmarshal(h.must("operator", "GET", "/v1/grants", nil, 200), &gs)
				return gs
			}
			start("n1", nil)
			waitFor(t, 10*time.Second, "n1 registered", func() bool { return h.node("n1").Name == "n1" })
			h.must("operator", "POST", "/v1/tenants", Tenant{Name: "alice", Demand: 2}, 200)
			n2 := start("n2", SimReplicas(func(LayoutSlice) time.Duration { return c.startup }))
			waitFor(t, 10*time.Second, "n2 registered", func() bool { return h.node("n2").Name == "n2" })
			olds := grants()
			if len(olds) != 2 || olds[0].Node != "n1" || olds[1].Node != "n1" {
				t.Fatalf("grants %v, want alice's 2 on n1", olds)
			}
			cordoned := time.Now()
			h.must("operator", "PUT", "/v1/nodes/n1/cordon", CordonRequest{Cordoned: true}, 200)
			onN1 := func() int {
				k := 0
				for _, g := range grants() {
					if g.Node == "n1" {
						k++
					}
				}
				return k
			}
			if c.startup < 0 {
				var evs []Event
				waitFor(t, 10*time.Second, "a StandbyFailed event", func() bool {
					json.Unmarshal(h.must("operator", "GET", "/v1/events", nil, 200), &evs)
					return slices.ContainsFunc(evs, func(e Event) bool { return e.Code == CodeStandbyFailed && e.Node == "n2" })
				})
				if k := onN1(); k != 2 {
					t.Fatalf("after failed standbys %d of alice's replicas on n1, want both still running there", k)
				}
				return
			}
			waitFor(t, 10*time.Second, "alice's replicas to leave n1", func() bool { return onN1() == 0 })
			if took := time.Since(cordoned); took < c.startup {
				t.Fatalf("the old replicas stopped %s after the cordon, before the standbys' %s start-up: readiness was not the health check's", took, c.startup)
			}
			for _, g := range grants() {
				if g.Node != "n2" || g.Replaces != "" || !slices.Contains(n2.Running(), g.ID) {
					t.Fatalf("grant %+v after the move; n2 runs %v healthy", g, n2.Running())
				}
			}
		})
	}
}
