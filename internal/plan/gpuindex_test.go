package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// shortFleet is a planner chosen and packed on distinctShapesOn's pool of n tenants on gpus
// GPUs (H100 and A100 nodes of eight), many of them short.
func shortFleet(tb testing.TB, n, gpus int) *planner {
	tb.Helper()
	p, err := newPlanner(distinctShapesOn(tb, n, gpus), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	p.evaluate()
	if err := p.optimise(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// nodeUsesByScan is resetNodeUses as it was, reading every GPU of the fleet for the nodes'.
func nodeUsesByScan(p *planner, nodes map[string]bool) map[string]map[string]migUse {
	out := map[string]map[string]migUse{}
	for n := range nodes {
		out[n] = map[string]migUse{}
	}
	for _, g := range p.gpus {
		n := g.fg.ref.Node
		if !nodes[n] {
			continue
		}
		if g.whole != nil {
			maps.Copy(out[n], wholeWant(g.whole))
		}
		for _, pi := range g.insts {
			if pi.u != nil {
				addInstWant(out[n], pi.in.Profile, useOf(pi.u))
			}
		}
	}
	return out
}

// placedByScan is placedOf as it was, reading every GPU of the fleet.
func placedByScan(p *planner, k groupKey) []*unit {
	var out []*unit
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		for _, u := range g.units() {
			if u.key == k && !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// The rescue's per-node and per-board reads (resetNodeUses, placedOf) read the GPUs of that
// node or board alone, through the index of the packing's GPUs, and find what a scan of the
// whole fleet finds; the index follows the packing's GPUs when a snapshot puts others back.
func TestGPUIndexReadsOneNodeOrBoard(t *testing.T) {
	p := shortFleet(t, 120, 256)
	check := func(stage string) {
		t.Helper()
		perNode, perBoard := map[string]int{}, map[string]int{}
		for _, g := range p.gpus {
			perNode[g.fg.ref.Node]++
			perBoard[g.fg.board.Name]++
		}
		for _, g := range p.gpus[:24] {
			nodes := map[string]bool{g.fg.ref.Node: true}
			want := nodeUsesByScan(p, nodes)
			before := p.gpuReads
			p.resetNodeUses(nodes)
			if got := p.gpuReads - before; got != perNode[g.fg.ref.Node] {
				t.Fatalf("%s: resetNodeUses of node %s read %d GPUs, want its %d", stage, g.fg.ref.Node, got, perNode[g.fg.ref.Node])
			}
			if !reflect.DeepEqual(p.nodeUse[g.fg.ref.Node], want[g.fg.ref.Node]) {
				t.Fatalf("%s: node %s uses %v, a scan of the fleet finds %v", stage, g.fg.ref.Node, p.nodeUse[g.fg.ref.Node], want[g.fg.ref.Node])
			}
		}
		keys := 0
		for _, g := range p.gpus {
			for _, u := range g.units() {
				keys++
				before := p.gpuReads
				got := p.placedOf(u.key)
				if n := p.gpuReads - before; n != perBoard[u.key.board] {
					t.Fatalf("%s: placedOf(%v) read %d GPUs, want its board's %d", stage, u.key, n, perBoard[u.key.board])
				}
				if want := placedByScan(p, u.key); !slices.Equal(got, want) {
					t.Fatalf("%s: placedOf(%v) is %d units, a scan of the fleet %d", stage, u.key, len(got), len(want))
				}
			}
		}
		if keys == 0 {
			t.Fatalf("%s: no unit placed", stage)
		}
	}
	check("packed")
	before := p.snapshot()
	for _, tn := range p.tenants {
		tn.infeas = nil
	}
	if err := p.pack(); err != nil {
		t.Fatal(err)
	}
	check("packed again")
	before.restore(p)
	check("restored")
}

// firstInRescueOrder is the first candidate of rescueOrder that its test keeps; candsOfKey is
// each group key's first candidate other than the tenant's choice.
func TestFirstInRescueOrderAndCandsOfKey(t *testing.T) {
	p := shortFleet(t, 120, 64)
	free := p.freeGPUs()
	if len(free) == 0 {
		t.Fatal("no idle GPU")
	}
	tests := map[string]func(tn *tenant) func(*cand) bool{
		"any":       func(*tenant) func(*cand) bool { return func(*cand) bool { return true } },
		"not-chose": func(tn *tenant) func(*cand) bool { return func(c *cand) bool { return c != tn.choice } },
		"idle":      func(*tenant) func(*cand) bool { return func(c *cand) bool { return countFree(free[c.board.Name]) > 0 } },
		"A100":      func(*tenant) func(*cand) bool { return func(c *cand) bool { return c.board.Name == "A100-SXM4-80GB" } },
		"none":      func(*tenant) func(*cand) bool { return func(*cand) bool { return false } },
	}
	for _, perClaim := range []bool{false, true} {
		p.perClaim = perClaim
		for name, mk := range tests {
			for _, tn := range p.tenants {
				ok := mk(tn)
				var want *cand
				for _, c := range p.rescueOrder(tn, free) {
					if ok(c) {
						want = c
						break
					}
				}
				if got := p.firstInRescueOrder(tn, free, ok); got != want {
					t.Fatalf("perClaim %v, %s, %s: %v, rescueOrder's first %v", perClaim, name, tn.t.Name, got, want)
				}
			}
		}
	}
	p.perClaim = false
	for _, tn := range p.tenants {
		got := p.candsOfKey(tn)
		want := map[int32]*cand{}
		for _, c := range tn.feasible {
			if k := p.rescueKeyID(tn, c); c != tn.choice && want[k] == nil {
				want[k] = c
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: candsOfKey %v, want %v", tn.t.Name, got, want)
		}
	}
}

// gpuState is what each GPU holds: role, mode and each unit's tenants in order.
func gpuState(p *planner) []string {
	var out []string
	for _, g := range p.gpus {
		s := fmt.Sprintf("%s/%d %s %s", g.fg.ref.Node, g.fg.ref.Index, g.role, g.mode)
		if g.whole != nil {
			s += fmt.Sprintf(" whole%v", tenantsOf(g.whole))
		}
		for _, pi := range g.insts {
			if pi.u == nil {
				s += " -"
				continue
			}
			s += fmt.Sprintf(" %s%v", pi.in.Profile, tenantsOf(pi.u))
		}
		out = append(out, s)
	}
	return out
}

func tenantsOf(u *unit) []string {
	var out []string
	for _, r := range u.reps {
		out = append(out, r.tn.t.Name)
	}
	return out
}

// dropAll leaves the GPUs and the nodes' uses as dropReplicas of each tenant in turn does.
func TestDropAllIsDropReplicasInTurn(t *testing.T) {
	a, b := shortFleet(t, 120, 64), shortFleet(t, 120, 64)
	if !slices.Equal(gpuState(a), gpuState(b)) {
		t.Fatal("two plans of one pool differ")
	}
	for _, step := range [][2]int{{0, 7}, {7, 40}, {40, 41}, {41, 120}} {
		ta, tb := a.tenants[step[0]:step[1]], b.tenants[step[0]:step[1]]
		a.dropAll(ta)
		for _, tn := range tb {
			b.dropReplicas(tn, nil)
		}
		if ga, gb := gpuState(a), gpuState(b); !slices.Equal(ga, gb) {
			t.Fatalf("tenants %d-%d: dropAll left\n%v\nwhere dropReplicas in turn left\n%v", step[0], step[1], ga, gb)
		}
		if !reflect.DeepEqual(a.nodeUse, b.nodeUse) {
			t.Fatalf("tenants %d-%d: nodes' uses %v against %v", step[0], step[1], a.nodeUse, b.nodeUse)
		}
	}
}

// BenchmarkRescueShortFleet is one pass of the rescue of short tenants (the packing and
// rescueShort, as each trial of stepDownFixed and releaseShort makes it) on 1,600 tenants of
// distinct shapes on 256 GPUs of two boards, most of them short.
func BenchmarkRescueShortFleet(b *testing.B) {
	p := shortFleet(b, 1600, 256)
	before := p.snapshot()
	b.ReportAllocs()
	for b.Loop() {
		for _, tn := range p.tenants {
			tn.infeas = nil
		}
		if err := p.pack(); err != nil {
			b.Fatal(err)
		}
		if err := p.rescueShort(p.unplaced); err != nil {
			b.Fatal(err)
		}
		before.restore(p)
	}
}
