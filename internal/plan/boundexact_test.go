package plan

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// exactGPUs is the fewest GPUs of one board that hold every feasible tenant of p at its
// candidates' replica counts (the counts the queueing model accepts, replicas), found by
// exhaustive search over every tenant's slice kind and, for MIG instances, over every way of
// laying them out on GPUs (a cover by the board's maximal layouts, exact by breadth-first
// search). It assumes that no unit is shared between tenants (every tenant its own sharing
// group, as in the pools TestBoundBelowExactOptimum draws) and leaves the device plugin's node
// rules out, so it is at most the fewest GPUs of any plan at those counts.
func exactGPUs(t *testing.T, p *planner) int {
	t.Helper()
	type option struct {
		whole   int    // whole GPUs (exclusive, MPS, time-slice, tensor-parallel)
		profile string // or instances of a MIG profile
		inst    int
	}
	var opts [][]option
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		whole := -1
		inst := map[string]int{}
		for _, c := range tn.feasible {
			units := (c.replicas + c.share - 1) / c.share
			if c.whole() {
				if g := units * max(c.tp, 1); whole < 0 || g < whole {
					whole = g
				}
				continue
			}
			if n, ok := inst[c.profile.Name]; !ok || units < n {
				inst[c.profile.Name] = units
			}
		}
		var o []option
		if whole >= 0 {
			o = append(o, option{whole: whole})
		}
		for prof, n := range inst {
			o = append(o, option{profile: prof, inst: n})
		}
		opts = append(opts, o)
	}
	if len(p.boards) != 1 {
		t.Fatalf("exactGPUs needs a fleet of one board, have %d", len(p.boards))
	}
	ps, err := newPatternCache().get(p.boards[0])
	if err != nil {
		t.Fatal(err)
	}
	best := -1
	choice := make([]option, len(opts))
	var walk func(i int)
	walk = func(i int) {
		if i == len(opts) {
			whole := 0
			demand := make([]int, len(ps.profiles))
			for _, o := range choice {
				whole += o.whole
				if o.profile != "" {
					j := ps.index(o.profile)
					if j < 0 {
						t.Fatalf("profile %s not among the board's patterns", o.profile)
					}
					demand[j] += o.inst
				}
			}
			if n := whole + migCover(ps.a, demand); best < 0 || n < best {
				best = n
			}
			return
		}
		for _, o := range opts[i] {
			choice[i] = o
			walk(i + 1)
		}
	}
	walk(0)
	return best
}

// migCover is the fewest GPUs whose MIG layouts (each a sub-multiset of one of the maximal
// patterns) hold demand instances of each profile: breadth-first search over what is left.
func migCover(patterns [][]int, demand []int) int {
	key := func(d []int) string { return fmt.Sprint(d) }
	if !slices.ContainsFunc(demand, func(n int) bool { return n > 0 }) {
		return 0
	}
	seen := map[string]bool{key(demand): true}
	frontier := [][]int{demand}
	for depth := 1; ; depth++ {
		var next [][]int
		for _, d := range frontier {
			for _, a := range patterns {
				r := make([]int, len(d))
				done := true
				for i := range d {
					r[i] = max(d[i]-a[i], 0)
					done = done && r[i] == 0
				}
				if done {
					return depth
				}
				if k := key(r); !seen[k] {
					seen[k] = true
					next = append(next, r)
				}
			}
		}
		frontier = next
	}
}

// TestBoundBelowExactOptimum checks the lower bound against an exact optimum on small pools:
// one to four tenants drawn from the synthetic generator's 1,000 (their rates scaled by 0.5–40,
// log-uniform, and pools kept where at most four GPUs hold them), each its own sharing group (isolation hard, or soft without a
// path), on one node of eight H100s, on both device paths. The optimum is the exhaustive
// search's (exactGPUs) over the counts the queueing model accepts; the bound, which counts
// every candidate at lbReplicas and relaxes the packing, must never exceed it. Every
// candidate's own count before the pool's bounds — the larger of the saturation count with
// idle neighbours and the TTFT floor — must also be at most the fewest replicas the queueing
// model accepts on that slice kind (lbReplicas is clamped to that count, which would hide
// it). It fails if fewer than a third of the pools have a bound equal to the optimum: a bound
// that far below would check little.
func TestBoundBelowExactOptimum(t *testing.T) {
	src := synthPool(1000).Tenants
	rng := rand.New(rand.NewPCG(11, 3))
	trials := 80
	if testing.Short() {
		trials = 40
	}
	for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
		checked, tight, counts := 0, 0, 0
		byOpt := map[int]int{}
		for trial := range trials {
			pool := synthPoolOn(1, 8)
			pool.Policy.KubernetesDeviceAPI = api
			pool.Tenants = nil
			var names []string
			for i := range 1 + rng.IntN(4) {
				tn := src[rng.IntN(len(src))]
				tn.Name = fmt.Sprintf("t%d", i)
				tn.Path = ""
				tn.Isolation = v1.IsolationSoft
				if rng.IntN(3) == 0 {
					tn.Isolation = v1.IsolationHard
				}
				tn.Traffic.RPS *= math.Exp(math.Log(0.5) + math.Log(80)*rng.Float64()) // 0.5–40 times
				pool.Tenants = append(pool.Tenants, tn)
				names = append(names, fmt.Sprintf("%s %.3g req/s %s", tn.Model.Name, tn.Traffic.RPS, tn.Isolation))
			}
			v1.Default(pool)
			p := evaluated(t, pool)
			for _, tn := range p.tenants {
				lam := floorRate(tn.t.Traffic)
				for _, c := range tn.feasible {
					if c.ev.q == nil || c.need == 0 {
						continue
					}
					counts++
					if own := max(c.sz.boundLowest, c.ev.q.ttftFloor(lam, tn.slo)); own > c.need {
						t.Errorf("%s: %s on %s: the bound's count %d is above the %d replicas the queueing model accepts",
							api, tn.t.Name, c.label(), own, c.need)
					}
				}
			}
			opt := exactGPUs(t, p)
			if opt > 4 || opt <= 0 {
				continue
			}
			bound := p.lowerBound()
			checked++
			byOpt[opt]++
			if bound == opt {
				tight++
			}
			if bound > opt {
				t.Errorf("%s, pool %d (%s): lower bound %d above the exact optimum %d", api, trial, strings.Join(names, "; "), bound, opt)
			}
		}
		t.Logf("%s: %d pools of 1–4 GPUs checked (by optimum: %v), the bound equal to the optimum in %d; %d candidates' counts checked", api, checked, byOpt, tight, counts)
		if checked < trials/4 || 3*tight < checked {
			t.Errorf("%s: %d pools checked, %d tight: the test checks little", api, checked, tight)
		}
	}
}

// evaluated is a planner for pool with every tenant's candidates sized and its first feasible
// one chosen, as the bound tests read them.
func evaluated(t testing.TB, pool *v1.Pool) *planner {
	t.Helper()
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx = context.Background()
	p.evaluate()
	for _, tn := range p.tenants {
		if len(tn.feasible) > 0 {
			tn.choice = tn.feasible[0]
		}
	}
	return p
}
