package plan

import (
	"cmp"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// compactBudget bounds the compaction's work: the target GPUs it looks at, over all sources.
const compactBudget = 200_000

// compactor is one compaction pass over the packed MIG GPUs.
type compactor struct {
	p      *planner
	pc     *patternCache
	where  map[*unit]*gpuPlan
	units  map[*tenant][]*unit
	byNode map[string][]*gpuPlan
	budget int
}

// compact re-places the MIG instances of the least-filled MIG GPUs into free room on other GPUs
// of the same board and energy class, and frees a GPU when all of its instances found room.
// Packing class by class (packMIG) leaves GPUs part-empty: a GPU with one shared 3g.40gb has
// room for two unshared 1g.20gb of another class that the class's own bins did not use. A move
// must keep the target's layout legal (its profile counts stay within one of the board's
// maximal patterns, and gpu.Place lays them out), keep the node's one way per profile, trust
// path and sharing strategy (compatible, as the packer checks), and not leave a redundant
// tenant on one GPU when it was on several. A GPU is freed only when every instance moves;
// otherwise nothing moves. Sources are tried least-filled first, each instance going to the
// fullest GPU that takes it; the work is bounded by compactBudget.
func (p *planner) compact(pc *patternCache) error {
	if p.noCompact {
		return nil
	}
	c := &compactor{p: p, pc: pc, where: map[*unit]*gpuPlan{}, units: map[*tenant][]*unit{}, byNode: map[string][]*gpuPlan{},
		budget: compactBudget}
	type bucket struct {
		board  string
		energy v1.EnergyClass
	}
	var order []bucket
	byBucket := map[bucket][]*gpuPlan{}
	for _, g := range p.gpus {
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
	u   *unit
	to  *gpuPlan
	set []string
}

// bucket compacts the MIG GPUs of one board and energy class.
func (c *compactor) bucket(board *gpu.Board, gs []*gpuPlan) error {
	pats, err := c.pc.get(board)
	if err != nil {
		return err
	}
	counts := map[*gpuPlan][]int{}
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
			moves, ok := c.relocate(g, pats, counts, open, emptied, fill)
			if !ok {
				for i := len(moves) - 1; i >= 0; i-- {
					m := moves[i]
					counts[m.to][pats.index(m.u.c.profile.Name)]--
					c.p.release(m.to.fg.ref.Node, m.set)
				}
				continue
			}
			if err := c.commit(g, board, pats, counts, moves); err != nil {
				return err
			}
			emptied[g] = true
			freed = true
			open = slices.DeleteFunc(open, func(h *gpuPlan) bool { return h == g || !room(counts[h]) })
		}
	}
	return nil
}

// relocate tentatively places every instance of g elsewhere, largest first, each on the fullest
// open GPU whose layout and node take it. It reports false (with the moves made so far, for the
// caller to undo) when one finds no GPU or a redundant tenant would end up on one GPU.
func (c *compactor) relocate(g *gpuPlan, pats *patterns, counts map[*gpuPlan][]int, open []*gpuPlan, emptied map[*gpuPlan]bool,
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
	for _, u := range us {
		i := pats.index(u.c.profile.Name)
		want := map[string]migUse{}
		addInstWant(want, u.c.profile.Name, useOf(u))
		var best *gpuPlan
		bestFill := -1.0
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
			if ok && f > bestFill && c.p.compatible(h.fg.ref.Node, want) {
				best, bestFill = h, f
			}
		}
		if best == nil {
			return moves, false
		}
		counts[best][i]++
		moves = append(moves, move{u: u, to: best, set: c.p.reserve(best.fg.ref.Node, want)})
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
		if err := c.p.fillMIG(h, board, pats, counts[h], queues, c.pc); err != nil {
			return err
		}
	}
	g.insts, g.role, g.mode = nil, v1.RoleIdle, ""
	for i := range counts[g] {
		counts[g][i] = 0
	}
	c.p.nodeUse[g.fg.ref.Node] = c.nodeWant(g.fg.ref.Node)
	return nil
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
