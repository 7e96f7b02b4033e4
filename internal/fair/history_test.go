package fair

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestHistoryDecayArithmetic pins h(t1) = h(t0)·δ + n·(1 − δ) with δ = 2^(−elapsed/halfLife).
func TestHistoryDecayArithmetic(t *testing.T) {
	hl := time.Hour
	for _, c := range []struct {
		h       float64
		n       int
		elapsed time.Duration
		want    float64
	}{
		{0, 10, time.Hour, 5},                         // δ = 1/2: 0·½ + 10·½
		{0, 10, 2 * time.Hour, 7.5},                   // δ = 1/4: 10·¾
		{0, 10, 3 * time.Hour, 8.75},                  // δ = 1/8: 10·⅞
		{8, 0, 30 * time.Minute, 8 / math.Sqrt2},      // δ = 2^−½: 8·0.7071… = 5.6568…
		{6, 2, 3 * time.Hour, 2.5},                    // δ = 1/8: 6/8 + 2·7/8 = 0.75 + 1.75
		{4, 4, 17 * time.Minute, 4},                   // holding what it held: h stays
		{3, 7, 0, 3},                                  // no time passed: δ = 1
		{1, 0, 10 * time.Hour, 1.0 / 1024},            // δ = 2^−10
		{0, 1, time.Minute, 1 - math.Exp2(-1.0/60.0)}, // δ = 2^(−1/60): 0.011486…
	} {
		d := decayFactor(int64(c.elapsed), int64(hl))
		if got := decay(c.h, c.n, d); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("h=%v n=%d after %v (half-life %v): got %.15g, want %.15g", c.h, c.n, c.elapsed, hl, got, c.want)
		}
	}
}

// TestHistoryThroughAllocator: the history follows the tasks held between steps, and enters the
// shares as h·task.
func TestHistoryThroughAllocator(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"cpu": 10}, HistoryHalfLife: time.Hour,
		Tenants: []Tenant{{Name: "a", Task: Vector{"cpu": 1}, Demand: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	hist := func(want float64, what string) {
		t.Helper()
		if got := a.Snapshot()[0].History; math.Abs(got-want) > 1e-12 {
			t.Fatalf("%s: history %v, want %v", what, got, want)
		}
	}
	mustDo(t)(a.Recompute(t0))
	hist(0, "start") // nothing held before
	mustDo(t)(a.Apply(t0.Add(time.Hour)))
	hist(2, "after an hour holding 4") // 4·(1 − ½)
	mustDo(t)(a.SetDemand(t0.Add(time.Hour), "a", 0))
	hist(2, "same time") // no time passed
	mustDo(t)(a.Apply(t0.Add(2 * time.Hour)))
	hist(1, "after an hour holding none") // 2·½ + 0
	// The share compared is (tasks + history)·task / capacity: (0 + 1)·1 / 10.
	if s := a.st.share[a.tenants[0].sLeaf]; math.Abs(s-0.1) > 1e-12 {
		t.Fatalf("steady share with history %v, want 0.1", s)
	}
	if c := a.Config(); c.HistoryHalfLife != time.Hour {
		t.Fatalf("Config lost the half-life: %v", c.HistoryHalfLife)
	}
}

func mustDo(t *testing.T) func(Decision, error) Decision {
	return func(d Decision, err error) Decision {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// TestHistoryRecentUserYields: a ran 11 one-CPU tasks on 11 CPUs for an hour; then b asks for
// 11 too. Floors are 5 each (⌊11/2⌋); the odd task goes by share. Without history the shares tie
// at 5 : 5 plus one, a keeps it (a keeps 6, b's move would end above a). With a one-hour
// half-life, a's history is 11·½ = 5.5 tasks: b takes the odd task (b 6 : 6/11 against a's
// (5 + 5.5)/11). Ten half-lives later a's history is ≈ 5 and b's ≈ 6: a taking the odd task back
// would end at (6 + 5.0005)/11 above b's (5 + 5.994)/11, so nothing churns.
func TestHistoryRecentUserYields(t *testing.T) {
	run := func(hl time.Duration) (*Allocator, Decision) {
		a, err := New(Config{Capacity: Vector{"cpu": 11}, HistoryHalfLife: hl, Tenants: []Tenant{
			{Name: "a", Task: Vector{"cpu": 1}, Demand: 11},
			{Name: "b", Task: Vector{"cpu": 1}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		mustDo(t)(a.Recompute(t0))
		d := mustDo(t)(a.SetDemand(t0.Add(time.Hour), "b", 11))
		return a, d.Clone()
	}
	held := func(a *Allocator) string {
		s := a.Snapshot()
		return fmt.Sprintf("a=%d b=%d", s[0].Steady, s[1].Steady)
	}
	off, dOff := run(0)
	if got := held(off); got != "a=6 b=5" {
		t.Fatalf("without history: %s, want a=6 b=5\n%v", got, dOff.Items)
	}
	on, dOn := run(time.Hour)
	if got := held(on); got != "a=5 b=6" {
		t.Fatalf("with history: %s, want a=5 b=6\n%v", got, dOn.Items)
	}
	var share bool
	for _, it := range dOn.Items {
		if it.Kind == KindPreempt && it.Reason == ReasonOverShare && it.Tenant == "a" && it.By == "b" {
			share = true
			// after the move: b (6 + 0)/11, a (5 + 5.5)/11
			if math.Abs(it.ByShare-6.0/11) > 1e-9 || math.Abs(it.Share-10.5/11) > 1e-9 {
				t.Fatalf("shares after the move %v, want 6/11 <= 10.5/11", it)
			}
		}
	}
	if !share {
		t.Fatalf("no share preemption of a by b: %v", dOn.Items)
	}
	// Same time again: nothing moves (the fixed point holds at a fixed time).
	if mv := moves(mustDo(t)(on.Recompute(t0.Add(time.Hour)))); len(mv) > 0 {
		t.Fatalf("a Recompute at the same time moved %v", mv)
	}
	if mv := moves(mustDo(t)(on.Recompute(t0.Add(11 * time.Hour)))); len(mv) > 0 {
		t.Fatalf("ten half-lives later: moved %v", mv)
	}
}

// TestHistoryNoTimeNoChange: with history on, steps that all happen at one time decide exactly
// what they decide with history off (no time passed, so no history).
func TestHistoryNoTimeNoChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genDynamic(t)
		on := cfg
		on.HistoryHalfLife = time.Minute
		a, _ := New(cfg)
		b, _ := New(on)
		da, _ := a.Recompute(t0)
		db, _ := b.Recompute(t0)
		for i := 0; ; i++ {
			if !reflect.DeepEqual(da.Clone(), db.Clone()) {
				t.Fatalf("step %d: decisions differ:\n%v\n%v", i, da.Items, db.Items)
			}
			if i == len(ops) {
				break
			}
			da, _, _ = runOp(a, cfg, ops[i], t0)
			db, _, _ = runOp(b, on, ops[i], t0)
		}
	})
}

// TestPropHistory runs random event sequences with history on and checks after every step the
// invariants of TestPropDynamic (capacity, caps, demand, leases, Pareto, reservations, the share
// rule) and that a Clone taken at any step continues exactly as the original.
func TestPropHistory(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genDynamic(t)
		cfg.HistoryHalfLife = rapid.SampledFrom([]time.Duration{time.Second, 30 * time.Second, 10 * time.Minute}).Draw(t, "half-life")
		cut := rapid.IntRange(0, len(ops)).Draw(t, "clone at")
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		d, _ := a.Recompute(now)
		checkState(t, a, d)
		var c *Allocator
		for i, o := range ops {
			if i == cut {
				c = a.Clone()
			}
			now = now.Add(o.advance)
			var dc Decision
			if c != nil {
				dc, _, _ = runOp(c, cfg, o, now)
				dc = dc.Clone()
			}
			d, _, err := runOp(a, cfg, o, now)
			if err != nil {
				continue
			}
			checkState(t, a, d)
			if c != nil && !reflect.DeepEqual(d.Clone(), dc) {
				t.Fatalf("step %d: clone decided\n%v\noriginal\n%v", i, dc.Items, d.Items)
			}
		}
	})
}

// TestNoPreemptionCycleWithHistory: with history on, shares change as time passes, so a claim
// may become valid only later; at a fixed time they do not, and no allocation comes back
// through preemptions alone. Each random scenario runs several steps at each time (ticks,
// Recomputes), and the allocations seen are forgotten when time passes or demand changes.
// Every Recompute is a fixed point (a second one at the same time moves nothing), limits hold,
// no tenant loses a task to a claim and gets a new one in the same decision, and floors are
// reached within one Recompute as without history.
func TestNoPreemptionCycleWithHistory(t *testing.T) {
	n := 3_000
	if testing.Short() {
		n = 500
	}
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 17))
		cfg := genSmall(r, seed%2 == 0)
		cfg.HistoryHalfLife = []time.Duration{5 * time.Second, time.Minute, time.Hour}[r.IntN(3)]
		if r.IntN(2) == 0 {
			cfg.LeaseDuration = 30 * time.Second
			if cfg.BurstPoolPercent = 20; validateConfig(cfg, true) != nil {
				cfg.BurstPoolPercent = 0
			}
		}
		for i := range cfg.Tenants {
			cfg.Tenants[i].MinRuntime = time.Duration(r.IntN(3)) * 10 * time.Second
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		now := t0
		seen := map[string]bool{}
		for step := range 16 {
			if r.IntN(2) == 0 {
				now = now.Add(time.Duration(1+r.IntN(30)) * time.Second)
				clear(seen)
			}
			what := fmt.Sprintf("seed %d step %d", seed, step)
			var d Decision
			switch r.IntN(4) {
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
						t.Fatalf("%s: a Recompute with no event moved tasks: %v", what, mv)
					}
					if steadyState(a) != st {
						t.Fatalf("%s: allocation changed", what)
					}
					if r.IntN(2) == 0 {
						// Floors do not depend on history: once the tasks of the step before
						// have run, one Recompute gives every tenant its floor.
						now = now.Add(31 * time.Second)
						clear(seen)
						d, err = a.Recompute(now)
						checkFloors(t, a, what)
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLimits(t, a, d, what)
			if hasPreemption(d, ReasonOverShare, ReasonReservationClaim, ReasonBelowFloor) {
				st := steadyState(a)
				if seen[st] {
					t.Fatalf("%s: allocation %s came back through preemptions alone at one time", what, st)
				}
				seen[st] = true
			}
			if grantAndStop(d) != "" {
				t.Fatalf("%s: %s\n%v", what, grantAndStop(d), d.Items)
			}
		}
	}
}

// TestHistoryTick: the history is brought forward at most every half-life/64, and then over the
// whole time since its last update.
func TestHistoryTick(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"cpu": 10}, HistoryHalfLife: 64 * time.Minute,
		Tenants: []Tenant{{Name: "a", Task: Vector{"cpu": 1}, Demand: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	hist := func(want float64, what string) {
		t.Helper()
		if got := a.Snapshot()[0].History; math.Abs(got-want) > 1e-12 {
			t.Fatalf("%s: history %v, want %v", what, got, want)
		}
	}
	mustDo(t)(a.Recompute(t0))
	mustDo(t)(a.Apply(t0.Add(30 * time.Second)))
	hist(0, "half a tick") // a tick is 64 min / 64 = 1 min
	mustDo(t)(a.Apply(t0.Add(time.Minute)))
	step := 4 * (1 - math.Exp2(-1.0/64)) // 4·(1 − 2^(−1/64)) = 0.043089…
	hist(step, "one tick")
	mustDo(t)(a.Apply(t0.Add(90 * time.Second)))
	hist(step, "half a tick after the update")
	mustDo(t)(a.Apply(t0.Add(3 * time.Minute)))
	// two minutes since the update: h·2^(−2/64) + 4·(1 − 2^(−2/64))
	d := math.Exp2(-2.0 / 64)
	hist(step*d+4*(1-d), "two ticks later")
}
