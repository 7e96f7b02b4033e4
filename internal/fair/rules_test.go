package fair

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func tenants(a *Allocator) map[string]TenantState { return tasksByName(a) }

// TestDiscreteLimits pins where indivisible tasks and the skip rule part from divisible DRF.
// The skip rule keeps the pool busy (Pareto), and the price is that exact envy-freeness and
// strategy-proofness no longer hold; the property tests check the bounded forms instead.
func TestDiscreteLimits(t *testing.T) {
	t.Run("inflating can block another tenant and gain", func(t *testing.T) {
		// Pool 12. Honest: a 3 (share 3/12) · b 7 (7/12; used 10) · a needs 13 > 12: a = 1.
		// a claims 6 per task: a 6 · b needs 13 > 12, skipped · a 12: a = 2 tasks of its true 3.
		// The gain comes only from b, which loses its task (TestPropStrategyProof).
		honest := Config{Capacity: Vector{"r": 12}, Tenants: []Tenant{
			{Name: "a", Task: Vector{"r": 3}, Demand: 2}, {Name: "b", Task: Vector{"r": 7}, Demand: 1}}}
		lie := honest
		lie.Tenants = []Tenant{{Name: "a", Task: Vector{"r": 6}, Demand: 2}, honest.Tenants[1]}
		x, _, _ := Allocate(honest, t0)
		y, _, _ := Allocate(lie, t0)
		if tenants(x)["a"].Tasks != 1 || tenants(y)["a"].Tasks != 2 || tenants(y)["b"].Tasks != 0 {
			t.Errorf("honest %v, lying %v", tenants(x), tenants(y))
		}
	})
	t.Run("a skipped tenant may envy one that kept filling", func(t *testing.T) {
		// Pool 15. a: task 7, weight 2; f: task 1. a 7/15/2 = .233 · f up to 4 (.267) · a needs
		// 7 + 4 + 7 = 18 > 15: skipped · f fills 8. a envies f: 2·(8−1)·1 = 14 ≥ (1+1)·7 = 14.
		// When a was skipped f held 4: 2·(4−1) = 6 < 14, no envy then.
		a, _, _ := Allocate(Config{Capacity: Vector{"r": 15}, Tenants: []Tenant{
			{Name: "a", Weight: 2, Task: Vector{"r": 7}, Demand: 2}, {Name: "f", Task: Vector{"r": 1}, Demand: 8}}}, t0)
		if s := tenants(a); s["a"].Tasks != 1 || s["f"].Tasks != 8 {
			t.Errorf("got %v", s)
		}
	})
}

// TestHierarchyWeights: org x (weight 2, one tenant) against org y (weight 1, two tenants) on
// one resource of 12: x gets 2/3 = 8, y's tenants 2 each (y's share 4/12 = x's 8/12 / 2).
func TestHierarchyWeights(t *testing.T) {
	a, _, err := Allocate(Config{Capacity: Vector{"gpu": 12}, Groups: []Group{{Path: "x", Weight: 2}},
		Tenants: []Tenant{
			{Name: "x1", Path: "x", Task: Vector{"gpu": 1}, Demand: 20},
			{Name: "y1", Path: "y", Task: Vector{"gpu": 1}, Demand: 20},
			{Name: "y2", Path: "y", Task: Vector{"gpu": 1}, Demand: 20},
		}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s := tenants(a); s["x1"].Tasks != 8 || s["y1"].Tasks != 2 || s["y2"].Tasks != 2 {
		t.Errorf("got %v", s)
	}
}

// TestFloorInsideOrg: team p's 3-GPU task needs two of team q's 2-GPU tasks. As a share claim
// inside org o the move lowers o's share, which the ancestor condition refuses (another org could
// claim it back); p would stay at 0 for good. p's sharing-incentive floor (half the pool: one
// task) gives it the task by a floor claim, inside the org as at the top level.
func TestFloorInsideOrg(t *testing.T) {
	for _, c := range []struct{ pathA, pathV string }{{"o/p", "o/q"}, {"", ""}} {
		a, err := New(Config{Capacity: Vector{"gpu": 10}, Tenants: []Tenant{
			{Name: "A", Path: c.pathA, Task: Vector{"gpu": 3}},
			{Name: "V", Path: c.pathV, Task: Vector{"gpu": 2}, Demand: 5},
		}})
		if err != nil {
			t.Fatal(err)
		}
		mustStep(t)(a.Recompute(t0))
		d := mustStep(t)(a.SetDemand(t0.Add(time.Minute), "A", 1))
		if got := tenants(a)["A"].Tasks; got != 1 {
			t.Errorf("paths %q/%q: A has %d tasks, want 1", c.pathA, c.pathV, got)
		}
		if n := countItems(d, KindPreempt, ReasonBelowFloor); n != 2 {
			t.Errorf("paths %q/%q: %d BelowFloor preemptions, want 2: %v", c.pathA, c.pathV, n, d.Items)
		}
	}
}

func countItems(d Decision, k Kind, r Reason) int {
	n := 0
	for _, it := range d.Items {
		if it.Kind == k && it.Reason == r {
			n++
		}
	}
	return n
}

func mustStep(t *testing.T) func(Decision, error) Decision {
	return func(d Decision, err error) Decision {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// TestLeaseConversion: a tenant holding a lease that gets steady room keeps the task running.
func TestLeaseConversion(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 4}, BurstPoolPercent: 25, LeaseDuration: time.Minute,
		Tenants: []Tenant{
			{Name: "a", Task: Vector{"gpu": 1}, Demand: 4},
			{Name: "b", Task: Vector{"gpu": 1}, Demand: 0},
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Steady pool 3: a gets 3 steady and 1 lease (task 4).
	mustStep(t)(a.Recompute(t0))
	if s := tenants(a)["a"]; s.Steady != 3 || s.Leased != 1 {
		t.Fatalf("a: %+v", s)
	}
	// The pool grows to 8 (steady 6): the lease turns steady, same task number.
	d := mustStep(t)(a.Apply(t0.Add(time.Second), SetCapacity{Capacity: Vector{"gpu": 8}}))
	if len(d.Items) == 0 || d.Items[0].Kind != KindGrant || d.Items[0].Reason != ReasonLeaseConverted || d.Items[0].Task != 4 {
		t.Errorf("items %v", d.Items)
	}
}

func TestValidateConfig(t *testing.T) {
	good := Tenant{Name: "a", Task: Vector{"cpu": 1}, Demand: 1}
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"empty", Config{}, []string{"capacity: empty"}},
		{"bad capacity", Config{Capacity: Vector{"cpu": -1, "a b": 1}}, []string{"capacity.cpu: amount -1 is negative", "without spaces"}},
		{"burst", Config{Capacity: Vector{"cpu": 1}, BurstPoolPercent: 100}, []string{"outside [0, 100)"}},
		{"burst without lease", Config{Capacity: Vector{"cpu": 1}, BurstPoolPercent: 10}, []string{"needs a lease duration"}},
		{"groups", Config{Capacity: Vector{"cpu": 1}, Groups: []Group{{Path: "", Weight: 1}, {Path: "x", Weight: 0}, {Path: "x", Weight: 1}}},
			[]string{"groups[0]: path: empty", "groups[1]: weight", "groups[2]: path \"x\" appears twice"}},
		{"tenant fields", Config{Capacity: Vector{"cpu": 1}, Tenants: []Tenant{
			{Name: "", Task: Vector{"cpu": 1}}, {Name: "b", Task: Vector{"gpu": 1}, Demand: -1, Weight: -1},
			{Name: "c", Task: Vector{"cpu": 1}, Reservation: 3, Cap: 2}, {Name: "d", Task: Vector{"cpu": 0}},
			{Name: "e", Path: "x//y", Task: Vector{"cpu": 1}, MinRuntime: -time.Second}}},
			[]string{"must be non-empty", "task.gpu: resource is not in the pool capacity", "demand: -1 is negative",
				"weight: -1", "reservation: 3 is above cap 2", "needs a positive amount", "empty segment", "minRuntime"}},
		{"duplicates and collisions", Config{Capacity: Vector{"cpu": 1}, Tenants: []Tenant{good, good,
			{Name: "x", Task: Vector{"cpu": 1}}, {Name: "y", Path: "x", Task: Vector{"cpu": 1}}}},
			[]string{"name appears twice", `"x" is also a group path`}},
		{"reservations", Config{Capacity: Vector{"cpu": 2}, Tenants: []Tenant{
			{Name: "a", Task: Vector{"cpu": 1}, Reservation: 3}}}, []string{"need 3 of cpu, the steady pool has 2"}},
		{"reservation that overflows", Config{Capacity: Vector{"cpu": 9e9}, Limits: Limits{MaxDemand: 1 << 53},
			Tenants: []Tenant{{Name: "a", Task: Vector{"cpu": 9e9}, Reservation: 1e13}}},
			[]string{"need more than 9.223372036854775e+12 of cpu, the steady pool has 9e+09"}},
		{"bounds", Config{Capacity: Vector{"cpu": 1}, MaxMinRuntime: -1, Limits: Limits{MaxTenants: 1, MaxTotalDemand: 5},
			Groups: []Group{{Path: "g", Weight: math.NaN(), MaxMinRuntime: -1}},
			Tenants: []Tenant{
				{Name: "a", Task: Vector{"cpu": 1}, Weight: 5e-324, Demand: 1 << 54},
				{Name: "b", Task: Vector{"cpu": math.Inf(1)}, Weight: math.Inf(1), Reservation: 1 << 21}}},
			[]string{"maxMinRuntime: -1ns is negative", "groups[0]: weight: NaN is not a finite number",
				"groups[0]: maxMinRuntime", "2 tenants exceed the limit of 1 (limits.maxTenants)",
				"total demand 9007199254740992 exceeds the limit of 5", `tenant "a": weight: 5e-324 is outside [1e-06, 1e+06]`,
				`tenant "a": demand: 18014398509481984 is above 2^53`, `tenant "b": task.cpu: amount +Inf is not a finite number`,
				`tenant "b": weight: +Inf is not a finite number`, `tenant "b": reservation: 2097152 exceeds the limit of 1048576 (limits.maxDemand)`}},
	}
	for _, c := range cases {
		_, err := New(c.cfg)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

func TestReasonsClosedSet(t *testing.T) {
	names := map[string]bool{}
	for _, r := range Reasons() {
		if names[r.String()] || strings.HasPrefix(r.String(), "Reason(") || r.Describe() == "" || len(r.Kinds()) == 0 {
			t.Errorf("reason %d: name %q, doc %q, kinds %v", r, r, r.Describe(), r.Kinds())
		}
		names[r.String()] = true
		for _, k := range r.Kinds() {
			if (k == KindGrant || k == KindLease || k == KindRelease) && r.Retryable() {
				t.Errorf("%s: a %s reason cannot be retryable", r, k)
			}
		}
	}
	retry := map[Reason]bool{ReasonPoolFull: true, ReasonWaitingForMinRuntime: true, ReasonWaitingForBurst: true,
		ReasonReservationWaiting: true, ReasonOverCap: false, ReasonExceedsSteadyPool: false,
		ReasonExceedsCapacity: false, ReasonReservationUnsatisfiable: false}
	for r, want := range retry {
		if r.Retryable() != want {
			t.Errorf("%s: retryable %v, want %v", r, r.Retryable(), want)
		}
	}
	if Reason(0).Retryable() || Reason(200).String() != "Reason(200)" || Kind(9).String() != "Kind(9)" {
		t.Error("out-of-range values")
	}
}

type bogusEvent struct{}

func (bogusEvent) event() {}

func TestApplyErrors(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"cpu": 4}, Tenants: []Tenant{{Name: "a", Task: Vector{"cpu": 1}, Demand: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t)(a.Recompute(t0.Add(time.Minute)))
	if _, err := a.Apply(t0); err == nil || !strings.Contains(err.Error(), "time went backwards") {
		t.Errorf("backwards: %v", err)
	}
	// A batch with one bad event applies nothing and names every problem.
	_, err = a.Apply(t0.Add(time.Hour), SetDemand{Tenant: "a", Demand: 4}, SetDemand{Tenant: "zz", Demand: 1}, nil, bogusEvent{},
		AddTenant{Tenant: Tenant{Name: "a", Task: Vector{"cpu": 1}}})
	for _, w := range []string{`events[1]: set demand: tenant "zz": not found`, "events[2]: event is nil",
		"events[3]: event of type fair.bogusEvent", `events[4]: add tenant "a": already present`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	if s := tenants(a)["a"]; s.Demand != 2 || s.Tasks != 2 {
		t.Errorf("state changed: %+v", s)
	}
	if _, err := a.SetDemand(t0.Add(time.Hour), "a", -1); err == nil {
		t.Error("negative demand accepted")
	}
	// Remove then add again in one batch is fine.
	mustStep(t)(a.Apply(t0.Add(time.Hour), RemoveTenant{Tenant: "a"}, AddTenant{Tenant: Tenant{Name: "a", Task: Vector{"cpu": 2}, Demand: 1}}))
	if s := tenants(a)["a"]; s.Tasks != 1 {
		t.Errorf("re-added a: %+v", s)
	}
}

// TestLeaseRenewal: with nobody else waiting, a lease that reaches its expiry is renewed in place
// (same task number, LeaseRenewed); once another tenant waits for room, expiry hands the room
// back to filling and the waiting tenant is lent its share, while what filling lends the lease's
// own tenant again is the same task renewed, not a reclaim and a new lease.
func TestLeaseRenewal(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 10}, BurstPoolPercent: 20, LeaseDuration: time.Minute,
		Tenants: []Tenant{
			{Name: "a", Task: Vector{"gpu": 1}, Demand: 10, Cap: 2},
			{Name: "b", Task: Vector{"gpu": 1}, Demand: 1, Cap: 1},
		}})
	if err != nil {
		t.Fatal(err)
	}
	d := mustStep(t)(a.Recompute(t0))
	leases := map[uint64]bool{}
	for _, it := range d.Items {
		if it.Kind == KindLease && it.Tenant == "a" {
			leases[it.Task] = true
		}
	}
	if len(leases) != 7 {
		t.Fatalf("a was lent %d tasks, want 7: %v", len(leases), d.Items)
	}
	d = mustStep(t)(a.Apply(t0.Add(time.Minute)))
	if n := countItems(d, KindLease, ReasonLeaseRenewed); n != 7 || len(moves(d)) != 7 {
		t.Fatalf("uncontended expiry: %d renewals, items %v; want 7 renewals and nothing else", n, d.Items)
	}
	for _, it := range d.Items {
		if it.Kind == KindLease && !leases[it.Task] {
			t.Errorf("renewal %v has a new task number", it)
		}
	}
	mustStep(t)(a.SetDemand(t0.Add(90*time.Second), "b", 5))
	d = mustStep(t)(a.Apply(t0.Add(2 * time.Minute)))
	// Contended: the 8 lease slots go back to filling; b (1 steady) is lent 4 and a (2 steady)
	// 3 (shares (1+4)/10 and (2+3)/10). a's 3 are 3 of its 7 expired leases renewed, same task
	// numbers: only the 4 b takes are reclaimed, and no lease of a starts anew.
	if n := countItems(d, KindReclaim, ReasonLeaseExpired); n != 4 {
		t.Errorf("contended expiry: %d leases expired, want 4: %v", n, d.Items)
	}
	if n := countItems(d, KindLease, ReasonLeaseRenewed); n != 3 {
		t.Errorf("contended expiry: %d renewals, want 3: %v", n, d.Items)
	}
	for _, it := range d.Items {
		if it.Tenant == "a" && it.Kind == KindLease && (!leases[it.Task] || it.Reason != ReasonLeaseRenewed) {
			t.Errorf("contended expiry: a's lease %v is not one of its expired leases renewed", it)
		}
	}
	if st := tenants(a); st["b"].Leased != 4 || st["a"].Leased != 3 {
		t.Errorf("contended expiry: a leases %d, b leases %d; want 3 and 4", st["a"].Leased, st["b"].Leased)
	}
}

// TestMinRuntimeCap: a tenant's own minimum runtime (10,000 h here) is capped by the pool's
// MaxMinRuntime and, lower, by a group's: its rival waits only as long as the cap in force.
func TestMinRuntimeCap(t *testing.T) {
	for _, c := range []struct {
		pool, group, wait time.Duration
	}{{time.Hour, 0, time.Hour}, {time.Hour, 2 * time.Minute, 2 * time.Minute}, {0, 5 * time.Minute, 5 * time.Minute}} {
		cfg := Config{Capacity: Vector{"gpu": 4}, MaxMinRuntime: c.pool, Tenants: []Tenant{
			{Name: "hog", Path: "o", Task: Vector{"gpu": 1}, Demand: 4, MinRuntime: 10000 * time.Hour},
			{Name: "new", Task: Vector{"gpu": 1}},
		}}
		if c.group > 0 {
			cfg.Groups = []Group{{Path: "o", Weight: 1, MaxMinRuntime: c.group}}
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mustStep(t)(a.Recompute(t0))
		mustStep(t)(a.SetDemand(t0.Add(time.Second), "new", 2))
		mustStep(t)(a.Apply(t0.Add(c.wait - time.Second)))
		if got := tenants(a)["new"].Tasks; got != 0 {
			t.Errorf("%+v: new has %d tasks before the cap ran out", c, got)
		}
		mustStep(t)(a.Apply(t0.Add(c.wait)))
		if got := tenants(a)["new"].Tasks; got != 2 {
			t.Errorf("%+v: new has %d tasks once the cap ran out, want 2", c, got)
		}
	}
}

// TestDemandLimits: SetDemand and Apply refuse a demand above the limits, one tenant's and the
// total, naming the limit; the state is unchanged.
func TestDemandLimits(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"cpu": 4}, Limits: Limits{MaxDemand: 10, MaxTotalDemand: 15},
		Tenants: []Tenant{{Name: "a", Task: Vector{"cpu": 1}, Demand: 2}, {Name: "b", Task: Vector{"cpu": 1}, Demand: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t)(a.Recompute(t0))
	if _, err := a.SetDemand(t0, "a", 11); err == nil || !strings.Contains(err.Error(), "exceeds the limit of 10 (limits.maxDemand)") {
		t.Errorf("one tenant: %v", err)
	}
	if _, err := a.SetDemand(t0, "a", 2e9); err == nil || !strings.Contains(err.Error(), "limits.maxDemand") {
		t.Errorf("2e9 tasks: %v", err)
	}
	mustStep(t)(a.SetDemand(t0, "a", 10))
	_, err = a.Apply(t0, SetDemand{Tenant: "b", Demand: 4}, SetDemand{Tenant: "b", Demand: 6})
	if err == nil || !strings.Contains(err.Error(), `events[1]: set demand: tenant "b": total demand 16 would exceed the limit of 15`) {
		t.Errorf("total: %v", err)
	}
	if s := tenants(a)["b"]; s.Demand != 2 {
		t.Errorf("b's demand changed to %d by a refused batch", s.Demand)
	}
	_, err = a.Apply(t0, AddTenant{Tenant: Tenant{Name: "c", Task: Vector{"cpu": 1}, Demand: 4}})
	if err == nil || !strings.Contains(err.Error(), "total demand 16 exceeds the limit of 15") {
		t.Errorf("arrival: %v", err)
	}
}

// TestLumpyNotStarved: the two starvation cases of v1. A tenant with 5-GPU tasks next to one
// holding ten 1-GPU tasks, and a tenant wanting whole GPUs next to one holding every GPU as MIG
// slices, both get their floor within one Recompute once the victims' minimum runtime has passed,
// and the allocation then stays (a later Recompute moves nothing).
func TestLumpyNotStarved(t *testing.T) {
	const board = "H100-SXM5-80GB/"
	whole, err := SliceVector(board + "exclusive")
	if err != nil {
		t.Fatal(err)
	}
	mig, err := SliceVector(board + "1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	// 4 GPUs: each can be a whole GPU or 7 1g.10gb slices; the pool offers both kinds, as a
	// planner that can re-cut GPUs would (capacity in SMs and memory is what is shared).
	capv, _, err := SliceCapacity(map[string]int{board + "exclusive": 4, board + "1g.10gb": 28})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range capv {
		if IsSliceKind(k) {
			continue
		}
		capv[k] = v / 2 // the SMs and memory of 4 GPUs, not 8
	}
	cases := []struct {
		name  string
		cfg   Config
		lumpy string
		floor int
	}{
		{"5-GPU tasks", Config{Capacity: Vector{"gpu": 10}, Tenants: []Tenant{
			{Name: "small", Task: Vector{"gpu": 1}, Demand: 10, MinRuntime: time.Minute},
			{Name: "lumpy", Task: Vector{"gpu": 5}}}}, "lumpy", 1},
		{"whole GPUs next to MIG slices", Config{Capacity: capv, Tenants: []Tenant{
			{Name: "mig", Task: mig.Vector, Demand: 28, MinRuntime: time.Minute},
			{Name: "whole", Task: whole.Vector}}}, "whole", 1},
	}
	for _, c := range cases {
		a, err := New(c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mustStep(t)(a.Recompute(t0))
		mustStep(t)(a.SetDemand(t0.Add(time.Second), c.lumpy, 4))
		if got := tenants(a)[c.lumpy].Tasks; got != 0 {
			t.Fatalf("%s: %d tasks inside the victims' minimum runtime", c.name, got)
		}
		now := t0.Add(2 * time.Minute)
		mustStep(t)(a.Recompute(now))
		lt := a.tenants[a.byName[c.lumpy]]
		if f := a.floor(lt); f < c.floor || len(lt.steady) < f {
			t.Errorf("%s: %s holds %d tasks, floor %d (want at least %d)", c.name, c.lumpy, len(lt.steady), f, c.floor)
		}
		d := mustStep(t)(a.Recompute(now.Add(time.Hour)))
		if mv := moves(d); len(mv) > 0 {
			t.Errorf("%s: a later Recompute moved %v", c.name, mv)
		}
	}
}

// TestDeservedQuota: a group's deserved part is guaranteed (reclaimed by floor claims), lent
// while the group wants less, and what is left is split by weight. Org a deserves 0.7 of 10 GPUs,
// org b nothing: a's tenant is entitled to 0.7 + 0.3/2 = 0.85 (8 tasks), b's to 0.15 (1 task).
func TestDeservedQuota(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 10}, Groups: []Group{{Path: "a", Weight: 1, Deserved: 0.7}},
		Tenants: []Tenant{
			{Name: "a1", Path: "a", Task: Vector{"gpu": 1}, Demand: 10},
			{Name: "b1", Path: "b", Task: Vector{"gpu": 1}, Demand: 10},
		}})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t)(a.Recompute(t0))
	if s := tenants(a); s["a1"].Tasks != 5 || s["b1"].Tasks != 5 {
		t.Fatalf("first decision (progressive filling): %d/%d, want 5/5", s["a1"].Tasks, s["b1"].Tasks)
	}
	d := mustStep(t)(a.Recompute(t0.Add(time.Minute)))
	if s := tenants(a); s["a1"].Tasks != 8 || s["b1"].Tasks != 2 || countItems(d, KindPreempt, ReasonBelowFloor) != 3 {
		t.Fatalf("deserved reclaimed: %d/%d, items %v; want 8/2 by three BelowFloor preemptions", s["a1"].Tasks, s["b1"].Tasks, d.Items)
	}
	mustStep(t)(a.SetDemand(t0.Add(2*time.Minute), "a1", 0))
	if s := tenants(a); s["b1"].Tasks != 10 {
		t.Errorf("idle deserved part not lent: b1 has %d", s["b1"].Tasks)
	}
	mustStep(t)(a.SetDemand(t0.Add(3*time.Minute), "a1", 10))
	mustStep(t)(a.Recompute(t0.Add(4 * time.Minute)))
	if s := tenants(a); s["a1"].Tasks != 8 || s["b1"].Tasks != 2 {
		t.Errorf("deserved part back: %d/%d, want 8/2", s["a1"].Tasks, s["b1"].Tasks)
	}
	_, err = New(Config{Capacity: Vector{"gpu": 10}, Groups: []Group{{Path: "a", Weight: 1, Deserved: 0.5}, {Path: "a/x", Weight: 1, Deserved: 0.4}},
		Tenants: []Tenant{{Name: "t", Path: "a/x", Task: Vector{"gpu": 1}, Deserved: 0.3}, {Name: "u", Path: "a", Task: Vector{"gpu": 1}, Deserved: 0.2},
			{Name: "v", Task: Vector{"gpu": 1}, Deserved: 1.5}}})
	for _, w := range []string{`the children of group "a" ask for 0.6000000000000001, more than its 0.5`, `tenant "v": deserved: 1.5 is outside [0, 1]`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

// TestGroupLimit: a group's limit caps its tenants' steady tasks (per resource, as a part of the
// pool) however idle the rest of the pool is; when the group's use falls, a tenant parked at the
// limit gets the room; leases may go beyond it.
func TestGroupLimit(t *testing.T) {
	cfg := Config{Capacity: Vector{"gpu": 10}, Groups: []Group{{Path: "x", Weight: 1, Limit: 0.3}},
		Tenants: []Tenant{
			{Name: "x1", Path: "x", Task: Vector{"gpu": 1}, Demand: 10},
			{Name: "x2", Path: "x", Task: Vector{"gpu": 1}},
			{Name: "y1", Task: Vector{"gpu": 1}, Demand: 2},
		}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := mustStep(t)(a.Recompute(t0))
	if s := tenants(a); s["x1"].Tasks != 3 || s["y1"].Tasks != 2 || countItems(d, KindQueue, ReasonGroupLimit) != 1 {
		t.Fatalf("x1 %d, y1 %d, items %v: want 3 and 2, x1 queued at its group's limit", s["x1"].Tasks, s["y1"].Tasks, d.Items)
	}
	// x2 is below its floor (x's part 0.3 split with x1: 1.5 GPUs, floor 1) inside a group at its
	// limit: its floor claim takes from x1, inside the group, and the group stays at its limit.
	d = mustStep(t)(a.SetDemand(t0.Add(time.Second), "x2", 2))
	if s := tenants(a); s["x2"].Tasks != 1 || s["x1"].Tasks != 2 || countItems(d, KindPreempt, ReasonBelowFloor) != 1 {
		t.Fatalf("x1 %d, x2 %d (%v): want 2 and 1, one BelowFloor preemption inside the group", s["x1"].Tasks, s["x2"].Tasks, d.Items)
	}
	mustStep(t)(a.SetDemand(t0.Add(2*time.Second), "x1", 1))
	if s := tenants(a); s["x1"].Tasks != 1 || s["x2"].Tasks != 2 {
		t.Errorf("after x1 shrank: x1 %d, x2 %d; want 1 and 2", s["x1"].Tasks, s["x2"].Tasks)
	}
	cfg.LeaseDuration = time.Minute
	a, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t)(a.Recompute(t0))
	if s := tenants(a); s["x1"].Steady != 3 || s["x1"].Leased != 5 {
		t.Errorf("with leases: x1 steady %d, leased %d; want 3 and the 5 idle GPUs lent", s["x1"].Steady, s["x1"].Leased)
	}
	_, err = New(Config{Capacity: Vector{"gpu": 1}, Groups: []Group{{Path: "x", Weight: 1, Limit: 1.5}, {Path: "y", Weight: 1, Limit: 0.2, Deserved: 0.3}}})
	for _, w := range []string{"groups[0]: limit: 1.5 is outside [0, 1]", "groups[1]: deserved: 0.3 is above the group's limit 0.2"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

// TestFloorRetriedOnTick: a floor claim that waits for the victims' minimum runtime is retried by
// a plain tick at that time, without a Recompute.
func TestFloorRetriedOnTick(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 10}, Tenants: []Tenant{
		{Name: "small", Task: Vector{"gpu": 1}, Demand: 10, MinRuntime: time.Minute},
		{Name: "lumpy", Task: Vector{"gpu": 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t)(a.Recompute(t0))
	d := mustStep(t)(a.SetDemand(t0.Add(time.Second), "lumpy", 1))
	var retry time.Time
	for _, it := range d.Items {
		if it.Kind == KindQueue && it.Tenant == "lumpy" {
			retry = it.RetryAt
		}
	}
	if !retry.Equal(t0.Add(time.Minute)) {
		t.Fatalf("lumpy's queue item says retry at %v, want %v: %v", retry, t0.Add(time.Minute), d.Items)
	}
	mustStep(t)(a.Apply(retry.Add(-time.Nanosecond)))
	if got := tenants(a)["lumpy"].Tasks; got != 0 {
		t.Fatalf("lumpy has %d tasks before the victims' minimum runtime ran out", got)
	}
	d = mustStep(t)(a.Apply(retry))
	if got := tenants(a)["lumpy"].Tasks; got != 1 || countItems(d, KindPreempt, ReasonBelowFloor) != 5 {
		t.Errorf("tick at the retry time: lumpy has %d tasks, items %v; want 1 by five BelowFloor preemptions", got, d.Items)
	}
}

// TestReplicaClasses: a tenant's replicas take its classes in order as they start; preemption and
// a lower demand stop the least important first, and every item names the task's class.
func TestReplicaClasses(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 6}, Tenants: []Tenant{
		{Name: "A", Task: Vector{"gpu": 1}, Demand: 6, Classes: []ReplicaClass{{Name: "critical", Replicas: 2}, {Name: "normal", Replicas: 2}}},
		{Name: "B", Task: Vector{"gpu": 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	classesOf := func(d Decision, k Kind, tenant string) string {
		var out []string
		for _, it := range d.Items {
			if it.Kind == k && it.Tenant == tenant {
				out = append(out, it.Class)
			}
		}
		return strings.Join(out, ",")
	}
	d := mustStep(t)(a.Recompute(t0))
	if got := classesOf(d, KindGrant, "A"); got != "critical,critical,normal,normal,," {
		t.Errorf("grants in class order: %q", got)
	}
	d = mustStep(t)(a.SetDemand(t0.Add(time.Second), "B", 3))
	if got := classesOf(d, KindPreempt, "A"); got != ",,normal" {
		t.Errorf("preempted classes %q, want the unnamed class first, then normal: %v", got, d.Items)
	}
	d = mustStep(t)(a.SetDemand(t0.Add(2*time.Minute), "A", 2))
	if got := classesOf(d, KindRelease, "A"); got != "normal" {
		t.Errorf("released classes %q, want normal", got)
	}
	// A grows back into the free GPU, then into B's when B leaves: the classes refill in order.
	d = mustStep(t)(a.SetDemand(t0.Add(3*time.Minute), "A", 6))
	if got := classesOf(d, KindGrant, "A"); got != "normal" {
		t.Errorf("regrown classes %q, want normal", got)
	}
	d = mustStep(t)(a.Apply(t0.Add(4*time.Minute), RemoveTenant{Tenant: "B"}))
	if got := classesOf(d, KindGrant, "A"); got != "normal,," {
		t.Errorf("regrown classes %q, want normal and two unnamed", got)
	}
	if _, err := New(Config{Capacity: Vector{"gpu": 1}, Tenants: []Tenant{{Name: "A", Task: Vector{"gpu": 1},
		Classes: []ReplicaClass{{Name: "x", Replicas: 1}, {Name: "x", Replicas: 0}}}}}); err == nil ||
		!strings.Contains(err.Error(), `classes[1].name: "x" must be non-empty and unique`) || !strings.Contains(err.Error(), "classes[1].replicas: 0") {
		t.Errorf("bad classes: %v", err)
	}
}

// TestCloneKeepsReplicaClasses: a clone releases and grants by the same classes as the
// original (the clone once lost its class counts and released the newest task instead of the
// least important one).
func TestCloneKeepsReplicaClasses(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 6}, Tenants: []Tenant{
		{Name: "A", Task: Vector{"gpu": 1}, Demand: 6, Classes: []ReplicaClass{{Name: "critical", Replicas: 2}, {Name: "normal", Replicas: 2}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	mustStep(t)(a.Recompute(t0))
	c := a.Clone()
	for i, tr := range a.tenants {
		if got := c.tenants[i].classN; !reflect.DeepEqual(got, tr.classN) {
			t.Fatalf("tenant %s: clone's class counts %v, original's %v", tr.cfg.Name, got, tr.classN)
		}
	}
	for i, n := range []int{3, 5, 1, 6} {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		want := mustStep(t)(a.SetDemand(at, "A", n))
		got := mustStep(t)(c.SetDemand(at, "A", n))
		if !reflect.DeepEqual(want.Clone(), got.Clone()) {
			t.Fatalf("demand %d: clone decided %v, original %v", n, got.Items, want.Items)
		}
	}
}
