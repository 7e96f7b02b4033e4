package control

import (
	"testing"
	"time"
)

// TestReview11RestartKeepsAFixedPointAllocation: beta came first and holds 2 of 3 slices; alpha,
// asking for 2 later, gets 1 and no claim moves a slice (alpha would end above beta). A restart
// of the control plane must keep that: the stored grants are the tenants' tasks.
func TestReview11RestartKeepsAFixedPointAllocation(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Register(t0, "node-a", inv(1, 3, "node-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutTenant(t0, Tenant{Name: "beta", Demand: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutTenant(t0.Add(time.Second), Tenant{Name: "alpha", Demand: 2}); err != nil {
		t.Fatal(err)
	}
	if err := e.Tick(t0.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if a, b := e.granted("alpha"), e.granted("beta"); a != 1 || b != 2 {
		t.Fatalf("before the restart alpha=%d beta=%d, want 1, 2", a, b)
	}
	before := map[string]string{}
	for id, g := range e.grants {
		before[id] = g.Tenant
	}
	e.Take()
	r, err := restoreEngine(EngineConfig{NodeTimeout: time.Hour}, t0.Add(3*time.Second), stateOf(e))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	after := map[string]string{}
	for id, g := range r.grants {
		after[id] = g.Tenant
	}
	if a, b := r.granted("alpha"), r.granted("beta"); a != 1 || b != 2 || len(after) != len(before) {
		t.Fatalf("after the restart alpha=%d beta=%d (grants %v, before %v): the restart moved a slice", a, b, after, before)
	}
}
