package plan

import (
	"cmp"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// compactBudget bounds the compaction's work: the target and idle GPUs it looks at, over all
// sources.
const compactBudget = 200_000

// compactor is one compaction pass over the packed MIG GPUs.
type compactor struct {
	p      *planner
	pc     *patternCache
	where  map[*unit]*gpuPlan
	units  map[*tenant][]*unit
	byNode map[string][]*gpuPlan
	pos    map[*gpuPlan]int // fleet order
	budget int
}

// compact re-places the MIG instances of the least-filled MIG GPUs into free room on other GPUs
// of the same board and energy class, and frees a GPU when all of its instances found room.
// Packing class by class (packMIG) leaves GPUs part-empty: a GPU with one shared 3g.40gb has
// room for two unshared 1g.20gb of another class that the class's own bins did not use. A move
// must keep the target's layout legal (its profile counts stay within one of the board's
// maximal patterns, and gpu.Place lays them out), keep the node's one way per profile, trust
// path and sharing strategy (compatible, as the packer checks; no such rule on the DRA path,
// where the packer leaves the compaction little to free), and not leave a redundant
// tenant on one GPU when it was on several. When no GPU with room is on a node that takes an
// instance's way, a GPU with room may move, with the instance, to an idle GPU on a node that
// takes them all (see relocate). A GPU is freed only when every instance moves;
// otherwise nothing moves. Sources are tried least-filled first, each instance going to the
// fullest GPU that takes it; the work is bounded by compactBudget.
func (p *planner) compact(pc *patternCache) error {
	if p.noCompact {
		return nil
	}
	c := &compactor{p: p, pc: pc, budget: compactBudget}
	c.where, c.units, c.byNode, c.pos = p.reuse.compactIndex(len(p.gpus))
	type bucket struct {
		board  string
		energy v1.EnergyClass
	}
	var order []bucket
	byBucket := map[bucket][]*gpuPlan{}
	for i, g := range p.gpus {
		c.pos[g] = i
		c.byNode[g.fg.ref.Node] = append(c.byNode[g.fg.ref.Node], g)
		us := g.units()
		for _, u := range us {
			c.where[u] = g
			for _, r := range u.reps {
				if ts := c.units[r.tn]; len(ts) == 0 || ts[len(ts)-1] != u {
					c.units[r.tn] = append(ts, u)
				}
			}
		}
		if g.role != v1.RolePool || g.mode != v1.ModeMIG || len(us) == 0 {
			continue
		}
		b := bucket{g.fg.board.Name, us[0].key.energy}
		if _, ok := byBucket[b]; !ok {
			order = append(order, b)
		}
		byBucket[b] = append(byBucket[b], g)
	}
	for _, b := range order {
		gs := byBucket[b]
		if err := c.bucket(gs[0].fg.board, gs); err != nil {
			return err
		}
	}
	return nil
}

// move is one tentative re-placement: unit u to GPU to, with the node uses it reserved.
type move struct {
	u    *unit
	to   *gpuPlan
	node string   // where set was reserved
	set  []string // the node uses the move reserved
	// dest, when set, is the idle GPU on another node that takes to's instances with u: to's
	// node does not take u's way, dest's node takes them all.
	dest *gpuPlan
}

// bucket compacts the MIG GPUs of one board and energy class.
func (c *compactor) bucket(board *gpu.Board, gs []*gpuPlan) error {
	pats, err := c.pc.get(board)
	if err != nil {
		return err
	}
	var idle []*gpuPlan // free GPUs of the board, fleet order
	for _, g := range c.p.gpus {
		if g.role == v1.RoleIdle && g.fg.board == board {
			idle = append(idle, g)
		}
	}
	counts := make(map[*gpuPlan][]int, len(gs)+len(idle))
	for _, g := range gs {
		v := make([]int, len(pats.profiles))
		for _, pi := range g.insts {
			if pi.u != nil {
				v[pats.index(pi.in.Profile)]++
			}
		}
		counts[g] = v
	}
	fill := func(v []int) (float64, float64) {
		var m, k float64
		for i, n := range v {
			m += float64(n) * pats.mem[i]
			k += float64(n) * pats.comp[i]
		}
		return max(m, k), m + k
	}
	room := func(v []int) bool { // some profile still fits
		for i := range v {
			v[i]++
			ok := fits(pats, v)
			v[i]--
			if ok {
				return true
			}
		}
		return false
	}
	var open []*gpuPlan // GPUs with room, fleet order
	for _, g := range gs {
		if room(counts[g]) {
			open = append(open, g)
		}
	}
	np := len(pats.profiles)
	zero := make([]int, len(idle)*np) // their counts, all 0, in one allocation
	for i, g := range idle {
		counts[g] = zero[i*np : (i+1)*np : (i+1)*np]
	}
	sources := slices.Clone(gs)
	slices.SortStableFunc(sources, func(a, b *gpuPlan) int {
		fa, sa := fill(counts[a])
		fb, sb := fill(counts[b])
		return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(sa, sb))
	})
	emptied := map[*gpuPlan]bool{}
	for pass, freed := 0, true; freed && pass < 3; pass++ {
		freed = false
		for _, g := range sources {
			if c.budget <= 0 || c.p.stopped() {
				return nil
			}
			if emptied[g] {
				continue
			}
			moves, ok := c.relocate(g, pats, counts, open, idle, emptied, fill)
			if !ok {
				for i := len(moves) - 1; i >= 0; i-- {
					m := moves[i]
					counts[m.to][pats.index(m.u.c.profile.Name)]--
					c.p.release(m.node, m.set)
				}
				continue
			}
			if err := c.commit(g, board, pats, counts, moves); err != nil {
				return err
			}
			emptied[g] = true
			freed = true
			for _, m := range moves {
				if m.dest != nil { // m.to's instances now run on m.dest
					open = append(open, m.dest)
					idle = append(slices.DeleteFunc(idle, func(h *gpuPlan) bool { return h == m.dest }), m.to)
					emptied[m.to], emptied[m.dest] = true, false
				}
			}
			idle = append(idle, g)
			open = slices.DeleteFunc(open, func(h *gpuPlan) bool { return emptied[h] || !room(counts[h]) })
			slices.SortFunc(open, func(a, b *gpuPlan) int { return cmp.Compare(c.pos[a], c.pos[b]) })
			slices.SortFunc(idle, func(a, b *gpuPlan) int { return cmp.Compare(c.pos[a], c.pos[b]) })
		}
	}
	return nil
}

// relocate tentatively places every instance of g elsewhere, largest first, each on the fullest
// open GPU whose layout and node take it; when no open GPU's node takes an instance's way, on
// the fullest open GPU whose instances, with it, an idle GPU on another node can take (the
// target's instances move there: a GPU for a GPU). It reports false (with the moves made so far,
// for the caller to undo) when one finds no GPU or a redundant tenant would end up on one GPU.
func (c *compactor) relocate(g *gpuPlan, pats *patterns, counts map[*gpuPlan][]int, open, idle []*gpuPlan, emptied map[*gpuPlan]bool,
	fill func([]int) (float64, float64)) ([]move, bool) {
	var us []*unit
	for _, pi := range g.insts {
		if pi.u != nil {
			us = append(us, pi.u)
		}
	}
	slices.SortStableFunc(us, func(a, b *unit) int {
		return cmp.Compare(pats.weight[pats.index(b.c.profile.Name)], pats.weight[pats.index(a.c.profile.Name)])
	})
	var moves []move
	moved := map[*gpuPlan]*gpuPlan{} // target → the idle GPU it moves to in this attempt
	taken := map[*gpuPlan]bool{}     // idle GPUs already chosen in this attempt
	nodeOf := func(h *gpuPlan) string {
		if x, ok := moved[h]; ok {
			return x.fg.ref.Node
		}
		return h.fg.ref.Node
	}
	for _, u := range us {
		i := pats.index(u.c.profile.Name)
		want := map[string]migUse{}
		addInstWant(want, u.c.profile.Name, useOf(u))
		var best *gpuPlan
		bestFill := -1.0
		var fitting []*gpuPlan // fit the layout, node aside
		var fills []float64
		for _, h := range open {
			if h == g || emptied[h] {
				continue
			}
			c.budget--
			v := counts[h]
			v[i]++
			ok := fits(pats, v)
			f, _ := fill(v)
			v[i]--
			if !ok {
				continue
			}
			if c.p.compatible(nodeOf(h), want) {
				if f > bestFill {
					best, bestFill = h, f
				}
			} else if _, gone := moved[h]; !gone {
				fitting, fills = append(fitting, h), append(fills, f)
			}
		}
		if best != nil {
			counts[best][i]++
			node := nodeOf(best)
			moves = append(moves, move{u: u, to: best, node: node, set: c.p.reserve(node, want)})
			continue
		}
		m, ok := c.transplant(u, want, fitting, fills, idle, taken, moves)
		if !ok {
			return moves, false
		}
		counts[m.to][i]++
		moved[m.to], taken[m.dest] = m.dest, true
		moves = append(moves, m)
	}
	dest := map[*unit]*gpuPlan{}
	for _, m := range moves {
		dest[m.u] = m.to
	}
	for _, u := range us {
		for _, r := range u.reps {
			if r.tn.t.Redundancy && c.single(r.tn, dest) {
				return moves, false
			}
		}
	}
	return moves, true
}

// transplant finds, for unit u whose way no open GPU's node takes, the fullest of the fitting
// GPUs whose instances (with those moved to it in this attempt) and u an idle GPU's node takes,
// and reserves them there.
func (c *compactor) transplant(u *unit, want map[string]migUse, fitting []*gpuPlan, fills []float64, idle []*gpuPlan,
	taken map[*gpuPlan]bool, moves []move) (move, bool) {
	idx := make([]int, len(fitting))
	for k := range idx {
		idx[k] = k
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(fills[b], fills[a]) })
	for _, k := range idx {
		h := fitting[k]
		all := c.gpuWant(h)
		for _, m := range moves {
			if m.to == h {
				addInstWant(all, m.u.c.profile.Name, useOf(m.u))
			}
		}
		for key, w := range want {
			if have, set := all[key]; set && have != w {
				all = nil // h itself holds the profile another way
				break
			}
			all[key] = w
		}
		if all == nil {
			continue
		}
		for _, x := range idle {
			if c.budget <= 0 {
				return move{}, false
			}
			c.budget--
			if taken[x] || x.fg.board != h.fg.board || x.fg.ref.Node == h.fg.ref.Node || !c.p.compatible(x.fg.ref.Node, all) {
				continue
			}
			return move{u: u, to: h, node: x.fg.ref.Node, set: c.p.reserve(x.fg.ref.Node, all), dest: x}, true
		}
	}
	return move{}, false
}

// single reports whether tn, on more than one GPU now, would be on one GPU after the moves in
// dest.
func (c *compactor) single(tn *tenant, dest map[*unit]*gpuPlan) bool {
	now, after := map[*gpuPlan]bool{}, map[*gpuPlan]bool{}
	for _, u := range c.units[tn] {
		now[c.where[u]] = true
		if h, ok := dest[u]; ok {
			after[h] = true
		} else {
			after[c.where[u]] = true
		}
	}
	return len(now) > 1 && len(after) == 1
}

// commit carries out the moves: each target GPU is laid out again (gpu.Place on its new
// profile counts) with its old and new instances, and g is freed.
func (c *compactor) commit(g *gpuPlan, board *gpu.Board, pats *patterns, counts map[*gpuPlan][]int, moves []move) error {
	added := map[*gpuPlan][]*unit{}
	var targets []*gpuPlan
	for _, m := range moves {
		if _, ok := added[m.to]; !ok {
			targets = append(targets, m.to)
		}
		added[m.to] = append(added[m.to], m.u)
		c.where[m.u] = m.to
	}
	dest := map[*gpuPlan]*gpuPlan{}
	for _, m := range moves {
		if m.dest != nil {
			dest[m.to] = m.dest
		}
	}
	nodes := []string{g.fg.ref.Node}
	for _, h := range targets {
		queues := map[string][]*unit{}
		for _, pi := range h.insts {
			if pi.u != nil {
				queues[pi.in.Profile] = append(queues[pi.in.Profile], pi.u)
			}
		}
		for _, u := range added[h] {
			queues[u.c.profile.Name] = append(queues[u.c.profile.Name], u)
		}
		h.insts = nil
		on := h
		if x := dest[h]; x != nil {
			on = x
			counts[x], counts[h] = counts[h], make([]int, len(counts[h]))
			h.role, h.mode = v1.RoleIdle, ""
			nodes = append(nodes, x.fg.ref.Node)
		}
		nodes = append(nodes, h.fg.ref.Node)
		if err := c.p.fillMIG(on, board, pats, counts[on], queues, c.pc); err != nil {
			return err
		}
		for _, pi := range on.insts {
			if pi.u != nil {
				c.where[pi.u] = on
			}
		}
	}
	g.insts, g.role, g.mode = nil, v1.RoleIdle, ""
	for i := range counts[g] {
		counts[g][i] = 0
	}
	for _, n := range nodes {
		c.p.nodeUse[n] = c.nodeWant(n)
	}
	return nil
}

// gpuWant is what g's instances ask of its node.
func (c *compactor) gpuWant(g *gpuPlan) map[string]migUse {
	want := map[string]migUse{}
	for _, pi := range g.insts {
		if pi.u != nil {
			addInstWant(want, pi.in.Profile, useOf(pi.u))
		}
	}
	return want
}

// nodeWant is what the GPUs of node ask of it, as the packer reserved it: wholeWant for whole-GPU
// and tensor-parallel units, addInstWant for each MIG instance. After a GPU is freed it replaces
// the node's uses, so that a profile or trust path only the freed GPU used is open again.
func (c *compactor) nodeWant(node string) map[string]migUse {
	want := map[string]migUse{}
	for _, g := range c.byNode[node] {
		if g.whole != nil {
			for k, u := range wholeWant(g.whole) {
				want[k] = u
			}
		}
		for _, pi := range g.insts {
			if pi.u != nil {
				addInstWant(want, pi.in.Profile, useOf(pi.u))
			}
		}
	}
	return want
}

// fits reports whether the profile counts v are within one of the board's maximal patterns, so
// that gpu.Place lays them out.
func fits(ps *patterns, v []int) bool {
	for _, a := range ps.a {
		ok := true
		for i, n := range v {
			if n > a[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
