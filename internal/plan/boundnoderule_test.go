package plan

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// ruleOpt is one way a tenant is served in exactNodeRuleGPUs: sharedOpt's units and replicas,
// and what its units ask of their node under the device plugin's rules.
type ruleOpt struct {
	sharedOpt
	kind v1.SliceKind
	use  string // how the unit's resource (nvidia.com/gpu or the MIG profile) is used
}

// nodeWants is what opt's units ask of a node on the device-plugin path (packmig.go): its
// resource used one way (kind, share and who may pair on it), the node's sharing strategy for a
// shared kind, migStrategy none for whole-GPU MPS and mixed for MIG instances.
func (o ruleOpt) nodeWants() map[string]string {
	res := wholeResource
	if o.profile != "" {
		res = o.profile
	}
	w := map[string]string{res: o.use}
	if s := strategyOf(o.kind); s != "" {
		w[strategyKey] = s
	}
	switch {
	case o.kind == v1.SliceMPS:
		w[migStrategyKey] = "none"
	case o.profile != "":
		w[migStrategyKey] = "mixed"
	}
	return w
}

// exactNodeRuleGPUs is the fewest GPUs of p's fleet (nodes of one board) that serve every tenant
// with a choice on one of its candidates, at exactSharedGPUs's replica counts, its replicas split
// over the nodes in every way, tenants of one sharing group filling each other's shared units on
// a node, MIG instances covered by the board's maximal layouts, each node within its GPUs. With
// rule, each node also keeps the device plugin's rules (nodeWants: one use per resource and
// strategy, whole-GPU MPS only on a node without MIG instances); without, it is the same
// search with the rules left out. Exhaustive; -1 when nothing fits or the search would take
// more than limit leaves.
func exactNodeRuleGPUs(t *testing.T, p *planner, rule bool, limit int) int {
	t.Helper()
	ps, err := newPatternCache().get(p.boards[0])
	if err != nil {
		t.Fatal(err)
	}
	var caps []int
	for _, n := range p.pool.Fleet.Nodes {
		c := 0
		for _, g := range n.GPUs {
			if g.Board != p.boards[0].Name {
				t.Fatalf("exactNodeRuleGPUs needs nodes of one board, node %s has %s", n.Name, g.Board)
			}
			c += g.Count
		}
		caps = append(caps, c)
	}
	if len(caps) > 2 {
		t.Fatalf("exactNodeRuleGPUs splits replicas over at most two nodes, have %d", len(caps))
	}
	var opts [][]ruleOpt
	leaves := 1
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		best := map[string]ruleOpt{}
		var keys []string
		for _, c := range tn.cands {
			r := idleCount(tn, c)
			if c.reject == "" && (r == 0 || c.replicas < r) {
				r = c.replicas
			}
			if r == 0 {
				continue
			}
			k := fmt.Sprintf("%s/%s/%s/%d/%d", tn.t.Name, c.kind, profName(c.profile), c.share, c.tp)
			if c.share > 1 {
				k = fmt.Sprintf("%s/%s/%s/%d", tn.group, c.kind, profName(c.profile), c.share)
			}
			group := ""
			if c.shared() {
				group = "path:" + tn.t.Path
				if isolationOf(tn.t) == v1.IsolationShared {
					group = "shared"
				}
			}
			o, seen := best[k]
			if !seen {
				keys = append(keys, k)
			}
			if !seen || r < o.r {
				best[k] = ruleOpt{
					sharedOpt: sharedOpt{key: k, r: r, k: c.share, tp: max(c.tp, 1), profile: profName(c.profile)},
					kind:      c.kind,
					use:       fmt.Sprintf("%s/%d/%s", c.kind, c.share, group),
				}
			}
		}
		var o []ruleOpt
		n := 0
		for _, k := range keys {
			o = append(o, best[k])
			n += 1 + (len(caps)-1)*best[k].r // ways to split its replicas over the nodes
		}
		opts = append(opts, o)
		if leaves *= n; leaves > limit {
			return -1
		}
	}
	cover := map[string]int{}
	best := -1
	choice := make([]ruleOpt, len(opts))
	first := make([]int, len(opts)) // replicas on the first node
	// nodeGPUs is the GPUs node i needs for its part of the choice, -1 when it breaks a rule or
	// does not fit.
	nodeGPUs := func(i int) int {
		reps := map[string]int{}
		by := map[string]ruleOpt{}
		wants := map[string]string{}
		for j, o := range choice {
			r := first[j]
			if i == 1 {
				r = o.r - first[j]
			}
			if r == 0 {
				continue
			}
			reps[o.key] += r
			by[o.key] = o
			if !rule {
				continue
			}
			for res, u := range o.nodeWants() {
				if have, ok := wants[res]; ok && have != u {
					return -1
				}
				wants[res] = u
			}
		}
		whole := 0
		demand := make([]int, len(ps.profiles))
		for k, r := range reps {
			o := by[k]
			units := (r + o.k - 1) / o.k
			if o.profile == "" {
				whole += units * o.tp
				continue
			}
			demand[ps.index(o.profile)] += units
		}
		dk := fmt.Sprint(demand)
		m, ok := cover[dk]
		if !ok {
			m = migCover(ps.a, demand)
			cover[dk] = m
		}
		if whole+m > caps[i] {
			return -1
		}
		return whole + m
	}
	var walk func(i int)
	walk = func(i int) {
		if i < len(opts) {
			for _, o := range opts[i] {
				choice[i] = o
				lo := 0
				if len(caps) == 1 {
					lo = o.r
				}
				for a := lo; a <= o.r; a++ {
					first[i] = a
					walk(i + 1)
				}
			}
			return
		}
		total := 0
		for n := range caps {
			g := nodeGPUs(n)
			if g < 0 {
				return
			}
			total += g
		}
		if best < 0 || total < best {
			best = total
		}
	}
	walk(0)
	return best
}

// TestBoundBelowNodeRuleOptimum checks the lower bound on the device-plugin path, where the node
// rules bind, against an exact optimum that keeps them: two or three tenants drawn from the
// synthetic generator's 1,000 (rates scaled by 0.02–2), soft, each of trust path "team" (two in
// three) or "lab", half the pools with exclusive and MPS only, on one node of eight H100s (three
// pools in four) or two nodes of two. The optimum (exactNodeRuleGPUs with the rules) is
// exhaustive over every tenant's candidates and every split of its replicas over the nodes; the
// same search without the rules must agree with exactSharedGPUs on one node. The bound must
// never exceed the optimum with the rules. The rules must bind (the optimum with them above the
// one without) in at least a tenth of the pools checked, so that the bound is checked where they
// do: there two trust paths want whole-GPU MPS on the one node, which takes one path's MPS, and
// the other path's tenants go exclusive.
func TestBoundBelowNodeRuleOptimum(t *testing.T) {
	src := synthPool(1000).Tenants
	rng := rand.New(rand.NewPCG(23, 9))
	trials := 120
	if testing.Short() {
		trials = 60
	}
	checked, binds, tight, bindTight := 0, 0, 0, 0
	for trial := range trials {
		pool := synthPoolOn(1, 8)
		pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDevicePlugin
		if trial%4 == 3 {
			pool.Fleet.Nodes = []v1.Node{
				{Name: "node-0", GPUs: []v1.GPUGroup{{Board: "H100-SXM5-80GB", Count: 2}}},
				{Name: "node-1", GPUs: []v1.GPUGroup{{Board: "H100-SXM5-80GB", Count: 2}}},
			}
		}
		if trial%2 == 0 {
			pool.Policy.AllowedModes = []v1.Mode{v1.ModeExclusive, v1.ModeMPS}
		}
		pool.Tenants = nil
		var names []string
		for i := range 2 + min(rng.IntN(3), 1) { // three tenants in two pools of three
			tn := src[rng.IntN(len(src))]
			tn.Name = fmt.Sprintf("t%d", i)
			tn.Isolation, tn.Path = v1.IsolationSoft, []string{"team", "team", "lab"}[rng.IntN(3)]
			tn.Traffic.RPS *= math.Exp(math.Log(0.02) + math.Log(100)*rng.Float64()) // 0.02–2 times
			pool.Tenants = append(pool.Tenants, tn)
			names = append(names, fmt.Sprintf("%s %.3g req/s path %q", tn.Model.Name, tn.Traffic.RPS, tn.Path))
		}
		v1.Default(pool)
		p := evaluated(t, pool)
		if p.perClaim {
			t.Fatal("the pool is on the DRA path")
		}
		free := exactNodeRuleGPUs(t, p, false, 2_000_000)
		if free <= 0 {
			continue
		}
		if len(pool.Fleet.Nodes) == 1 {
			if shared := exactSharedGPUs(t, p); shared != free {
				t.Errorf("pool %d (%s): the search without node rules says %d GPUs, exactSharedGPUs %d", trial, strings.Join(names, "; "), free, shared)
			}
		}
		opt := exactNodeRuleGPUs(t, p, true, 2_000_000)
		if opt <= 0 {
			continue
		}
		if opt < free {
			t.Fatalf("pool %d: the optimum with node rules %d below the one without %d", trial, opt, free)
		}
		bound := p.lowerBound()
		checked++
		if bound == opt {
			tight++
		}
		if opt > free {
			binds++
			if bound == opt {
				bindTight++
			}
			t.Logf("pool %d, %d node(s), modes %v (%s): optimum %d with the node rules, %d without, bound %d", trial, len(pool.Fleet.Nodes), pool.Policy.AllowedModes, strings.Join(names, "; "), opt, free, bound)
		}
		if bound > opt {
			t.Errorf("pool %d, %d node(s) (%s): lower bound %d above the exact optimum %d under the node rules", trial, len(pool.Fleet.Nodes), strings.Join(names, "; "), bound, opt)
		}
	}
	t.Logf("%d pools checked, the bound equal to the optimum in %d; the node rules bind in %d (bound equal to the optimum in %d of them)", checked, tight, binds, bindTight)
	if checked < trials/4 || 10*binds < checked {
		t.Errorf("%d pools checked, the node rules binding in %d: the test checks little", checked, binds)
	}
}

// TestBoundBelowNodeRuleOptimumMIGAndMPS is a pool where the rule that whole-GPU MPS needs
// migStrategy none binds: on one node of eight H100s with MIG and MPS allowed, a hard-isolated
// qwen2.5-1.5b tenant held to 3 replicas (MIG instances; no MPS for its tier) and a soft one held
// to 12, which MPS at the ladder's finest share 1/12 serves on one GPU where 1g.10gb instances
// would take two. Without the rule the two take two GPUs (one MIG GPU, one MPS GPU); with it the
// node is MIG only and they take three (fifteen 1g.10gb instances, seven a GPU). The exact optimum under
// the rule must be 3 and without it 2, the bound at most 3, and the device-plugin plan must
// use more GPUs than the DRA plan of the same pool, where the rule does not exist.
func TestBoundBelowNodeRuleOptimumMIGAndMPS(t *testing.T) {
	var x v1.Tenant
	for _, s := range synthPool(1000).Tenants {
		if s.Model.Name == "qwen2.5-1.5b" {
			x = s
			break
		}
	}
	if x.Name == "" {
		t.Fatal("no qwen2.5-1.5b tenant among the synthetic 1,000")
	}
	mk := func(api v1.KubernetesDeviceAPI) *v1.Pool {
		pool := synthPoolOn(1, 8)
		pool.Policy.KubernetesDeviceAPI = api
		pool.Policy.AllowedModes = []v1.Mode{v1.ModeMIG, v1.ModeMPS}
		hard := x
		hard.Name, hard.Isolation, hard.Path = "hard", v1.IsolationHard, ""
		hard.Traffic.RPS = 0.1
		soft := x
		soft.Name, soft.Isolation, soft.Path = "fixed12", v1.IsolationSoft, "team"
		soft.Traffic.RPS = 0.1
		twelve, three := 12, 3
		soft.Replicas, hard.Replicas = &twelve, &three
		slow := v1.Duration(10 * time.Second)
		soft.SLO.TTFTP99, soft.SLO.TPOTP99 = &slow, &slow
		hard.SLO.TTFTP99, hard.SLO.TPOTP99 = &slow, &slow
		pool.Tenants = []v1.Tenant{hard, soft}
		v1.Default(pool)
		return pool
	}
	pool := mk(v1.DeviceAPIDevicePlugin)
	p := evaluated(t, pool)
	free := exactNodeRuleGPUs(t, p, false, 2_000_000)
	opt := exactNodeRuleGPUs(t, p, true, 2_000_000)
	bound := p.lowerBound()
	t.Logf("exact optimum %d with the node rules, %d without; bound %d", opt, free, bound)
	if opt != 3 || free != 2 {
		t.Errorf("exact optimum %d with the node rules and %d without, want 3 and 2: the pool no longer shows the rule binding", opt, free)
	}
	if bound > opt || bound < 1 {
		t.Errorf("lower bound %d, the exact optimum under the node rules %d", bound, opt)
	}
	used := map[v1.KubernetesDeviceAPI]int{}
	for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
		pool := mk(api)
		pl, err := Build(context.Background(), pool, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Errorf("%s: %v", api, err)
		}
		for _, tp := range pl.Tenants {
			if tp.Infeasible {
				t.Errorf("%s: tenant %s infeasible", api, tp.Name)
			}
		}
		used[api] = pl.Summary.GPUsUsed
		t.Logf("%s: %d GPUs, lower bound %d", api, pl.Summary.GPUsUsed, pl.Summary.LowerBound)
		if pl.Summary.LowerBound > opt {
			t.Errorf("%s: the plan's lower bound %d above the exact optimum %d under the node rules", api, pl.Summary.LowerBound, opt)
		}
	}
	if used[v1.DeviceAPIDevicePlugin] <= used[v1.DeviceAPIDRA] {
		t.Errorf("device-plugin plan %d GPUs, DRA plan %d: the node rule does not bind", used[v1.DeviceAPIDevicePlugin], used[v1.DeviceAPIDRA])
	}
}
