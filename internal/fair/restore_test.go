package fair

import (
	"testing"
	"time"
)

// TestRestoreLeaseExpiry: a rebuilt allocator's lease given back its old expiry ends (when another
// tenant waits) at that expiry, not a full term after the rebuild; a later expiry is refused.
func TestRestoreLeaseExpiry(t *testing.T) {
	cfg := Config{Capacity: Vector{"gpu": 10}, BurstPoolPercent: 20, LeaseDuration: time.Minute,
		Tenants: []Tenant{
			{Name: "a", Task: Vector{"gpu": 1}, Demand: 10, Cap: 2},
			{Name: "b", Task: Vector{"gpu": 1}, Demand: 1, Cap: 1},
		}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := t0.Add(40 * time.Second) // the old leases end at t0+1m; the new ones at t0+1m40s
	d := mustStep(t)(a.Recompute(rebuilt))
	var lease uint64
	for _, it := range d.Items {
		if it.Kind == KindLease && it.Tenant == "a" {
			lease = it.Task
		}
	}
	if lease == 0 {
		t.Fatalf("no lease for a: %v", d.Items)
	}
	if a.RestoreLeaseExpiry("a", lease, rebuilt.Add(2*time.Minute)) {
		t.Error("a later expiry was taken: a lease must not be extended")
	}
	if a.RestoreLeaseExpiry("b", lease, t0.Add(time.Minute)) || a.RestoreLeaseExpiry("nobody", lease, t0.Add(time.Minute)) {
		t.Error("another tenant's task was taken as a lease")
	}
	if !a.RestoreLeaseExpiry("a", lease, t0.Add(time.Minute)) {
		t.Fatal("the earlier expiry was refused")
	}
	mustStep(t)(a.SetDemand(t0.Add(50*time.Second), "b", 5)) // b waits: expiries end leases
	d = mustStep(t)(a.Apply(t0.Add(time.Minute)))
	var ended []uint64
	for _, it := range d.Items {
		if it.Kind == KindReclaim && it.Reason == ReasonLeaseExpired {
			ended = append(ended, it.Task)
		}
	}
	if len(ended) != 1 || ended[0] != lease {
		t.Fatalf("at the restored expiry: leases ended %v, want exactly [%d]: %v", ended, lease, d.Items)
	}
	d = mustStep(t)(a.Apply(rebuilt.Add(time.Minute)))
	if n := countItems(d, KindReclaim, ReasonLeaseExpired); n == 0 {
		t.Errorf("the other leases did not end at their own expiry: %v", d.Items)
	}
}
