package fair

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genOpts says which features a generated configuration may use.
type genOpts struct {
	hier, reserve, caps, weights bool
	small                        bool // many small tasks: every task ≤ 1/10 of every capacity
}

var tenantNames = []string{"a", "b", "c", "d", "e", "f"}
var paths = []string{"", "x", "y", "x/p", "x/q"}

func genConfig(t *rapid.T, o genOpts) Config {
	m := rapid.IntRange(1, 3).Draw(t, "resources")
	cfg := Config{Capacity: Vector{}}
	for j := range m {
		cfg.Capacity[fmt.Sprintf("r%d", j)] = float64(rapid.IntRange(10, 60).Draw(t, "cap"))
	}
	n := rapid.IntRange(1, len(tenantNames)).Draw(t, "tenants")
	for i := range n {
		tc := Tenant{Name: tenantNames[i], Task: Vector{}, Demand: rapid.IntRange(0, 40).Draw(t, "demand")}
		hi := 12
		if o.small {
			hi = 1
		}
		for j := range m {
			r := fmt.Sprintf("r%d", j)
			x := rapid.IntRange(0, hi).Draw(t, "amount")
			if o.small {
				x = rapid.IntRange(0, int(cfg.Capacity[r])/10).Draw(t, "amount")
			}
			if x > 0 {
				tc.Task[r] = float64(x)
			}
		}
		if len(tc.Task) == 0 {
			tc.Task["r0"] = 1
		}
		if o.weights {
			tc.Weight = rapid.SampledFrom([]float64{0, 1, 2, 3, 0.5}).Draw(t, "weight")
		}
		if o.hier {
			tc.Path = rapid.SampledFrom(paths).Draw(t, "path")
		}
		if o.caps && rapid.Bool().Draw(t, "capped") {
			tc.Cap = rapid.IntRange(1, 10).Draw(t, "cap")
		}
		cfg.Tenants = append(cfg.Tenants, tc)
	}
	if o.hier {
		for _, p := range []string{"x", "y", "x/p"} {
			if rapid.Bool().Draw(t, "group") {
				cfg.Groups = append(cfg.Groups, Group{Path: p, Weight: rapid.SampledFrom([]float64{1, 2, 3}).Draw(t, "gw")})
			}
		}
	}
	if o.reserve {
		addReservations(t, &cfg)
	}
	return cfg
}

// addReservations gives tenants reservations while they still fit the steady pool.
func addReservations(t *rapid.T, cfg *Config) {
	for i := range cfg.Tenants {
		r := rapid.IntRange(0, 3).Draw(t, "reserve")
		if c := cfg.Tenants[i].Cap; c > 0 && r > c {
			r = c
		}
		cfg.Tenants[i].Reservation = r
		if validateConfig(*cfg, true) != nil {
			cfg.Tenants[i].Reservation = 0
		}
	}
}

func tasksByName(a *Allocator) map[string]TenantState {
	out := map[string]TenantState{}
	for _, s := range a.Snapshot() {
		out[s.Name] = s
	}
	return out
}

// TestPropFillMatchesReference: a fresh allocation (reservations, caps, weights, hierarchy,
// no leases) is exactly the plain re-statement of progressive filling.
func TestPropFillMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, genOpts{hier: true, reserve: true, caps: true, weights: true})
		a, d, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		want, order := refFillOrder(cfg)
		for name, s := range tasksByName(a) {
			if s.Tasks != want[name] {
				t.Fatalf("tenant %s: %d tasks, reference %d (all: %v)", name, s.Tasks, want[name], want)
			}
		}
		var got []string
		for _, it := range d.Items {
			if it.Kind == KindGrant {
				got = append(got, it.Tenant)
			}
		}
		if !slices.Equal(got, order) {
			t.Fatalf("grant order %v, reference %v", got, order)
		}
	})
}

// TestPropFlatIsHierarchyOfOne: putting every tenant under one group of any weight changes
// nothing; the hierarchical rule reduces to the flat one.
func TestPropFlatIsHierarchyOfOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, genOpts{weights: true, caps: true})
		a, _, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		nested := cfg
		nested.Tenants = nil
		for _, tc := range cfg.Tenants {
			tc.Path = "org/team"
			nested.Tenants = append(nested.Tenants, tc)
		}
		nested.Groups = []Group{{Path: "org", Weight: 5}}
		b, _, err := Allocate(nested, t0)
		if err != nil {
			t.Fatal(err)
		}
		x, y := tasksByName(a), tasksByName(b)
		for name := range x {
			if x[name].Tasks != y[name].Tasks {
				t.Fatalf("tenant %s: flat %d, nested %d", name, x[name].Tasks, y[name].Tasks)
			}
		}
	})
}

// TestPropSharingIncentive (discrete form). With weights w and W = Σw, a static partition gives
// tenant i the weighted share 1/W. Progressive filling guarantees every tenant with unmet demand
// W·s_i·(1+1e-9) > 1 − Σ_t u_t, where u_t is one task's dominant share: when i was skipped, each
// other tenant held at most one task more than i's weighted share (it was served while its share
// was not above i's), and the resource i lacked was full but for less than one of i's tasks.
func TestPropSharingIncentive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, genOpts{weights: true, small: true})
		a, _, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		var W, U float64
		for _, tc := range cfg.Tenants {
			W += weightOf(tc)
			U += oneTaskShare(a, tc)
		}
		st := tasksByName(a)
		for _, tc := range cfg.Tenants {
			s := st[tc.Name]
			if s.Tasks >= tc.Demand {
				continue
			}
			if W*s.WeightedShare*(1+1e-9) <= 1-U {
				t.Fatalf("tenant %s: weighted share %v, W=%v, Σu=%v: below the static share bound", tc.Name, s.WeightedShare, W, U)
			}
		}
	})
}

func weightOf(tc Tenant) float64 {
	if tc.Weight == 0 {
		return 1
	}
	return tc.Weight
}

func oneTaskShare(a *Allocator, tc Tenant) float64 {
	d, _ := a.res.dense(tc.Task)
	return dominant(d, a.capT, a.res.share)
}

// TestPropEnvyFree (discrete form). Replaying the grants of a fresh allocation in order, a
// tenant is skipped when it has the lowest weighted share but the next grant goes elsewhere; at
// that moment its next task must not fit, and it must not envy any other tenant's bundle with
// one task taken out (scaled by w_i/w_j): it could not run x_i + 1 of its own tasks in it. After
// the skip, others may take room the skipped tenant cannot use (see TestDiscreteLimits).
func TestPropEnvyFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, genOpts{weights: true})
		a, d, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		r := newReplay(a, cfg)
		for _, it := range d.Items {
			if it.Kind == KindGrant {
				r.grant(t, it.Tenant)
			}
		}
		r.finish(t)
	})
}

// replay re-runs a flat allocation from its grant order.
type replay struct {
	a       *Allocator
	ts      []Tenant
	d       map[string][]int64
	x       map[string]int
	skipped map[string]bool
	used    []int64
}

func newReplay(a *Allocator, cfg Config) *replay {
	r := &replay{a: a, ts: cfg.Tenants, d: map[string][]int64{}, x: map[string]int{}, skipped: map[string]bool{},
		used: make([]int64, len(a.capT))}
	for _, tc := range cfg.Tenants {
		r.d[tc.Name], _ = a.res.dense(tc.Task)
	}
	return r
}

func (r *replay) share(tc Tenant) float64 {
	u := make([]int64, len(r.used))
	addScaled(u, r.d[tc.Name], int64(r.x[tc.Name]))
	return dominant(u, r.a.capT, r.a.res.share) / weightOf(tc)
}

// lowest is the active tenant with the lowest weighted share (ties within 1e-9: smaller name).
func (r *replay) lowest() (Tenant, bool) {
	var best Tenant
	found := false
	for _, tc := range r.ts {
		if r.skipped[tc.Name] || r.x[tc.Name] >= tc.Demand {
			continue
		}
		if !found || r.share(tc) < r.share(best) {
			best, found = tc, true
		}
	}
	for _, tc := range r.ts {
		if found && !r.skipped[tc.Name] && r.x[tc.Name] < tc.Demand && tie(r.share(tc), r.share(best)) && tc.Name < best.Name {
			best = tc
		}
	}
	return best, found
}

func (r *replay) grant(t *rapid.T, name string) {
	for {
		low, ok := r.lowest()
		if !ok {
			t.Fatalf("grant to %s after every tenant was done", name)
		}
		if low.Name == name {
			break
		}
		r.skip(t, low)
	}
	addScaled(r.used, r.d[name], 1)
	r.x[name]++
}

func (r *replay) finish(t *rapid.T) {
	for {
		low, ok := r.lowest()
		if !ok {
			return
		}
		r.skip(t, low)
	}
}

func (r *replay) skip(t *rapid.T, ti Tenant) {
	r.skipped[ti.Name] = true
	di := r.d[ti.Name]
	if fits(r.used, r.a.capS, di) {
		t.Fatalf("%s was passed over although its next task fits", ti.Name)
	}
	xi := r.x[ti.Name]
	for _, tj := range r.ts {
		xj := r.x[tj.Name]
		if tj.Name == ti.Name || xj == 0 {
			continue
		}
		dj, scale, envy := r.d[tj.Name], weightOf(ti)/weightOf(tj), true
		for k := range di {
			if scale*float64(xj-1)*float64(dj[k]) < float64(xi+1)*float64(di[k]) {
				envy = false
			}
		}
		if envy {
			t.Fatalf("when skipped, %s (%d tasks) envies %s (%d tasks) even without one of its tasks", ti.Name, xi, tj.Name, xj)
		}
	}
}

// TestPropStrategyProof (discrete form): a tenant that inflates its task vector gets more
// tasks only by making another tenant get fewer. Proof: honestly, the liar stopped at x tasks
// because at that moment the others' use u of some resource r plus (x+1)·d_r exceeded the
// capacity; if under the lie every other tenant held at least as many tasks, their use of r is
// at least u, and x+1 inflated tasks use at least (x+1)·d_r: more than the capacity. Exact
// strategy-proofness (divisible DRF) does not survive indivisible tasks: TestDiscreteLimits.
func TestPropStrategyProof(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, genOpts{weights: true, hier: true})
		a, _, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		i := rapid.IntRange(0, len(cfg.Tenants)-1).Draw(t, "liar")
		lie := cfg
		lie.Tenants = append([]Tenant(nil), cfg.Tenants...)
		inflated := cloneVector(cfg.Tenants[i].Task)
		for _, r := range sortedKeys(cfg.Capacity) {
			inflated[r] += float64(rapid.IntRange(0, 5).Draw(t, "extra"))
		}
		lie.Tenants[i].Task = inflated
		b, _, err := Allocate(lie, t0)
		if err != nil {
			t.Fatal(err)
		}
		honest, lied := tasksByName(a), tasksByName(b)
		name := cfg.Tenants[i].Name
		if lied[name].Tasks <= honest[name].Tasks {
			return
		}
		for other, s := range honest {
			if other != name && lied[other].Tasks < s.Tasks {
				return
			}
		}
		t.Fatalf("%s: %d tasks honestly, %d with task %v, and nobody lost a task", name, honest[name].Tasks, lied[name].Tasks, inflated)
	})
}

// TestPropParetoFresh: after filling, every tenant that wants more steady tasks is blocked: its
// next task does not fit the steady pool.
func TestPropParetoFresh(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, genOpts{weights: true, hier: true, caps: true, reserve: true})
		a, _, err := Allocate(cfg, t0)
		if err != nil {
			t.Fatal(err)
		}
		checkPareto(t, a)
	})
}

func checkPareto(t *rapid.T, a *Allocator) {
	for _, tr := range a.tenants {
		if len(tr.steady) < tr.steadyWant() && fits(a.sUsed, a.capS, tr.d) {
			t.Fatalf("%s wants %d more steady tasks and one fits the steady pool", tr.cfg.Name, tr.steadyWant()-len(tr.steady))
		}
		if a.leasesOn() && tr.total() < tr.cfg.Demand && fits(a.tUsed, a.capT, tr.d) {
			t.Fatalf("%s wants %d more tasks and one fits the idle pool", tr.cfg.Name, tr.cfg.Demand-tr.total())
		}
	}
}
