package fair

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// genSmall draws a small random hierarchical configuration from a seeded generator: 1–3
// resources, 2–6 tenants over paths up to two levels deep, weights, group weights, deserved
// parts on some groups and tenants, caps and optionally reservations, lumpy tasks (up to half of a resource) next to small ones. These
// tests run thousands of scenarios, so they use a plain generator rather than rapid.
func genSmall(r *rand.Rand, reserve bool) Config {
	m := 1 + r.IntN(3)
	cfg := Config{Capacity: Vector{}}
	for j := range m {
		cfg.Capacity[fmt.Sprintf("r%d", j)] = float64(8 + r.IntN(40))
	}
	n := 2 + r.IntN(5)
	for i := range n {
		tc := Tenant{Name: tenantNames[i], Task: Vector{}, Demand: r.IntN(25), Path: paths[r.IntN(len(paths))]}
		lumpy := r.IntN(3) == 0
		for j := range m {
			rn := fmt.Sprintf("r%d", j)
			hi := 3
			if lumpy {
				hi = int(cfg.Capacity[rn]) / 2
			}
			if x := r.IntN(hi + 1); x > 0 {
				tc.Task[rn] = float64(x)
			}
		}
		if len(tc.Task) == 0 {
			tc.Task["r0"] = 1
		}
		tc.Weight = []float64{0, 1, 2, 3, 0.5}[r.IntN(5)]
		if r.IntN(4) == 0 {
			tc.Cap = 1 + r.IntN(8)
		}
		cfg.Tenants = append(cfg.Tenants, tc)
	}
	for _, p := range []string{"x", "y", "x/p"} {
		if r.IntN(2) == 0 {
			g := Group{Path: p, Weight: float64(1 + r.IntN(3))}
			if r.IntN(3) == 0 { // a deserved part (quota) on some groups and tenants
				g.Deserved = map[string]float64{"x": 0.4, "y": 0.3, "x/p": 0.2}[p]
			}
			if r.IntN(3) == 0 { // and a hard limit
				g.Limit = map[string]float64{"x": 0.5, "y": 0.6, "x/p": 0.3}[p]
			}
			cfg.Groups = append(cfg.Groups, g)
		}
	}
	for i := range cfg.Tenants {
		if r.IntN(5) == 0 {
			cfg.Tenants[i].Deserved = 0.1
		}
	}
	if validateConfig(cfg, false) != nil {
		for i := range cfg.Tenants {
			cfg.Tenants[i].Deserved = 0
		}
	}
	if reserve {
		for i := range cfg.Tenants {
			cfg.Tenants[i].Reservation = r.IntN(3)
			if c := cfg.Tenants[i].Cap; c > 0 && cfg.Tenants[i].Reservation > c {
				cfg.Tenants[i].Reservation = c
			}
			if validateConfig(cfg, true) != nil {
				cfg.Tenants[i].Reservation = 0
			}
		}
	}
	return cfg
}

// moves lists the items of d that start or stop a task.
func moves(d Decision) []Item {
	var out []Item
	for _, it := range d.Items {
		if it.Kind != KindQueue {
			out = append(out, it)
		}
	}
	return out
}

// TestFixedPointRecompute: over 10,000 random hierarchical scenarios (with reservations, caps,
// weights at every level and lumpy tasks), a Recompute right after a Recompute, with no event in
// between and at the same time, starts and stops nothing.
func TestFixedPointRecompute(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 9))
		cfg := genSmall(r, seed%2 == 0)
		a, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		now := t0
		for round := range 2 {
			// The second round starts from an allocation moved by a later Recompute (tasks now
			// past their start, so claims may take them) and checks the fixed point again.
			if _, err := a.Recompute(now); err != nil {
				t.Fatal(err)
			}
			d, err := a.Recompute(now)
			if err != nil {
				t.Fatal(err)
			}
			if mv := moves(d); len(mv) > 0 {
				t.Fatalf("seed %d round %d: a Recompute with no event moved tasks: %v", seed, round, mv)
			}
			checkLimits(t, a, d, fmt.Sprintf("seed %d round %d", seed, round))
			now = now.Add(time.Second)
		}
	}
}

// floorReachable reports whether every tenant's reservation or floor fits the steady pool
// together, and within every group limit those of the group's tenants; only then must every
// tenant reach its floor.
func floorReachable(a *Allocator) bool {
	sum := make([]int64, len(a.capS))
	for _, t := range a.tenants {
		addScaled(sum, t.d, int64(max(t.resTarget(), a.floor(t))))
	}
	if over(sum, a.capS) {
		return false
	}
	tr := &a.st
	for n, l := range tr.limit {
		if l == 0 {
			continue
		}
		clear(sum)
		for _, leaf := range tr.leavesUnder(int32(n), nil) {
			t := a.tenants[tr.tenant[leaf]]
			addScaled(sum, t.d, int64(max(t.resTarget(), a.floor(t))))
		}
		for _, j := range tr.dims {
			if float64(sum[j]) > l*(1+tieTolerance)*float64(a.capT[j]) {
				return false
			}
		}
	}
	return true
}

// checkFloors fails when a tenant holds fewer steady tasks than its sharing-incentive floor.
func checkFloors(t *testing.T, a *Allocator, what string) {
	t.Helper()
	if !floorReachable(a) {
		return
	}
	for _, tr := range a.tenants {
		if a.overLimit(tr) && !fits(a.sUsed, a.capS, tr.d) {
			// At a group's limit with the pool full as well: a floor claim takes only from inside
			// the group, which may not free what the pool lacks (docs/fairness.md §2).
			continue
		}
		if f := a.floor(tr); len(tr.steady) < f {
			t.Fatalf("%s: %s holds %d steady tasks, below its floor %d (entitlement %.4f, one task %.4f): %s",
				what, tr.cfg.Name, len(tr.steady), f, a.st.entitlement(tr.sLeaf), tr.unit, steadyState(a))
		}
	}
}

// TestFloorWithinOneRecompute: in random scenarios and after random demand changes, one
// Recompute (once the tasks of the step before have started) brings every tenant with positive
// demand to its sharing-incentive floor: its demand-aware weighted part of the steady pool in
// whole tasks (at least one task when that part holds one).
func TestFloorWithinOneRecompute(t *testing.T) {
	n := 3_000
	if testing.Short() {
		n = 300
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		cfg := genSmall(r, seed%3 == 0)
		a, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		now := t0
		mustRe := func() {
			if _, err := a.Recompute(now); err != nil {
				t.Fatal(err)
			}
		}
		mustRe()
		for step := range 6 {
			now = now.Add(time.Second)
			mustRe()
			checkFloors(t, a, fmt.Sprintf("seed %d step %d", seed, step))
			tc := cfg.Tenants[r.IntN(len(cfg.Tenants))]
			now = now.Add(time.Second)
			if _, err := a.SetDemand(now, tc.Name, r.IntN(25)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestNoPreemptionCycle runs 10,000 random dynamic scenarios (hierarchy, weights, lumpy tasks,
// reservations, caps, minimum runtimes, leases; demand changes, ticks and Recomputes) and fails if
// an allocation seen after a preemption comes back through preemptions alone (no demand,
// capacity or configuration change in between). After each Recompute it also checks the fixed
// point: a second Recompute at the same time moves nothing.
func TestNoPreemptionCycle(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 13))
		cfg := genSmall(r, seed%2 == 0)
		if r.IntN(2) == 0 {
			cfg.LeaseDuration = 30 * time.Second
			if cfg.BurstPoolPercent = 20; validateConfig(cfg, true) != nil {
				cfg.BurstPoolPercent = 0
			}
		}
		for i := range cfg.Tenants {
			cfg.Tenants[i].MinRuntime = time.Duration(r.IntN(3)) * 10 * time.Second
			if r.IntN(3) == 0 {
				cfg.Tenants[i].Classes = []ReplicaClass{{Name: "hi", Replicas: 1}, {Name: "mid", Replicas: 2}}
			}
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		now := t0
		seen := map[string]bool{}
		for step := range 12 {
			now = now.Add(time.Duration(r.IntN(20)) * time.Second)
			var d Decision
			switch op := r.IntN(4); op {
			case 0:
				tc := cfg.Tenants[r.IntN(len(cfg.Tenants))]
				d, err = a.SetDemand(now, tc.Name, r.IntN(25))
				clear(seen)
			case 1:
				d, err = a.Apply(now)
			default:
				d, err = a.Recompute(now)
				if err == nil {
					st := steadyState(a)
					again, _ := a.Recompute(now)
					if mv := moves(again); len(mv) > 0 {
						t.Fatalf("seed %d step %d: a Recompute with no event moved tasks: %v", seed, step, mv)
					}
					if steadyState(a) != st {
						t.Fatalf("seed %d step %d: allocation changed", seed, step)
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLimits(t, a, d, fmt.Sprintf("seed %d step %d", seed, step))
			if hasPreemption(d, ReasonOverShare, ReasonReservationClaim, ReasonBelowFloor) {
				st := steadyState(a)
				if seen[st] {
					t.Fatalf("seed %d step %d: allocation %s came back through preemptions alone", seed, step, st)
				}
				seen[st] = true
			}
			if grantAndStop(d) != "" {
				t.Fatalf("seed %d step %d: %s\n%v", seed, step, grantAndStop(d), d.Items)
			}
		}
	}
}

// grantAndStop names a tenant that, in one decision, loses a task to a claim and is then granted
// or lent a new one, or "" if none: a task stopped only to start another.
func grantAndStop(d Decision) string {
	lost := map[string]bool{}
	for _, it := range d.Items {
		if it.Kind == KindPreempt && it.Reason != ReasonCapacityLost {
			lost[it.Tenant] = true
		}
		newTask := it.Kind == KindGrant && it.Reason != ReasonLeaseConverted || it.Kind == KindLease && it.Reason != ReasonSteadyToLease
		if newTask && lost[it.Tenant] {
			return fmt.Sprintf("%s loses a task to a claim and then gets %v in the same decision", it.Tenant, it)
		}
	}
	return ""
}

// checkLimits fails when a decision granted a tenant a steady task other than for a reservation
// (reservations are served before limits) and some shared resource that task uses is held by a
// group of the tenant above limit × capacity.
func checkLimits(t *testing.T, a *Allocator, d Decision, what string) {
	t.Helper()
	tr := &a.st
	for _, it := range d.Items {
		if it.Kind != KindGrant || it.Reason == ReasonReservation {
			continue
		}
		tn := a.tenants[a.byName[it.Tenant]]
		for n := tr.parent[tn.sLeaf]; n > 0; n = tr.parent[n] {
			l := tr.limit[n]
			if l == 0 {
				continue
			}
			h := tr.histOf(n)
			for i, j := range tr.dims {
				used := tr.u(n)[i]
				if h != nil {
					used -= h[i] // limits bound tasks, not usage history
				}
				if tn.d[j] > 0 && float64(used) > l*(1+tieTolerance)*float64(a.capT[j]) {
					t.Fatalf("%s: %v took group %q above its limit %.4f in %s: %s\n%v",
						what, it, tr.full[n], l, a.res.names[j], steadyState(a), d.Items)
				}
			}
		}
	}
}
