package plan

import (
	"fmt"
	"slices"
	"sync"

	v1 "gpupool.dev/gpupool/api/v1"
)

// spreadRedundant keeps a redundant tenant off a single GPU: when all its replicas landed on one
// GPU, one of them moves to (or swaps with a non-redundant tenant's replica in) a unit of the
// same group on another GPU; when no such unit has room, to another GPU of the board (spreadTo).
func (p *planner) spreadRedundant() {
	var where map[*unit]*gpuPlan
	var byKey map[groupKey][]*unit
	index := func() {
		where, byKey = p.reuse.spreadIndex(len(p.gpus))
		for _, g := range p.gpus {
			for u := range g.eachUnit {
				where[u] = g
				byKey[u.key] = append(byKey[u.key], u)
			}
		}
	}
	for _, tn := range p.tenants {
		if !tn.t.Redundancy || tn.choice == nil || tn.choice.replicas < 2 {
			continue
		}
		home, from, placed := p.soleGPU(tn)
		if home == nil {
			continue
		}
		if where == nil { // indexed when first needed: most pools have no replicas to spread
			index()
		}
		if moveOne(tn, from, home, byKey[from.key], where) {
			continue
		}
		if p.spreadTo(tn, from, home) {
			where, byKey = nil, nil // units moved: indexed again when next needed
			continue
		}
		r := v1.NewReason(v1.ReasonRedundancy,
			"all %d replicas run on %s: no other GPU has a %s slot of its group (board, energy class, sharing) to spread them to, and no other %s GPU of its energy class has room for one whose node allows it",
			placed, home.fg.ref, tn.choice.label(), home.fg.board.Name)
		if !slices.Contains(tn.infeas, r) { // the rescue spreads the packing's tenants again
			tn.infeas = append(tn.infeas, r)
		}
	}
}

// soleGPU is the one GPU that holds every placed replica of tn, a unit of it there that holds
// one, and how many replicas it holds; home is nil when tn's replicas are on more GPUs than one
// (or none).
func (p *planner) soleGPU(tn *tenant) (home *gpuPlan, from *unit, placed int) {
	for _, g := range p.gpus {
		for u := range g.eachUnit {
			if !holds(u, tn) {
				continue
			}
			if home != nil && home != g {
				return nil, nil, 0
			}
			home, from = g, u
			placed += countOf(u, tn)
		}
	}
	return home, from, placed
}

// countOf is how many of tn's replicas u holds.
func countOf(u *unit, tn *tenant) int {
	n := 0
	for _, r := range u.reps {
		if r.tn == tn {
			n++
		}
	}
	return n
}

// spreadTo moves one of tn's replicas out of unit from on home (which holds all of them) to
// another GPU of the same board: as one more MIG instance of its profile on a MIG GPU of the same
// energy class whose layout (within one of the board's maximal patterns, laid out again by
// gpu.Place) and node take it, else onto an idle GPU whose node takes it (a MIG instance alone,
// or the whole GPU in the unit's mode). The node rules are the packer's (compatible, reserve).
// It reports whether a replica moved. Tensor-parallel units span GPUs already and stay.
func (p *planner) spreadTo(tn *tenant, from *unit, home *gpuPlan) bool {
	if from.c.tp > 1 || from.c.board != home.fg.board {
		return false
	}
	i := slices.IndexFunc(from.reps, func(r replica) bool { return r.tn == tn })
	if i < 0 {
		return false
	}
	nu := &unit{key: from.key, c: from.c, reps: []replica{from.reps[i]}}
	board := home.fg.board
	if from.c.whole() {
		want := wholeWant(nu)
		for _, g := range p.gpus {
			if g.role != v1.RoleIdle || g.fg.board != board || !p.compatible(g.fg.ref.Node, want) {
				continue
			}
			p.reserve(g.fg.ref.Node, want)
			g.role, g.whole = v1.RolePool, nu
			g.mode = map[v1.SliceKind]v1.Mode{v1.SliceExclusive: v1.ModeExclusive, v1.SliceMPS: v1.ModeMPS, v1.SliceTimeSlice: v1.ModeTimeSlice}[from.c.kind]
			from.reps = slices.Delete(from.reps, i, i+1)
			return true
		}
		return false
	}
	pc := p.patternCache()
	pats, err := pc.get(board)
	if err != nil || pats.index(from.c.profile.Name) < 0 {
		return false
	}
	want := map[string]migUse{}
	addInstWant(want, from.c.profile.Name, useOf(nu))
	var targets []*gpuPlan // MIG GPUs of the energy class with room first, then idle GPUs; fleet order
	for _, g := range p.gpus {
		if us := g.units(); g != home && g.role == v1.RolePool && g.mode == v1.ModeMIG && g.fg.board == board && len(us) > 0 && us[0].key.energy == from.key.energy {
			targets = append(targets, g)
		}
	}
	for _, g := range p.gpus {
		if g.role == v1.RoleIdle && g.fg.board == board {
			targets = append(targets, g)
		}
	}
	for _, g := range targets {
		if !p.compatible(g.fg.ref.Node, want) {
			continue
		}
		laid, ok := p.relaid(g, pats, pc, nu, nil)
		if !ok {
			continue
		}
		rest := home
		if len(from.reps) == 1 { // the instance leaves home: lay home out without it
			if rest, ok = p.relaid(home, pats, pc, nil, from); !ok {
				continue
			}
		}
		p.reserve(g.fg.ref.Node, want)
		g.role, g.mode, g.insts = laid.role, laid.mode, laid.insts
		home.insts = rest.insts
		if len(from.reps) > 1 {
			from.reps = slices.Delete(from.reps, i, i+1)
		}
		return true
	}
	return false
}

// relaid lays MIG GPU g out again with its units plus add and less drop (either may be nil), on a
// copy; false when the profile counts fit none of the board's maximal patterns or gpu.Place
// finds no layout.
func (p *planner) relaid(g *gpuPlan, pats *patterns, pc *patternCache, add, drop *unit) (*gpuPlan, bool) {
	v := make([]int, len(pats.profiles))
	queues := map[string][]*unit{}
	us := g.units()
	if add != nil {
		us = append(slices.Clone(us), add)
	}
	for _, u := range us {
		if u == drop || u.c.profile == nil {
			continue
		}
		k := pats.index(u.c.profile.Name)
		if k < 0 {
			return nil, false
		}
		v[k]++
		queues[u.c.profile.Name] = append(queues[u.c.profile.Name], u)
	}
	if !fits(pats, v) {
		return nil, false
	}
	out := &gpuPlan{fg: g.fg, role: g.role, mode: g.mode}
	if err := p.fillMIG(out, g.fg.board, pats, v, queues, pc); err != nil {
		return nil, false
	}
	return out, true
}

func holds(u *unit, tn *tenant) bool {
	for _, r := range u.reps {
		if r.tn == tn {
			return true
		}
	}
	return false
}

func moveOne(tn *tenant, from *unit, home *gpuPlan, peers []*unit, where map[*unit]*gpuPlan) bool {
	i := -1
	for k, r := range from.reps {
		if r.tn == tn {
			i = k
		}
	}
	for _, u := range peers {
		if where[u] == home {
			continue
		}
		if len(u.reps) < u.key.share {
			u.reps = append(u.reps, from.reps[i])
			from.reps = append(from.reps[:i], from.reps[i+1:]...)
			return true
		}
		for j, r := range u.reps {
			if r.tn != tn && !r.tn.t.Redundancy {
				u.reps[j], from.reps[i] = from.reps[i], u.reps[j]
				return true
			}
		}
	}
	return false
}

// draft turns the packed GPUs into a v1.Plan, without its lower bound and baselines.
func (p *planner) draft() *v1.Plan {
	out, refs := p.draftGPUs()
	for _, tn := range p.tenants {
		out.Tenants = append(out.Tenants, p.planTenant(tn, refs[tn], p.predict(tn, len(refs[tn]))))
	}
	out.Summary.Objective = p.objective()
	return out
}

// draftGPUs is draft's GPUs, with the GPUs used in the summary, and each tenant's replicas.
func (p *planner) draftGPUs() (*v1.Plan, map[*tenant][]v1.ReplicaRef) {
	out := &v1.Plan{APIVersion: v1.APIVersion, Kind: v1.KindPlan, Metadata: v1.Metadata{Name: p.pool.Metadata.Name},
		Pool: p.pool.Metadata.Name}
	next := map[*tenant]int{}
	refs := map[*tenant][]v1.ReplicaRef{}
	burstMode := p.idleMode()
	used := 0
	tpDone := map[*unit][]v1.PlanReplica{} // a tensor-parallel unit's replicas, listed under each of its GPUs
	for _, g := range p.gpus {
		pg := v1.PlanGPU{Node: g.fg.ref.Node, Index: g.fg.ref.Index, Board: g.fg.board.Name, Role: g.role, Mode: g.mode}
		if g.mode == "" {
			pg.Mode = burstMode
		}
		switch u := g.whole; {
		case u != nil && len(u.reps) > 0 && u.tp.Size > 0:
			if tpDone[u] == nil { // the group's first GPU in fleet order, its lowest index
				tpDone[u] = p.replicas(u, pg.Ref(), v1.InstanceRef{}, next, refs)
				for i := range tpDone[u] {
					tpDone[u][i].TensorParallel = u.tp
				}
			}
			pg.Replicas = slices.Clone(tpDone[u])
		case u != nil && len(u.reps) > 0:
			pg.Replicas = p.replicas(u, pg.Ref(), v1.InstanceRef{}, next, refs)
		}
		for _, pi := range g.insts {
			in := v1.PlanInstance{Profile: pi.in.Profile, Start: pi.in.Start}
			if pi.u != nil {
				in.Sharing.Mode = sharingOf(pi.u.c.kind)
				in.Replicas = p.replicas(pi.u, pg.Ref(), in.Ref(), next, refs)
			}
			pg.Instances = append(pg.Instances, in)
		}
		if g.role == v1.RolePool && hasReplicas(pg) {
			used++
		} else if g.role == v1.RolePool {
			pg.Role = v1.RoleIdle
		}
		pg.Reasons = p.gpuReasons(g, pg)
		out.GPUs = append(out.GPUs, pg)
	}
	p.hideOtherBoards(out)
	out.Summary = v1.Summary{GPUsUsed: used, GPUsTotal: len(p.gpus)}
	return out, refs
}

// result is the plan of the chosen and packed state: draft with its lower bound and baselines.
//
// The lower bound runs on a goroutine of its own while this one computes the tenants'
// predictions (predict: the queueing model's rate and latency searches on each chosen
// candidate), the two largest parts of the result. They share nothing that either writes: the
// bound swaps candidates' counts (lbReplicas) and tenants' feasible lists in and out and reads
// only candidates' counts, slices and prices, the predictions read the candidates' evaluations
// and fill the queueing models' and evaluations' memos. The tenants' reasons, which read the
// counts, are written after the bound has put them back, so the plan does not depend on which
// finishes first.
func (p *planner) result() (*v1.Plan, error) {
	out, refs := p.draftGPUs()
	var lb int
	var wg sync.WaitGroup
	wg.Go(func() { lb = p.lowerBound() })
	preds := make([]v1.Prediction, len(p.tenants))
	for i, tn := range p.tenants {
		if p.stopped() {
			break // Build discards the plan
		}
		preds[i] = p.predict(tn, len(refs[tn]))
	}
	wg.Wait()
	if err := p.ctx.Err(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	for i, tn := range p.tenants {
		out.Tenants = append(out.Tenants, p.planTenant(tn, refs[tn], preds[i]))
	}
	out.Summary.Objective = p.objective()
	out.Summary.LowerBound = lb
	out.Summary.Baselines = p.baselines()
	if err := p.ctx.Err(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	return out, nil
}

func hasReplicas(g v1.PlanGPU) bool {
	if len(g.Replicas) > 0 {
		return true
	}
	for _, in := range g.Instances {
		if len(in.Replicas) > 0 {
			return true
		}
	}
	return false
}

// idleMode is the mode of GPUs that run nothing: exclusive when allowed, else the first allowed.
func (p *planner) idleMode() v1.Mode {
	for _, m := range []v1.Mode{v1.ModeExclusive, v1.ModeMIG, v1.ModeMPS, v1.ModeTimeSlice} {
		if p.modes[m] {
			return m
		}
	}
	return v1.ModeExclusive
}

func sharingOf(k v1.SliceKind) v1.SharingMode {
	switch k {
	case v1.SliceMIGMPS:
		return v1.SharingMPS
	case v1.SliceMIGTimeSlice:
		return v1.SharingTimeSlice
	}
	return ""
}

// replicas numbers the replicas of one unit and fills their limits and vLLM arguments.
func (p *planner) replicas(u *unit, g v1.GPURef, in v1.InstanceRef, next map[*tenant]int, refs map[*tenant][]v1.ReplicaRef) []v1.PlanReplica {
	var out []v1.PlanReplica
	for _, r := range u.reps {
		c := r.tn.choice
		idx := next[r.tn]
		next[r.tn]++
		pr := v1.PlanReplica{Tenant: r.tn.t.Name, Index: idx}
		if r.tn.measured == nil { // a measured tenant's server is not vLLM
			pr.VLLMArgs = vllmFlags(c)
		}
		switch c.kind {
		case v1.SliceMPS, v1.SliceMIGMPS:
			pr.Limits = v1.Limits{SMPercent: c.ev.smPct, Memory: v1.Bytes(c.ev.capBytes)}
		case v1.SliceTimeSlice, v1.SliceMIGTimeSlice:
			pr.Limits = v1.Limits{Memory: v1.Bytes(c.ev.capBytes), TimeSliceReplicas: 1}
		}
		out = append(out, pr)
		refs[r.tn] = append(refs[r.tn], v1.ReplicaRef{Index: idx, GPU: g, Instance: in, Slice: c.kind})
	}
	return out
}

// planTenant is the plan's view of one tenant: its replicas, prediction (predict's, for its
// len(refs) replicas) and reasons.
func (p *planner) planTenant(tn *tenant, refs []v1.ReplicaRef, pred v1.Prediction) v1.PlanTenant {
	pt := v1.PlanTenant{Name: tn.t.Name, Replicas: refs}
	if tn.choice == nil {
		pt.Infeasible = true
		pt.Reasons = p.infeasibleReasons(tn)
		return pt
	}
	pt.Predicted = pred
	pt.Reasons = p.tenantReasons(tn)
	if r, ok := p.fixedUnmet(tn); ok { // a fixed count the SLO needs more than: planned, and said so
		pt.Infeasible = true
		pt.Reasons = append([]v1.Reason{r}, pt.Reasons...)
	}
	if r, ok := p.simReason(tn); ok {
		pt.Reasons = append(pt.Reasons, r)
	}
	for _, r := range tn.infeas {
		if r.Code != v1.ReasonRedundancy {
			pt.Infeasible = true
		}
	}
	if pt.Infeasible { // why it is short comes first: readers and the table show the first reason
		pt.Reasons = append(slices.Clone(tn.infeas), pt.Reasons...)
	} else {
		pt.Reasons = append(pt.Reasons, tn.infeas...)
	}
	return pt
}

// predict is the prediction of tn's chosen candidate on n replicas (none without a choice):
// its latencies at the tenant's load and the highest rate the replicas carry within the SLO.
// It reads the candidate's evaluation and the tenant alone, never the candidates' counts.
func (p *planner) predict(tn *tenant, nrep int) v1.Prediction {
	if tn.choice == nil {
		return v1.Prediction{}
	}
	c := tn.choice
	n := float64(nrep)
	ttft, tpot := c.ev.oneRate().TTFT, c.ev.oneRate().TPOT
	lam, at := 0.0, 0
	if c.sz.n > 0 && tn.t.Traffic.RPS > 0 { // at the tenant's own load, over its replicas
		ttft, tpot = seconds(c.sz.state().ttft), seconds(c.sz.state().tpot)
		if c.sz.at != nil {
			lam, at = c.sz.at.lam, c.sz.at.n
		}
	}
	e2e := predictE2E(tn, c.ev.q, lam, at, ttft, tpot)
	var pred v1.Prediction
	if tn.measured != nil {
		// a request waits at most one batch to start and one to finish: 2 × the batch latency;
		// measured replicas each carry the measured rate (ParvaGPU's rule)
		pred = v1.Prediction{E2EP99: v1.Duration(2 * c.ev.oneRate().TTFT), MaxRPS: roundRate(n*c.ev.oneRate().RequestsPerSec, tn.t.Traffic.RPS)}
	} else {
		// the highest rate the planned replicas carry within the SLO, behind one router
		most, _ := c.ev.q.maxRateOver(tn.slo, nrep, peakRate(tn.t.Traffic))
		pred = v1.Prediction{TTFTP99: v1.Duration(ttft), TPOTP99: v1.Duration(tpot),
			E2EP99: v1.Duration(e2e), TokensPerSecond: round3(most * float64(tn.work.OutputTokens)), MaxRPS: roundRate(most, tn.t.Traffic.RPS)}
		if tn.t.Traffic.Pattern == v1.PatternBursty {
			pred.BurstRPS = round3(peakRate(tn.t.Traffic))
		}
	}
	return pred
}

// roundRate rounds a rate to 3 decimals for the plan, but not below offered when it carries it.
func roundRate(x, offered float64) float64 {
	if r := round3(x); r >= offered || x < offered {
		return r
	}
	return offered
}
