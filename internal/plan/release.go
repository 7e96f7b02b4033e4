package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Giving up placements when the fleet is too small (docs/planner.md, "When the fleet is too
// small").
//
// The packer places units in group order and a tenant whose units do not all find a GPU keeps
// the ones that did. In a fleet too small for everyone such a partly placed tenant, which is
// short anyway, can hold the GPUs another tenant needed: on one node of 2 H100s a 70B bf16
// tenant sized at two tensor-parallel groups of 2 gets one group, and a 7B tenant behind it
// finds no GPU, so both are short. Likewise a tenant packed early and served in full can hold
// what two later ones needed. After the choice and packing (optimise), releaseShort gives up
// such placements where that serves more tenants in full:
//
//   - the candidates are the tenants short of GPUs that hold placed replicas, then the tenants
//     served in full on a board that has no idle GPU left and a short tenant, each list in
//     give-way order: most demand per weight first (demand: the GPU-equivalents of the chosen
//     replicas, cand.cost; weight: the tenant's fair-share weight, as weighted DRF at run time
//     favours the tenant with the least use per weight), ties the one listed later first;
//   - a candidate is left out of the packing (released) and the pool packed again with the same
//     choices; the release is kept when strictly more tenants are then served in full and every
//     other tenant served in full before still is (so a tenant served in full gives way only to
//     two or more, and no one else loses its service to the release), and undone otherwise (a
//     short tenant keeps its replicas and is reported short, as before);
//   - after a kept release the candidates are listed again (the next packing changed them), and
//     the search stops when a whole pass keeps none or after maxReleaseTries packings;
//   - after the search (and the readmission of released tenants) the pool is packed once more,
//     the pass onto used GPUs' MIG room free to seat the tenants still short, and that packing
//     is kept when it serves more tenants in full on no more GPUs and none served before loses
//     it (ADR 0124).
//
// Tenants are released one at a time only: two short tenants that only together hold what a
// third needs both keep their replicas. At equal counts nothing is swapped.
//
// A released tenant is reported short (Infeasible, NoCapacity), its reason naming the tenants
// served in full in its place, the GPUs its choice needs and those it held.

// maxReleaseTries bounds the packings releaseShort makes.
const maxReleaseTries = 16

// releaseShort runs the search above on the chosen and packed state of p, which it changes in
// place when a release is kept.
func (p *planner) releaseShort() error {
	p.released = nil
	if p.noRelease {
		return nil
	}
	served := p.servedInFull()
	for tries := 0; tries < maxReleaseTries; {
		kept := false
		for _, tn := range slices.Concat(p.partlyPlaced(), p.servedOnFullBoards()) {
			if tries >= maxReleaseTries || p.stopped() {
				return p.seatShortInUsedMIG()
			}
			tries++
			before := p.snapshot()
			held := p.heldBy(tn)
			wasServed := p.servedSet()
			held.served = wasServed[tn]
			if p.released == nil {
				p.released = map[*tenant]string{}
			}
			p.released[tn] = "left unplaced" // the reason proper once the release is kept
			now, better, err := p.repackServesMore(served, wasServed, tn)
			if err != nil {
				return err
			}
			if better {
				served, kept = now, true
				var gained []string
				for _, t := range p.tenants {
					if servedInFull(t) && !wasServed[t] {
						gained = append(gained, t.t.Name)
					}
				}
				p.released[tn] = p.releaseWhy(tn, held, gained)
				tn.infeas = slices.DeleteFunc(tn.infeas, func(r v1.Reason) bool { return r.Code == v1.ReasonNoCapacity })
				tn.infeas = append(tn.infeas, v1.NewReason(v1.ReasonNoCapacity, "%s", p.released[tn]))
				break
			}
			delete(p.released, tn)
			before.restore(p)
		}
		if !kept {
			break
		}
	}
	if err := p.readmitReleased(served); err != nil {
		return err
	}
	return p.seatShortInUsedMIG()
}

// seatShortInUsedMIG packs the pool once more after the release and its readmission, the pass
// onto used GPUs' MIG room free to seat the tenants still short besides its own (its own
// first), and keeps it when more tenants are then served in full, none served before loses it
// and no more GPUs are used (ADR 0124). Within the releases' repackings the pass seats no new
// tenant: seated there they would count as served before the releases after them.
func (p *planner) seatShortInUsedMIG() error {
	if p.usedMIGServed == nil || p.noRelease || p.noUsedMIGRescue || p.stopped() || !p.anyShort() {
		return nil
	}
	before, was, served, used := p.snapshot(), p.servedSet(), p.servedInFull(), p.gpusInUse()
	p.usedMIGTrial, p.usedMIGNew, p.usedMIGLast = map[*tenant]bool{}, map[*tenant]bool{}, true
	defer func() { p.usedMIGTrial, p.usedMIGNew, p.usedMIGLast = nil, nil, false }()
	for _, t := range p.tenants {
		if _, out := p.released[t]; !out && !was[t] {
			p.usedMIGTrial[t] = true
		}
	}
	_, better, err := p.repackServesMore(served, was, nil)
	if err != nil {
		return err
	}
	if !better || p.gpusInUse() > used {
		before.restore(p)
	}
	return nil
}

// gpusInUse counts the GPUs the plan does not leave idle.
func (p *planner) gpusInUse() int {
	n := 0
	for _, g := range p.gpus {
		if g.role != v1.RoleIdle {
			n++
		}
	}
	return n
}

// readmitReleased packs the pool again with each released tenant back in, one at a time, and
// keeps it when more tenants are then served in full and none served before loses it.
func (p *planner) readmitReleased(served int) error {
	for _, tn := range p.tenants {
		why, out := p.released[tn]
		if !out || p.stopped() {
			continue
		}
		before := p.snapshot()
		wasServed := p.servedSet()
		delete(p.released, tn)
		now, better, err := p.repackServesMore(served, wasServed, tn)
		if err != nil {
			return err
		}
		if better {
			served = now
			continue
		}
		p.released[tn] = why
		before.restore(p)
	}
	return nil
}

// partlyPlaced lists the tenants short of GPUs that hold placed replicas, in give-way order:
// most demand (GPU-equivalents of the chosen replicas) per weight first, ties the one listed
// later first.
func (p *planner) partlyPlaced() []*tenant {
	holds := map[*tenant]bool{}
	for _, g := range p.gpus {
		for _, u := range g.units() {
			for _, r := range u.reps {
				holds[r.tn] = true
			}
		}
	}
	var out []*tenant
	for _, tn := range p.tenants {
		if holds[tn] && !servedInFull(tn) && slices.ContainsFunc(tn.infeas, func(r v1.Reason) bool { return r.Code == v1.ReasonNoCapacity }) {
			out = append(out, tn)
		}
	}
	slices.SortFunc(out, giveWay)
	return out
}

// servedOnFullBoards lists the tenants served in full on a board with no idle GPU left where
// another tenant, not released, is short of GPUs, in give-way order as partlyPlaced. Such a
// tenant gives way only when that serves at least two others in full.
func (p *planner) servedOnFullBoards() []*tenant {
	idle, short := map[string]bool{}, map[string]bool{}
	for _, g := range p.gpus {
		if g.role == v1.RoleIdle {
			idle[g.fg.board.Name] = true
		}
	}
	for _, tn := range p.tenants {
		if _, out := p.released[tn]; !out && tn.choice != nil && !servedInFull(tn) {
			short[tn.choice.board.Name] = true
		}
	}
	var out []*tenant
	for _, tn := range p.tenants {
		if b := tn.choice; servedInFull(tn) && short[b.board.Name] && !idle[b.board.Name] {
			out = append(out, tn)
		}
	}
	slices.SortFunc(out, giveWay)
	return out
}

// giveWay orders tenants most demand per weight first, ties the one listed later first.
func giveWay(a, b *tenant) int {
	return cmp.Or(cmp.Compare(demandPerWeight(b), demandPerWeight(a)), cmp.Compare(b.idx, a.idx))
}

// demandPerWeight is a tenant's chosen GPU-equivalents divided by its fair-share weight.
func demandPerWeight(tn *tenant) float64 {
	w := 1.0
	if tn.t.Weight != nil && *tn.t.Weight > 0 {
		w = *tn.t.Weight
	}
	return tn.choice.cost / w
}

// held is what a tenant's placed replicas occupied before it was released.
type held struct {
	served   bool // it was served in full
	replicas int
	gpus     []string // the GPUs that held them, "node/index" in fleet order
}

func (p *planner) heldBy(tn *tenant) held {
	var h held
	for _, g := range p.gpus {
		on := false
		for _, u := range g.units() {
			for _, r := range u.reps {
				if r.tn != tn {
					continue
				}
				on = true
				if u.tp.Size == 0 || u.tp.GPUs[0] == g.fg.ref.Index { // a group's replica once
					h.replicas++
				}
			}
		}
		if on {
			h.gpus = append(h.gpus, fmt.Sprintf("%s/%d", g.fg.ref.Node, g.fg.ref.Index))
		}
	}
	return h
}

// lostAny reports whether a tenant of was other than tn is no longer served in full.
func (p *planner) lostAny(was map[*tenant]bool, tn *tenant) bool {
	for _, t := range p.tenants {
		if t != tn && was[t] && !servedInFull(t) {
			return true
		}
	}
	return false
}

// servedSet is the set of tenants served in full.
func (p *planner) servedSet() map[*tenant]bool {
	s := map[*tenant]bool{}
	for _, tn := range p.tenants {
		if servedInFull(tn) {
			s[tn] = true
		}
	}
	return s
}

// needs says what a candidate's replicas take on board b: whole GPUs for exclusive and
// tensor-parallel replicas, GPU-equivalents otherwise.
func needs(c *cand) string {
	switch {
	case c.kind == v1.SliceExclusive && c.tp > 1:
		return fmt.Sprintf("%d %s GPUs (%d group(s) of %d)", c.replicas*c.tp, c.board.Name, c.replicas, c.tp)
	case c.kind == v1.SliceExclusive:
		return fmt.Sprintf("%d %s GPUs", c.replicas, c.board.Name)
	}
	return fmt.Sprintf("%.2f %s GPUs' worth", c.cost, c.board.Name)
}

// releaseWhy is the NoCapacity reason of a released tenant.
func (p *planner) releaseWhy(tn *tenant, h held, gained []string) string {
	c := tn.choice
	if h.served {
		return fmt.Sprintf("left unplaced in favour of %s, served in full in its place: its %d replica(s) (%s) need %s, "+
			"which it had (on %s), and freed they serve %d tenants in full where it was one (the pool has %d GPUs of which %d are canaries and %d held for the burst pool); "+
			"a tenant gives up what it holds when that serves more tenants in full",
			strings.Join(gained, ", "), c.replicas, c.label(), needs(c), strings.Join(h.gpus, ", "), len(gained), len(p.fleet), p.canaries(), p.burst)
	}
	return fmt.Sprintf("left unplaced in favour of %s, served in full in its place: its %d replica(s) (%s) need %s "+
		"and only %d of them had found room (on %s; the pool has %d GPUs of which %d are canaries and %d held for the burst pool); "+
		"a tenant short of GPUs gives up what it holds when that serves more tenants in full",
		strings.Join(gained, ", "), c.replicas, c.label(), needs(c), h.replicas, strings.Join(h.gpus, ", "), len(p.fleet), p.canaries(), p.burst)
}

// repackServesMore packs the pool again as optimise does, the packer then the rescue of the
// tenants it leaves short onto the GPUs it leaves idle (rescueShort), with every tenant's
// infeasibility reasons cleared first, and reports the tenants served in full after it and
// whether that is more than served with none of wasServed, tn aside, losing its service.
func (p *planner) repackServesMore(served int, wasServed map[*tenant]bool, tn *tenant) (int, bool, error) {
	for _, t := range p.tenants {
		t.infeas = nil
	}
	if err := p.pack(); err != nil {
		return 0, false, err
	}
	if err := p.rescueShort(p.unplaced); err != nil {
		return 0, false, err
	}
	now := p.servedInFull()
	return now, now > served && !p.lostAny(wasServed, tn), nil
}
