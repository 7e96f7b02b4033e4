package fair

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestExpiredLeaseGoesBackAsTheSameTask: a lease that reaches its expiry while another tenant
// waits ends and its room goes back to filling; when filling gives that room to the lease's own
// tenant in the same step, the tenant keeps the task (no reclaim and no new task).
func TestExpiredLeaseGoesBackAsTheSameTask(t *testing.T) {
	items := func(d Decision) []string {
		var out []string
		for _, it := range moves(d) {
			out = append(out, fmt.Sprintf("%s %s#%d %s", it.Kind, it.Tenant, it.Task, it.Reason))
		}
		return out
	}
	t.Run("lent again", func(t *testing.T) {
		// testdata/review2/fair-lumpy-burst.yaml up to 6m: pool 8, 2 for leases; big's 4-GPU
		// task never fits the lease room, so it waits at every expiry. At 6m s4 and s5 (lowest
		// shares, 1/8 each with s1 and s2) are lent the room of their own expiring leases #7 and
		// #8 again: both are renewed, same tasks.
		a, err := New(Config{Capacity: Vector{"gpu": 8}, BurstPoolPercent: 25, LeaseDuration: 2 * time.Minute,
			Tenants: []Tenant{
				{Name: "big", Task: Vector{"gpu": 4}, Demand: 2},
				{Name: "s1", Task: Vector{"gpu": 1}, Demand: 8},
				{Name: "s2", Task: Vector{"gpu": 1}, Demand: 8},
				{Name: "s3", Task: Vector{"gpu": 1}, Demand: 8},
			}})
		if err != nil {
			t.Fatal(err)
		}
		mustStep(t)(a.Recompute(t0))
		mustStep(t)(a.Recompute(t0.Add(time.Minute)))
		mustStep(t)(a.SetDemand(t0.Add(2*time.Minute), "s3", 0))
		mustStep(t)(a.Recompute(t0.Add(3 * time.Minute)))
		mustStep(t)(a.Apply(t0.Add(4*time.Minute), AddTenant{Tenant: Tenant{Name: "s4", Task: Vector{"gpu": 1}, Demand: 8}},
			AddTenant{Tenant: Tenant{Name: "s5", Task: Vector{"gpu": 1}, Demand: 8}}))
		mustStep(t)(a.Recompute(t0.Add(5 * time.Minute)))
		d := mustStep(t)(a.Apply(t0.Add(6 * time.Minute)))
		want := []string{"lease s4#7 LeaseRenewed", "lease s5#8 LeaseRenewed"}
		if got := items(d); !slices.Equal(got, want) {
			t.Errorf("at 6m: %v, want %v", got, want)
		}
	})
	t.Run("turned steady", func(t *testing.T) {
		// Pool 10, 2 for leases: a and b 1 steady + 1 lease each, big one 6-GPU task and
		// waiting for its second. At 1m b leaves (demand 0) as a's lease #4 expires: the steady
		// room b frees goes to a, and a's lease becomes that steady task (LeaseConverted), not a
		// reclaim and a new grant.
		a, err := New(Config{Capacity: Vector{"gpu": 10}, BurstPoolPercent: 20, LeaseDuration: time.Minute,
			Tenants: []Tenant{
				{Name: "a", Task: Vector{"gpu": 1}, Demand: 10},
				{Name: "b", Task: Vector{"gpu": 1}, Demand: 3},
				{Name: "big", Task: Vector{"gpu": 6}, Demand: 2},
			}})
		if err != nil {
			t.Fatal(err)
		}
		mustStep(t)(a.Recompute(t0))
		d := mustStep(t)(a.SetDemand(t0.Add(time.Minute), "b", 0))
		want := []string{"release b#5 DemandDropped", "release b#2 DemandDropped", "grant a#4 LeaseConverted",
			"lease a#6 Burst", "lease a#7 Burst"}
		if got := items(d); !slices.Equal(got, want) {
			t.Errorf("at 1m: %v, want %v", got, want)
		}
	})
}
