package control

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func inv(gpus, slicesPer int, node string) Inventory {
	var in Inventory
	for g := range gpus {
		s := make([]string, slicesPer)
		for i := range s {
			s[i] = "3g.40gb"
		}
		in.GPUs = append(in.GPUs, GPU{UUID: fmt.Sprintf("GPU-%s-%d", node, g), Board: "H100-SXM5-80GB", Slices: s})
	}
	return in
}

// checkInvariants: every slice holds at most one grant, every grant's slice is live (or drains
// for a MIG change), every standby stands in for a draining grant, no tenant holds more grants
// than its demand, and the engine's indexes agree.
func checkInvariants(t *testing.T, e *Engine) {
	t.Helper()
	perSlice := map[string]string{}
	perTenant := map[string]int{}
	standbys := 0
	for id, g := range e.grants {
		if other, dup := perSlice[g.Slice]; dup {
			t.Fatalf("slice %s holds grants %s and %s", g.Slice, other, id)
		}
		perSlice[g.Slice] = id
		if _, ok := e.slices[g.Slice]; !ok && !e.drainingSlice(g.Slice) {
			t.Fatalf("grant %s on slice %s that is not live", id, g.Slice)
		}
		if e.sliceGrant[g.Slice] != id {
			t.Fatalf("slice index says %q for %s, grant %s", e.sliceGrant[g.Slice], g.Slice, id)
		}
		if g.Replaces != "" {
			if old, ok := e.grants[g.Replaces]; !ok || !e.drainingSlice(old.Slice) || old.Tenant != g.Tenant {
				t.Fatalf("standby %s replaces %s, which is not a draining grant of tenant %s", id, g.Replaces, g.Tenant)
			}
			standbys++
			continue
		}
		perTenant[g.Tenant]++
	}
	for name, n := range perTenant {
		if want, engine := e.loraDemand(name); engine { // a shared LoRA engine: one grant at most
			if n > 1 || n == 1 && !want {
				t.Fatalf("lora engine %s holds %d grants (wanted: %v)", name, n, want)
			}
			continue
		}
		if len(e.adapterOf[name]) > 0 && n > 0 {
			t.Fatalf("adapter tenant %s holds %d grants of its own beside its engines %v", name, n, e.adapterOf[name])
		}
		if tn, ok := e.tenants[name]; !ok || n > tn.Demand {
			t.Fatalf("tenant %s holds %d grants, demand %v", name, n, tn)
		}
	}
	if len(e.taskGrant) != len(e.grants)-standbys {
		t.Fatalf("%d tasks for %d grants", len(e.taskGrant), len(e.grants))
	}
}

func TestEngineGrantsFollowDemandAndNodes(t *testing.T) {
	e, err := NewEngine(EngineConfig{NodeTimeout: 10 * time.Second}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// 2 nodes × 2 GPUs × 2 slices = 8 slices.
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := e.Register(t0, n, inv(2, 2, n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.PutTenant(t0, Tenant{Name: "alpha", Demand: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutTenant(t0, Tenant{Name: "beta", Demand: 10}); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	// alpha wants 3 of 8 (its fair half is 4): 3; beta gets the other 5.
	if a, b := e.granted("alpha"), e.granted("beta"); a != 3 || b != 5 {
		t.Fatalf("granted alpha=%d beta=%d, want 3, 5", a, b)
	}
	// alpha asks 6. Its sharing-incentive floor is half of the 8 slices, and a claim may leave the
	// claimant level with the victim (docs/fairness.md): one slice moves, 4 and 4.
	tn, err := e.SetDemand(t0.Add(time.Second), "alpha", 6)
	if err != nil {
		t.Fatal(err)
	}
	if tn.Version != 2 {
		t.Errorf("version %d after one change, want 2", tn.Version)
	}
	checkInvariants(t, e)
	if a, b := e.granted("alpha"), e.granted("beta"); a != 4 || b != 4 {
		t.Fatalf("granted alpha=%d beta=%d, want 4, 4", a, b)
	}
	// node-b goes silent: 4 slices left, 2 each; every grant sits on node-a.
	if err := e.Heartbeat(t0.Add(5*time.Second), "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := e.Tick(t0.Add(12 * time.Second)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	if a, b := e.granted("alpha"), e.granted("beta"); a+b != 4 {
		t.Fatalf("after node loss alpha=%d beta=%d, want 4 in all", a, b)
	}
	for _, g := range e.grants {
		if g.Node != "node-a" {
			t.Fatalf("grant %s still on %s", g.ID, g.Node)
		}
	}
	c := e.Take()
	if !c.Nodes["node-b"] || len(c.Events) == 0 {
		t.Fatalf("changes do not name node-b or carry events: %+v", c)
	}
	// The lost node speaks again. It is fenced: its heartbeat and a report for the epoch it ran
	// are refused; its layout is empty and carries the new epoch; a report for that epoch brings
	// it back with its 4 slices: 8 in all.
	if err := e.Heartbeat(t0.Add(13*time.Second), "node-b"); !errors.Is(err, ErrFenced) || !errors.Is(err, ErrConflict) {
		t.Fatalf("lost node's heartbeat: %v, want ErrFenced (a conflict)", err)
	}
	if _, err := e.Register(t0.Add(13*time.Second), "node-b", inv(1, 4, "node-b")); !errors.Is(err, ErrFenced) {
		t.Fatalf("lost node's report for epoch 0: %v, want ErrFenced", err)
	}
	l, _ := e.View(2).Layout("node-b")
	if l.Epoch != 1 || len(l.Slices) != 0 {
		t.Fatalf("lost node's layout: epoch %d, %d slices; want epoch 1 and none", l.Epoch, len(l.Slices))
	}
	if a, b := e.granted("alpha"), e.granted("beta"); a+b != 4 {
		t.Fatalf("after refused reports alpha=%d beta=%d, want still 4 in all", a, b)
	}
	// A restart keeps the node lost and fenced.
	r, err := restoreEngine(EngineConfig{NodeTimeout: 10 * time.Second}, t0.Add(13*time.Second), stateOf(e))
	if err != nil {
		t.Fatal(err)
	}
	if n := r.nodes["node-b"]; !n.Lost || n.Epoch != 1 {
		t.Fatalf("after a restart node-b is %+v, want still lost at epoch 1", n)
	}
	if err := r.Heartbeat(t0.Add(13*time.Second), "node-b"); !errors.Is(err, ErrFenced) {
		t.Fatalf("after a restart the lost node's heartbeat: %v, want ErrFenced", err)
	}
	back := inv(1, 4, "node-b")
	back.Epoch = l.Epoch
	if _, err := e.Register(t0.Add(13*time.Second), "node-b", back); err != nil {
		t.Fatal(err)
	}
	if err := e.Heartbeat(t0.Add(14*time.Second), "node-b"); err != nil {
		t.Fatalf("heartbeat after coming back: %v", err)
	}
	checkInvariants(t, e)
	if a, b := e.granted("alpha"), e.granted("beta"); a+b != 8 || a < 3 {
		t.Fatalf("after return alpha=%d beta=%d, want 8 in all and alpha at least 3", a, b)
	}
	if err := e.DeleteTenant(t0.Add(14*time.Second), "alpha"); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	if b := e.granted("beta"); b != 8 {
		t.Fatalf("beta alone has %d, want 8", b)
	}
}

func TestEngineRejectsWithFieldPaths(t *testing.T) {
	e, _ := NewEngine(EngineConfig{}, t0)
	_, err := e.PutTenant(t0, Tenant{Name: "Bad Name", Demand: -1, Weight: -2, Reservation: 5, Cap: 2})
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("err %v, want *InvalidError", err)
	}
	want := map[string]bool{"name": true, "demand": true, "weight": true, "reservation": true}
	for _, f := range inv.Fields {
		delete(want, f.Path)
	}
	if len(want) != 0 {
		t.Fatalf("missing paths %v in %v", want, inv.Fields)
	}
	if _, err := e.SetDemand(t0, "nobody", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("set demand of unknown tenant: %v", err)
	}
}

// TestRestoreKeepsGrants: a restored engine takes over the stored grants (ids and slices).
func TestRestoreKeepsGrants(t *testing.T) {
	e, _ := NewEngine(EngineConfig{}, t0)
	e.Register(t0, "n1", inv(1, 4, "n1"))
	e.PutTenant(t0, Tenant{Name: "a", Demand: 2})
	e.PutTenant(t0, Tenant{Name: "b", Demand: 2})
	before := e.View(1).Grants
	st := State{Tenants: []Tenant{*e.tenants["a"], *e.tenants["b"]}, Nodes: []Node{*e.nodes["n1"]},
		Grants: before, NextGrant: e.nextGrant, NextEvent: e.nextEvent}
	r, err := restoreEngine(EngineConfig{}, t0.Add(time.Minute), st)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	after := r.View(2).Grants
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("grants moved on restore:\n%v\n%v", before, after)
	}
	if c := r.Take(); len(c.Grants) != 4 {
		t.Fatalf("restore wrote %d grants, want the 4 it took over", len(c.Grants))
	}
}

func TestFairShares(t *testing.T) {
	// capacity 10; a wants 2 (w1), b wants 10 (w1), c wants 10 (w2):
	// a gets 2; 8 left over weights 3: b 8/3, c 16/3.
	got := fairShares(map[string]*Tenant{"a": {Name: "a", Demand: 2}, "b": {Name: "b", Demand: 10}, "c": {Name: "c", Demand: 10, Weight: 2}}, 10)
	want := map[string]float64{"a": 0.2, "b": 8.0 / 30, "c": 16.0 / 30}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: %g, want %g", k, got[k], v)
		}
	}
	// A cap bounds the share as demand does: on 9 slices gamma (weight 3, cap 2) gets 2/9, and
	// the 7 left go to alpha and beta (weight 1 each, demand 9) by weight.
	got = fairShares(map[string]*Tenant{"alpha": {Name: "alpha", Demand: 9}, "beta": {Name: "beta", Demand: 9},
		"gamma": {Name: "gamma", Demand: 9, Weight: 3, Cap: 2}}, 9)
	want = map[string]float64{"alpha": 3.5 / 9, "beta": 3.5 / 9, "gamma": 2.0 / 9}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("capped %s: %g, want %g", k, got[k], v)
		}
	}
}

func BenchmarkEngineSetDemand(b *testing.B) {
	e, _ := NewEngine(EngineConfig{}, t0)
	for i := range 8 {
		n := fmt.Sprintf("n%d", i)
		e.Register(t0, n, inv(8, 4, n))
	}
	for i := range 50 {
		e.PutTenant(t0, Tenant{Name: fmt.Sprintf("t%d", i), Demand: 4})
	}
	e.Take()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.SetDemand(t0, fmt.Sprintf("t%d", i%50), 2+i%5); err != nil {
			b.Fatal(err)
		}
		e.Take()
	}
}

// TestBurstLeases: with a 20% burst pool on 10 slices, a tenant asking 10 runs 8 steady replicas
// and 2 leased ones that carry their expiry; a second tenant's claim takes the leased slices back.
func TestBurstLeases(t *testing.T) {
	e, _ := NewEngine(EngineConfig{BurstPoolPercent: 20, LeaseDuration: 5 * time.Second}, t0)
	e.Register(t0, "n1", inv(2, 5, "n1"))
	e.PutTenant(t0, Tenant{Name: "a", Demand: 10})
	checkInvariants(t, e)
	leased := 0
	for _, g := range e.grants {
		if !g.Expires.IsZero() {
			leased++
			if !g.Expires.Equal(t0.Add(5 * time.Second)) {
				t.Errorf("lease %s expires %s, want %s", g.ID, g.Expires, t0.Add(5*time.Second))
			}
		}
	}
	if len(e.grants) != 10 || leased != 2 {
		t.Fatalf("%d grants, %d leased; want 10 with 2 leased (8 steady + 20%% of 10)", len(e.grants), leased)
	}
	// b asks 5: its fair half of the 8 steady slices is 4, so a gives up its leases and 2 steady.
	e.PutTenant(t0.Add(time.Second), Tenant{Name: "b", Demand: 5})
	checkInvariants(t, e)
	if a, b := e.granted("a"), e.granted("b"); a+b != 10 || b < 2 {
		t.Fatalf("after b's claim a=%d b=%d, want 10 in all and b at least the 2 leased slices", a, b)
	}
}

// TestCordonMovesReplicas: cordoning n2 starts a standby on n1 for each of n2's replicas (the
// allocator trims to n1's 4 slices first); n2's replicas keep running, listed as draining in its
// layout, until n1's agent reports the standbys ready. A report does not uncordon; uncordoning
// returns the room. Cordoned again, standbys not reported ready take over at the drain timeout;
// uncordoned before that, the standbys stop and the replicas stay.
func TestCordonMovesReplicas(t *testing.T) {
	e, _ := NewEngine(EngineConfig{}, t0)
	e.Register(t0, "n1", inv(1, 4, "n1"))
	e.Register(t0, "n2", inv(1, 4, "n2"))
	e.PutTenant(t0, Tenant{Name: "a", Demand: 3})
	e.PutTenant(t0, Tenant{Name: "b", Demand: 3}) // 6 of 8 slices
	onN2 := func() (olds, standbys []string) {
		for _, id := range slices.Sorted(maps.Keys(e.grants)) {
			g := e.grants[id]
			if g.Node == "n2" {
				olds = append(olds, id)
				if sb := e.standbyOf(id); sb == nil || sb.Node != "n1" {
					t.Fatalf("grant %s on cordoned n2 has no standby on n1: %+v", id, sb)
				} else {
					standbys = append(standbys, sb.ID)
				}
			}
		}
		return olds, standbys
	}
	if _, err := e.Cordon(t0, "n2", true); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	olds, standbys := onN2()
	if len(olds) == 0 || e.granted("a")+e.granted("b") != 4 {
		t.Fatalf("after cordon: %d replicas still on n2, %d granted; want some on n2 (with standbys) and 4 granted", len(olds), e.granted("a")+e.granted("b"))
	}
	l, _ := e.View(1).Layout("n2")
	if len(l.Slices) != len(olds) || !l.Slices[0].Draining {
		t.Fatalf("cordoned n2's layout %+v: want its %d replicas, draining", l.Slices, len(olds))
	}
	back := inv(1, 4, "n1")
	back.Ready = standbys
	e.Register(t0.Add(time.Second), "n1", back) // n1's agent: the standbys run
	checkInvariants(t, e)
	for _, g := range e.grants {
		if g.Node != "n1" || g.Replaces != "" {
			t.Fatalf("after the standbys were ready: grant %+v, want every grant a replica on n1", g)
		}
	}
	if len(e.grants) != 4 {
		t.Fatalf("%d grants on n1's 4 slices, want 4", len(e.grants))
	}
	e.Register(t0.Add(2*time.Second), "n2", inv(1, 4, "n2")) // a report does not uncordon
	if len(e.slices) != 4 {
		t.Fatalf("%d live slices after n2 reported while cordoned, want 4", len(e.slices))
	}
	if _, err := e.Cordon(t0.Add(2*time.Second), "n2", false); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	if len(e.grants) != 6 {
		t.Fatalf("%d grants after uncordon, want 6", len(e.grants))
	}
	if _, err := e.Cordon(t0, "nope", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cordon of unknown node: %v", err)
	}
	// a's 2 replicas on n2, n1 empty.
	t1 := t0.Add(time.Minute)
	setup := func() {
		e, _ = NewEngine(EngineConfig{NodeTimeout: time.Hour}, t0)
		e.Register(t0, "n2", inv(1, 4, "n2"))
		e.PutTenant(t0, Tenant{Name: "a", Demand: 2})
		e.Register(t0, "n1", inv(1, 4, "n1"))
		e.Cordon(t1, "n2", true)
		checkInvariants(t, e)
	}
	// Nobody reports the standbys ready: they take over at the drain timeout.
	setup()
	if olds, _ = onN2(); len(olds) != 2 {
		t.Fatalf("cordon: %v on n2, want a's 2 replicas", olds)
	}
	e.Tick(t1.Add(4 * time.Minute))
	if o, _ := onN2(); len(o) != 2 {
		t.Fatalf("before the drain timeout %d replicas left n2, want none to leave", 2-len(o))
	}
	e.Tick(t1.Add(5 * time.Minute))
	checkInvariants(t, e)
	if o, _ := onN2(); len(o) != 0 || e.granted("a") != 2 {
		t.Fatalf("at the drain timeout %v still on n2, a granted %d", o, e.granted("a"))
	}
	// Uncordoned before any standby is ready: the standbys stop, the replicas stay.
	setup()
	olds, standbys = onN2()
	e.Cordon(t1, "n2", false)
	checkInvariants(t, e)
	for _, id := range olds {
		if g := e.grants[id]; g == nil || g.Node != "n2" {
			t.Fatalf("uncordoned before the standbys were ready: grant %s is %+v, want it still on n2", id, g)
		}
	}
	for _, id := range standbys {
		if _, ok := e.grants[id]; ok {
			t.Fatalf("standby %s still runs after the uncordon", id)
		}
	}
	// Lost while cordoned: the standbys are the replicas at once.
	setup()
	_, standbys = onN2()
	e.Heartbeat(t1.Add(59*time.Minute), "n1")
	e.Tick(t1.Add(61 * time.Minute)) // n2 silent since t0, over the 1 h node timeout
	checkInvariants(t, e)
	for _, id := range standbys {
		if g := e.grants[id]; g == nil || g.Replaces != "" {
			t.Fatalf("n2 lost while cordoned: standby %s is %+v, want the replica", id, g)
		}
	}
}

func BenchmarkEngineView(b *testing.B) {
	e, _ := NewEngine(EngineConfig{}, t0)
	for i := range 4 {
		n := fmt.Sprintf("n%d", i)
		e.Register(t0, n, inv(8, 4, n))
	}
	for i := range 50 {
		e.PutTenant(t0, Tenant{Name: fmt.Sprintf("t%d", i), Demand: 1 + i%4})
	}
	for b.Loop() {
		e.View(1)
	}
}

// TestRestoreKeepsLeases: a restart keeps each burst lease (same grant, slice and expiry, not a
// fresh term from the restart), and the lease is renewed at its own expiry with the new expiry
// on the grant.
func TestRestoreKeepsLeases(t *testing.T) {
	cfg := EngineConfig{BurstPoolPercent: 20, LeaseDuration: time.Minute}
	e, _ := NewEngine(cfg, t0)
	e.Register(t0, "n1", inv(2, 5, "n1"))
	e.PutTenant(t0, Tenant{Name: "a", Demand: 10})
	before := e.View(1).Grants
	leases := map[string]bool{}
	for _, g := range before {
		if !g.Expires.IsZero() {
			leases[g.ID] = true
		}
	}
	if len(leases) != 2 {
		t.Fatalf("%d leases before the restart, want 2: %v", len(leases), before)
	}
	restart := t0.Add(40 * time.Second)
	st := State{Tenants: []Tenant{*e.tenants["a"]}, Nodes: []Node{*e.nodes["n1"]},
		Grants: before, NextGrant: e.nextGrant, NextEvent: e.nextEvent}
	r, err := restoreEngine(cfg, restart, st)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	if after := r.View(2).Grants; fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("grants or leases changed on restart:\n%v\n%v", before, after)
	}
	if err := r.Tick(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for id := range leases {
		g := r.grants[id]
		if g == nil || !g.Expires.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("lease %s after its own expiry at %s: %+v, want renewed to %s", id, t0.Add(time.Minute), g, t0.Add(2*time.Minute))
		}
	}
}

// TestLeaseExpiryKeepsGrantsGoingBackToTheirTenant: 10 slices, 20% burst (2 leasable), a and b
// ask 10 each: 4 steady each and one lease each once b's claim settled. At every later expiry
// both still wait, so the
// room goes back to filling, which lends it to the same two tenants again (equal shares). Each
// lease is renewed on its own grant (same ID, slice, a new expiry): no replica stops or starts
// for a renewal at the same demand, nor when both ask their same demand again at 5m, an expiry.
func TestLeaseExpiryKeepsGrantsGoingBackToTheirTenant(t *testing.T) {
	e, _ := NewEngine(EngineConfig{BurstPoolPercent: 20, LeaseDuration: time.Minute, NodeTimeout: time.Hour}, t0)
	e.Register(t0, "n1", inv(2, 5, "n1"))
	e.PutTenant(t0, Tenant{Name: "a", Demand: 10})
	e.PutTenant(t0.Add(time.Second), Tenant{Name: "b", Demand: 10})
	// b's claim takes a's leases' room; a's leases end at their expiry, lent to b, lower.
	if err := e.Tick(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	before := map[string]Grant{}
	for id, g := range e.grants {
		before[id] = *g
	}
	leases := 0
	for _, g := range before {
		if !g.Expires.IsZero() {
			leases++
		}
	}
	if len(before) != 10 || leases != 2 || e.granted("a") != 5 || e.granted("b") != 5 {
		t.Fatalf("%d grants (%d leased), a %d, b %d; want 10 with 2 leased, 5 each", len(before), leases, e.granted("a"), e.granted("b"))
	}
	seq := e.nextEvent
	for _, at := range []time.Duration{2 * time.Minute, 3 * time.Minute, 4 * time.Minute} {
		if err := e.Tick(t0.Add(at)); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, e)
		if len(e.grants) != len(before) {
			t.Fatalf("at %s: %d grants, want the %d before", at, len(e.grants), len(before))
		}
		for id, was := range before {
			g := e.grants[id]
			if g == nil || g.Tenant != was.Tenant || g.Slice != was.Slice {
				t.Fatalf("at %s: grant %s %+v, want it kept on %s for %s", at, id, g, was.Slice, was.Tenant)
			}
			if !was.Expires.IsZero() && !g.Expires.Equal(t0.Add(at+time.Minute)) {
				t.Errorf("at %s: lease %s expires %s, want %s", at, id, g.Expires, t0.Add(at+time.Minute))
			}
		}
	}
	// Asked again at the same demand right after an expiry: nothing moves either.
	for _, name := range []string{"a", "b"} {
		if _, err := e.SetDemand(t0.Add(5*time.Minute), name, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Tick(t0.Add(5 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	for id, was := range before {
		if g := e.grants[id]; g == nil || g.Slice != was.Slice {
			t.Fatalf("after the same demand again: grant %s %+v, want it kept on %s", id, g, was.Slice)
		}
	}
	for _, ev := range e.events {
		if ev.Seq > seq && (ev.Code == CodePreempted || ev.Code == CodeGranted || ev.Code == CodeReleased) {
			t.Errorf("renewal caused %s: %s", ev.Code, ev.Message)
		}
	}
}
