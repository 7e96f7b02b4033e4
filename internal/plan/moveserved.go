package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Moving served tenants to seat a short one (docs/adr/0072-move-served-tenants.md).

// moveServed is the rescue's last try for a short tenant tn while pool GPUs are idle: its choice's
// board B is full of tenants served in full, and the idle GPUs are on other boards where tn's
// candidates do not fit but where some of those tenants' candidates do. searchMoves takes every
// served tenant with a replica on B's pool GPUs off them and looks for a set of them to move
// onto the idle GPUs of other boards, each with one of its candidates, such that tn's choice, its
// units first, and the tenants not moved (their choices as they were) fit B's GPUs, packed with
// the packer's rules, node rules included. Its first set is the one found one at a time (the
// most room freed on B first, each tenant's first candidate that fits, stopping at the first set
// that seats tn); the search then tries, within moveTries packings, other candidates of the
// tenants moved and leaving tenants on B, and keeps the set that leaves the most pool GPUs idle
// (of as many, the fewest moved). The same search, within moveTries packings each, is made for
// tn's cheapest other candidates (moveCands in all), each on its own board; a set found there is
// kept only when it leaves more GPUs idle. The best set is then made again from the plan as it
// was. The plan serves one tenant more in full and none less; moved says for each tenant moved
// where to and why, and for tn how it was served. When no set is found every GPU and choice
// goes back exactly as it was, unmovedServed says for tn what the one-at-a-time pass of its
// choice tried, and it reports false. free is brought up to date with the GPUs left idle.
func (p *planner) moveServed(tn *tenant, short map[*tenant]bool, free map[string][]*gpuPlan, pc *patternCache) (bool, error) {
	c0 := tn.choice
	if c0 == nil || p.stopped() {
		return false, nil
	}
	if p.moveSpent() {
		p.moveSkipped++
		p.unmovedServed[tn] = fmt.Sprintf("served tenants were not tried off %s's pool GPUs to make room: the %d packings the rescue gives the move of served tenants were spent on the short tenants before it", c0.board.Name, p.movePass())
		return false, nil
	}
	// the short tenant's choice first, then its other candidates cheapest first (rescue order)
	cands := []*cand{c0}
	for _, c := range p.rescueOrder(tn, free) {
		if len(cands) == moveCands || p.noMoveSearch {
			break
		}
		if c != c0 {
			cands = append(cands, c)
		}
	}
	// the GPUs are saved only once a search or the replay is about to change them: a search that
	// ends before it drops a replica leaves every GPU as it was, and saving and restoring the
	// whole fleet for it made the rescue's cost grow with short tenants times GPUs. Only the
	// GPUs that can change are saved (holdMoves), each once: those of the tenants a search or
	// the replay takes off, and for the replay the idle ones (a search undoes each of its
	// packings, undoTrial, the replay does not). Every search and the replay start from the plan
	// as it was, so a GPU saved later is saved as it was too.
	var held []heldGPU
	holding := false
	saved := make([]bool, len(p.gpus))
	hold := func(ts []*tenant, idle bool) {
		holding = true
		held = p.holdMoves(ts, idle, held, saved)
	}
	choices := make([]*cand, len(p.tenants))
	for i, t := range p.tenants {
		choices[i] = t.choice
	}
	undo := func() {
		if holding {
			p.restoreHeld(held)
		}
		for i, t := range p.tenants {
			t.choice = choices[i]
		}
	}
	var newUnits []*unit
	defer func() {
		for _, u := range newUnits {
			delete(p.blocked, u)
		}
	}()
	var first, best *moveResult
	for i, c := range cands {
		r, err := p.searchMoves(tn, c, short, free, pc, i == 0, best, &newUnits, hold)
		undo()
		if err != nil {
			return false, err
		}
		if i == 0 {
			first = r
		}
		if r.better(best) {
			best = r
		}
		if p.stopped() {
			return false, nil
		}
		if p.moveSpent() {
			break
		}
	}
	if best == nil {
		p.unmovedServed[tn] = first.why
		return false, nil
	}
	hold(append([]*tenant{tn}, best.served...), true)
	ok, err := p.replayMoves(tn, best, free, pc, &newUnits)
	if err != nil || !ok {
		undo()
		if err == nil && best != first.greedy && first.greedy != nil {
			// the packings laid out otherwise than in the search: the first set found instead
			best = first.greedy
			if ok, err = p.replayMoves(tn, best, free, pc, &newUnits); !ok {
				undo()
			}
		}
		if err != nil || !ok {
			return false, err
		}
	}
	c := best.c
	b := c.board.Name
	var stayed []*tenant
	for _, o := range best.served {
		if best.moved(o) == nil {
			stayed = append(stayed, o)
		}
	}
	seat := "so that %[1]s, short of GPUs with its %[2]s on %[3]s, is served in full there"
	if c != c0 {
		seat = "so that %[1]s, short of GPUs with its %[4]s on %[5]s, is served in full with %[2]s on %[3]s"
	}
	var names []string
	for _, o := range best.served {
		oc := best.moved(o)
		if oc == nil {
			continue
		}
		was := choices[slices.Index(p.tenants, o)]
		names = append(names, fmt.Sprintf("%s (to %s on %s)", o.t.Name, oc.label(), oc.board.Name))
		msg := fmt.Sprintf("moved off %s's pool GPUs (%s on %s, its choice there) to %s on %s, %d replica(s) on idle GPUs of that board, ",
			b, was.label(), b, oc.label(), oc.board.Name, oc.replicas) +
			fmt.Sprintf(seat, tn.t.Name, c.label(), b, c0.label(), c0.board.Name)
		if p.moved[o] != "" {
			msg = p.moved[o] + "; then " + msg
		}
		p.moved[o] = msg
	}
	stay := ""
	if len(stayed) > 0 {
		var sn []string
		for _, o := range stayed {
			sn = append(sn, o.t.Name)
		}
		stay = fmt.Sprintf(", packed again there with %s", strings.Join(sn, ", "))
	}
	other := ""
	if c != c0 {
		other = fmt.Sprintf(" (its candidate needing the fewest GPUs once served tenants move, of the %d tried)", len(cands))
	}
	head := fmt.Sprintf("%s on %s found no free GPU (%s) and its other candidates no room on the idle pool GPUs", c0.label(), c0.board.Name, p.shortWhy(tn, c0))
	if p.raising {
		// a confirmation's raise (raiseByMoves): the tenant was served; its raised count found no
		// room when the plan was chosen and packed again, and its other candidates were not tried
		// on idle GPUs first
		head = fmt.Sprintf("%s on %s, raised to %d replicas after the simulation's runs found it short, had no room for the raise when the plan was chosen and packed again", c0.label(), c0.board.Name, c0.replicas)
	}
	p.moved[tn] = fmt.Sprintf("%s; with %s moved off %s's pool GPUs onto idle GPUs of other boards, %s on %s holds all %d replicas%s%s",
		head, strings.Join(names, ", "), b, c.label(), b, c.replicas, stay, other)
	clear(free)
	maps.Copy(free, p.freeGPUs())
	return true, nil
}

const (
	// moveCands is how many candidates of a short tenant the move of served tenants tries: its
	// choice and the cheapest others.
	moveCands = 4
	// moveTries bounds the packings a search of moves makes past the first set found one at a
	// time (or, for a candidate other than the short tenant's choice, in all).
	moveTries = 64
	// moveFits is how many candidates that fit a served tenant's move tries, cheapest first.
	moveFits = 3
	// moveBudget bounds the packings the move of served tenants makes in one pass of the rescue
	// (or one confirmation's raise), all short tenants together (ADR 0080), in a pool of at
	// most moveScaleTenants tenants; a larger pool's budget is that much smaller (movePass).
	moveBudget = 4096
	// moveScaleTenants is the pool size above which a pass's budget of packings shrinks in
	// proportion to the tenants (ADR 0110): each packing packs a board's served tenants again,
	// so that a pass's work stays about moveBudget packings of a pool of this size.
	moveScaleTenants = 1000
)

// movePass is the packings the move of served tenants may make in one pass of the rescue:
// moveBudget in a pool of at most moveScaleTenants tenants, moveBudget × moveScaleTenants /
// tenants above (1,024 for 4,000 tenants, 204 for 20,000), at least moveTries.
func (p *planner) movePass() int {
	n := len(p.tenants)
	if n <= moveScaleTenants {
		return moveBudget
	}
	return max(moveTries, moveBudget*moveScaleTenants/n)
}

// moveSpent reports whether the move of served tenants has made its movePass packings in this
// pass of the rescue.
func (p *planner) moveSpent() bool { return p.moveUsed >= p.movePass() }

// movePacked counts one packing of the move of served tenants against movePass.
func (p *planner) movePacked() {
	p.moveUsed++
	p.movePackings++
	p.moveMost = max(p.moveMost, p.moveUsed)
}

// moveStep is one served tenant moved, with the candidate it takes.
type moveStep struct {
	o *tenant
	c *cand
}

// moveResult is a set of moves that seats the short tenant with candidate c on c's board:
// served are the tenants served in full on that board's pool GPUs, moves those moved in order,
// idle the pool GPUs left idle after. why says, for a search that found none, what was tried;
// greedy is the set found one at a time (first in the search).
type moveResult struct {
	c      *cand
	served []*tenant
	moves  []moveStep
	idle   int
	ok     bool
	why    string
	greedy *moveResult
}

func (r *moveResult) moved(o *tenant) *cand {
	for _, m := range r.moves {
		if m.o == o {
			return m.c
		}
	}
	return nil
}

// better reports whether r seats the short tenant and leaves more pool GPUs idle than best, or
// as many with fewer tenants moved.
func (r *moveResult) better(best *moveResult) bool {
	switch {
	case r == nil || !r.ok:
		return false
	case best == nil:
		return true
	}
	return r.idle > best.idle || r.idle == best.idle && len(r.moves) < len(best.moves)
}

// servedOn is the tenants served in full with a replica on board b's pool GPUs, in pool order,
// but tn and the short ones.
func (p *planner) servedOn(b string, tn *tenant, short map[*tenant]bool) []*tenant {
	on := map[*tenant]bool{}
	for _, g := range p.gpus {
		if g.role != v1.RolePool || g.fg.board.Name != b {
			continue
		}
		for _, u := range g.units() {
			for _, r := range u.reps {
				on[r.tn] = true
			}
		}
	}
	var served []*tenant
	for _, o := range p.tenants {
		if on[o] && o != tn && !short[o] && servedInFull(o) {
			served = append(served, o)
		}
	}
	return served
}

// searchMoves looks for moves of served tenants off c's board B onto idle GPUs of other boards
// that seat tn's candidate c in full on B. The tenants that can move are tried in one order,
// the most room freed on B first (their choice's GPU-equivalents there), of equal room the one
// whose first candidate elsewhere adds the fewest GPU-equivalents, then pool order; a depth-first
// search takes, for each in turn, one of its first moveFits candidates that fit (rescue order)
// or leaves it on B, and after each move packs c, its units first, with the tenants not moved
// on B's GPUs. A set that seats c ends its branch. With greedy the first branch is the set found
// one at a time (each tenant its first candidate that fits), searched in full as before; every
// other packing counts against moveTries. A branch that can no longer leave more GPUs idle than
// best is cut. It returns the set that leaves the most pool GPUs idle (nil when it found none,
// but for greedy, whose why then says what was tried) and leaves the GPUs changed: it calls
// hold with the tenants it takes off before it first changes them, and the caller restores them.
func (p *planner) searchMoves(tn *tenant, c *cand, short map[*tenant]bool, free map[string][]*gpuPlan, pc *patternCache, greedy bool, best *moveResult, newUnits *[]*unit, hold func([]*tenant, bool)) (*moveResult, error) {
	b := c.board.Name
	served := p.servedOn(b, tn, short)
	otherIdle := false
	for ob, gs := range free {
		if ob != b && countFree(gs) > 0 {
			otherIdle = true
		}
	}
	out := &moveResult{c: c, served: served}
	if len(served) == 0 || !otherIdle {
		return out, nil
	}
	// nothing moves unless some served tenant has a candidate on a board with idle GPUs
	away := map[*tenant]*cand{} // each served tenant's first candidate in rescue order off B with idle GPUs
	idle := idleCounts(free)
	offB := func(oc *cand) bool { return oc.board.Name != b && idle[oc.board.Name] > 0 }
	for _, o := range served {
		if oc := p.firstInRescueOrder(o, free, offB); oc != nil {
			away[o] = oc
		}
	}
	if len(away) == 0 {
		out.why = fmt.Sprintf("none of the %d tenant(s) served in full on %s's pool GPUs has a candidate on another board with idle pool GPUs, so none was moved to make room", len(served), b)
		return out, nil
	}
	off := append([]*tenant{tn}, served...)
	hold(off, false)
	p.dropAll(off)
	trial := p.freeGPUs()
	var order []*tenant
	for _, o := range served {
		if away[o] != nil {
			order = append(order, o)
		}
	}
	slices.SortStableFunc(order, func(x, y *tenant) int {
		return cmp.Or(cmp.Compare(y.choice.cost, x.choice.cost), cmp.Compare(away[x].cost, away[y].cost))
	})
	var (
		path       []moveStep
		stuck      []string // on the first branch, the tenants none of whose candidates fit
		greedyMove int      // on the first branch, the tenants moved
		tries      int
		found      *moveResult
	)
	bestIdle := func() int {
		switch {
		case found != nil:
			return found.idle
		case best != nil:
			return best.idle
		}
		return -1
	}
	isMoved := func(o *tenant) bool {
		return slices.ContainsFunc(path, func(m moveStep) bool { return m.o == o })
	}
	// seats reports whether c, its units first, and the tenants not moved fit B's GPUs; it
	// records the set when it does and undoes the packing.
	seats := func(first bool) (bool, error) {
		units := soloUnits(tn, c)
		for _, s := range served {
			if !isMoved(s) {
				units = append(units, soloUnits(s, s.choice)...)
			}
		}
		*newUnits = append(*newUnits, units...)
		was := slices.Clone(trial[b])
		left, err := p.packBucket(units, trial, pc)
		tries++
		p.movePacked()
		if err != nil {
			return false, err
		}
		ok := len(left) == 0
		if ok {
			r := &moveResult{c: c, served: served, moves: slices.Clone(path), idle: countIdle(trial), ok: true}
			if found == nil && first {
				out.greedy = r
			}
			if r.better(found) {
				found = r
			}
		}
		p.undoTrial(was, units, trial, b)
		return ok, nil
	}
	var rec func(i int, first bool) error
	rec = func(i int, first bool) error {
		if i == len(order) {
			if first {
				greedyMove = len(path)
			}
			return nil
		}
		if p.stopped() || p.moveSpent() || !first && (tries >= moveTries || p.noMoveSearch) {
			return nil
		}
		o := order[i]
		fit := 0
		for _, oc := range p.rescueOrder(o, trial) {
			ob := oc.board.Name
			if ob == b || countFree(trial[ob]) == 0 {
				continue
			}
			if p.stopped() || p.moveSpent() || fit == moveFits || !(first && fit == 0) && (tries >= moveTries || p.noMoveSearch) {
				break
			}
			units := soloUnits(o, oc)
			if room, err := p.roomFor(oc, trial[ob], pc); err != nil || room < len(units) {
				if err != nil {
					return err
				}
				continue
			}
			was := slices.Clone(trial[ob])
			left, err := p.packBucket(units, trial, pc)
			tries++
			p.movePacked()
			*newUnits = append(*newUnits, units...)
			if err != nil {
				return err
			}
			if len(left) > 0 {
				p.undoTrial(was, units, trial, ob)
				continue
			}
			on := first && fit == 0 // still on the first branch
			fit++
			path = append(path, moveStep{o, oc})
			// a packing of B only takes idle GPUs: a branch with no more idle than the best is cut
			if on || countIdle(trial) > bestIdle() {
				ok, err := seats(on)
				if err != nil {
					return err
				}
				if !ok {
					if err := rec(i+1, on); err != nil {
						return err
					}
				}
			}
			path = path[:len(path)-1]
			p.undoTrial(was, units, trial, ob)
		}
		if first && fit == 0 {
			stuck = append(stuck, o.t.Name)
		}
		// o stays on B
		return rec(i+1, first && fit == 0)
	}
	if err := rec(0, greedy); err != nil {
		return nil, err
	}
	if found != nil {
		found.greedy = out.greedy
		return found, nil
	}
	if !greedy {
		return out, nil
	}
	var tried []string
	if greedyMove > 0 {
		tried = append(tried, fmt.Sprintf("with %d of them moved onto idle GPUs of other boards, its %s on %s still found no room for all %d replicas", greedyMove, c.label(), b, c.replicas))
	}
	if len(stuck) > 0 {
		tried = append(tried, fmt.Sprintf("%s found no room on the idle GPUs of other boards", strings.Join(stuck, ", ")))
	}
	out.why = fmt.Sprintf("moving the %d tenant(s) served in full on %s's pool GPUs with a candidate on another board with idle pool GPUs, one at a time, did not make room: %s (all moves undone)",
		len(order), b, strings.Join(tried, "; "))
	if p.moveSpent() {
		out.why += fmt.Sprintf("; the search stopped there, at the %d packings the rescue gives the move of served tenants", p.movePass())
	}
	return out, nil
}

// replayMoves makes the moves of r from the plan as it was before the search: tn's and the
// served tenants' replicas off, each move packed in order, then r's candidate of tn and the
// tenants not moved on its board. It reports whether every replica was placed (the search's
// packings laid out again); the caller restores the GPUs when not.
func (p *planner) replayMoves(tn *tenant, r *moveResult, free map[string][]*gpuPlan, pc *patternCache, newUnits *[]*unit) (bool, error) {
	p.dropAll(append([]*tenant{tn}, r.served...))
	trial := p.freeGPUs()
	for _, m := range r.moves {
		units := soloUnits(m.o, m.c)
		*newUnits = append(*newUnits, units...)
		left, err := p.packBucket(units, trial, pc)
		if err != nil || len(left) > 0 {
			return false, err
		}
		m.o.choice = m.c
	}
	units := soloUnits(tn, r.c)
	for _, s := range r.served {
		if r.moved(s) == nil {
			units = append(units, soloUnits(s, s.choice)...)
		}
	}
	*newUnits = append(*newUnits, units...)
	left, err := p.packBucket(units, trial, pc)
	if err != nil || len(left) > 0 {
		return false, err
	}
	tn.choice = r.c
	return true, nil
}

// holdMoves adds to held, for restoreHeld, the GPUs that taking the tenants of ts off and
// packing moves can change and that saved (by position in the fleet) does not mark yet, as they
// are (see heldGPU): the pool GPUs that hold a replica of a tenant of ts (dropAll takes them
// off) and, with idle, the idle ones (packBucket takes only those, from freeGPUs). No other GPU
// changes in a search or a replay of moves; a search, which undoes each packing as it goes
// (undoTrial), needs no idle GPU saved.
func (p *planner) holdMoves(ts []*tenant, idle bool, held []heldGPU, saved []bool) []heldGPU {
	in := make(map[*tenant]bool, len(ts))
	for _, t := range ts {
		in[t] = true
	}
	for i, g := range p.gpus {
		if saved[i] {
			continue
		}
		switch g.role {
		case v1.RoleIdle:
			if !idle {
				continue
			}
		case v1.RolePool:
			off := false
			for u := range g.eachUnit {
				if slices.ContainsFunc(u.reps, func(r replica) bool { return in[r.tn] }) {
					off = true
					break
				}
			}
			if !off {
				continue
			}
		default:
			continue
		}
		saved[i] = true
		held = append(held, holdGPU(g))
	}
	return held
}

// holdAll saves every GPU of the plan as it is (see heldGPU), idle ones included, for
// restoreHeld.
func (p *planner) holdAll() []heldGPU {
	out := make([]heldGPU, 0, len(p.gpus))
	for _, g := range p.gpus {
		out = append(out, holdGPU(g))
	}
	return out
}
