package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// countMoves counts the replicas a migration moves to another GPU (CountMoves): restarts in
// place are reconfigurations, counted apart.
func countMoves(steps []Step) int { return CountMoves(steps) }

// replan weighs the re-packed plan next against the plan in force (Options.Current) and returns
// the plan to run:
//
//   - next, the re-pack;
//   - kept, the plan in force for every tenant it still serves on the slices it runs on now
//     (servedInForce), the others (new tenants, tenants whose slices no longer carry their load)
//     started in the room its busy GPUs leave free, else placed on the GPUs that plan leaves idle
//     (keepServed): the fewest moves that serve the pool;
//   - with Options.MaxMoves, when next moves more replicas than allowed, a partial re-pack
//     (partialRepack).
//
// Of those within the move budget that leave no more tenants short than next does (a budget
// limits changes, not service) it takes the one with the fewest tenants short, then the fewest
// GPUs, then the fewest replica moves, then the fewest MPS clients restarted by the plan's node
// device-plugin config changes (NodeConfigRestarts), then the fewest GPU changes, next first
// among equals: a re-pack that saves no GPU does not reconfigure or move anything. Every tenant
// of a plan other than next gets a MoveBudget reason with the numbers given up. Moves are
// replicas that change GPU (CountMoves); restarts and moves on a replica's own GPU are
// reconfigurations, not counted against the budget, MPS restarts included (a tenant leaving an
// MPS node restarts those that stay in every plan). When the kept plan's starts in room restart
// MPS clients, the kept plan with nothing started in room (keepServedFill) is weighed too.
//
// With a budget, when no plan within it serves every tenant next serves, the best plan within it
// is taken all the same (by the same order), and says so: the kept plan, or the plan in force
// held as it is (keepHolding: every tenant keeps what runs now, those it no longer serves short,
// with why), never one that leaves a tenant without the replicas it runs now. When not even that
// exists (a tenant that runs now would have to stop: its slice kind is no longer allowed) Build
// fails, naming the tenants that must move and why.
//
// A kept, held or partly re-packed plan chosen is confirmed by simulation as the re-pack was
// (confirmKept): its tenants found short start a replica more in room, which changes none of the
// plan's GPUs, moves or GPU changes, else on a GPU it leaves idle, which adds a GPU; when the runs
// leave a tenant short or a GPU is added, every plan is weighed again.
func (p *planner) replan(next *v1.Plan) (*v1.Plan, error) {
	cur := p.o.Current
	limit := -1
	if p.o.MaxMoves != nil {
		limit = *p.o.MaxMoves
	}
	within := func(m int) bool { return limit < 0 || m <= limit }
	nextSteps := Migration(cur, next, 1)
	moves := countMoves(nextSteps)
	nextRestarts, nextChanges := NodeConfigRestarts(p.pool, cur, next)
	if moves == 0 && nextRestarts == 0 && len(gpuChanges(nextSteps)) == 0 {
		return next, nil // the re-pack is the plan in force already
	}
	type option struct {
		pl       *v1.Plan
		moves    int
		restarts int // replicas restarted in place by node-config changes (NodeConfigRestarts)
		score    [5]int
		chosen   string
	}
	var best, fallback *option
	opts := map[*v1.Plan]*option{} // each plan's last weighing, within the budget or not
	_, running := p.inForce()
	short := shortTenants(next)
	type weighed struct {
		pl     *v1.Plan
		chosen string
	}
	var all []weighed // every plan weighed, to weigh again once a kept plan is confirmed
	weigh := func(pl *v1.Plan, chosen string) {
		steps := Migration(cur, pl, 1)
		restarts, _ := NodeConfigRestarts(p.pool, cur, pl)
		o := &option{pl: pl, moves: countMoves(steps), restarts: restarts, chosen: chosen}
		opts[pl] = o
		if !within(o.moves) {
			return
		}
		// a replica an MPS daemon's restart restarts is down as a moved one is, but in place and
		// often forced (a departure restarts its node's clients in every plan): weighed after
		// the moves, not against the budget (ADR 0062, amendment)
		o.score = [5]int{shortTenants(pl), pl.Summary.GPUsUsed, o.moves, o.restarts, len(gpuChanges(steps))}
		if shortTenants(pl) > short {
			// a budget limits changes, not service: such a plan is taken only when no plan
			// within the budget serves every tenant the re-pack serves, and never one that
			// leaves a tenant without the replicas it runs now
			if limit >= 0 && !stopsRunning(pl, running) && (fallback == nil || slices.Compare(o.score[:], fallback.score[:]) < 0) {
				fallback = o
			}
			return
		}
		if best == nil || slices.Compare(o.score[:], best.score[:]) < 0 {
			best = o
		}
	}
	consider := func(pl *v1.Plan, chosen string) {
		all = append(all, weighed{pl, chosen})
		weigh(pl, chosen)
	}
	consider(next, "next")
	kept, mustMove, keepErr := p.keepServed(next)
	var keptIdle *v1.Plan // the kept plan with nothing started in room, when that room restarts MPS clients
	var idleMustMove []error
	keptRestarts, keptChanges := 0, []DevicePluginChange(nil)
	if keepErr == nil {
		consider(kept, "kept")
		if keptRestarts, keptChanges = NodeConfigRestarts(p.pool, cur, kept); keptRestarts > 0 {
			if pl, why, err := p.keepServedFill(next, false); err == nil {
				keptIdle, idleMustMove = pl, why
				consider(keptIdle, "kept")
			}
		}
	}
	var partErr error
	var part *v1.Plan
	var made int
	if !within(moves) {
		part, made, partErr = p.partialRepack(next, limit)
		if partErr == nil {
			consider(part, "part")
		}
	}
	heldTried := false
	tryHeld := func() {
		if best != nil || limit < 0 || len(cur.LoRAEngines) > 0 || heldTried {
			return
		}
		heldTried = true
		// Nothing within the budget serves every tenant the re-pack serves: the best plan within
		// it does not, and says so. Besides the kept plan (when it could be made), the plan in
		// force held as it is: every tenant keeps what runs now, those it does not serve short.
		why := fmt.Sprintf("serving it within max-moves %d: re-packing moves %d replicas", limit, moves)
		if keepErr != nil {
			why += "; keeping the others where they run and placing it: " + keepErr.Error()
		}
		if partErr != nil {
			why += "; re-packing part of the pool: " + partErr.Error()
		}
		if held, err := p.keepHolding(next, why); err == nil {
			consider(held, "held")
		}
	}
	tryHeld()
	// The kept, held or partly re-packed plan chosen is confirmed by simulation as the re-pack
	// was (confirmKept). A replica it starts in room changes none of the plan's GPUs, moves or
	// GPU changes, so the weighing stands; a replica on an idle GPU or a tenant left short does
	// not, and every plan is weighed again.
	confirmed := map[*v1.Plan]bool{}
	for {
		pick := best
		if pick == nil {
			pick = fallback
		}
		if pick == nil || pick.chosen == "next" || confirmed[pick.pl] {
			break
		}
		before, gpusBefore := shortTenants(pick.pl), pick.pl.Summary.GPUsUsed
		if err := p.confirmKept(pick.pl, pick.chosen, limit); err != nil {
			return nil, err
		}
		confirmed[pick.pl] = true
		// a replica started on a GPU the plan left idle adds a GPU and a GPU change (ADR 0065)
		if shortTenants(pick.pl) == before && pick.pl.Summary.GPUsUsed == gpusBefore {
			break
		}
		best, fallback = nil, nil
		for _, w := range all {
			weigh(w.pl, w.chosen)
		}
		tryHeld()
	}
	if best != nil && best.chosen == "part" {
		gpus, _ := p.inForce()
		r := v1.NewReason(v1.ReasonMoveBudget, "partly re-packed within max-moves %d: %d of the re-pack's %d replica moves, those that free the most GPUs; the pool runs on %d GPUs (re-packed: %d, plan in force: %d)",
			limit, made, moves, part.Summary.GPUsUsed, next.Summary.GPUsUsed, usedGPUs(gpus))
		addReason(part, r)
	}
	if best == nil && fallback != nil {
		pl := fallback.pl
		names := shortNames(pl, next)
		addReason(pl, v1.NewReason(v1.ReasonMoveBudget, "no plan within max-moves %d serves every tenant the re-pack serves (it moves %d replicas): this one moves %d%s and leaves %s short (the re-pack: %d short, %d GPUs; this plan: %d GPUs)",
			limit, moves, fallback.moves, restartsOf(fallback.restarts), strings.Join(names, ", "), short, next.Summary.GPUsUsed, pl.Summary.GPUsUsed))
		return pl, nil
	}
	if best == nil {
		why := ""
		switch {
		case keepErr != nil:
			why = "; the plan in force cannot be kept for the tenants it serves: " + keepErr.Error()
		case shortTenants(kept) > short:
			why = fmt.Sprintf("; keeping the plan in force for the tenants it serves (%s) leaves %s short that the re-pack serves",
				joinErrs(mustMove), strings.Join(shortNames(kept, next), ", "))
		default:
			why = fmt.Sprintf("; keeping the plan in force for the tenants it serves moves %d (%s)",
				countMoves(replicaSteps(cur, kept)), joinErrs(mustMove))
		}
		if partErr != nil {
			why += "; re-packing part of the pool: " + partErr.Error()
		}
		return nil, fmt.Errorf("build plan: re-packing moves %d replicas, more than max-moves %d%s", moves, limit, why)
	}
	if best.chosen != "kept" {
		if best.chosen == "next" && keepErr == nil {
			roomReasons(next, kept) // where the re-pack makes the kept plan's starts in room, it says so
			if k := opts[kept]; k != nil && keptRestarts > 0 && within(k.moves) && slices.Equal(k.score[:3], best.score[:3]) && k.score[3] > best.score[3] {
				// the kept plan's restarts decided: it serves as many on as many GPUs with as many moves
				addReason(next, v1.NewReason(v1.ReasonMoveBudget, "re-packed: keeping the plan in force would restart %d MPS clients in place (%s: the node's device-plugin config change restarts its MPS daemon), where re-packing restarts %d, on %d GPUs with %d replica moves as it",
					k.restarts, restartsText(keptChanges), best.restarts, best.score[1], best.moves))
			}
		}
		return best.pl, nil
	}
	keptRoom := kept
	if best.pl == keptIdle {
		kept, mustMove = keptIdle, idleMustMove
	}
	budget := ""
	if limit >= 0 {
		budget = fmt.Sprintf(", more than max-moves %d", limit)
		if within(moves) {
			budget = fmt.Sprintf(" (max-moves %d)", limit)
		}
	}
	msg := "the plan in force is kept"
	if len(mustMove) > 0 {
		msg += fmt.Sprintf(" for the tenants it still serves, %d replica moves in all (%s)", best.moves, joinErrs(mustMove))
	}
	if best.restarts > 0 {
		_, ch := NodeConfigRestarts(p.pool, cur, kept)
		msg += fmt.Sprintf(", its node device-plugin config changes restarting %d MPS clients in place (%s)", best.restarts, restartsText(ch))
	}
	if room := opts[keptRoom]; best.pl == keptIdle && room != nil && within(room.moves) && slices.Equal(room.score[:3], best.score[:3]) && room.restarts > best.restarts {
		// the restarts decided: the room serves as many on as many GPUs with as many moves
		msg += fmt.Sprintf("; what it does not serve is placed on GPUs it leaves idle, not started in the room of its busy GPUs: that would restart %d MPS clients in place (%s: the node's device-plugin config change restarts its MPS daemon; a restarted replica is down as a moved one is), where this plan restarts %d, for no GPU or move saved",
			room.restarts, restartsText(keptChanges), best.restarts)
	}
	repack := fmt.Sprintf("move %d replicas", moves)
	if nextRestarts > 0 {
		repack += fmt.Sprintf(" and restart %d MPS clients in place (%s)", nextRestarts, restartsText(nextChanges))
	}
	if s, k := shortTenants(next), shortTenants(kept); s > k {
		msg += fmt.Sprintf(": re-packing would leave %d tenants short (this plan %d), run the pool on %d GPUs instead of %d and %s%s",
			s, k, next.Summary.GPUsUsed, kept.Summary.GPUsUsed, repack, budget)
	} else if d := kept.Summary.GPUsUsed - next.Summary.GPUsUsed; d == 0 {
		// the budget is not why: a re-pack that saves no GPU is not made with or without one
		msg += fmt.Sprintf(": re-packing would save no GPU (it runs the pool on %d too) and %s", next.Summary.GPUsUsed, repack)
	} else if d > 0 {
		msg += fmt.Sprintf(": re-packing would run the pool on %d GPUs instead of %d (%d fewer) but %s%s",
			next.Summary.GPUsUsed, kept.Summary.GPUsUsed, d, repack, budget)
	} else {
		msg += fmt.Sprintf(": re-packing would run the pool on %d GPUs instead of %d (%d more) and %s%s",
			next.Summary.GPUsUsed, kept.Summary.GPUsUsed, -d, repack, budget)
	}
	addReason(kept, v1.NewReason(v1.ReasonMoveBudget, "%s", msg))
	return kept, nil
}

// roomReasons gives each tenant of next that runs on the very slots the kept plan started it
// on in room the plan in force leaves free (fillKept), on GPUs next does not reconfigure either,
// the kept plan's reason that says so: the re-pack makes the same starts.
func roomReasons(next, kept *v1.Plan) {
	changed := map[v1.GPURef]bool{}
	for _, s := range gpuChanges(Migration(kept, next, 1)) {
		changed[s.GPU] = true
	}
	was, now := replicaSlots(kept), replicaSlots(next)
	key := func(ss []slot) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = fmt.Sprint(s)
		}
		slices.Sort(out)
		return out
	}
	for i := range next.Tenants {
		t := &next.Tenants[i]
		k, ok := planTenant(kept, t.Name)
		if !ok || !slices.Equal(key(was[t.Name]), key(now[t.Name])) ||
			slices.ContainsFunc(now[t.Name], func(s slot) bool { return changed[s.gpu] }) {
			continue
		}
		for _, r := range k.Reasons {
			if r.Code == v1.ReasonMoveBudget && strings.Contains(r.Message, "in room the plan in force leaves free") && !slices.Contains(t.Reasons, r) {
				t.Reasons = append(slices.Clone(t.Reasons), r)
			}
		}
	}
}

// addReason appends r to every tenant's reasons of pl.
func addReason(pl *v1.Plan, r v1.Reason) {
	for i := range pl.Tenants {
		pl.Tenants[i].Reasons = append(slices.Clone(pl.Tenants[i].Reasons), r)
	}
}

// shortTenants counts the tenants pl marks infeasible.
func shortTenants(pl *v1.Plan) int {
	n := 0
	for _, t := range pl.Tenants {
		if t.Infeasible {
			n++
		}
	}
	return n
}

// replicasN is "1 replica" or "n replicas".
func replicasN(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

// shortNames names the tenants pl marks infeasible and than does not.
func shortNames(pl, than *v1.Plan) []string {
	served := map[string]bool{}
	for _, t := range than.Tenants {
		served[t.Name] = !t.Infeasible
	}
	var out []string
	for _, t := range pl.Tenants {
		if t.Infeasible && served[t.Name] {
			out = append(out, t.Name)
		}
	}
	return out
}

// joinErrs joins the errors' messages with "; ".
func joinErrs(errs []error) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// gpuChanges keeps the GPU changes of a migration.
func gpuChanges(steps []Step) []Step {
	return slices.DeleteFunc(slices.Clone(steps), func(s Step) bool { return s.Kind != StepGPU })
}

// slotUse is one replica of the plan in force as servedInForce weighs it: its board, slice kind,
// MIG profile, tensor-parallel degree and, on a shared slice, its MPS SM percentage and memory
// cap (which name the share it was sized for).
type slotUse struct {
	board, kind, profile string
	tp                   int
	smPct                int
	capBytes             int64
}

// inForce is the plan in force for the pool as it is now: its GPUs with the replicas of tenants
// no longer in the pool removed (a GPU left with none is idle), and each remaining tenant's
// replicas as slot uses.
func (p *planner) inForce() ([]v1.PlanGPU, map[string][]slotUse) {
	inPool := map[string]bool{}
	for _, tn := range p.tenants {
		inPool[tn.t.Name] = true
	}
	gone := func(r v1.PlanReplica) bool { return !inPool[r.Tenant] }
	var gpus []v1.PlanGPU
	for _, g := range p.o.Current.GPUs {
		g.LoRAEngine = "" // shared LoRA engines are placed apart (PlaceLoRAEngines), back here when idle
		g.Replicas = slices.DeleteFunc(slices.Clone(g.Replicas), gone)
		g.Instances = slices.Clone(g.Instances)
		for i := range g.Instances {
			in := &g.Instances[i]
			in.Replicas = slices.DeleteFunc(slices.Clone(in.Replicas), gone)
		}
		if g.Role == v1.RolePool && g.ReplicaCount() == 0 {
			g.Role = v1.RoleIdle
		}
		gpus = append(gpus, g)
	}
	return gpus, planUses(&v1.Plan{GPUs: gpus})
}

// planUses lists each tenant's replicas in pl as slot uses, a tensor-parallel replica once.
func planUses(pl *v1.Plan) map[string][]slotUse {
	uses := map[string][]slotUse{}
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if tp := r.TensorParallel.GPUs; len(tp) > 0 && tp[0] != g.Index {
				continue
			}
			uses[r.Tenant] = append(uses[r.Tenant], slotUse{g.Board, string(v1.SliceOf(g.Mode, "")), "", max(r.TensorParallel.Size, 1),
				r.Limits.SMPercent, int64(r.Limits.Memory)})
		}
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				uses[r.Tenant] = append(uses[r.Tenant], slotUse{g.Board, string(v1.SliceOf(v1.ModeMIG, in.Sharing.Mode)), in.Profile, 1,
					r.Limits.SMPercent, int64(r.Limits.Memory)})
			}
		}
	}
	return uses
}

// inForceCand is tn's candidate for the slice its replicas run on in the plan in force (uses),
// or why there is none: they must all run on one slice kind (board, kind, MIG profile, tensor-
// parallel degree and, when shared, the share their limits were sized for) that is still one
// of its candidates.
func inForceCand(tn *tenant, uses []slotUse) (*cand, error) {
	u := uses[0]
	for _, o := range uses[1:] {
		if o != u {
			return nil, fmt.Errorf("its %d replicas run on more than one slice kind", len(uses))
		}
	}
	for _, c := range tn.cands {
		if c.board.Name != u.board || string(c.kind) != u.kind || profName(c.profile) != u.profile || max(c.tp, 1) != u.tp {
			continue
		}
		shared := c.shared() && c.ev != nil
		if shared && (c.ev.smPct != u.smPct || c.ev.capBytes != u.capBytes) || !shared && (c.share != 1 || u.smPct != 0 || u.capBytes != 0) {
			continue
		}
		return c, nil
	}
	what := u.kind
	if u.profile != "" {
		what += " " + u.profile
	}
	return nil, fmt.Errorf("%s of %s is no longer one of its slice kinds (isolation, policy or limits changed)", what, u.board)
}

// servedInForce says why the plan in force does not serve tn, or nil. Its replicas there (uses)
// serve it when they run on a slice kind that is still one of its candidates (inForceCand), that
// candidate is feasible, and they are at least as many as it needs at the tenant's load now (the
// queueing model's count, with the simulation's raise when it was the chosen kind, and the
// pool's bounds) and no more than maxReplicas, cap or a fixed count allow. The replicas stay on
// the slices they have: nothing of them moves. A tenant with no replicas there is new to it.
func servedInForce(tn *tenant, uses []slotUse) error {
	name := tn.t.Name
	if len(uses) == 0 {
		if tn.choice == nil {
			return nil // nothing runs it now, and nothing can
		}
		return fmt.Errorf("tenant %s must start: it runs no replicas in the plan in force", name)
	}
	c, err := inForceCand(tn, uses)
	if err != nil {
		return fmt.Errorf("tenant %s must move: %w", name, err)
	}
	n := len(uses)
	where := c.label() + " of " + c.board.Name
	switch {
	case c.reject != "":
		return fmt.Errorf("tenant %s must move: on %s at %.3g req/s %s (%s)", name, where, tn.t.Traffic.RPS, c.why, c.reject)
	case n < c.replicas:
		return fmt.Errorf("tenant %s must move: it runs %s on %s, which at %.3g req/s needs %d", name, replicasN(n), where, tn.t.Traffic.RPS, c.replicas)
	case tn.t.Replicas != nil && n != c.replicas:
		return fmt.Errorf("tenant %s must move: it runs %s on %s, its fixed count is %d", name, replicasN(n), where, c.replicas)
	}
	if m := maxReplicasOf(tn.t); m > 0 && n > m {
		return fmt.Errorf("tenant %s must move: it runs %s on %s, more than %s", name, replicasN(n), where, maxReplicasName(tn.t))
	}
	return nil
}

// keepServed is the plan in force for the pool as it is now, for the tenants it still serves
// (servedInForce): their replicas stay where they run, the replicas of tenants no longer in the
// pool stop (their GPUs become idle when nothing else runs there), and the tenants it does not
// serve start first in the room its busy GPUs leave free (fillKept: nothing is reconfigured),
// the rest planned by themselves on the GPUs left idle (a pool of those tenants with every
// other GPU a canary), so they are the only ones that change. When the plan with those starts
// is not valid for the pool, it is made again without them. A tenant whose replicas there only
// fall short in number (growBy) keeps them and starts the rest on the same slice kind; when the
// idle GPUs do not give it that kind, it moves instead: all its replicas there are dropped and it
// is planned afresh, as new tenants are. It returns the plan, why each such tenant grows, starts
// or moves, and an error when that plan cannot be made or is not valid for the pool (caps, fixed
// counts, policy, node rules).
func (p *planner) keepServed(next *v1.Plan) (*v1.Plan, []error, error) {
	return p.keepServedFill(next, true)
}

// keepServedFill is keepServed, with the room the busy GPUs leave free tried first only when
// fill is set: without it, the tenants it does not serve are planned on the GPUs left idle alone
// (the kept plan re-planning weighs when starting them in that room restarts MPS clients).
func (p *planner) keepServedFill(next *v1.Plan, fill bool) (*v1.Plan, []error, error) {
	_, uses := p.inForce()
	grow := map[string]int{}
	for _, tn := range p.tenants {
		if servedInForce(tn, uses[tn.t.Name]) != nil {
			if _, more := growBy(tn, uses[tn.t.Name]); more > 0 {
				grow[tn.t.Name] = more
			}
		}
	}
	for {
		pl, why, off, err := p.keepServedGrowing(next, grow, fill)
		if fill && err != nil && len(off) == 0 {
			// the free slots of the plan in force gave no valid plan: every tenant placed afresh
			pl, why, off, err = p.keepServedGrowing(next, grow, false)
		}
		if len(off) == 0 {
			return pl, why, err
		}
		for _, name := range off {
			delete(grow, name)
		}
	}
}

// growBy is the candidate of tn's replicas in force (uses) and how many replicas it lacks there
// when that is all that keeps them from serving it: one feasible slice kind, no fixed count or
// redundancy (whose spread the added replicas would not know). 0: it cannot grow in place.
func growBy(tn *tenant, uses []slotUse) (*cand, int) {
	if len(uses) == 0 || tn.t.Replicas != nil || tn.t.Redundancy {
		return nil, 0
	}
	c, err := inForceCand(tn, uses)
	if err != nil || c.reject != "" || len(uses) >= c.replicas {
		return nil, 0
	}
	if m := maxReplicasOf(tn.t); m > 0 && c.replicas > m {
		return nil, 0
	}
	return c, c.replicas - len(uses)
}

// keepServedGrowing is keepServed with the tenants of grow growing in place by grow[name]
// replicas; off names those the idle GPUs did not give their slice kind (or left short), to be
// moved instead.
func (p *planner) keepServedGrowing(next *v1.Plan, grow map[string]int, fill bool) (pl *v1.Plan, why []error, off []string, err error) {
	cur := p.o.Current
	gpus, uses := p.inForce()
	served, stays, placed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	p.unspreadRoom = nil // what this filling finds (fillKept)
	var place []v1.Tenant
	for _, tn := range p.tenants {
		name := tn.t.Name
		err := servedInForce(tn, uses[name])
		switch {
		case err == nil && len(uses[name]) > 0:
			served[name], stays[name] = true, true
		case err != nil && grow[name] > 0:
			c, more := growBy(tn, uses[name])
			why = append(why, fmt.Errorf("tenant %s grows: it runs %s on %s of %s, which at %.3g req/s needs %d; %d more start",
				name, replicasN(len(uses[name])), c.label(), c.board.Name, tn.t.Traffic.RPS, c.replicas, more))
			t := tn.t
			t.Replicas, t.MinReplicas, t.MaxReplicas, t.Cap, t.Reservation = &more, nil, nil, nil, 0
			t.Traffic.RPS *= float64(more) / float64(c.replicas) // its share of the load, for the reasons
			place = append(place, t)
			stays[name], placed[name] = true, true
		case err != nil:
			why = append(why, err)
			place = append(place, tn.t)
			placed[name] = true
		}
	}
	kept := keepOnly(next, gpus, stays)
	byName := map[string]*tenant{}
	for _, tn := range p.tenants {
		byName[tn.t.Name] = tn
	}
	nextUses := planUses(next)
	for _, t := range cur.Tenants {
		if stays[t.Name] {
			n := len(uses[t.Name]) + grow[t.Name]
			t.Predicted = p.predictInForce(byName[t.Name], uses[t.Name], n, t.Predicted)
			t.Reasons = p.keptReasons(byName[t.Name], uses[t.Name], n, t, next, nextUses)
			kept.Tenants = append(kept.Tenants, t)
		}
	}
	kept.Summary = v1.Summary{GPUsUsed: usedGPUs(kept.GPUs), GPUsTotal: len(kept.GPUs), LowerBound: next.Summary.LowerBound,
		Baselines: next.Summary.Baselines, Objective: next.Summary.Objective}
	for _, t := range next.Tenants { // tenants nothing runs now and nothing can: as next has them
		if tn := byName[t.Name]; tn != nil && !stays[t.Name] && !placed[t.Name] {
			kept.Tenants = append(kept.Tenants, t)
		}
	}
	var filled map[string]bool
	if fill && len(place) > 0 {
		// free slots of GPUs that keep their layout first: starts, no GPU changes
		var notes []error
		place, filled, notes = p.fillKept(kept, next, place, grow, uses)
		why = append(why, notes...)
		for name := range filled {
			stays[name] = true
		}
	}
	refreshGPUReasons(kept, byName, uses) // what the GPUs kept run now, not what they ran
	if len(place) == 0 {
		kept.Tenants = inPoolOrder(p.tenants, kept.Tenants)
		if err := v1.ValidatePlan(kept, p.pool); err != nil {
			return nil, nil, nil, fmt.Errorf("it is not valid for the pool: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		return kept, why, nil, nil
	}
	mixed, sub, err := p.placeOnIdle(kept, next, place, stays)
	for name := range grow {
		if filled[name] {
			continue // it grew in free slots of the plan in force
		}
		if sub == nil {
			off = append(off, name) // the placement failed: try again with it moving
			continue
		}
		if t, ok := planTenant(sub, name); !ok || t.Infeasible {
			off = append(off, name)
			continue
		}
		for _, u := range planUses(sub)[name] {
			if u != uses[name][0] {
				off = append(off, name)
				break
			}
		}
	}
	slices.Sort(off)
	if err != nil {
		return nil, why, off, err
	}
	return mixed, why, off, nil
}

// planTenant is pl's entry for tenant name.
func planTenant(pl *v1.Plan, name string) (v1.PlanTenant, bool) {
	for _, t := range pl.Tenants {
		if t.Name == name {
			return t, true
		}
	}
	return v1.PlanTenant{}, false
}

// placeOnIdle plans the tenants place on the GPUs that kept leaves idle (not those that run a
// shared LoRA engine now, which would then move, nor burst or canary GPUs) and mixes that plan
// into kept, whose tenants (served) stay as they are. The GPUs kept runs replicas on fix their
// node's device-plugin MPS setting (mpsNodeRefs); when the placement breaks it on a node (a
// coarser share on an idle GPU of a node whose busy GPUs run finer ones, or more replicas on a GPU
// than a finer-shared GPU of the node allows), it is planned again without that node's idle GPUs,
// and the tenants it then leaves short say so.
func (p *planner) placeOnIdle(kept, next *v1.Plan, place []v1.Tenant, served map[string]bool) (mixed, placed *v1.Plan, err error) {
	var withheld []string // nodes whose idle GPUs a placement broke the MPS setting of
	withheldText := ""
	for {
		mixed, placed, err = p.placeOnIdleWithout(kept, next, place, served, withheld, withheldText)
		if err != nil || mixed == nil {
			return mixed, placed, err
		}
		broken := slices.DeleteFunc(mpsSettingBroken(p.pool, mixed), func(node string) bool {
			return slices.Contains(withheld, node) || !placesOn(placed, node)
		})
		if len(broken) == 0 {
			if err := v1.ValidatePlan(mixed, p.pool); err != nil {
				return nil, placed, fmt.Errorf("with %s planned on the GPUs it leaves idle, the partial re-pack is not valid for the pool: %w", tenantNames(place), err)
			}
			mixed.Summary.Objective = next.Summary.Objective
			return mixed, placed, nil
		}
		adopt := idleFor(kept, p.o.Current)
		withheldText = joinNonEmpty(withheldText, withoutNodes(kept.GPUs, broken, mpsNodeRefs(mixed), adopt))
		withheld = append(withheld, broken...)
	}
}

// placesOn reports whether pl runs a replica on a GPU of node.
func placesOn(pl *v1.Plan, node string) bool {
	for _, g := range pl.GPUs {
		if g.Node == node && g.ReplicaCount() > 0 {
			return true
		}
	}
	return false
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// idleFor is the GPUs kept leaves idle that a placement may take: not those that run replicas,
// burst or canary GPUs, nor those that run a shared LoRA engine in cur (taking one would move
// it), by gpuKey.
func idleFor(kept, cur *v1.Plan) map[string]bool {
	engine := map[v1.GPURef]bool{}
	for _, g := range cur.GPUs {
		engine[g.Ref()] = g.LoRAEngine != ""
	}
	adopt := map[string]bool{}
	for _, g := range kept.GPUs {
		if g.ReplicaCount() > 0 || g.Role == v1.RoleBurst || g.Role == v1.RoleCanary || engine[g.Ref()] {
			continue
		}
		adopt[gpuKey(g.Node, g.Index)] = true
	}
	return adopt
}

// placeOnIdleWithout is placeOnIdle with the idle GPUs of the nodes in withheld left out (why:
// which, and why, for the reasons of the tenants left short), the mixed plan not yet validated.
func (p *planner) placeOnIdleWithout(kept, next *v1.Plan, place []v1.Tenant, served map[string]bool, withheld []string, why string) (mixed, placed *v1.Plan, err error) {
	sub := *p.pool
	sub.Tenants = place
	sub.Policy.CanaryGPUs = slices.Clone(p.pool.Policy.CanaryGPUs)
	adopt := idleFor(kept, p.o.Current)
	for _, g := range kept.GPUs {
		k := gpuKey(g.Node, g.Index)
		if adopt[k] && slices.Contains(withheld, g.Node) {
			delete(adopt, k)
		}
		if !adopt[k] && !slices.Contains(sub.Policy.CanaryGPUs, g.Ref()) {
			sub.Policy.CanaryGPUs = append(sub.Policy.CanaryGPUs, g.Ref())
		}
	}
	if len(adopt) == 0 {
		if why != "" {
			return nil, nil, fmt.Errorf("the plan in force leaves no GPU idle for %s that keeps its node's sharing setting: not %s", tenantNames(place), why)
		}
		return nil, nil, fmt.Errorf("the plan in force leaves no GPU idle for %s", tenantNames(place))
	}
	zero := 0
	sub.Policy.BurstPoolPercent = &zero // the burst GPUs in force stay as they are
	o := p.o
	o.Current, o.MaxMoves = nil, nil
	placed, err = Build(p.ctx, &sub, o)
	if err != nil {
		return nil, nil, fmt.Errorf("planning %s on the GPUs it leaves idle: %w", tenantNames(place), err)
	}
	p.idleSpreadReasons(placed, adopt)
	if why != "" {
		for i := range placed.Tenants {
			if t := &placed.Tenants[i]; t.Infeasible {
				t.Reasons = append([]v1.Reason{v1.NewReason(v1.ReasonNoCapacity, "planned on the GPUs the plan in force leaves idle, without %s: a replica there of another share would break that setting", why)},
					t.Reasons...)
			}
		}
	}
	overlay := *placed
	overlay.Summary = next.Summary
	overlay.Tenants = nil
	subT := map[string]v1.PlanTenant{}
	for _, t := range placed.Tenants {
		subT[t.Name] = t
	}
	keptT := map[string]v1.PlanTenant{}
	for _, t := range kept.Tenants {
		keptT[t.Name] = t
	}
	for _, tn := range p.tenants {
		if t, ok := subT[tn.t.Name]; ok {
			overlay.Tenants = append(overlay.Tenants, t)
		} else if t, ok := keptT[tn.t.Name]; ok {
			overlay.Tenants = append(overlay.Tenants, t)
		}
	}
	mixed, err = mixUnchecked(kept, &overlay, adopt, served)
	if err != nil {
		return nil, placed, fmt.Errorf("with %s planned on the GPUs it leaves idle, %w", tenantNames(place), err)
	}
	return mixed, placed, nil
}

func tenantNames(ts []v1.Tenant) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// inPoolOrder orders plan tenants as the pool lists them.
func inPoolOrder(tenants []*tenant, ts []v1.PlanTenant) []v1.PlanTenant {
	at := map[string]int{}
	for i, tn := range tenants {
		at[tn.t.Name] = i
	}
	slices.SortStableFunc(ts, func(a, b v1.PlanTenant) int { return at[a.Name] - at[b.Name] })
	return ts
}

// predictInForce is the prediction for a tenant the plan in force serves, at its load now over n
// replicas on the slice kind it runs on there (uses); old when the queueing model does not size
// it.
func (p *planner) predictInForce(tn *tenant, uses []slotUse, n int, old v1.Prediction) v1.Prediction {
	c, err := inForceCand(tn, uses)
	if err != nil || c.ev == nil || c.ev.q == nil || tn.t.Traffic.RPS <= 0 {
		return old
	}
	st := c.ev.q.state(peakRate(tn.t.Traffic), n)
	ttft, tpot := seconds(st.ttft), seconds(st.tpot)
	return v1.Prediction{TTFTP99: v1.Duration(ttft), TPOTP99: v1.Duration(tpot), E2EP99: v1.Duration(predictE2E(tn, c.ev.q, peakRate(tn.t.Traffic), n, ttft, tpot)),
		TokensPerSecond: round3(float64(n) * c.ev.oneRate().OutputTokensPerSec), MaxRPS: round3(float64(n) * c.ev.oneRate().RequestsPerSec)}
}

// keptReasons are the reasons of a tenant the kept plan keeps where it runs (uses: its replicas
// in force), n replicas in all with those it grows by, at its load now (old: its entry in the
// plan in force, its prediction already the kept one). When the re-pack (next, nextUses) runs it
// on the same slice kind with as many replicas, they are the re-pack's (its simulation's verdict
// included); else the sizing reasons are made again, as the fresh planner words them, for the
// slice kind it runs on at its load now (the memory it needs, the rate a replica sustains there,
// the replicas that load needs), with no simulation's verdict: the verdict a kept plan carries is
// its own runs' (confirmKept), when it is simulated.
// A reason with its load now over its n replicas follows (keptLoadReason). A tenant whose slice
// kind in force is not known keeps the plan in force's reasons.
func (p *planner) keptReasons(tn *tenant, uses []slotUse, n int, old v1.PlanTenant, next *v1.Plan, nextUses map[string][]slotUse) []v1.Reason {
	if tn == nil {
		return slices.Clone(old.Reasons)
	}
	c, err := inForceCand(tn, uses)
	if err != nil || c.ev == nil {
		return slices.Clone(old.Reasons)
	}
	if pt, ok := planTenant(next, tn.t.Name); ok && !pt.Infeasible && c == tn.choice && len(nextUses[tn.t.Name]) == n {
		out := slices.DeleteFunc(slices.Clone(pt.Reasons), func(r v1.Reason) bool { return r.Code == v1.ReasonMoveBudget })
		return append(out, p.keptLoadReason(tn, c, n, old.Predicted, keptRepackVerdict)...)
	}
	choice := tn.choice
	tn.choice = c
	out := p.tenantReasons(tn)
	spilled := p.spilledWhy(tn) // the re-pack's choice of board, not where the tenant runs
	tn.choice = choice
	for i := range out {
		if spilled != "" && out[i].Code == v1.ReasonComputeBound {
			out[i].Message = strings.TrimSuffix(out[i].Message, spilled)
		}
	}
	if tn.t.Redundancy {
		// the spread is the plan in force's: its replicas stay on the GPUs they run on
		gpus := map[v1.GPURef]bool{}
		for _, r := range old.Replicas {
			gpus[r.GPU] = true
		}
		spread := len(gpus) > 1
		var where []v1.Reason // the plan in force's reasons on where they run, when on one GPU
		first := true
		for _, r := range old.Reasons {
			if r.Code == v1.ReasonRedundancy {
				if !first && !spread {
					where = append(where, r)
				}
				first = false
			}
		}
		if i := slices.IndexFunc(out, func(r v1.Reason) bool { return r.Code == v1.ReasonRedundancy }); i >= 0 {
			out[i] = redundancyReason(tn.t, c, spread)
		}
		out = append(out, where...)
	}
	return append(out, p.keptLoadReason(tn, c, n, old.Predicted, keptNotSimulated)...)
}

// keptLoadReason says what a tenant the kept plan keeps where it runs carries now: its load over
// its n replicas on the slice kind in force (c) and the queueing model's prediction there (pred),
// then sizing, what the sizing reasons before it are. None when the queueing model does not size
// it.
func (p *planner) keptLoadReason(tn *tenant, c *cand, n int, pred v1.Prediction, sizing string) []v1.Reason {
	if c.ev == nil || c.ev.q == nil || tn.t.Traffic.RPS <= 0 {
		return nil
	}
	more := ""
	if n > c.replicas {
		more = fmt.Sprintf(" (its load needs %d)", c.replicas)
	}
	return []v1.Reason{v1.NewReason(v1.ReasonComputeBound, "kept where it runs: %.3g req/s now over %s%s on %s of %s (p99 TTFT %s, TPOT %s by the queueing model); %s",
		peakRate(tn.t.Traffic), replicasN(n), more, c.label(), c.board.Name, roundDur(time.Duration(pred.TTFTP99)), roundDur(time.Duration(pred.TPOTP99)), sizing)}
}

// usedGPUs counts the GPUs that run a replica.
func usedGPUs(gpus []v1.PlanGPU) int {
	n := 0
	for _, g := range gpus {
		if g.ReplicaCount() > 0 {
			n++
		}
	}
	return n
}

// keepHolding is the plan in force for the pool as it is now with nothing placed anew: every
// tenant keeps the replicas it runs there (none moves, starts or is reconfigured), the replicas
// of tenants no longer in the pool stop, and a tenant they do not serve (servedInForce) is left
// short, its reasons saying why and what serving it would take (why: the reasons it could not be
// served within the budget). A tenant whose slice kind in force is no longer one of its
// candidates (isolation or policy took it away) cannot keep it, and stopping a tenant that runs
// is no plan within a budget: that is an error. It is what a move budget leaves when no plan
// within it serves every tenant the re-pack serves; an error too when it is not valid for the
// pool.
func (p *planner) keepHolding(next *v1.Plan, why string) (*v1.Plan, error) {
	cur := p.o.Current
	gpus, uses := p.inForce()
	stays, short := map[string]bool{}, map[string]error{}
	for _, tn := range p.tenants {
		name := tn.t.Name
		err := servedInForce(tn, uses[name])
		if err == nil {
			stays[name] = len(uses[name]) > 0
			continue
		}
		short[name] = err
		if len(uses[name]) > 0 {
			if _, cerr := inForceCand(tn, uses[name]); cerr != nil {
				// holding would stop a tenant that runs now: no plan within a budget does that
				return nil, fmt.Errorf("%v, and it cannot keep them", err)
			}
			stays[name] = true
		}
	}
	held := keepOnly(next, gpus, stays)
	curT := map[string]v1.PlanTenant{}
	for _, t := range cur.Tenants {
		curT[t.Name] = t
	}
	nextT := map[string]v1.PlanTenant{}
	for _, t := range next.Tenants {
		nextT[t.Name] = t
	}
	for _, tn := range p.tenants {
		name := tn.t.Name
		err := short[name]
		t := curT[name]
		if !stays[name] {
			var ok bool
			if t, ok = nextT[name]; !ok && err == nil {
				continue
			}
			t.Name = name
		}
		if err == nil {
			if stays[name] { // else nothing runs it now and nothing can: as next has it
				t.Predicted = p.predictInForce(tn, uses[name], len(uses[name]), t.Predicted)
			}
			held.Tenants = append(held.Tenants, t)
			continue
		}
		t.Infeasible = true
		t.Reasons = slices.Clone(t.Reasons)
		if n := len(uses[name]); stays[name] {
			// what the plan in force says they carry; no latency: the load now is more
			t.Predicted = v1.Prediction{MaxRPS: t.Predicted.MaxRPS, TokensPerSecond: t.Predicted.TokensPerSecond}
			t.Reasons = append([]v1.Reason{v1.NewReason(v1.ReasonNoCapacity, "short: %v; it keeps its %s in force where it runs them; %s", err, replicasN(n), why)}, t.Reasons...)
		} else {
			t.Replicas, t.LoRAEngines, t.Predicted = nil, nil, v1.Prediction{}
			t.Reasons = append([]v1.Reason{v1.NewReason(v1.ReasonNoCapacity, "not served: %v; %s", err, why)}, t.Reasons...)
		}
		held.Tenants = append(held.Tenants, t)
	}
	held.Summary = v1.Summary{GPUsUsed: usedGPUs(held.GPUs), GPUsTotal: len(held.GPUs), LowerBound: next.Summary.LowerBound,
		Baselines: next.Summary.Baselines, Objective: next.Summary.Objective}
	if err := v1.ValidatePlan(held, p.pool); err != nil {
		return nil, fmt.Errorf("it is not valid for the pool: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return held, nil
}

// stopsRunning reports whether pl leaves a tenant short with no replica (nor shared LoRA engine)
// while it runs replicas in the plan in force (running: its slot uses there).
func stopsRunning(pl *v1.Plan, running map[string][]slotUse) bool {
	for _, t := range pl.Tenants {
		if t.Infeasible && len(t.Replicas) == 0 && len(t.LoRAEngines) == 0 && len(running[t.Name]) > 0 {
			return true
		}
	}
	return false
}

// keepOnly is a plan with next's header and the GPUs in force, gpus (changed in place), holding
// only the replicas of the tenants in stays; a pool GPU left without any becomes idle.
func keepOnly(next *v1.Plan, gpus []v1.PlanGPU, stays map[string]bool) *v1.Plan {
	dropped := func(r v1.PlanReplica) bool { return !stays[r.Tenant] }
	for i := range gpus {
		g := &gpus[i]
		g.Replicas = slices.DeleteFunc(g.Replicas, dropped)
		for j := range g.Instances {
			g.Instances[j].Replicas = slices.DeleteFunc(g.Instances[j].Replicas, dropped)
		}
		if g.Role == v1.RolePool && g.ReplicaCount() == 0 {
			g.Role = v1.RoleIdle
		}
	}
	return &v1.Plan{APIVersion: next.APIVersion, Kind: next.Kind, Metadata: next.Metadata, Pool: next.Pool, GPUs: gpus}
}

// restartsOf is " and restarts n MPS clients in place", "" for none.
func restartsOf(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and restarts %d MPS clients in place", n)
}
