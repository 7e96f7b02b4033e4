package fair

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Review 11's properties (testdata/review11/README.md): the dynamic invariants of TestPropDynamic
// under events the other property tests do not draw (SetGroup with weights, deserved parts and
// limits; UpdateTenant of reservation, cap and deserved part; capacity down to zero and back),
// with usage history, fractional task amounts and weights at the ends of their range, plus
// independence of the order in which the configuration lists tenants and groups.

type r11op struct {
	kind    string
	advance time.Duration
	tenant  int
	n       int
	factor  float64
	weight  float64
	group   int
	part    float64
}

var r11groups = []string{"x", "y", "x/p"}

func genR11(t *rapid.T) (Config, []r11op) {
	m := rapid.IntRange(1, 3).Draw(t, "resources")
	cfg := Config{Capacity: Vector{}}
	for j := range m {
		cfg.Capacity[fmt.Sprintf("r%d", j)] = float64(rapid.IntRange(4, 40).Draw(t, "cap"))
	}
	n := rapid.IntRange(2, len(tenantNames)).Draw(t, "tenants")
	for i := range n {
		tc := Tenant{Name: tenantNames[i], Task: Vector{}, Demand: rapid.IntRange(0, 20).Draw(t, "demand"),
			Path: rapid.SampledFrom(paths).Draw(t, "path")}
		for j := range m {
			r := fmt.Sprintf("r%d", j)
			x := rapid.SampledFrom([]float64{0, 0, 1, 1, 2, 3, 0.333333, 0.5, 1.5, 7}).Draw(t, "amount")
			if x > 0 {
				tc.Task[r] = x
			}
		}
		if len(tc.Task) == 0 {
			tc.Task["r0"] = 1
		}
		tc.Weight = rapid.SampledFrom([]float64{0, 1, 2, 0.5, 1e-6, 1e6, 1.0 / 3}).Draw(t, "weight")
		if rapid.Bool().Draw(t, "capped") {
			tc.Cap = rapid.IntRange(1, 8).Draw(t, "capn")
		}
		if rapid.IntRange(0, 4).Draw(t, "deserved?") == 0 {
			tc.Deserved = 0.1
		}
		tc.MinRuntime = rapid.SampledFrom([]time.Duration{0, 10 * time.Second, 45 * time.Second}).Draw(t, "minrun")
		cfg.Tenants = append(cfg.Tenants, tc)
	}
	for _, p := range r11groups {
		if rapid.Bool().Draw(t, "group") {
			g := Group{Path: p, Weight: rapid.SampledFrom([]float64{1, 2, 3, 1e-6, 1e6}).Draw(t, "gw")}
			if rapid.IntRange(0, 2).Draw(t, "gdeserved?") == 0 {
				g.Deserved = map[string]float64{"x": 0.4, "y": 0.3, "x/p": 0.2}[p]
			}
			if rapid.IntRange(0, 2).Draw(t, "glimit?") == 0 {
				g.Limit = map[string]float64{"x": 0.5, "y": 0.6, "x/p": 0.3}[p]
			}
			cfg.Groups = append(cfg.Groups, g)
		}
	}
	if validateConfig(cfg, false) != nil {
		for i := range cfg.Tenants {
			cfg.Tenants[i].Deserved = 0
		}
	}
	addReservations(t, &cfg)
	if rapid.Bool().Draw(t, "leases") {
		cfg.LeaseDuration = rapid.SampledFrom([]time.Duration{30 * time.Second, 90 * time.Second}).Draw(t, "lease")
		cfg.BurstPoolPercent = rapid.SampledFrom([]float64{0, 10, 25}).Draw(t, "burst")
		if validateConfig(cfg, true) != nil {
			cfg.BurstPoolPercent = 0
		}
	}
	if rapid.IntRange(0, 2).Draw(t, "history?") == 0 {
		cfg.HistoryHalfLife = rapid.SampledFrom([]time.Duration{time.Minute, 10 * time.Minute}).Draw(t, "halflife")
	}
	ops := make([]r11op, rapid.IntRange(5, 30).Draw(t, "ops"))
	for i := range ops {
		ops[i] = r11op{
			kind: rapid.SampledFrom([]string{"demand", "demand", "tick", "tick", "recompute", "recompute",
				"capacity", "group", "update", "remove", "add"}).Draw(t, "op"),
			advance: time.Duration(rapid.IntRange(0, 60).Draw(t, "advance")) * time.Second,
			tenant:  rapid.IntRange(0, len(cfg.Tenants)-1).Draw(t, "tenant"),
			n:       rapid.IntRange(0, 30).Draw(t, "n"),
			factor:  rapid.SampledFrom([]float64{0, 0.5, 1, 1, 1.5}).Draw(t, "factor"),
			weight:  rapid.SampledFrom([]float64{1, 2, 3, 1e-6, 1e6}).Draw(t, "weight"),
			group:   rapid.IntRange(0, len(r11groups)-1).Draw(t, "which group"),
			part:    rapid.SampledFrom([]float64{0, 0.1, 0.2, 0.3}).Draw(t, "part"),
		}
	}
	return cfg, ops
}

// runR11 applies one op; external reports whether it was an event (demand, capacity or
// configuration) rather than a tick or a Recompute.
func runR11(a *Allocator, cfg Config, o r11op, now time.Time) (d Decision, external bool, err error) {
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
	case o.kind == "group":
		g := Group{Path: r11groups[o.group], Weight: o.weight, Deserved: o.part}
		if o.n%2 == 0 {
			g.Limit = max(o.part, 0.2) + 0.3
		}
		d, err = a.Apply(now, SetGroup{Group: g})
	case o.kind == "add" && !present:
		d, err = a.Apply(now, AddTenant{Tenant: tc})
	case !present:
		d, err = a.Apply(now)
		return d, false, err
	case o.kind == "demand":
		d, err = a.SetDemand(now, tc.Name, o.n)
	case o.kind == "update":
		cur := a.tenants[a.byName[tc.Name]].cfg
		cur.Weight, cur.Reservation, cur.Cap, cur.Deserved = o.weight, o.n%4, o.n%5, o.part
		if cur.Cap > 0 && cur.Reservation > cur.Cap {
			cur.Reservation = cur.Cap
		}
		d, err = a.Apply(now, UpdateTenant{Tenant: cur})
	default:
		d, err = a.Apply(now, RemoveTenant{Tenant: tc.Name})
	}
	return d, true, err
}

// checkR11Items: every item carries a reason of the closed set that goes with its kind, a task
// or a count as its kind requires, and the limits of checkLimits hold.
func checkR11Items(t *rapid.T, d Decision) {
	for _, it := range d.Items {
		if !it.Reason.valid() || !slices.Contains(it.Reason.Kinds(), it.Kind) {
			t.Fatalf("%v: reason %v does not go with kind %v", it, it.Reason, it.Kind)
		}
		if it.Retry != it.Reason.Retryable() {
			t.Fatalf("%v: Retry %v, reason says %v", it, it.Retry, it.Reason.Retryable())
		}
		if (it.Kind == KindQueue) != (it.Task == 0) || it.Kind == KindQueue && it.Count <= 0 {
			t.Fatalf("%v: a queue item needs a count and no task, others a task", it)
		}
	}
}

// groupLimitRoom reports whether one more steady task of tr fits every Limit on its path,
// recomputed from the tasks of every tenant below each group (not from the allocator's indexes).
func groupLimitRoom(a *Allocator, tr *tenantRec) bool {
	lim := map[string]float64{}
	for _, g := range a.Config().Groups {
		lim[g.Path] = g.Limit
	}
	for p := tr.cfg.Path; p != ""; {
		if l := lim[p]; l > 0 {
			used := make([]int64, len(a.capT))
			for _, o := range a.tenants {
				if !o.removed && (o.cfg.Path == p || len(o.cfg.Path) > len(p) && o.cfg.Path[:len(p)+1] == p+"/") {
					addScaled(used, o.d, int64(len(o.steady)))
				}
			}
			for _, j := range a.st.dims {
				if tr.d[j] > 0 && float64(used[j]+tr.d[j]) > l*(1+tieTolerance)*float64(a.capT[j]) {
					return false
				}
			}
		}
		i := len(p) - 1
		for i >= 0 && p[i] != '/' {
			i--
		}
		p = p[:max(i, 0)]
	}
	return true
}

// checkR11State is checkState with the Pareto check aware of group limits: a tenant may wait
// for a steady task that fits the pool when a limit on its path holds it back.
func checkR11State(t *rapid.T, a *Allocator, d Decision) {
	for _, tr := range a.tenants {
		if tr.removed {
			continue
		}
		if len(tr.steady) < tr.steadyWant() && fits(a.sUsed, a.capS, tr.d) && groupLimitRoom(a, tr) {
			t.Fatalf("%s wants %d more steady tasks and one fits the steady pool and its limits: %s\n%v",
				tr.cfg.Name, tr.steadyWant()-len(tr.steady), steadyState(a), d.Items)
		}
		if a.leasesOn() && tr.total() < tr.cfg.Demand && fits(a.tUsed, a.capT, tr.d) {
			t.Fatalf("%s wants %d more tasks and one fits the idle pool", tr.cfg.Name, tr.cfg.Demand-tr.total())
		}
	}
	checkStateNoPareto(t, a, d)
	checkR11Items(t, d)
}

// TestReview11Dynamic: random sequences of every event kind; after every step the invariants of
// checkState (capacity of both pools, caps, demand, lease expiry, Pareto, reservations kept by
// every preemption, the share rule) and of checkR11Items; without history, no allocation comes
// back through preemptions alone; at the end, ticking past every minimum runtime settles.
func TestReview11Dynamic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genR11(t)
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		d, err := a.Recompute(now)
		if err != nil {
			t.Fatal(err)
		}
		checkR11State(t, a, d)
		seen := map[string]bool{}
		for i, o := range ops {
			now = now.Add(o.advance)
			d, external, err := runR11(a, cfg, o, now)
			if err != nil {
				continue
			}
			checkR11State(t, a, d)
			if external || (cfg.HistoryHalfLife > 0 && o.advance > 0) {
				clear(seen)
			}
			if hasPreemption(d, ReasonOverShare, ReasonReservationClaim, ReasonBelowFloor) {
				st := steadyState(a)
				if seen[st] {
					t.Fatalf("step %d (%v): allocation %s came back through preemptions alone", i, o.kind, st)
				}
				seen[st] = true
			}
			if s := grantAndStop(d); s != "" {
				t.Fatalf("step %d: %s\n%v", i, s, d.Items)
			}
		}
		settleR11(t, a, now)
	})
}

// settleR11 ticks past every minimum runtime until two Recomputes in a row preempt nothing, and
// then checks reservations and deserved parts. With usage history, preemptions need not stop:
// time changes the shares, and two tenants that cannot both be served may swap for ever
// (finding L1 of review 11, TestReview11HistorySwapsForEver); only reservations are checked.
func settleR11(t *rapid.T, a *Allocator, now time.Time) {
	quiet := 0
	var last []string
	for round := 0; round < 60 && quiet < 2; round++ {
		now = now.Add(100 * time.Second)
		d, err := a.Recompute(now)
		if err != nil {
			t.Fatal(err)
		}
		checkR11State(t, a, d)
		last = append(last, fmt.Sprintf("%v: %s %v", now.Sub(t0), steadyState(a), moves(d)))
		if hasPreemption(d, ReasonOverShare, ReasonReservationClaim, ReasonBelowFloor) {
			quiet = 0
		} else {
			quiet++
		}
	}
	if quiet < 2 && a.histHL == 0 {
		t.Fatalf("preemptions did not stop after 60 rounds; the last rounds:\n%s", strings.Join(last[len(last)-4:], "\n"))
	}
	if a.reservationsExceedPool() {
		return
	}
	for _, tr := range a.tenants {
		if !tr.removed && len(tr.steady) < tr.resTarget() {
			t.Fatalf("%s: %d steady tasks below its reservation target %d after settling", tr.cfg.Name, len(tr.steady), tr.resTarget())
		}
	}
	checkR11Deserved(t, a)
}

// checkR11Deserved: a tenant directly under the root with a deserved part d holds, after settling,
// at least the whole tasks that d of the steady pool holds (or all it wants), computed here from
// the configuration. Only where nothing else can stand in the way: no group limits, and every
// reservation and every deserved part of the root's children fit the steady pool beside it.
func checkR11Deserved(t *rapid.T, a *Allocator) {
	cfg := a.Config()
	for _, g := range cfg.Groups {
		if g.Limit > 0 {
			return
		}
	}
	unit := func(tc Tenant) float64 { // the dominant share of one task in the steady pool
		var u float64
		for k, x := range tc.Task {
			if IsSliceKind(k) || x == 0 {
				continue
			}
			cm := math.Round(cfg.Capacity[k] * 1e6)
			c := (cm - math.Floor(cm*cfg.BurstPoolPercent/100)) / 1e6 // the steady pool
			if c == 0 {
				return math.Inf(1)
			}
			u = max(u, x/c)
		}
		return u
	}
	var taken float64 // reservations and deserved parts of the root's other children
	for _, g := range cfg.Groups {
		if !strings.Contains(g.Path, "/") {
			taken += g.Deserved
		}
	}
	for _, tc := range cfg.Tenants {
		taken += float64(tc.Reservation) * unit(tc)
		if tc.Path == "" {
			taken += tc.Deserved
		}
	}
	if taken > 1 {
		return
	}
	for _, tc := range cfg.Tenants {
		if tc.Path != "" || tc.Deserved == 0 {
			continue
		}
		tr := a.tenants[a.byName[tc.Name]]
		k := int(math.Floor(tc.Deserved / unit(tc) * (1 + 1e-9)))
		if want := min(tr.steadyWant(), k); len(tr.steady) < want {
			t.Fatalf("%s: %d steady tasks after settling, its deserved part %v holds %d: %s",
				tc.Name, len(tr.steady), tc.Deserved, want, steadyState(a))
		}
	}
}

// shuffled lists the tenants and groups of cfg in another order.
func shuffled(t *rapid.T, cfg Config) Config {
	out := cfg
	out.Tenants = rapid.Permutation(cfg.Tenants).Draw(t, "tenant order")
	out.Groups = rapid.Permutation(cfg.Groups).Draw(t, "group order")
	return out
}

// TestReview11OrderIndependent: the same configuration with its tenants and groups listed in
// another order, and the same events, gives the same decisions, item for item.
func TestReview11OrderIndependent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genR11(t)
		other := shuffled(t, cfg)
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(other)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		da, _ := a.Recompute(now)
		db, _ := b.Recompute(now)
		for i := 0; ; i++ {
			if !reflect.DeepEqual(da.Clone(), db.Clone()) {
				t.Fatalf("step %d: decisions differ with the configuration in another order:\n%v\n%v", i, da.Items, db.Items)
			}
			if i == len(ops) {
				break
			}
			now = now.Add(ops[i].advance)
			da, _, _ = runR11(a, cfg, ops[i], now)
			db, _, _ = runR11(b, cfg, ops[i], now)
		}
	})
}

// r11RefFlat is an independent progressive filling for a flat pool without reservations or
// leases: amounts in millionths (as the package documents), shares as float64 over the
// resources of positive capacity (a positive use of a zero-capacity resource never fits), the
// lowest weighted dominant share first, ties within a relative 1e-9 to the smaller name, a
// tenant whose next task does not fit is done.
func r11RefFlat(cfg Config) map[string]int {
	micro := func(x float64) int64 { return int64(math.Round(x * 1e6)) }
	names := make([]string, 0, len(cfg.Capacity))
	for k := range cfg.Capacity {
		names = append(names, k)
	}
	sort.Strings(names)
	capS := map[string]int64{}
	for _, k := range names {
		c := micro(cfg.Capacity[k])
		capS[k] = c - int64(float64(c)*cfg.BurstPoolPercent/100)
	}
	ts := slices.Clone(cfg.Tenants)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	used := map[string]int64{}
	n := map[string]int{}
	done := map[string]bool{}
	share := func(t Tenant) float64 {
		var s float64
		for _, k := range names {
			u := micro(t.Task[k]) * int64(n[t.Name])
			if u == 0 || IsSliceKind(k) {
				continue
			}
			c := micro(cfg.Capacity[k])
			if c == 0 {
				return math.Inf(1)
			}
			s = max(s, float64(u)/float64(c))
		}
		w := t.Weight
		if w == 0 {
			w = 1
		}
		return s / w
	}
	for {
		best := -1
		var bs float64
		for i, t := range ts {
			want := t.Demand
			if t.Cap > 0 {
				want = min(want, t.Cap)
			}
			if done[t.Name] || n[t.Name] >= want {
				continue
			}
			s := share(t)
			if best < 0 || s < bs && !(bs-s <= 1e-9*bs) {
				best, bs = i, s
			}
		}
		if best < 0 {
			return n
		}
		t := ts[best]
		ok := true
		for k, x := range t.Task {
			if used[k]+micro(x) > capS[k] {
				ok = false
			}
		}
		if !ok {
			done[t.Name] = true
			continue
		}
		for k, x := range t.Task {
			used[k] += micro(x)
		}
		n[t.Name]++
	}
}

// TestReview11FlatMatchesReference: a fresh flat allocation (fractional amounts, weights from
// 1e-6 to 1e6, caps, a burst pool, a resource of zero capacity) gives every tenant the steady
// tasks of r11RefFlat (leases, lent after steady filling, are not compared).
func TestReview11FlatMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, _ := genR11(t)
		cfg.Groups, cfg.HistoryHalfLife = nil, 0
		for i := range cfg.Tenants {
			cfg.Tenants[i].Path, cfg.Tenants[i].Reservation, cfg.Tenants[i].Deserved = "", 0, 0
			if cfg.Tenants[i].Demand > 0 && rapid.IntRange(0, 5).Draw(t, "huge?") == 0 {
				cfg.Tenants[i].Demand = 100_000 // more than the pool holds
			}
		}
		if rapid.Bool().Draw(t, "zero resource") {
			cfg.Capacity["z"] = 0
			cfg.Tenants[0].Task["z"] = 1
		}
		a, _, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		want := r11RefFlat(cfg)
		for name, s := range tasksByName(a) {
			if s.Steady != want[name] {
				t.Fatalf("tenant %s: %d steady tasks, reference %d (all: %v)", name, s.Steady, want[name], want)
			}
		}
	})
}

// TestReview11HistorySwapsForEver pins review 11's L1: with usage history, b (one task of 7 of
// r1's 9 units) and e (six tasks of 1) cannot both be served, and with no event at all b takes
// the room from e, then e from b, for as long as the pool runs. Time makes each claim valid
// (docs/fairness.md §5, "With usage history"), so this is a cycle across time, not at one time:
// the test checks that no move is undone within one half-life and that the minimum runtime
// spaces them further; it fails if the swapping stops, so that the docs are revisited then.
func TestReview11HistorySwapsForEver(t *testing.T) {
	for _, minRun := range []time.Duration{0, 10 * time.Minute} {
		cfg := Config{Capacity: Vector{"r0": 4, "r1": 9}, HistoryHalfLife: time.Minute,
			Groups: []Group{{Path: "y", Weight: 1, Deserved: 0.3}},
			Tenants: []Tenant{
				{Name: "a", Task: Vector{"r0": 1}, Demand: 1, Deserved: 0.1},
				{Name: "b", Path: "y", Task: Vector{"r1": 7}, Demand: 1, Deserved: 0.1, MinRuntime: minRun},
				{Name: "e", Task: Vector{"r1": 1}, Demand: 6, Deserved: 0.1, MinRuntime: minRun},
			}}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var swaps []time.Duration
		var last string
		for s := 0; s <= 360*3; s++ {
			now := t0.Add(time.Duration(s) * 10 * time.Second)
			d, err := a.Recompute(now)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range d.Items {
				if it.Kind == KindPreempt {
					if it.By == last {
						t.Fatalf("%v: %s preempts again without being preempted", now.Sub(t0), it.By)
					}
					last = it.By
					swaps = append(swaps, now.Sub(t0))
					break
				}
			}
		}
		if len(swaps) < 10 {
			t.Fatalf("min runtime %v: %d swaps in 3 hours (%v): the swapping stopped; docs/fairness.md §5 says it does not", minRun, len(swaps), swaps)
		}
		for i := 1; i < len(swaps); i++ {
			if gap := swaps[i] - swaps[i-1]; gap < max(cfg.HistoryHalfLife, minRun) {
				t.Fatalf("min runtime %v: a move undone %v after it, within a half-life or the minimum runtime: %v", minRun, gap, swaps)
			}
		}
		t.Logf("min runtime %v: %d swaps in 3 hours, first at %v, gaps %v", minRun, len(swaps), swaps[0], swaps[1]-swaps[0])
	}
}

// TestReview11CloneContinues: a Clone (which derives every index again from the tasks) taken
// after any step of genR11's events (or after every step) decides every later step item for
// item as the original,
// which keeps its indexes incrementally: the incremental indexes never drift from the state.
func TestReview11CloneContinues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg, ops := genR11(t)
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		if _, err := a.Recompute(now); err != nil {
			t.Fatal(err)
		}
		cut := rapid.IntRange(0, len(ops)-1).Draw(t, "clone at")
		every := rapid.Bool().Draw(t, "clone at every step")
		var c *Allocator
		for i, o := range ops {
			if i == cut || every {
				c = a.Clone()
			}
			now = now.Add(o.advance)
			da, _, errA := runR11(a, cfg, o, now)
			da = da.Clone()
			if c == nil {
				continue
			}
			dc, _, errC := runR11(c, cfg, o, now)
			if (errA == nil) != (errC == nil) || !reflect.DeepEqual(da, dc.Clone()) {
				t.Fatalf("step %d (%s): the clone decided\n%v (%v)\nthe original\n%v (%v)", i, o.kind, dc.Items, errC, da.Items, errA)
			}
		}
	})
}

// TestReview11QueueReasonAfterRebuild pins review 11's L2: b's one task (7 of 9) is above its
// group's limit (0.5 of the pool), so it runs on a lease; when a takes the lease's room, b waits
// for burst room. A Clone (as after a restart) said PoolFull instead: the reason read the
// filling's index (b's leaf parked at the limit), which a rebuilt Allocator had not set yet.
func TestReview11QueueReasonAfterRebuild(t *testing.T) {
	cfg := Config{Capacity: Vector{"r0": 9}, BurstPoolPercent: 10, LeaseDuration: 30 * time.Second,
		Groups: []Group{{Path: "x", Weight: 1, Limit: 0.5}},
		Tenants: []Tenant{
			{Name: "a", Task: Vector{"r0": 1}},
			{Name: "b", Path: "x", Task: Vector{"r0": 7}, Demand: 1},
			{Name: "e", Task: Vector{"r0": 1}, Demand: 2},
		}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Recompute(t0); err != nil {
		t.Fatal(err)
	}
	c := a.Clone()
	reason := func(x *Allocator) string {
		d, err := x.SetDemand(t0.Add(time.Second), "a", 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range d.Items {
			if it.Kind == KindQueue && it.Tenant == "b" {
				return it.Reason.String()
			}
		}
		t.Fatalf("b does not wait: %v", d.Items)
		return ""
	}
	if got, gotC := reason(a), reason(c); got != "WaitingForBurst" || gotC != got {
		t.Fatalf("b waits with %s, its clone with %s; want WaitingForBurst for both", got, gotC)
	}
}

// r11Floors computes, for one resource and tasks of one unit, every tenant's sharing-incentive
// floor as docs/fairness.md §5 states it without deserved parts: a node that wants tasks gets its
// weight over the summed weights of its siblings that want tasks of its parent's part, the root
// the steady pool, and a tenant the whole tasks of its part (at most what it wants). ok is false
// when some wanting tenant's part holds no whole task (floors are then filled by ADR 0046's
// whole-task filling, not checked here).
func r11Floors(cfg Config, steady float64) (map[string]int, bool) {
	gw := map[string]float64{}
	for _, g := range cfg.Groups {
		gw[g.Path] = g.Weight
	}
	weight := func(node string, t *Tenant) float64 {
		if t != nil {
			if t.Weight == 0 {
				return 1
			}
			return t.Weight
		}
		if w, ok := gw[node]; ok {
			return w
		}
		return 1
	}
	want := func(t Tenant) int {
		if t.Cap > 0 {
			return min(t.Cap, t.Demand)
		}
		return t.Demand
	}
	// the nodes on a tenant's path, root's child first: "x", "x/p", then the leaf "x/p/name"
	chain := func(t Tenant) []string {
		var out []string
		if t.Path != "" {
			parts := strings.Split(t.Path, "/")
			for i := range parts {
				out = append(out, strings.Join(parts[:i+1], "/"))
			}
		}
		leaf := t.Name
		if t.Path != "" {
			leaf = t.Path + "/" + t.Name
		}
		return append(out, leaf)
	}
	parentOf := func(n string) string {
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			return n[:i]
		}
		return ""
	}
	wanting := map[string]bool{} // nodes with a tenant below that wants a task
	leafT := map[string]*Tenant{}
	for i, t := range cfg.Tenants {
		c := chain(t)
		leafT[c[len(c)-1]] = &cfg.Tenants[i]
		if want(t) > 0 {
			for _, n := range c {
				wanting[n] = true
			}
		}
	}
	sumW := map[string]float64{} // parent → summed weights of its wanting children
	for n := range wanting {
		sumW[parentOf(n)] += weight(n, leafT[n])
	}
	out := map[string]int{}
	ok := true
	for _, t := range cfg.Tenants {
		if want(t) == 0 {
			continue
		}
		part := steady
		for _, n := range chain(t) {
			part *= weight(n, leafT[n]) / sumW[parentOf(n)]
		}
		k := int(math.Floor(part * (1 + 1e-9)))
		if k == 0 {
			ok = false
		}
		out[t.Name] = min(want(t), k)
	}
	return out, ok
}

// TestReview11HierarchicalFloors: one resource, tasks of one unit, tenants on paths with weights at
// every level (changed by SetGroup and UpdateTenant), demands, caps and tenants coming and going;
// after each event and a settling (Recomputes past every minimum runtime) every tenant holds at
// least the floor r11Floors computes from the configuration: nobody that wants tasks is held
// below its part of the pool for ever.
func TestReview11HierarchicalFloors(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.IntRange(4, 40).Draw(t, "slices")
		cfg := Config{Capacity: Vector{"s": float64(c)}}
		if rapid.Bool().Draw(t, "burst") {
			cfg.BurstPoolPercent, cfg.LeaseDuration = 25, time.Minute
		}
		n := rapid.IntRange(2, len(tenantNames)).Draw(t, "tenants")
		for i := range n {
			tc := Tenant{Name: tenantNames[i], Task: Vector{"s": 1}, Path: rapid.SampledFrom(paths).Draw(t, "path"),
				Demand: rapid.IntRange(0, 30).Draw(t, "demand"), Weight: rapid.SampledFrom([]float64{0, 1, 2, 3, 0.5}).Draw(t, "weight"),
				MinRuntime: rapid.SampledFrom([]time.Duration{0, 30 * time.Second}).Draw(t, "minrun")}
			if rapid.IntRange(0, 3).Draw(t, "capped?") == 0 {
				tc.Cap = rapid.IntRange(1, 10).Draw(t, "cap")
			}
			cfg.Tenants = append(cfg.Tenants, tc)
		}
		for _, p := range r11groups {
			if rapid.Bool().Draw(t, "group") {
				cfg.Groups = append(cfg.Groups, Group{Path: p, Weight: rapid.SampledFrom([]float64{1, 2, 3, 0.5}).Draw(t, "gw")})
			}
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		check := func(what string) {
			for range 3 {
				now = now.Add(31 * time.Second)
				if _, err := a.Recompute(now); err != nil {
					t.Fatal(err)
				}
			}
			cur := a.Config()
			steady := float64(a.capS[0]) / 1e6
			floors, ok := r11Floors(cur, steady)
			if !ok {
				return
			}
			got := tasksByName(a)
			for name, f := range floors {
				if got[name].Steady < f {
					t.Fatalf("%s: %s holds %d steady tasks, its floor is %d (floors %v): %s", what, name, got[name].Steady, f, floors, steadyState(a))
				}
			}
		}
		check("start")
		for s := range rapid.IntRange(1, 12).Draw(t, "steps") {
			var ev Event
			names := []string{}
			for _, st := range a.Snapshot() {
				names = append(names, st.Name)
			}
			switch rapid.IntRange(0, 4).Draw(t, "event") {
			case 0:
				ev = SetGroup{Group: Group{Path: rapid.SampledFrom(r11groups).Draw(t, "g"), Weight: rapid.SampledFrom([]float64{1, 2, 3, 0.5}).Draw(t, "w")}}
			case 1:
				cur := a.tenants[a.byName[rapid.SampledFrom(names).Draw(t, "who")]].cfg
				cur.Weight = rapid.SampledFrom([]float64{0, 1, 2, 3, 0.5}).Draw(t, "w")
				ev = UpdateTenant{Tenant: cur}
			case 2:
				if len(names) > 1 {
					ev = RemoveTenant{Tenant: rapid.SampledFrom(names).Draw(t, "who")}
					break
				}
				fallthrough
			default:
				ev = SetDemand{Tenant: rapid.SampledFrom(names).Draw(t, "who"), Demand: rapid.IntRange(0, 30).Draw(t, "n")}
			}
			now = now.Add(time.Second)
			if _, err := a.Apply(now, ev); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("step %d (%T %+v)", s, ev, ev))
		}
	})
}
