package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// The rescue onto the free MIG room of pool GPUs already in use (docs/adr/0116-rescue-on-used-mig-room.md).

// rescueOnUsedMIG is the try of the rescue's last pass (rescueUsedMIGPass) for a short tenant
// tn that the steps before left short: the packer and those steps lay MIG instances out on idle
// GPUs only, so a MIG GPU in use keeps the memory slices its layout leaves free. Its MIG
// candidates, its choice first (the replicas left short, its placed ones kept) and then the
// others cheapest first (every replica), try to put each unit on such room of their board: an
// empty instance of the unit's profile on a pool GPU in use, or a new instance at a start the
// board's placement tables allow beside the GPU's instances (gpu.Board.FreeStarts), each existing
// instance kept where it is. A GPU takes the unit only when its units run at the unit's energy
// class (one clock lock a GPU) and its node serves the profile the unit's way (compatible: the
// device plugin's sharing setting and trust path per resource and node, one board per resource).
// Among a GPU's legal starts the one that leaves the most room is taken (bestStart). The first
// candidate that places every unit is kept: tn is then served in full, no other tenant is
// touched, and moved says where. A tenant a step-down trial seats anew (usedMIGTrial, not
// usedMIGServed) tries no kind of its fixedFallback, where its fixed count misses the SLO (ADR
// 0123). When none does, every GPU is as it was. left is the units still
// short: short is tn's replicas among them, which the choice's try places; room is the pass's GPUs
// with room. When it places them it returns what undoes the move (usedMIGMove.undo), nil
// otherwise.
func (p *planner) rescueOnUsedMIG(tn *tenant, short int, room *usedRoom) *usedMIGMove {
	old := tn.choice
	if old == nil || short == 0 {
		return nil
	}
	var mv *usedMIGMove
	try := func(c *cand, n int) bool {
		if c.whole() || c.profile == nil || c.tp > 1 || n <= 0 {
			return false
		}
		if p.stopped() {
			return false
		}
		gs := room.on(p, c.board.Name)
		if len(gs) == 0 {
			return false
		}
		units := shortUnits(tn, c, n)
		placed, was, ok := p.placeOnUsedMIG(units, gs)
		if !ok {
			return false
		}
		mv = &usedMIGMove{tn: tn, old: old, why: p.moved[tn], placed: was}
		if c != old {
			mv.held = p.holding(tn)
			p.dropReplicas(tn, units)
			tn.choice = c
		}
		on := make([]string, len(placed))
		for i, g := range placed {
			on[i] = g.fg.ref.String()
		}
		room.update(c.board.Name)
		switch {
		case c == old && n == old.replicas:
			p.moved[tn] = fmt.Sprintf("%s on %s found no free GPU (%s); its %d replica(s) took free MIG room of pool GPUs already in use (%s), each GPU's instances kept where they were",
				old.label(), old.board.Name, p.shortWhy(tn, old), n, strings.Join(on, ", "))
		case c == old:
			p.moved[tn] = fmt.Sprintf("%s on %s placed %d of its %d replicas, the others found no free GPU (%s); the other %d took free MIG room of pool GPUs already in use (%s), each GPU's instances kept where they were",
				old.label(), old.board.Name, old.replicas-n, old.replicas, p.shortWhy(tn, old), n, strings.Join(on, ", "))
		default:
			p.moved[tn] = fmt.Sprintf("%s on %s found no free GPU (%s); %s on %s holds all %d replicas in free MIG room of pool GPUs already in use (%s), each GPU's instances kept where they were",
				old.label(), old.board.Name, p.shortWhy(tn, old), c.label(), c.board.Name, c.replicas, strings.Join(on, ", "))
		}
		return true
	}
	if try(old, short) {
		return mv
	}
	for _, c := range tn.feasible {
		if c != old && try(c, c.replicas) {
			return mv
		}
	}
	if p.usedMIGTrial[tn] && !p.usedMIGServed[tn] {
		return nil // seated anew in a step's trial: no kind where its fixed count misses the SLO (ADR 0123)
	}
	for _, c := range tn.fixedFallback {
		if c != old && try(c, c.replicas) {
			return mv
		}
	}
	return nil
}

// usedMIGMove is one tenant rescueOnUsedMIG placed: its choice and moved reason before, the
// GPUs that held its replicas before they were taken off (held) and the GPUs it placed units on
// as they were before (placed).
type usedMIGMove struct {
	tn     *tenant
	old    *cand
	why    string
	held   []heldGPU
	placed []heldGPU
}

// undo puts the GPUs, the nodes' uses, the choice and the reason back as they were before the move.
func (m *usedMIGMove) undo(p *planner) {
	p.restoreHeld(m.held)
	p.restoreHeld(m.placed)
	m.tn.choice = m.old
	if m.why == "" {
		delete(p.moved, m.tn)
	} else {
		p.moved[m.tn] = m.why
	}
}

// shortUnits is n replicas of tn on c in units of c's share, as soloUnits lays out c's count.
func shortUnits(tn *tenant, c *cand, n int) []*unit {
	if n == c.replicas {
		return soloUnits(tn, c)
	}
	per := max(1, min(n, c.share))
	var out []*unit
	for n > 0 {
		m := min(per, n)
		u := &unit{key: keyOf(tn, c), c: c, reps: make([]replica, m)}
		for i := range u.reps {
			u.reps[i] = replica{tn: tn}
		}
		out = append(out, u)
		n -= m
	}
	return out
}

// usedRoom is, by board, the pool GPUs in MIG mode with room (usedMIG) during a pass of
// rescueUsedMIGPass: read once per board the pass asks for, and brought up to date after each
// move (a GPU a move filled drops out), so that a short fleet's pass does not read every GPU of
// a board for every candidate of every short tenant.
type usedRoom struct {
	by map[string][]*gpuPlan
}

// on is board's GPUs with room.
func (r *usedRoom) on(p *planner, board string) []*gpuPlan {
	gs, ok := r.by[board]
	if !ok {
		gs = p.usedMIG(board)
		r.by[board] = gs
	}
	return gs
}

// update drops the GPUs of board left without room.
func (r *usedRoom) update(board string) {
	r.by[board] = slices.DeleteFunc(r.by[board], func(g *gpuPlan) bool { return !hasRoom(g) })
}

// usedMIG is board's pool GPUs in MIG mode, in fleet order, whose layout has an empty instance
// or a free memory slice.
func (p *planner) usedMIG(board string) []*gpuPlan {
	var out []*gpuPlan
	for _, g := range p.gpuIdx().byBoard[board] {
		if g.role != v1.RolePool || g.mode != v1.ModeMIG || len(g.insts) == 0 {
			continue
		}
		if hasRoom(g) {
			out = append(out, g)
		}
	}
	return out
}

// hasRoom reports whether g's MIG layout has an empty instance or a memory slice no instance uses.
func hasRoom(g *gpuPlan) bool {
	b := g.fg.board
	used := 0
	for _, pi := range g.insts {
		if pi.u == nil {
			return true
		}
		if pr, err := b.Profile(pi.in.Profile); err == nil {
			used += pr.MemorySlices
		}
	}
	return used < b.MemorySlices
}

// layoutOf is g's MIG layout, its instances in order.
func layoutOf(g *gpuPlan) gpu.Layout {
	l := make(gpu.Layout, len(g.insts))
	for i, pi := range g.insts {
		l[i] = pi.in
	}
	return l
}

// placeOnUsedMIG puts each unit of units on the MIG room of the GPUs gs (see rescueOnUsedMIG),
// the first GPU in order that takes it, and reports the GPUs it used. When a unit finds no room
// every GPU and node use is put back as it was and ok is false; otherwise was holds the GPUs
// used as they were before (heldGPU, for restoreHeld).
func (p *planner) placeOnUsedMIG(units []*unit, gs []*gpuPlan) (used []*gpuPlan, was []heldGPU, ok bool) {
	saved := map[*gpuPlan][]placedInst{}
	var order []*gpuPlan
	undo := func() {
		nodes := map[string]bool{}
		for _, g := range order {
			g.insts = saved[g]
			nodes[g.fg.ref.Node] = true
		}
		p.resetNodeUses(nodes)
	}
	for _, u := range units {
		prof := u.c.profile.Name
		want := map[string]migUse{}
		addInstWant(want, prof, useOf(u))
		done := false
		for _, g := range gs {
			if !sameEnergy(g, u) || !p.compatible(g.fg.ref.Node, want) {
				continue
			}
			i := slices.IndexFunc(g.insts, func(pi placedInst) bool { return pi.u == nil && pi.in.Profile == prof })
			start := -1
			if i < 0 {
				start = bestStart(g.fg.board, layoutOf(g), prof)
				if start < 0 {
					continue
				}
			}
			if _, ok := saved[g]; !ok {
				saved[g] = slices.Clone(g.insts)
				order = append(order, g)
				was = append(was, holdGPU(g))
			}
			if i >= 0 {
				g.insts[i].u = u
			} else {
				g.insts = append(g.insts, placedInst{in: gpu.Instance{Profile: prof, Start: start}, u: u})
				slices.SortStableFunc(g.insts, func(a, b placedInst) int { return cmp.Compare(a.in.Start, b.in.Start) })
			}
			p.reserve(g.fg.ref.Node, want)
			done = true
			break
		}
		if !done {
			undo()
			return nil, nil, false
		}
	}
	for _, g := range order {
		p.notePlaced(g)
	}
	return order, was, true
}

// sameEnergy reports whether g's units all run at u's energy class: a GPU runs at one clock lock.
func sameEnergy(g *gpuPlan, u *unit) bool {
	for _, pi := range g.insts {
		if pi.u != nil && pi.u.key.energy != u.key.energy {
			return false
		}
	}
	return true
}

// bestStart is the start at which an instance of profile added to l leaves the most room, -1
// when no start is legal (gpu.Board.FreeStarts: free memory slices, the profile's count, the
// board's instance and compute limits). Room is compared as gpu.Board.Place compares layouts:
// how many instances of each profile could still be added, the largest profile first; ties go to
// the lowest start.
func bestStart(b *gpu.Board, l gpu.Layout, profile string) int {
	starts, err := b.FreeStarts(l, profile)
	if err != nil || len(starts) == 0 {
		return -1
	}
	if len(starts) == 1 {
		return starts[0]
	}
	best, bestRoom := -1, []int(nil)
	for _, s := range starts {
		r := roomAfter(b, append(slices.Clone(l), gpu.Instance{Profile: profile, Start: s}))
		if best < 0 || slices.Compare(r, bestRoom) > 0 {
			best, bestRoom = s, r
		}
	}
	return best
}

// roomAfter is, for each of b's profiles from the largest (memory slices, then compute), how
// many starts are still free for it beside l.
func roomAfter(b *gpu.Board, l gpu.Layout) []int {
	profs := slices.Clone(b.Profiles)
	slices.SortStableFunc(profs, func(x, y gpu.Profile) int {
		return cmp.Or(cmp.Compare(y.MemorySlices, x.MemorySlices), cmp.Compare(y.ComputeSlices, x.ComputeSlices))
	})
	out := make([]int, len(profs))
	for i, pr := range profs {
		fs, _ := b.FreeStarts(l, pr.Name)
		out[i] = len(fs)
	}
	return out
}

// rescueUsedMIGPass is the rescue's last pass: the tenants of short not yet served (done) try
// the free MIG room of pool GPUs in use (rescueOnUsedMIG), those that hold placed replicas first,
// each group in order. It comes after every other step, the move of served tenants included, so
// that the room it takes is room no other step wanted. The pass is kept only when it leaves no
// tenant short that holds placed replicas: at the first such tenant that finds no room, every
// move it made is undone (usedMIGMove.undo) and the pass ends. The release of short tenants
// (releaseShort) may give up such a tenant's replicas to serve the others in full, which may
// leave more GPUs idle than their rescue onto room of used GPUs (the review's rnd-303: a partly
// placed mixtral on 8 H200s, released, let a llama-3.2-1b onto the H200s' MIG room, 17 GPUs used
// where the pass kept both and used 24). For the same reason it seats no new tenant within the
// release's repackings (a tenant released): served there, the tenants it seats made an earlier
// release count as serving more, kept in place of the one that left more GPUs idle (review 13's
// d1: 7 GPUs used for the same tenants where 6 were). It runs in full in settle's rescue alone:
// within the repackings of the steps after it (usedMIGAgain: the step down and up of fixed
// counts, the release and its readmission) it seats again only the tenants it served there
// (usedMIGServed), none undone. Run in full there, it seated tenants in the step down's trials
// that the release's repackings then lost, so that no release was kept (genscale.py 4000 2000 1
// fixed: 3,694 tenants served where 3,797; ADR 0121). Within a trial of the step down
// (trialFixed) it also seats the tenants short before the trial (usedMIGTrial), recorded in
// usedMIGNew: the trial does not count them as its gain, and they join usedMIGServed when the
// step is kept (ADR 0123). Once the release and its readmission are done, one more packing
// (seatShortInUsedMIG) lets it seat the tenants still short, its own first, kept only when it
// serves more (ADR 0124). It returns the units still without a GPU.
func (p *planner) rescueUsedMIGPass(short []*tenant, done map[*tenant]bool, left []*unit) []*unit {
	again := p.usedMIGAgain || len(p.released) > 0 // a step after settle's rescue
	if p.noUsedMIGRescue || len(left) == 0 || again && len(p.usedMIGServed) == 0 && len(p.usedMIGTrial) == 0 {
		return left
	}
	holds := map[*tenant]bool{}
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		for u := range g.eachUnit {
			for _, r := range u.reps {
				holds[r.tn] = true
			}
		}
	}
	count := map[*tenant]int{} // each tenant's replicas in left
	for _, u := range left {
		for _, r := range u.reps {
			count[r.tn]++
		}
	}
	order := make([]*tenant, 0, len(short))
	for _, first := range []bool{true, false} {
		for _, tn := range short {
			if !done[tn] && holds[tn] == first {
				order = append(order, tn)
			}
		}
	}
	if again && len(p.usedMIGTrial) > 0 && p.usedMIGLast {
		// After the release its own first: a tenant short takes no room one it served needs
		// (ADR 0124).
		slices.SortStableFunc(order, func(a, b *tenant) int {
			return cmp.Compare(ownFirst(p.usedMIGServed[a]), ownFirst(p.usedMIGServed[b]))
		})
	}
	room := &usedRoom{by: map[string][]*gpuPlan{}}
	var moves []*usedMIGMove
	for _, tn := range order {
		if p.stopped() {
			break
		}
		if again && !p.usedMIGServed[tn] && !p.usedMIGTrial[tn] {
			continue
		}
		mv := p.rescueOnUsedMIG(tn, count[tn], room)
		if mv == nil && holds[tn] && !again {
			for i := len(moves) - 1; i >= 0; i-- {
				moves[i].undo(p)
			}
			return left
		}
		if mv != nil {
			moves = append(moves, mv)
		}
	}
	if len(moves) == 0 {
		return left
	}
	for _, mv := range moves {
		done[mv.tn] = true
		if !again && p.usedMIGServed != nil {
			p.usedMIGServed[mv.tn] = true
		}
		if again && p.usedMIGTrial[mv.tn] && !p.usedMIGServed[mv.tn] {
			p.usedMIGNew[mv.tn] = true
		}
	}
	return dropDone(left, done)
}

// ownFirst ranks the tenants the pass served before (own) ahead of the others.
func ownFirst(own bool) int {
	if own {
		return 0
	}
	return 1
}
