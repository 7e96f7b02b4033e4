package plan

import (
	"cmp"
	"fmt"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Raising the short tenants whose raises fit (ADR 0081).
//
// The confirmation raises every tenant its runs found short, then chooses and packs again
// (confirm). When that leaves a tenant without GPUs and the moves of raiseByMoves cannot make
// the raises either, the raises were all or nothing: the best round was kept and every short
// tenant stayed short, even one whose raise alone fits (review 13's M4: a tenant of one
// 1g.20gb, short by a fraction of a point, left short because another tenant's tensor-parallel
// raise needed 12 GPUs of 10). raiseSubset tries the raises one at a time instead, fewest extra
// GPUs first, and keeps each one that still serves in full every tenant the round served.
//
// The order: a raise adds one replica of the tenant's chosen candidate, unitFrac / share GPUs;
// every raise kept makes the room for the next ones smaller, so the smallest first raise the
// most tenants the room allows (and the cheapest to try are tried while the bound lasts).
// Ties keep the tenants' order.
//
// Each try is one choose and pack, without a simulation: the raises kept are simulated by the
// next round like any other. The tries are bounded by confirmSubsetTries per round. A tenant
// whose raise was tried and did not fit is not raised again (counts only rise, so the room
// only shrinks): when the runs find it short again it is left short, NoCapacity, with a reason
// that says its raise did not fit. A tenant past the bound is not raised in that round, and
// stays free to be raised in a later one.
const confirmSubsetTries = 4

// raiseSubset makes the raises of raised (their choices' counts already raised, round r's plan
// in place, as raiseByMoves leaves it) that fit one at a time, as described above. It reports
// whether any was kept; then the planner holds the plan chosen and packed with those raises,
// and the raises not kept are undone (their entries taken out of confirmShort and r's). It
// reports false with r's plan in place, the raised counts kept, otherwise.
func (p *planner) raiseSubset(r *confirmRound, raised []*tenant) (bool, error) {
	if len(raised) < 2 || p.noRaiseSubset || p.stopped() {
		return false, nil // one raise alone is what did not fit
	}
	order := slices.Clone(raised)
	slices.SortStableFunc(order, func(a, b *tenant) int { return cmp.Compare(extraGPUs(a.choice), extraGPUs(b.choice)) })
	choice := map[*tenant]*cand{} // each raised tenant's choice in r
	for _, tn := range raised {
		choice[tn] = tn.choice
	}
	var kept []*tenant
	var keptUndo confirmUndo
	var keptHeld []heldGPU
	tried := 0
	for _, tn := range order {
		if tried == confirmSubsetTries || p.stopped() {
			break
		}
		tried++
		r.undo.restore(p) // r's plan and counts, none raised
		p.restoreHeld(r.held)
		for _, k := range kept {
			p.setCandReplicas(choice[k], choice[k].replicas+1)
		}
		p.setCandReplicas(choice[tn], choice[tn].replicas+1)
		p.forbid, p.nodeRule, p.nodeMPS = nil, nil, nil
		if err := p.optimise(); err != nil {
			return false, err
		}
		if p.servedInFull() < r.served {
			if p.raiseNoRoom == nil {
				p.raiseNoRoom = map[*tenant]string{}
			}
			p.raiseNoRoom[tn] = fmt.Sprintf("its raise to %d replica(s) of %s did not fit", choice[tn].replicas, choice[tn].label())
			continue
		}
		kept = append(kept, tn)
		keptUndo, keptHeld = p.snapshot(), p.holdAll()
	}
	if len(kept) == 0 {
		r.undo.restore(p)
		p.restoreHeld(r.held)
		for _, tn := range raised {
			p.setCandReplicas(choice[tn], choice[tn].replicas+1)
		}
		return false, nil
	}
	keptUndo.restore(p)
	p.restoreHeld(keptHeld)
	for _, tn := range raised {
		if slices.Contains(kept, tn) {
			continue
		}
		if e := r.entries[tn]; e != "" { // not raised: not a count found short before
			if s := p.confirmShort[tn]; len(s) > 0 && s[len(s)-1] == e {
				p.confirmShort[tn] = s[:len(s)-1]
			}
			delete(r.entries, tn)
		}
	}
	return true, nil
}

// extraGPUs is the GPU-equivalents a replica more of c takes.
func extraGPUs(c *cand) float64 {
	return c.unitFrac / float64(max(c.share, 1))
}

// leftNoRoom leaves tn short, NoCapacity, when raiseSubset found no room for its raise, and
// reports whether it did.
func (p *planner) leftNoRoom(tn *tenant) bool {
	why, ok := p.raiseNoRoom[tn]
	if !ok {
		return false
	}
	p.leftShort(tn, "the fleet: "+why, v1.ReasonNoCapacity, "and the fleet has no room for a replica more ("+why+" with the other tenants served)")
	return true
}
