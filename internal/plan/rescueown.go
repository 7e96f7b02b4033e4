package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// The rescue on a short tenant's own GPUs (docs/adr/0070-rescue-on-own-gpus.md).

// heldGPU is a pool GPU as it was before rescueOnOwn took a tenant's replicas off it: the GPU's
// fields, its instances, and the replicas of each of its units.
type heldGPU struct {
	g    *gpuPlan
	was  gpuPlan
	reps map[*unit][]replica
}

// holdsAlone is, by board in fleet order, the pool GPUs on which every unit holds tn's replicas
// only: those dropReplicas leaves idle when it takes tn off. A GPU that tn shares with another
// tenant stays in use and frees nothing whole. held reports whether any pool GPU holds a
// replica of tn (heldGPUs above nought), read in the same pass over the GPUs. During a pass of
// the rescue, which asks it once for each tenant still short after its other tries, only the
// GPUs that have held a unit of tn's choice's group key since the pass began are read
// (placedIndex): a short tenant's placed replicas are units of its choice (formUnits; a tenant
// the rescue moves is packed anew on its new choice and not asked again), and reading every GPU
// for each short tenant made the rescue of a large short fleet quadratic in its size.
func (p *planner) holdsAlone(tn *tenant) (own map[string][]*gpuPlan, held bool) {
	own = map[string][]*gpuPlan{}
	visit := func(g *gpuPlan) {
		if g.role != v1.RolePool {
			return
		}
		any, alone := false, true
		for u := range g.eachUnit {
			any = true
			for _, r := range u.reps {
				if r.tn == tn {
					held = true
				} else {
					alone = false
				}
			}
		}
		if any && alone {
			own[g.fg.board.Name] = append(own[g.fg.board.Name], g)
		}
	}
	if x := p.pidx; x != nil && tn.choice != nil && sameSlice(x.of, p.gpus) {
		for _, i := range x.by[p.rkeyIDs().ofKey(keyOf(tn, tn.choice))+1] { // ascending: fleet order
			visit(p.gpus[i])
		}
		if holdsAloneCheck != nil {
			holdsAloneCheck(p, tn, own, held)
		}
		return own, held
	}
	for _, g := range p.gpus {
		visit(g)
	}
	return own, held
}

// holdsAloneCheck, when set (tests), is called with each answer holdsAlone reads off the index.
var holdsAloneCheck func(p *planner, tn *tenant, own map[string][]*gpuPlan, held bool)

// holding saves the pool GPUs that hold a replica of tn, as they are (see heldGPU).
func (p *planner) holding(tn *tenant) []heldGPU {
	var out []heldGPU
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		if !slices.ContainsFunc(g.units(), func(u *unit) bool {
			return slices.ContainsFunc(u.reps, func(r replica) bool { return r.tn == tn })
		}) {
			continue
		}
		out = append(out, holdGPU(g))
	}
	return out
}

// holdGPU saves g as it is, its instances and each unit's replicas copied, for restoreHeld.
func holdGPU(g *gpuPlan) heldGPU {
	h := heldGPU{g: g, was: *g, reps: map[*unit][]replica{}}
	h.was.insts = slices.Clone(g.insts)
	for u := range g.eachUnit {
		h.reps[u] = slices.Clone(u.reps)
	}
	return h
}

// restoreHeld puts the GPUs of held back as holding saved them, and their nodes' uses. The
// GPUs get copies of what was saved, so held can be restored again.
func (p *planner) restoreHeld(held []heldGPU) {
	nodes := map[string]bool{}
	for _, h := range held {
		*h.g = h.was
		h.g.insts = slices.Clone(h.was.insts)
		for u, reps := range h.reps {
			u.reps = slices.Clone(reps)
		}
		nodes[h.g.fg.ref.Node] = true
		p.notePlaced(h.g)
	}
	p.resetNodeUses(nodes)
}

// rescueOnOwn is the rescue's last try for a short tenant tn that holds pool GPUs of its own
// (holdsAlone), once its other candidates found no room on the idle ones (rescueTenant): its
// replicas are taken off, and its candidates, its choice among them and cheapest first
// (rescueOrder), try to place the whole count, packed with the packer's rules (node rules
// included), on the board's idle pool GPUs together with those its replicas freed. A part
// placement can hold GPUs that the whole count of another candidate fits (three H100s holding
// three of five 4g.40gb take three exclusive replicas), or that a packing of the same candidate
// from scratch lays out better. Only boards where tn holds a GPU of its own are tried: on the
// others the GPUs are the idle ones rescueTenant tried. The first candidate that places every
// replica is kept, tn is then served in full and no other tenant is touched, so the plan has one
// tenant fewer short; moved says why. When none does, the replicas go back where they were and
// unmovedOwn names the GPUs tried; when tn holds no GPU alone, it says so. free is brought up to date with the GPUs left idle.
func (p *planner) rescueOnOwn(tn *tenant, free map[string][]*gpuPlan, pc *patternCache) (bool, error) {
	own, held := p.holdsAlone(tn)
	if p.stopped() {
		return false, nil
	}
	if len(own) == 0 {
		p.unmovedOwn[tn] = "it holds no pool GPU of its own to free for another candidate: none of its replicas is placed"
		if held {
			p.unmovedOwn[tn] = "it holds no pool GPU of its own to free for another candidate: the GPUs of its placed replicas also serve other tenants"
		}
		return false, nil
	}
	old := tn.choice
	saved := p.holding(tn)
	p.dropReplicas(tn, nil)
	p.idleEmptied(own)
	trial := p.freeGPUs()
	tried := map[string]string{} // board → why its first candidate tried found no room
	var boards []string
	note := func(b, why string) {
		if _, ok := tried[b]; !ok {
			tried[b] = why
			boards = append(boards, b)
		}
	}
	for _, c := range p.rescueOrder(tn, trial) {
		b := c.board.Name
		if len(own[b]) == 0 {
			continue
		}
		if p.stopped() {
			break
		}
		units := soloUnits(tn, c)
		n := countFree(trial[b])
		room, err := p.roomFor(c, trial[b], pc)
		if err != nil {
			p.restoreHeld(saved)
			return false, err
		}
		if room < len(units) {
			note(b, fmt.Sprintf("%s: needs %d unit(s), the %d GPU(s) hold at most %d", c.label(), len(units), n, room))
			continue
		}
		was := slices.Clone(trial[b])
		left, err := p.packBucket(units, trial, pc)
		if err != nil {
			p.restoreHeld(saved)
			return false, err
		}
		blocked, isBlocked := p.blocked[firstOr(left)]
		for _, u := range units {
			delete(p.blocked, u)
		}
		if len(left) == 0 {
			tn.choice = c
			p.moved[tn] = fmt.Sprintf("%s on %s placed %s of its %d replicas, the others found no free GPU (%s); with the %d GPU(s) of %s its own replicas held taken back and the board's %d other idle pool GPU(s), %s on %s holds all %d replicas",
				old.label(), old.board.Name, placedOf(saved, tn), old.replicas, p.shortWhy(tn, old), len(own[b]), b, n-len(own[b]), c.label(), b, c.replicas)
			if slices.Contains(tn.fixedFallback, c) {
				p.moved[tn] = fixedFellBack(tn, old, c, p.shortWhy(tn, old)) + fmt.Sprintf(", on the %d GPU(s) its own replicas held and the board's idle ones", len(own[b]))
			}
			clear(free)
			maps.Copy(free, p.freeGPUs())
			return true, nil
		}
		why := fmt.Sprintf("%d of its %d unit(s) found no room on the %d GPU(s)", len(left), len(units), n)
		if isBlocked {
			why = blocked.rule
		}
		note(b, c.label()+": "+why)
		p.undoTrial(was, units, trial, b)
	}
	p.restoreHeld(saved)
	var parts []string
	for _, b := range boards {
		idle := countFree(free[b])
		parts = append(parts, fmt.Sprintf("on %s, the %d GPU(s) its own replicas hold and the %d idle, %s", b, len(own[b]), idle, tried[b]))
	}
	if len(parts) > 0 {
		p.unmovedOwn[tn] = "nor does any candidate on the GPUs its own replicas hold beside the idle ones: " + strings.Join(parts, "; ")
	}
	return false, nil
}

// idleEmptied makes idle the GPUs of own that dropReplicas left holding no replica: the second
// and later GPUs of a tensor-parallel unit hold the unit it already emptied on the first.
func (p *planner) idleEmptied(own map[string][]*gpuPlan) {
	nodes := map[string]bool{}
	for _, gs := range own {
		for _, g := range gs {
			if g.role != v1.RolePool || slices.ContainsFunc(g.units(), func(u *unit) bool { return len(u.reps) > 0 }) {
				continue
			}
			g.role, g.mode, g.whole, g.insts = v1.RoleIdle, "", nil, nil
			nodes[g.fg.ref.Node] = true
		}
	}
	p.resetNodeUses(nodes)
}

// firstOr is the first of us, nil when there is none.
func firstOr(us []*unit) *unit {
	if len(us) == 0 {
		return nil
	}
	return us[0]
}

// placedOf says how many of tn's replicas the GPUs of held hold.
func placedOf(held []heldGPU, tn *tenant) string {
	n := 0
	seen := map[*unit]bool{}
	for _, h := range held {
		for u, reps := range h.reps {
			if seen[u] {
				continue
			}
			seen[u] = true
			for _, r := range reps {
				if r.tn == tn {
					n++
				}
			}
		}
	}
	return fmt.Sprint(n)
}
