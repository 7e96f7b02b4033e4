package fair

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// op is one generated step of a dynamic scenario.
type op struct {
	kind    string // demand, tick, recompute, capacity, update, remove, add
	advance time.Duration
	tenant  int
	n       int
	factor  float64
	weight  float64
}

func genDynamic(t *rapid.T) (Config, []op) {
	cfg := genConfig(t, genOpts{hier: true, reserve: true, caps: true, weights: true})
	if rapid.Bool().Draw(t, "leases") {
		cfg.LeaseDuration = rapid.SampledFrom([]time.Duration{30 * time.Second, 90 * time.Second}).Draw(t, "lease")
		cfg.BurstPoolPercent = rapid.SampledFrom([]float64{0, 10, 25}).Draw(t, "burst")
		if validateConfig(cfg, true) != nil {
			cfg.BurstPoolPercent = 0
		}
	}
	for i := range cfg.Tenants {
		cfg.Tenants[i].MinRuntime = rapid.SampledFrom([]time.Duration{0, 10 * time.Second, 45 * time.Second}).Draw(t, "minrun")
		if rapid.Bool().Draw(t, "classes") {
			cfg.Tenants[i].Classes = []ReplicaClass{{Name: "hi", Replicas: 1}, {Name: "mid", Replicas: 2}}
		}
	}
	ops := make([]op, rapid.IntRange(5, 30).Draw(t, "ops"))
	for i := range ops {
		ops[i] = op{
			kind:    rapid.SampledFrom([]string{"demand", "demand", "demand", "tick", "tick", "recompute", "capacity", "update", "remove", "add"}).Draw(t, "op"),
			advance: time.Duration(rapid.IntRange(0, 60).Draw(t, "advance")) * time.Second,
			tenant:  rapid.IntRange(0, len(cfg.Tenants)-1).Draw(t, "tenant"),
			n:       rapid.IntRange(0, 40).Draw(t, "n"),
			factor:  rapid.SampledFrom([]float64{0.5, 0.8, 1, 1.25}).Draw(t, "factor"),
			weight:  rapid.SampledFrom([]float64{1, 2, 3}).Draw(t, "weight"),
		}
	}
	return cfg, ops
}

// run applies one op; external reports whether it changed demand, capacity or configuration.
func runOp(a *Allocator, cfg Config, o op, now time.Time) (d Decision, external bool, err error) {
	tc := cfg.Tenants[o.tenant]
	_, present := a.byName[tc.Name]
	switch {
	case o.kind == "tick":
		d, err = a.Apply(now)
		return d, false, err
	case o.kind == "recompute":
		d, err = a.Recompute(now)
		return d, false, err
	case o.kind == "capacity":
		c := Vector{}
		for k, x := range cfg.Capacity {
			c[k] = float64(int(x * o.factor))
		}
		d, err = a.Apply(now, SetCapacity{Capacity: c})
	case o.kind == "add" && !present:
		d, err = a.Apply(now, AddTenant{Tenant: tc})
	case !present:
		d, err = a.Apply(now)
		return d, false, err
	case o.kind == "demand":
		d, err = a.SetDemand(now, tc.Name, o.n)
	case o.kind == "update":
		cur := a.tenants[a.byName[tc.Name]].cfg
		cur.Weight = o.weight
		d, err = a.Apply(now, UpdateTenant{Tenant: cur})
	default:
		d, err = a.Apply(now, RemoveTenant{Tenant: tc.Name})
	}
	return d, true, err
}

// checkState checks the invariants that hold after every step, recomputing use from the tasks.
func checkState(t *rapid.T, a *Allocator, d Decision) {
	checkPareto(t, a)
	checkStateNoPareto(t, a, d)
}

// checkStateNoPareto is checkState without the Pareto check (which does not know group limits).
func checkStateNoPareto(t *rapid.T, a *Allocator, d Decision) {
	m := len(a.capT)
	sUsed, tUsed := make([]int64, m), make([]int64, m)
	for _, tr := range a.tenants {
		addScaled(sUsed, tr.d, int64(len(tr.steady)))
		addScaled(tUsed, tr.d, int64(tr.total()))
		if tr.cfg.Cap > 0 && len(tr.steady) > tr.cfg.Cap {
			t.Fatalf("%s: %d steady tasks above its cap %d", tr.cfg.Name, len(tr.steady), tr.cfg.Cap)
		}
		if tr.total() > tr.cfg.Demand {
			t.Fatalf("%s: %d tasks above its demand %d", tr.cfg.Name, tr.total(), tr.cfg.Demand)
		}
		for _, l := range tr.leases {
			if l.expiry <= a.nowNS {
				t.Fatalf("%s: lease %d outlived its expiry", tr.cfg.Name, l.seq)
			}
		}
	}
	if over(sUsed, a.capS) || over(tUsed, a.capT) {
		t.Fatalf("capacity exceeded: steady %v of %v, all %v of %v", sUsed, a.capS, tUsed, a.capT)
	}
	if !slices.Equal(sUsed, a.sUsed) || !slices.Equal(tUsed, a.tUsed) {
		t.Fatalf("tracked use %v/%v differs from the tasks' %v/%v", a.sUsed, a.tUsed, sUsed, tUsed)
	}
	for _, it := range d.Items {
		if it.Kind != KindPreempt {
			continue
		}
		v := a.tenants[a.byName[it.Tenant]]
		if it.Reason != ReasonCapacityLost && len(v.steady) < v.cfg.Reservation {
			t.Fatalf("%v took %s below its reservation %d", it, it.Tenant, v.cfg.Reservation)
		}
		if it.Reason == ReasonOverShare && lessTol(it.Share, it.ByShare) {
			t.Fatalf("%v: claimant's share after the move is above the victim's", it)
		}
	}
}

func steadyState(a *Allocator) string {
	s := ""
	for _, tr := range a.tenants {
		s += fmt.Sprintf("%s=%d ", tr.cfg.Name, len(tr.steady))
	}
	return s
}

// TestPropDynamic runs random event sequences and checks after every step: capacity, caps,
// demand, lease expiry, Pareto (nothing that fits is left waiting), reservations kept by every
// preemption, the share rule on every share preemption, and no preemption cycle: between two
// external events no allocation seen after a preemption ever comes back. At the end, ticking
// past every minimum runtime must settle (no more preemptions) with reservations honoured.
func TestPropDynamic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genDynamic(t)
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		d, err := a.Recompute(now)
		if err != nil {
			t.Fatal(err)
		}
		checkState(t, a, d)
		seen := map[string]bool{}
		for _, o := range ops {
			now = now.Add(o.advance)
			d, external, err := runOp(a, cfg, o, now)
			if err != nil {
				continue // rejected events change nothing; validation has its own tests
			}
			checkState(t, a, d)
			if external {
				clear(seen)
			}
			if hasPreemption(d, ReasonOverShare, ReasonReservationClaim) {
				st := steadyState(a)
				if seen[st] {
					t.Fatalf("allocation %s came back through preemptions alone", st)
				}
				seen[st] = true
			}
		}
		settle(t, a, now)
	})
}

func hasPreemption(d Decision, reasons ...Reason) bool {
	for _, it := range d.Items {
		if it.Kind == KindPreempt && slices.Contains(reasons, it.Reason) {
			return true
		}
	}
	return false
}

func settle(t *rapid.T, a *Allocator, now time.Time) {
	quiet := 0
	for round := 0; round < 60 && quiet < 2; round++ {
		now = now.Add(100 * time.Second)
		d, err := a.Recompute(now)
		if err != nil {
			t.Fatal(err)
		}
		checkState(t, a, d)
		if hasPreemption(d, ReasonOverShare, ReasonReservationClaim) {
			quiet = 0
		} else {
			quiet++
		}
	}
	if quiet < 2 {
		t.Fatalf("preemptions did not stop after 60 rounds")
	}
	if a.reservationsExceedPool() {
		return
	}
	for _, tr := range a.tenants {
		if len(tr.steady) < tr.resTarget() {
			t.Fatalf("%s: %d steady tasks below its reservation target %d after settling", tr.cfg.Name, len(tr.steady), tr.resTarget())
		}
	}
}

// TestPropDeterministic: the same configuration and events give the same decisions, item for
// item, and a Clone taken at any step continues exactly as the original.
func TestPropDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genDynamic(t)
		cut := rapid.IntRange(0, len(ops)).Draw(t, "clone at")
		a, _ := New(cfg)
		b, _ := New(cfg)
		now := t0
		da, _ := a.Recompute(now)
		db, _ := b.Recompute(now)
		var c *Allocator
		for i := 0; ; i++ {
			if !reflect.DeepEqual(da.Clone(), db.Clone()) {
				t.Fatalf("step %d: decisions differ:\n%v\n%v", i, da.Items, db.Items)
			}
			if i == cut {
				c = a.Clone()
			}
			if i == len(ops) {
				break
			}
			now = now.Add(ops[i].advance)
			var dc Decision
			if c != nil {
				dc, _, _ = runOp(c, cfg, ops[i], now)
				dc = dc.Clone()
			}
			da, _, _ = runOp(a, cfg, ops[i], now)
			if c != nil && !reflect.DeepEqual(da.Clone(), dc) {
				t.Fatalf("step %d: clone decided\n%v\noriginal\n%v", i, dc.Items, da.Items)
			}
			db, _, _ = runOp(b, cfg, ops[i], now)
		}
	})
}
