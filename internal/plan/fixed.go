package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Fixed replica counts (docs/planner.md, "Fixed replica counts").

// fixedSlices keeps a fixed-count tenant on the slice kinds where its count fares best against
// the SLO: the kinds where the fixed count meets it when there is one (the cheapest of them is
// chosen, not a cheaper kind where the count misses); else the kinds where some count meets it,
// the cheapest of them chosen (the tenant is infeasible on any of them; a larger slice is taken
// afterwards only on GPUs the plan leaves idle, stepUpFixed); else all of them. The others are
// rejected (SLOUnmet) with what the fixed count lacks there, and kept best first (fixedPrefer)
// as the tenant's fixedFallback: a fixed count is a count to place, so when the kept kinds find
// no room the rescue falls back to the best of these that fits, and when the kept kind takes
// room that would serve other tenants in full a cheaper one is tried (stepDownFixed).
func (p *planner) fixedSlices(tn *tenant) {
	if tn.t.Replicas == nil || len(tn.feasible) < 2 {
		return
	}
	fixed := *tn.t.Replicas
	best := tn.feasible[0]
	for _, c := range tn.feasible[1:] {
		if fixedRank(c, fixed) < fixedRank(best, fixed) {
			best = c
		}
	}
	kept := tn.feasible[:0]
	var fallback []*cand
	for _, c := range tn.feasible {
		if fixedRank(c, fixed) > fixedRank(best, fixed) {
			c.reject, c.why = v1.ReasonSLOUnmet, fmt.Sprintf("the fixed %d replica(s) %s here; on %s of %s they %s",
				fixed, fixedShort(c, fixed), best.label(), best.board.Name, fixedShort(best, fixed))
			fallback = append(fallback, c)
			continue
		}
		kept = append(kept, c)
	}
	tn.feasible = kept
	slices.SortStableFunc(fallback, func(a, b *cand) int { return fixedPrefer(a, b, fixed) })
	tn.fixedFallback = fallback
}

// fixedPrefer orders slice kinds for a fixed count: by fixedRank, then, where some count meets
// the SLO, the most requests a replica carries within it first (the count misses by the least),
// then the cheapest.
func fixedPrefer(a, b *cand, fixed int) int {
	ra, rb := fixedRank(a, fixed), fixedRank(b, fixed)
	switch {
	case ra != rb:
		return cmp.Compare(ra, rb)
	case ra == 1 && a.ev.oneRate().RequestsPerSec != b.ev.oneRate().RequestsPerSec:
		return cmp.Compare(b.ev.oneRate().RequestsPerSec, a.ev.oneRate().RequestsPerSec)
	}
	return cmp.Compare(a.cost, b.cost)
}

// fixedMeets reports whether a fixed count meets the SLO on c.
func fixedMeets(c *cand, fixed int) bool { return c.need > 0 && fixed >= c.need }

// fixedRank orders the slices for a fixed count: 0 where it meets the SLO, 1 where another count
// would, 2 where no count does.
func fixedRank(c *cand, fixed int) int {
	switch {
	case fixedMeets(c, fixed):
		return 0
	case c.need > 0:
		return 1
	}
	return 2
}

// fixedShort says how a fixed count fares on c, for reasons.
func fixedShort(c *cand, fixed int) string {
	switch {
	case fixedMeets(c, fixed):
		return fmt.Sprintf("meet the SLO, which needs %d", c.need)
	case c.need > 0:
		return fmt.Sprintf("miss the SLO, which needs %d (%.3g req/s a replica within it)", c.need, c.ev.oneRate().RequestsPerSec)
	}
	return "miss the SLO, which no count meets"
}

// fixedFellBack is the reason of a fixed-count tenant the rescue placed on a kind of its
// fallback because its kept kind old found no room (why).
func fixedFellBack(tn *tenant, old, c *cand, why string) string {
	return fmt.Sprintf("%s on %s, where the fixed %d replica(s) %s, found no free GPU (%s); %s on %s, the best slice kind for the count that fits, holds all %d replicas: a fixed count falls back to the best kind that fits rather than go unplaced",
		old.label(), old.board.Name, *tn.t.Replicas, fixedShort(old, *tn.t.Replicas), why, c.label(), c.board.Name, c.replicas)
}

// fixedStep is a fixed-count tenant's step to another kind (stepDownFixed, stepUpFixed): the
// kind it took and why.
type fixedStep struct {
	to  *cand
	why string
}

// trialFixed packs the pool again (and runs the rescue) with tn on c, and keeps the result when
// tn is then served in full on c, every tenant served in full before still is, and at least
// more tenants than before are served in full (more: 1 for a step down, 0 for a step up); else
// it restores the plan as it was. It returns whether it kept the step and the tenants it served
// in full that were not before. In a step down after settle's rescue the pass onto used GPUs'
// MIG room may seat the tenants short before the trial too (usedMIGTrial); those it seats
// (usedMIGNew) count neither towards the gain nor among the tenants returned, and when the step
// is kept they are seated again in the repackings after it (usedMIGServed, ADR 0123).
func (p *planner) trialFixed(tn *tenant, c *cand, more int) (bool, []string, error) {
	before, was, served := p.snapshot(), p.servedSet(), p.servedInFull()
	tn.choice = c
	if p.usedMIGServed != nil && more > 0 {
		// The pass onto used GPUs' MIG room may seat the tenants short before the step too; they
		// do not count towards the step's gain (ADR 0123).
		p.usedMIGTrial, p.usedMIGNew = map[*tenant]bool{}, map[*tenant]bool{}
		for _, t := range p.tenants {
			if !was[t] {
				p.usedMIGTrial[t] = true
			}
		}
		defer func() { p.usedMIGTrial, p.usedMIGNew = nil, nil }()
	}
	now, _, err := p.repackServesMore(served, was, nil)
	if err != nil {
		return false, nil, err
	}
	for t := range p.usedMIGNew {
		if servedInFull(t) {
			now--
		}
	}
	if now >= served+more && !p.lostAny(was, nil) && tn.choice == c && servedInFull(tn) {
		var gained []string
		for t := range p.usedMIGNew {
			if servedInFull(t) {
				p.usedMIGServed[t] = true // seated again in the repackings after the step
			}
		}
		for _, t := range p.tenants {
			if servedInFull(t) && !was[t] && !p.usedMIGNew[t] {
				gained = append(gained, t.t.Name)
			}
		}
		return true, gained, nil
	}
	before.restore(p)
	return false, nil, nil
}

func (p *planner) noteFixedStep(tn *tenant, c *cand, why string) {
	if p.fixedSteps == nil {
		p.fixedSteps = map[*tenant]fixedStep{}
	}
	p.fixedSteps[tn] = fixedStep{to: c, why: why}
}

// stepDownFixed: a fixed count is a count, not a licence to take a larger slice than the other
// tenants can spare. When tenants are short of GPUs, a fixed-count tenant served in full whose
// fallback (fixedFallback) has a cheaper kind where some count meets the SLO tries it, best
// first (trialFixed): the step is kept when strictly more tenants are then served in full and
// every tenant served in full before still is, the fixed tenant among them. The tenant then
// misses its SLO, and its reasons say which tenants its step served. At most maxReleaseTries
// packings, fewer above 4,000 tenants (fixedStepTries).
func (p *planner) stepDownFixed() error {
	budget := fixedStepPackings
	if p.o.fixedStepPackings > 0 {
		budget = p.o.fixedStepPackings
	}
	tries, limit := 0, fixedStepTries(len(p.tenants), budget)
	for tries < limit {
		kept := false
		for _, tn := range p.tenants {
			if tn.t.Replicas == nil || len(tn.fixedFallback) == 0 || !servedInFull(tn) || !p.anyShort() {
				continue
			}
			old, fixed := tn.choice, *tn.t.Replicas
			for _, c := range tn.fixedFallback {
				// never onto a kind where no count meets the SLO
				if c.cost >= old.cost-1e-9 || fixedRank(c, fixed) > 1 || p.forbidden(tn, c) {
					continue
				}
				if tries >= limit || p.stopped() {
					return nil
				}
				tries++
				ok, gained, err := p.trialFixed(tn, c, 1)
				if err != nil {
					return err
				}
				if ok {
					p.noteFixedStep(tn, c, fmt.Sprintf(
						"%s on %s, where the fixed %d replica(s) %s, was not used: it takes %s, and %s on %s (%s) leaves room that serves %s in full; a fixed count is a count, not a licence to take a larger slice than the other tenants can spare",
						old.label(), old.board.Name, fixed, fixedShort(old, fixed), needs(old), c.label(), c.board.Name, needs(c), strings.Join(gained, ", ")))
					kept = true
					break
				}
			}
			if kept {
				break
			}
		}
		if !kept {
			return nil
		}
	}
	return nil
}

// fixedStepPackings bounds stepDownFixed's trials, each a packing and rescue of the whole pool,
// in tenant-packings: maxReleaseTries trials up to 4,000 tenants, fewer above (ADR 0127).
const fixedStepPackings = maxReleaseTries * 4000

// fixedStepTries is the most trials stepDownFixed makes in a pool of n tenants within budget
// tenant-packings, at most maxReleaseTries: 16 up to 4,000 tenants, 3 at 20,000, none above
// 64,000.
func fixedStepTries(n, budget int) int {
	return min(maxReleaseTries, budget/max(n, 1))
}

// stepUpFixed: a fixed count that no kind lets meet the SLO is chosen on the cheapest kind where
// some count would (fixedSlices), so that it takes no room from other tenants. Once the plan is
// packed, and only when no tenant is short of GPUs, the kinds where one replica carries more
// within the SLO, and no less per GPU (ratePerGPU), are tried, most first, on the GPUs the plan
// leaves idle (trialFixed: every tenant stays served in full): the first that fits is kept, and
// the count misses its SLO by less. At most maxReleaseTries packings.
func (p *planner) stepUpFixed() error {
	tries := 0
	for _, tn := range p.tenants {
		if tn.t.Replicas == nil || tn.choice == nil || !servedInFull(tn) {
			continue
		}
		old, fixed := tn.choice, *tn.t.Replicas
		if fixedRank(old, fixed) != 1 {
			continue
		}
		top := fixedTop(tn)
		if top == nil || top.ev.oneRate().RequestsPerSec <= old.ev.oneRate().RequestsPerSec {
			continue
		}
		carries := fmt.Sprintf("%s of %s, where one replica carries %.3g req/s within the SLO against %.3g here,",
			top.label(), top.board.Name, top.ev.oneRate().RequestsPerSec, old.ev.oneRate().RequestsPerSec)
		switch {
		case p.anyShort():
			p.noteStepUpMissed(tn, carries+" was not tried: other tenants are short of GPUs")
			continue
		case !p.anyIdle():
			p.noteStepUpMissed(tn, carries+" was not tried: the plan leaves no pool GPU idle")
			continue
		}
		var better []*cand
		for _, c := range tn.feasible {
			if fixedRank(c, fixed) == 1 && c.ev.oneRate().RequestsPerSec > old.ev.oneRate().RequestsPerSec &&
				ratePerGPU(c) >= ratePerGPU(old) && !p.forbidden(tn, c) {
				better = append(better, c)
			}
		}
		if len(better) == 0 {
			p.noteStepUpMissed(tn, fmt.Sprintf("%s was not taken: it carries %.3g req/s a GPU against %.3g here, and a larger kind is taken only where it carries no less per GPU (neither does any other kind that carries more a replica)",
				carries, ratePerGPU(top), ratePerGPU(old)))
			continue
		}
		slices.SortStableFunc(better, func(a, b *cand) int { return fixedPrefer(a, b, fixed) })
		own, pool := p.heldGPUs(tn), sum(slices.Collect(maps.Values(p.poolGPUs())))
		var tried []string
		for _, c := range better {
			if tries >= maxReleaseTries || p.stopped() {
				break
			}
			tries++
			ok, _, err := p.trialFixed(tn, c, 0)
			if err != nil {
				return err
			}
			if !ok {
				tried = append(tried, fmt.Sprintf("%s of %s (%.3g req/s a replica)", c.label(), c.board.Name, c.ev.oneRate().RequestsPerSec))
				continue
			}
			if ok {
				why := fmt.Sprintf("planned on %s of %s, where one replica carries %.3g req/s within the SLO, on GPUs the plan leaves idle: no kind lets the fixed count meet it, so it takes the kind where a replica carries the most that fits without taking room from another tenant (%s, the cheapest where some count meets it, carries %.3g)",
					c.label(), c.board.Name, c.ev.oneRate().RequestsPerSec, old.label(), old.ev.oneRate().RequestsPerSec)
				if c == better[0] {
					why = fmt.Sprintf("planned on %s of %s, where one replica carries the most within the SLO (%.3g req/s) of the kinds that carry no less per GPU, on GPUs the plan leaves idle, so the count misses it by less (%s, the cheapest where some count meets it, carries %.3g)",
						c.label(), c.board.Name, c.ev.oneRate().RequestsPerSec, old.label(), old.ev.oneRate().RequestsPerSec)
				}
				p.noteFixedStep(tn, c, why)
				tried = nil
				break
			}
		}
		if len(tried) > 0 {
			p.noteStepUpMissed(tn, fmt.Sprintf("%s found no room: %s, tried in turn, each found none when the pool was packed again with the tenant on it, on the %d pool GPUs, the %d its own replicas held among them, with every other tenant kept in full",
				carries, strings.Join(tried, ", "), pool, own))
		}
	}
	return nil
}

// noteStepUpMissed records why stepUpFixed left tn on its kind, for fixedChoiceWhy.
func (p *planner) noteStepUpMissed(tn *tenant, why string) {
	if p.stepUpMissed == nil {
		p.stepUpMissed = map[*tenant]fixedStep{}
	}
	p.stepUpMissed[tn] = fixedStep{to: tn.choice, why: why}
}

// fixedTop is, of tn's kinds where some count meets the SLO (fixedRank 1), the one where a
// replica carries the most within it.
func fixedTop(tn *tenant) *cand {
	var top *cand
	for _, x := range slices.Concat(tn.feasible, tn.fixedFallback) {
		if fixedRank(x, *tn.t.Replicas) == 1 && (top == nil || x.ev.oneRate().RequestsPerSec > top.ev.oneRate().RequestsPerSec) {
			top = x
		}
	}
	return top
}

// heldGPUs counts the pool GPUs that hold a replica of tn.
func (p *planner) heldGPUs(tn *tenant) int {
	n := 0
	for _, g := range p.gpus {
		if g.role == v1.RolePool && slices.ContainsFunc(g.units(), func(u *unit) bool {
			return slices.ContainsFunc(u.reps, func(r replica) bool { return r.tn == tn })
		}) {
			n++
		}
	}
	return n
}

// ratePerGPU is the rate one replica of c carries within the SLO per GPU-equivalent it holds. A
// step up keeps to kinds that carry no less per GPU than the one it leaves, so that a fixed
// count missing its SLO does not take a tensor-parallel group of eight GPUs for a few per cent
// more rate.
func ratePerGPU(c *cand) float64 {
	return c.ev.oneRate().RequestsPerSec * float64(c.share) / c.unitFrac
}

// anyIdle reports whether the plan leaves a pool GPU idle.
func (p *planner) anyIdle() bool {
	return slices.ContainsFunc(p.gpus, func(g *gpuPlan) bool { return g.role == v1.RoleIdle })
}

// anyShort reports whether a tenant with a chosen kind is short of GPUs.
func (p *planner) anyShort() bool {
	return slices.ContainsFunc(p.tenants, func(tn *tenant) bool {
		return tn.choice != nil && slices.ContainsFunc(tn.infeas, func(r v1.Reason) bool { return r.Code == v1.ReasonNoCapacity })
	})
}

// fixedChoiceWhy says, for the reasons of a fixed-count tenant that misses its SLO, why its
// kind was chosen: it stepped down for others or up onto idle GPUs (fixedSteps), or a kind where
// the count meets the SLO found no room, or, where no kind meets it, it is the cheapest kind
// where some count would and no kind that carries more fits the idle GPUs.
func (p *planner) fixedChoiceWhy(tn *tenant) string {
	c, fixed := tn.choice, *tn.t.Replicas
	if s, ok := p.fixedSteps[tn]; ok && s.to == c {
		return "; " + s.why
	}
	if fixedRank(c, fixed) == 0 {
		return ""
	}
	if i := slices.IndexFunc(tn.feasible, func(x *cand) bool { return fixedMeets(x, fixed) }); i >= 0 {
		return fmt.Sprintf("; on %s of %s the count meets it, but no GPU was free for it (see below): a fixed count falls back to the best kind that fits",
			tn.feasible[i].label(), tn.feasible[i].board.Name)
	}
	if fixedRank(c, fixed) != 1 {
		return ""
	}
	top := fixedTop(tn)
	if top == nil || top.ev.oneRate().RequestsPerSec <= c.ev.oneRate().RequestsPerSec {
		return fmt.Sprintf("; planned on the slice kind where one replica carries the most within the SLO (%.3g req/s), so the count misses it by the least", c.ev.oneRate().RequestsPerSec)
	}
	const cheapest = "; planned on the cheapest slice kind where some count meets it, to take no room from other tenants: "
	if s, ok := p.stepUpMissed[tn]; ok && s.to == c {
		return cheapest + s.why
	}
	return fmt.Sprintf("%s%s of %s, where one replica carries %.3g req/s within the SLO against %.3g here, was not tried: a larger kind is tried only once the tenant is served in full",
		cheapest, top.label(), top.board.Name, top.ev.oneRate().RequestsPerSec, c.ev.oneRate().RequestsPerSec)
}
