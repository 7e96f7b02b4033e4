package plan

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// unspread reports whether tn.infeas holds spreadRedundant's reason that its replicas share one
// GPU, and where.
func unspread(tn *tenant) int {
	return slices.IndexFunc(tn.infeas, func(r v1.Reason) bool {
		return r.Code == v1.ReasonRedundancy && strings.HasPrefix(r.Message, "all ")
	})
}

// vacateForSpread keeps the promise of redundancy (a replica on another GPU) where the packing
// left a redundant tenant's replicas on one GPU because no other GPU of its board had room: a
// GPU of that board whose one whole-GPU unit holds every replica of one other tenant is freed by
// moving that tenant to another of its feasible candidates, on another board, whose replicas all
// fit idle pool GPUs there (packed with the packer's rules, cheapest candidate first), and one
// replica of the redundant tenant then goes to the freed GPU (spreadTo). The plan uses one GPU
// more: the redundant tenant's spread is kept at the cost of that GPU. The moved tenant's
// ComputeBound reason says why it runs on the dearer candidate (moved). When the freed GPU does
// not take the replica after all (a node rule), the move is undone. A tenant still on one GPU
// gets its reason completed with the idle GPUs and tenants that were considered. Where no GPU
// can be freed, the redundant tenant itself may move to another of its candidates (relocate).
func (p *planner) vacateForSpread() {
	for _, tn := range p.tenants {
		i := unspread(tn)
		if i < 0 || tn.choice == nil {
			continue
		}
		home, from, _ := p.soleGPU(tn)
		if home == nil {
			continue
		}
		freed, x, tried := p.vacate(tn, home, from)
		if freed != nil {
			dropUnspread(tn)
			p.noteMoved(x, fmt.Sprintf("%s on %s, cheaper, ran alone on %s, which was freed for a replica of %s (redundancy: a replica on another GPU, and no other %s GPU had room for it)",
				tried, home.fg.board.Name, freed.fg.ref, tn.t.Name, home.fg.board.Name))
			continue
		}
		old, why := p.relocate(tn)
		if why == "" {
			dropUnspread(tn)
			cheaper := ""
			if old.cost < tn.choice.cost {
				cheaper = ", cheaper,"
			}
			p.noteMoved(tn, fmt.Sprintf("%s on %s%s held all its replicas on %s, and no other %s GPU had room for one or could be freed for it (redundancy: a replica on another GPU), so it moved to %s, which had idle pool GPUs, and runs there on distinct GPUs",
				old.label(), home.fg.board.Name, cheaper, home.fg.ref, home.fg.board.Name, tn.choice.board.Name))
			continue
		}
		if why != "-" {
			tried += "; " + why
		}
		tn.infeas = slices.Clone(tn.infeas) // the packings kept share its array
		tn.infeas[i].Message += "; " + tried
	}
}

// dropUnspread takes spreadRedundant's reasons that tn's replicas share one GPU off tn.
func dropUnspread(tn *tenant) {
	tn.infeas = slices.Clone(tn.infeas) // the packings kept share its array
	for i := unspread(tn); i >= 0; i = unspread(tn) {
		tn.infeas = slices.Delete(tn.infeas, i, i+1)
	}
	if len(tn.infeas) == 0 {
		tn.infeas = nil
	}
}

// noteMoved adds why to what tn's ComputeBound reason says of its move off a cheaper candidate.
func (p *planner) noteMoved(tn *tenant, why string) {
	if p.moved == nil {
		p.moved = map[*tenant]string{}
	}
	p.moved[tn] += why
}

// relocate keeps the promise of redundancy where no GPU of tn's board could be freed for it
// (vacate): tn itself moves to another of its feasible candidates on a board with idle pool GPUs
// (cheapest first, not one an earlier packing ruled out), whose replicas the packer's rules put
// on those idle GPUs (packBucket) and, when they land on one, spread to another GPU of that board
// (spreadTo: one more MIG instance on a GPU with room, or another idle GPU). Its old replicas
// then leave home. It returns tn's old candidate and "" when tn moved; else what was considered,
// or "-" when no pool GPU is idle (vacate said so).
func (p *planner) relocate(tn *tenant) (*cand, string) {
	free := p.freeGPUs()
	if len(free) == 0 {
		return nil, "-"
	}
	old := tn.choice
	var olds []*unit // the units that hold tn's replicas now
	for _, g := range p.gpus {
		for _, u := range g.units() {
			if holds(u, tn) {
				olds = append(olds, u)
			}
		}
	}
	pc := newPatternCache()
	var tried []string
	for _, c := range tn.feasible {
		if c == old || c.replicas < 2 || countFree(free[c.board.Name]) == 0 || p.forbidden(tn, c) {
			continue
		}
		tried = append(tried, fmt.Sprintf("%d × %s on %s", c.replicas, c.label(), c.board.Name))
		units, was, ok := p.trialPack(tn, c, free, pc)
		if !ok {
			continue
		}
		if g, u := p.soleGPUOf(units); g != nil && !p.spreadTo(tn, u, g) {
			p.undoTrial(was, units, free, c.board.Name)
			continue
		}
		var keep []*unit
		for _, g := range p.gpus {
			for _, u := range g.units() {
				if holds(u, tn) && !slices.Contains(olds, u) {
					keep = append(keep, u)
				}
			}
		}
		p.dropReplicas(tn, keep)
		tn.choice = c
		return old, ""
	}
	if len(tried) == 0 {
		return nil, "and it has no other candidate on a board with idle pool GPUs"
	}
	return nil, "and none of its other candidates on boards with idle pool GPUs (" + strings.Join(tried, ", ") + ") has its replicas fit them on distinct GPUs"
}

// vacate frees a GPU of home's board for one of tn's replicas (see vacateForSpread) and puts
// the replica from unit from there. It returns the GPU freed and the tenant moved with its old
// candidate's label, or nil and what was considered.
func (p *planner) vacate(tn *tenant, home *gpuPlan, from *unit) (*gpuPlan, *tenant, string) {
	board := home.fg.board
	var idle []string
	for _, g := range p.gpus {
		if g.role == v1.RoleIdle {
			idle = append(idle, fmt.Sprintf("%s (%s)", g.fg.ref, g.fg.board.Name))
		}
	}
	if len(idle) == 0 {
		return nil, nil, "no pool GPU is left idle"
	}
	if from.c.tp > 1 || from.c.board != board {
		return nil, nil, fmt.Sprintf("the idle pool GPUs (%s) are of other boards", strings.Join(idle, ", "))
	}
	var alone []string
	pc := newPatternCache()
	for _, g := range p.gpus {
		u := g.whole
		if g == home || g.role != v1.RolePool || g.fg.board != board || u == nil || len(u.reps) == 0 || u.c.tp > 1 {
			continue
		}
		x := u.reps[0].tn
		if x == tn || x.t.Redundancy || x.choice != u.c || slices.ContainsFunc(u.reps, func(r replica) bool { return r.tn != x }) {
			continue
		}
		if h, _, n := p.soleGPU(x); h != g || n != len(u.reps) {
			continue
		}
		alone = append(alone, fmt.Sprintf("%s on %s", x.t.Name, g.fg.ref))
		free := p.freeGPUs()
		for _, c := range x.feasible {
			if c == x.choice || c.board == board || c.tp > 1 || countFree(free[c.board.Name]) == 0 || p.forbidden(x, c) {
				continue
			}
			units, _, ok := p.trialPack(x, c, free, pc)
			if !ok {
				continue
			}
			old, oldMode, oldReps := x.choice, g.mode, slices.Clone(u.reps)
			p.dropReplicas(x, units)
			x.choice = c
			if p.spreadTo(tn, from, home) {
				return g, x, old.label()
			}
			// the freed GPU did not take the replica: put x back
			p.dropReplicas(x, nil)
			u.reps = oldReps
			g.role, g.mode, g.whole, g.insts = v1.RolePool, oldMode, u, nil
			x.choice = old
			p.resetNodeUses(allNodes(p.gpus))
			free = p.freeGPUs()
		}
	}
	why := fmt.Sprintf("the idle pool GPUs (%s) are of other boards", strings.Join(idle, ", "))
	if len(alone) == 0 {
		return nil, nil, why + ", and no other " + board.Name + " GPU is held by one tenant alone that could move there"
	}
	return nil, nil, why + ", and no tenant alone on another " + board.Name + " GPU (" + strings.Join(alone, ", ") + ") has a candidate whose replicas fit them"
}

// trialPack packs tn's replicas of candidate c, one unit each, on the free GPUs of c's board.
// When they all fit it returns the units and the board's free GPUs as they were before (for
// undoTrial); otherwise it undoes the packing and ok is false. A trial leaves no blocked-unit
// record either way.
func (p *planner) trialPack(tn *tenant, c *cand, free map[string][]*gpuPlan, pc *patternCache) (units []*unit, was []*gpuPlan, ok bool) {
	units = soloUnits(tn, c)
	b := c.board.Name
	was = slices.Clone(free[b])
	left, err := p.packBucket(units, free, pc)
	for _, nu := range units {
		delete(p.blocked, nu)
	}
	if err != nil || len(left) > 0 {
		p.undoTrial(was, units, free, b)
		return nil, nil, false
	}
	return units, was, true
}

// soleGPUOf is the one GPU that holds all of units and one of them there; nil when they are on
// more GPUs than one.
func (p *planner) soleGPUOf(units []*unit) (*gpuPlan, *unit) {
	var home *gpuPlan
	var from *unit
	for _, g := range p.gpus {
		for _, u := range g.units() {
			if !slices.Contains(units, u) {
				continue
			}
			if home != nil && home != g {
				return nil, nil
			}
			home, from = g, u
		}
	}
	return home, from
}

// allNodes is the nodes of gs.
func allNodes(gs []*gpuPlan) map[string]bool {
	out := map[string]bool{}
	for _, g := range gs {
		out[g.fg.ref.Node] = true
	}
	return out
}

// spreadRoom says where r has room for n replicas of group k (candidate c) and why that does not
// hold them on distinct GPUs: no slot of the kind, or slots on fewer GPUs than n. growing: the
// tenant grows in place, on the kind it runs on in force.
func (r *slotRoom) spreadRoom(kept *v1.Plan, k groupKey, c *cand, n int, growing bool) string {
	var gpus []string
	slots := map[string]int{}
	for i, s := range r.slots {
		fit := r.key[i] == k && r.free[i] > 0
		if r.open[i] {
			o := r.key[i]
			fit = o.board == k.board && o.profile == k.profile && o.energy == k.energy && o.kind == k.kind && k.kind == v1.SliceMIG
		}
		if !fit {
			continue
		}
		ref := kept.GPUs[s.g].Ref().String()
		if slots[ref] == 0 {
			gpus = append(gpus, ref)
		}
		slots[ref] += max(r.free[i], btoi(r.open[i])*k.share)
	}
	kind := fmt.Sprintf("the kind the re-pack gives it (%s on %s)", c.label(), c.board.Name)
	if growing {
		kind = fmt.Sprintf("the kind it runs on in force (%s on %s)", c.label(), c.board.Name)
	}
	if len(gpus) == 0 {
		return "the room the plan in force leaves free on its busy GPUs has no slot of " + kind
	}
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		parts[i] = fmt.Sprintf("%s: %d free", g, slots[g])
	}
	return fmt.Sprintf("the room the plan in force leaves free on its busy GPUs has slots of %s on %d GPU(s) only (%s), and a tenant with redundancy starts there only with its %d replicas on distinct GPUs",
		kind, len(gpus), strings.Join(parts, ", "), n)
}

// noteUnspread records why the filling did not start redundant tenant name (unspreadRoom).
func (p *planner) noteUnspread(name, why string) {
	if p.unspreadRoom == nil {
		p.unspreadRoom = map[string]string{}
	}
	p.unspreadRoom[name] = why
}

// idleSpreadReasons completes, in placed (the plan of the tenants put on the GPUs the plan in
// force leaves idle, adopt), the reason of a redundant tenant whose replicas all run on one GPU:
// that sub-plan saw only those GPUs, so the reason names them, and adds what the filling of the
// busy GPUs' room found (unspreadRoom).
func (p *planner) idleSpreadReasons(placed *v1.Plan, adopt map[string]bool) {
	var idle []string
	for _, g := range placed.GPUs {
		if adopt[gpuKey(g.Node, g.Index)] {
			idle = append(idle, g.Ref().String())
		}
	}
	for ti := range placed.Tenants {
		t := &placed.Tenants[ti]
		for ri := range t.Reasons {
			r := &t.Reasons[ri]
			head, tail, ok := strings.Cut(r.Message, ": ")
			if r.Code != v1.ReasonRedundancy || !strings.HasPrefix(r.Message, "all ") || !ok {
				continue
			}
			r.Message = fmt.Sprintf("%s, planned on the GPUs the plan in force leaves idle (%s): among them, %s", head, strings.Join(idle, ", "), tail)
			if why := p.unspreadRoom[t.Name]; why != "" {
				r.Message += "; " + why
			}
		}
	}
}
