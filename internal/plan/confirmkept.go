package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Confirming a kept plan by simulation (ADR 0064, 0065).
//
// A re-plan may return the plan in force kept for the tenants it still serves (keepServed) or,
// under a move budget, held as it is (keepHolding) or partly re-packed (partialRepack, which
// mixes the re-pack and the plan in force component by component), instead of the re-pack that
// Build confirmed
// (confirm). Its tenants then run beside other neighbours than the re-pack gave them, or on
// another slice kind or count, so the re-pack's runs say nothing about them. confirmKept runs the
// same confirmation on the plan that is returned: the same simulator (Options.Simulate), budget
// (Options.ConfirmRequests), seeds, pool-size limit (confirmMaxTenants), runs, thresholds and
// sharing-component runs for tenants too slow for the pool-wide runs. A tenant is judged on the
// slice kind it runs on in that plan (inForceCand), at the replicas it runs there, when the
// queueing model sized it (as confirmable: not a fixed count, a measured profile, or a bursty
// pattern; a diurnal tenant only in runs of at most confirmPeakRun). A tenant the plan leaves
// short already (held with fewer replicas than its load needs) is simulated and its reason says
// what its replicas saw, but it is not raised.
//
// A tenant the runs find short gets a replica more without a move: first in the room its busy
// GPUs leave free (keptRoom, the same room fillKept starts tenants in), of its own group, else on
// a GPU the plan leaves idle of its board, on its slice kind in force (startOnIdle: whole-GPU
// kinds of one GPU, keeping the node's device-plugin MPS setting); the plan is simulated again,
// for at most confirmRounds rounds in all. Where there is neither (or maxReplicas allows no more,
// or no round is left) the tenant is marked short, its first reason saying why. Every tenant the
// runs simulated carries a Simulated reason of this plan's runs; the re-pack's are removed.
//
// A replica started in room is a start on a GPU that already runs replicas and keeps its layout:
// the plan's GPUs, replica moves and GPU changes stay as they were when it was weighed against
// the re-pack. A replica started on an idle GPU adds a GPU (and a GPU change where the GPU's mode
// in force differs), and a tenant marked short adds a tenant short: either changes the weighing,
// and replan weighs the confirmed plan again with every other.

// keptConfirmable reports whether the runs may judge tn on c, the slice kind it runs on in a
// kept or held plan: as confirmable, for that candidate.
func keptConfirmable(tn *tenant, c *cand) bool {
	if c == nil || c.ev == nil || c.ev.q == nil || tn.measured != nil || tn.t.Replicas != nil || tn.t.Traffic.RPS <= 0 {
		return false
	}
	return patternConfirmable(tn.t.Traffic.Pattern)
}

// keptJudged is one tenant the runs of a kept plan judge.
type keptJudged struct {
	tn *tenant
	c  *cand
	n  int // the replicas it runs in the plan
	// short marks a tenant the plan leaves short already (one held with fewer replicas than
	// its load needs): the runs say what its replicas see, and it is not raised
	short  bool
	st     *confirmState
	before []string // the counts found short before, for its Simulated reason
	// code and why say why a count found short was not raised ("" while it was, or passed)
	code v1.ReasonCode
	why  string
	// start is the reason of a replica started this round on a GPU the plan left idle
	start string
}

// Texts of the kept-load reason (keptLoadReason) for a tenant whose sizing is not simulated in
// the kept plan, and what they read once the plan's runs have judged it.
const (
	keptNotSimulated   = "the sizing above is for its load now on that slice kind, not simulated in this plan"
	keptRepackVerdict  = "the sizing and the simulation's verdict above are the re-pack's, which runs it on the same slice kind and count"
	keptSimulatedAfter = "the sizing above is for its load now on that slice kind; the Simulated reason is this plan's own runs"
	keptRepackSizing   = "the sizing above is the re-pack's, which runs it on the same slice kind and count; the Simulated reason is this plan's own runs"
)

// confirmKept confirms pl, a kept, held or partly re-packed plan (chosen: "kept", "held" or
// "part", as replan weighs it; held and part within max-moves limit), by simulation as described
// above. pl is changed in place. It returns the simulator's
// or the context's error.
func (p *planner) confirmKept(pl *v1.Plan, chosen string, limit int) error {
	budget := p.o.ConfirmRequests
	if budget == 0 {
		budget = DefaultConfirmRequests
	}
	if p.o.Simulate == nil || budget < 0 || len(p.tenants) > confirmMaxTenants {
		return nil
	}
	byName := map[string]*tenant{}
	for _, tn := range p.tenants {
		byName[tn.t.Name] = tn
	}
	judged := map[string]*keptJudged{}
	for round := range confirmRounds {
		uses := planUses(pl)
		var judge []*tenant
		minRate, sumRate := math.Inf(1), 0.0
		for _, tn := range p.tenants {
			name := tn.t.Name
			if len(uses[name]) > 0 {
				sumRate += tn.t.Traffic.RPS
			}
			at := slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == name })
			if at < 0 || len(uses[name]) == 0 {
				continue
			}
			c, err := inForceCand(tn, uses[name])
			if err != nil || !keptConfirmable(tn, c) {
				continue
			}
			j := judged[name]
			if j == nil {
				model := c.replicas
				if st := p.confirmed[c]; st != nil {
					model = st.model // the queueing model's, before the re-pack's raises
				}
				j = &keptJudged{tn: tn, st: &confirmState{model: model, fixed: tn.t.Replicas != nil}}
				judged[name] = j
			}
			j.c, j.n, j.short = c, len(uses[name]), pl.Tenants[at].Infeasible
			j.st.q = c.ev.q
			judge = append(judge, tn)
			minRate = min(minRate, tn.t.Traffic.RPS)
		}
		if len(judge) == 0 {
			break
		}
		secs := min(confirmRequests/minRate, float64(budget)/sumRate, confirmMaxRun.Seconds())
		if !(secs >= 1) {
			break
		}
		// Shared LoRA engines and their adapter tenants are left out, as the draft a fresh plan
		// simulates leaves them (their engines are confirmed apart, confirm_lora.go).
		dense := map[string]bool{}
		for _, pt := range pl.Tenants {
			dense[pt.Name] = len(pt.LoRAEngines) == 0
		}
		sp, spl := restrict(p.pool, pl, dense)
		d := time.Duration(secs * float64(time.Second))
		reports, err := p.simulateRuns(sp, spl, d)
		if err != nil {
			return err
		}
		for _, tn := range judge {
			j := judged[tn.t.Name]
			j.st.tally(j.n, &tn.t, d, reports)
			j.st.poolOver, j.st.poolOffPeak, j.st.component, j.st.boardless, j.st.unreached = j.st.over, j.st.offPeak, "", false, ""
			j.st.left, j.code, j.why = "", "", ""
		}
		state := func(tn *tenant) (*confirmState, int) { j := judged[tn.t.Name]; return j.st, j.n }
		if err := p.confirmComponents(judge, pl, budget, state); err != nil {
			return err
		}
		if err := p.confirmBorderline(judge, pl, state); err != nil {
			return err
		}
		if err := p.confirmBusy(judge, pl, state); err != nil {
			return err
		}
		var short []*keptJudged
		for _, tn := range judge {
			if j := judged[tn.t.Name]; !j.short && j.st.short() {
				short = append(short, j)
			}
		}
		if len(short) == 0 {
			break
		}
		if round == confirmRounds-1 {
			for _, j := range short {
				j.st.left, j.code, j.why = "the last round", v1.ReasonSLOUnmet, fmt.Sprintf("after %d rounds of raises", confirmRounds)
			}
			break
		}
		if !p.raiseInRoom(pl, short, byName, chosen, limit) {
			break
		}
	}
	p.keptSimReasons(pl, judged)
	return nil
}

// raiseInRoom starts a replica more for each tenant of short in the room pl's busy GPUs leave
// free, of its own group (keptRoom), else on a GPU pl leaves idle of its board (startOnIdle), and
// says where; a tenant with neither (or whose maxReplicas allows no more) is left as it is, with
// why. A raise that leaves pl not valid for
// the pool is undone. It reports whether any tenant was raised.
func (p *planner) raiseInRoom(pl *v1.Plan, short []*keptJudged, byName map[string]*tenant, chosen string, limit int) bool {
	undo := clonePlan(pl)
	raised := 0
	var notes []*keptJudged
	room := p.keptRoom(pl, byName, planUses(pl))
	for _, j := range short {
		tn, c := j.tn, j.c
		name := tn.t.Name
		if m, name, code, why := raiseBound(tn.t); m > 0 && j.n >= m {
			j.st.left, j.code, j.why = name, code, why
			continue
		}
		var slots []keptSlot
		if c.tp <= 1 && c.kind != v1.SliceExclusive {
			slots = room.take(keyOf(tn, c), 1, false)
		}
		at := slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == name })
		tmpl, ok := replicaOf(pl, name)
		if at < 0 || !ok {
			j.st.left, j.code, j.why = "no room", v1.ReasonNoCapacity, "and the plan lists none of its replicas to start another like"
			continue
		}
		kept, plan := "the plan it keeps", "the plan it keeps"
		switch chosen {
		case "held":
			kept, plan = fmt.Sprintf("the plan in force, held within max-moves %d,", limit), fmt.Sprintf("the plan in force held within max-moves %d", limit)
		case "part":
			kept = fmt.Sprintf("the partial re-pack within max-moves %d", limit)
			plan = kept
		}
		j.start = ""
		if slots == nil {
			// no room on its busy GPUs: a GPU the plan leaves idle, of its board (ADR 0065)
			gi, why := p.startOnIdle(pl, &pl.Tenants[at], tmpl, c)
			if gi < 0 {
				j.st.left, j.code = "no room", v1.ReasonNoCapacity
				j.why = fmt.Sprintf("and %s has no room of its kind (%s of %s) for a replica more on the GPUs it runs replicas on, nor %s; a move is the re-pack's to make",
					kept, c.label(), c.board.Name, why)
				continue
			}
			g := pl.GPUs[gi]
			j.start = fmt.Sprintf("tenant %s starts 1 replica more on %s, a GPU %s leaves idle (%s of %s: the GPU changes from idle to a pool GPU of mode %s), as this plan's simulation found %d short and its busy GPUs have no room of its kind",
				name, g.Ref(), plan, c.label(), c.board.Name, g.Mode, j.n)
			j.why = g.Ref().String()
		} else {
			where := startInRoom(pl, &pl.Tenants[at], tmpl, c.kind, slots)
			j.why = strings.Join(where, ", ")
		}
		j.before = append(j.before, fmt.Sprintf("%s × %d (%.2f %%, %.2f %% in the worst run%s)", c.label(), j.n, 100*j.st.att, 100*j.st.worst, j.st.inRuns()))
		notes = append(notes, j)
		raised++
	}
	if raised == 0 {
		return false
	}
	pl.Summary.GPUsUsed = usedGPUs(pl.GPUs) // a replica started on an idle GPU adds one
	if err := v1.ValidatePlan(pl, p.pool); err != nil {
		*pl = *undo
		for _, j := range notes {
			j.before = j.before[:len(j.before)-1]
			j.st.left, j.code = "the pool's rules", v1.ReasonNoCapacity
			j.why = fmt.Sprintf("and a replica more in room the plan leaves free, or on a GPU it leaves idle, is not valid for the pool (%s)", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		return false
	}
	uses := planUses(pl)
	for _, j := range notes {
		name := j.tn.t.Name
		at := slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == name })
		t := &pl.Tenants[at]
		t.Predicted = p.predictInForce(j.tn, uses[name], len(uses[name]), t.Predicted)
		if j.start != "" {
			t.Reasons = append(slices.Clone(t.Reasons), v1.NewReason(v1.ReasonMoveBudget, "%s", j.start))
		} else {
			t.Reasons = append(slices.Clone(t.Reasons), v1.NewReason(v1.ReasonMoveBudget,
				"tenant %s starts 1 replica more in room the plan in force leaves free (%s), on a GPU that keeps its layout: %s, as this plan's simulation found %d short",
				name, j.c.label(), j.why, j.n))
		}
		j.why, j.start = "", ""
	}
	pl.Summary.GPUsUsed = usedGPUs(pl.GPUs)
	refreshGPUReasons(pl, byName, uses)
	return true
}

// startOnIdle starts a replica of entry's tenant like tmpl on its slice kind in force (c) on the
// first GPU in fleet order that pl leaves idle (idleFor: no replica, no burst or canary role, no
// shared LoRA engine in force; one started for another tenant this round runs a replica) of c's
// board, whose start keeps its node's device-plugin MPS setting (ADR 0060: mpsSettingBroken finds
// no node broken that was not before). The GPU becomes a pool GPU of the kind's mode, its layout
// in force dropped: a GPU more the weighing counts, and a GPU change the migration lists where
// its mode in force differs. Only whole-GPU
// kinds of one GPU are started so: a MIG instance there would be a re-partition, a tensor-parallel
// replica several GPUs of one node, both left to the re-pack. It returns the GPU's index in
// pl.GPUs, or −1 and why none was taken ("a GPU it leaves idle …"), for the tenant's reason.
func (p *planner) startOnIdle(pl *v1.Plan, entry *v1.PlanTenant, tmpl v1.PlanReplica, c *cand) (int, string) {
	var mode v1.Mode
	switch c.kind {
	case v1.SliceExclusive:
		mode = v1.ModeExclusive
	case v1.SliceMPS:
		mode = v1.ModeMPS
	case v1.SliceTimeSlice:
		mode = v1.ModeTimeSlice
	}
	switch {
	case c.tp > 1:
		return -1, fmt.Sprintf("a GPU it leaves idle (a tensor-parallel replica takes %d GPUs of one node: the re-pack's to place)", c.tp)
	case mode == "":
		return -1, "a GPU it leaves idle (a MIG instance there is a re-partition: the re-pack's to make)"
	}
	adopt := idleFor(pl, p.o.Current)
	brokenBefore := mpsSettingBroken(p.pool, pl)
	var other, broke []string
	for gi := range pl.GPUs {
		g := &pl.GPUs[gi]
		if !adopt[gpuKey(g.Node, g.Index)] {
			continue
		}
		if g.Board != c.board.Name {
			other = append(other, fmt.Sprintf("%s (%s)", g.Ref(), g.Board))
			continue
		}
		save := *g
		g.Role, g.Mode, g.Instances, g.Replicas = v1.RolePool, mode, nil, nil
		g.Reasons = []v1.Reason{v1.NewReason(v1.ReasonMoveBudget, "started from idle for 1 replica more of tenant %s (%s), which this plan's simulation found short where its busy GPUs have no room of its kind",
			entry.Name, c.label())}
		startInRoom(pl, entry, tmpl, c.kind, []keptSlot{{gi, -1}})
		if broken := mpsSettingBroken(p.pool, pl); slices.ContainsFunc(broken, func(n string) bool { return !slices.Contains(brokenBefore, n) }) {
			*g = save
			entry.Replicas = entry.Replicas[:len(entry.Replicas)-1]
			broke = append(broke, fmt.Sprintf("%s (node %s's device-plugin MPS setting would cut its clients' share)", g.Ref(), g.Node))
			continue
		}
		return gi, ""
	}
	switch {
	case len(broke) > 0:
		return -1, fmt.Sprintf("a GPU it leaves idle of %s that keeps its node's device-plugin MPS setting: not %s", c.board.Name, strings.Join(broke, ", "))
	case len(other) > 0:
		return -1, fmt.Sprintf("a GPU it leaves idle of %s: those it leaves idle are of another board, %s", c.board.Name, strings.Join(other, ", "))
	}
	return -1, "a GPU it leaves idle (it leaves none, burst and canary GPUs aside)"
}

// keptSimReasons gives each tenant of pl the runs judged (judged) its Simulated reason from
// them, in place of any it carried (the re-pack's, or the plan in force's), and the kept-load
// reason's word that its sizing is simulated; a tenant whose count the runs found short and that
// was not raised is marked short, why first among its reasons.
func (p *planner) keptSimReasons(pl *v1.Plan, judged map[string]*keptJudged) {
	for i := range pl.Tenants {
		t := &pl.Tenants[i]
		j := judged[t.Name]
		if j == nil {
			continue
		}
		rs := slices.DeleteFunc(slices.Clone(t.Reasons), func(r v1.Reason) bool { return r.Code == v1.ReasonSimulated })
		for k := range rs {
			rs[k].Message = strings.Replace(rs[k].Message, keptNotSimulated, keptSimulatedAfter, 1)
			rs[k].Message = strings.Replace(rs[k].Message, keptRepackVerdict, keptRepackSizing, 1)
		}
		rs = append(rs, j.st.reason(j.n, j.before))
		if j.st.left != "" {
			t.Infeasible = true
			rs = append([]v1.Reason{v1.NewReason(j.code, "this plan's simulation finds %d replica(s) of %s short of the SLO (%.2f %% of %d requests within it over %d runs, %.2f %% in the worst%s) %s",
				j.n, j.c.label(), 100*j.st.att, j.st.over, confirmRuns+j.st.extra, 100*j.st.worst, j.st.missText(), j.why)}, rs...)
		}
		t.Reasons = rs
	}
}

// clonePlan is a copy of pl whose GPUs, instances, replicas and tenants may be changed without
// changing pl.
func clonePlan(pl *v1.Plan) *v1.Plan {
	out := *pl
	out.GPUs = slices.Clone(pl.GPUs)
	for i := range out.GPUs {
		g := &out.GPUs[i]
		g.Replicas = slices.Clone(g.Replicas)
		g.Instances = slices.Clone(g.Instances)
		for k := range g.Instances {
			g.Instances[k].Replicas = slices.Clone(g.Instances[k].Replicas)
		}
	}
	out.Tenants = slices.Clone(pl.Tenants)
	for i := range out.Tenants {
		out.Tenants[i].Replicas = slices.Clone(out.Tenants[i].Replicas)
	}
	return &out
}
