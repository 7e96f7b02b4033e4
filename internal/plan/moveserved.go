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
// candidates do not fit but where some of those tenants' candidates do. Every served tenant with
// a replica on B's pool GPUs is taken off them. Those whose candidates place every replica on the
// idle GPUs of other boards (their away candidate: the first such in rescue order, which is
// cheapest first but for MPS candidates a node would have to switch to, and fixed fallbacks) are
// moved one at a time, the one that frees the most room on B first (its choice's
// GPU-equivalents there), of equal room the one whose away candidate adds the fewest
// GPU-equivalents, then pool order. Cheapest elsewhere first would move small tenants that free
// little on B onto whole idle GPUs, and those GPUs are the ones a larger tenant needs to leave B
// (cmd/gpupool/testdata/review/random/rnd-211.yaml: no plan at all). Each tries its candidates in rescue order on the idle GPUs of other boards
// and takes the first that fits; after each move tn's choice, its units first, and the tenants
// not moved (their choices as they were) are packed together on B's GPUs with the packer's
// rules, node rules included, and the first set of moves that seats every replica of tn ends
// the step. The plan then serves one tenant more in full and none less, with no more tenants
// moved than that order needed; moved says for each tenant moved where to and why, and for tn
// how it was served. Otherwise every GPU and choice goes back exactly as it was, unmovedServed
// says for tn what was tried, and it reports false. free is brought up to date with the GPUs
// left idle.
func (p *planner) moveServed(tn *tenant, short map[*tenant]bool, free map[string][]*gpuPlan, pc *patternCache) (bool, error) {
	c0 := tn.choice
	if c0 == nil || p.stopped() {
		return false, nil
	}
	b := c0.board.Name
	// the served tenants on B's pool GPUs, in pool order
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
	otherIdle := false
	for ob, gs := range free {
		if ob != b && countFree(gs) > 0 {
			otherIdle = true
		}
	}
	if len(served) == 0 || !otherIdle {
		return false, nil
	}
	// nothing moves unless some served tenant has a candidate on a board with idle GPUs
	away := map[*tenant]*cand{} // each served tenant's first candidate in rescue order off B with idle GPUs
	for _, o := range served {
		for _, c := range p.rescueOrder(o, free) {
			if c.board.Name != b && countFree(free[c.board.Name]) > 0 {
				away[o] = c
				break
			}
		}
	}
	if len(away) == 0 {
		p.unmovedServed[tn] = fmt.Sprintf("none of the %d tenant(s) served in full on %s's pool GPUs has a candidate on another board with idle pool GPUs, so none was moved to make room", len(served), b)
		return false, nil
	}
	held := p.holdAll()
	choices := map[*tenant]*cand{tn: c0}
	for _, o := range served {
		choices[o] = o.choice
	}
	undo := func() {
		p.restoreHeld(held)
		for t, c := range choices {
			t.choice = c
		}
	}
	var newUnits []*unit
	forget := func() {
		for _, u := range newUnits {
			delete(p.blocked, u)
		}
	}
	defer forget()
	p.dropReplicas(tn, nil)
	for _, o := range served {
		p.dropReplicas(o, nil)
	}
	trial := p.freeGPUs()
	// the most room freed on B first; of equal room, the fewest GPU-equivalents added elsewhere
	var order []*tenant
	for _, o := range served {
		if away[o] != nil {
			order = append(order, o)
		}
	}
	slices.SortStableFunc(order, func(x, y *tenant) int {
		return cmp.Or(cmp.Compare(choices[y].cost, choices[x].cost), cmp.Compare(away[x].cost, away[y].cost))
	})
	moved := map[*tenant]*cand{}
	var stuck []string // the tenants with an away candidate none of whose candidates fit
	fits := false
	for _, o := range order {
		for _, c := range p.rescueOrder(o, trial) {
			ob := c.board.Name
			if ob == b || countFree(trial[ob]) == 0 {
				continue
			}
			if p.stopped() {
				undo()
				return false, nil
			}
			units := soloUnits(o, c)
			if room, err := p.roomFor(c, trial[ob], pc); err != nil || room < len(units) {
				if err != nil {
					undo()
					return false, err
				}
				continue
			}
			was := slices.Clone(trial[ob])
			left, err := p.packBucket(units, trial, pc)
			newUnits = append(newUnits, units...)
			if err != nil {
				undo()
				return false, err
			}
			if len(left) == 0 {
				moved[o] = c
				o.choice = c
				break
			}
			p.undoTrial(was, units, trial, ob)
		}
		if moved[o] == nil {
			stuck = append(stuck, o.t.Name)
			continue
		}
		// tn first, then the tenants not moved, on B's GPUs
		units := soloUnits(tn, c0)
		for _, s := range served {
			if moved[s] == nil {
				units = append(units, soloUnits(s, s.choice)...)
			}
		}
		newUnits = append(newUnits, units...)
		was := slices.Clone(trial[b])
		left, err := p.packBucket(units, trial, pc)
		if err != nil {
			undo()
			return false, err
		}
		if len(left) == 0 {
			fits = true
			break
		}
		p.undoTrial(was, units, trial, b)
	}
	if !fits {
		undo()
		var tried []string
		if n := len(moved); n > 0 {
			tried = append(tried, fmt.Sprintf("with %d of them moved onto idle GPUs of other boards, its %s on %s still found no room for all %d replicas", n, c0.label(), b, c0.replicas))
		}
		if len(stuck) > 0 {
			tried = append(tried, fmt.Sprintf("%s found no room on the idle GPUs of other boards", strings.Join(stuck, ", ")))
		}
		p.unmovedServed[tn] = fmt.Sprintf("moving the %d tenant(s) served in full on %s's pool GPUs with a candidate on another board with idle pool GPUs, one at a time, did not make room: %s (all moves undone)",
			len(order), b, strings.Join(tried, "; "))
		return false, nil
	}
	var stayed []*tenant
	for _, o := range served {
		if moved[o] == nil {
			stayed = append(stayed, o)
		}
	}
	tn.choice = c0
	var names []string
	for _, o := range served {
		c := moved[o]
		if c == nil {
			continue
		}
		names = append(names, fmt.Sprintf("%s (to %s on %s)", o.t.Name, c.label(), c.board.Name))
		msg := fmt.Sprintf("moved off %s's pool GPUs (%s on %s, its choice there) to %s on %s, %d replica(s) on idle GPUs of that board, so that %s, short of GPUs with its %s on %s, is served in full there",
			b, choices[o].label(), b, c.label(), c.board.Name, c.replicas, tn.t.Name, c0.label(), b)
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
	p.moved[tn] = fmt.Sprintf("%s on %s found no free GPU (%s) and its other candidates no room on the idle pool GPUs; with %s moved off %s's pool GPUs onto idle GPUs of other boards, %s on %s holds all %d replicas%s",
		c0.label(), b, p.shortWhy(tn, c0), strings.Join(names, ", "), b, c0.label(), b, c0.replicas, stay)
	clear(free)
	maps.Copy(free, p.freeGPUs())
	return true, nil
}

// holdAll saves every GPU of the plan as it is (see heldGPU), idle ones included, for
// restoreHeld.
func (p *planner) holdAll() []heldGPU {
	out := make([]heldGPU, 0, len(p.gpus))
	for _, g := range p.gpus {
		h := heldGPU{g: g, was: *g, reps: map[*unit][]replica{}}
		h.was.insts = slices.Clone(g.insts)
		for _, u := range g.units() {
			h.reps[u] = slices.Clone(u.reps)
		}
		out = append(out, h)
	}
	return out
}
