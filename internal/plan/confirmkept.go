package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Confirming a kept plan by simulation (ADR 0064).
//
// A re-plan may return the plan in force kept for the tenants it still serves (keepServed) or,
// under a move budget, held as it is (keepHolding), instead of the re-pack that Build confirmed
// (confirm). Its tenants then run beside other neighbours than the re-pack gave them, or on
// another slice kind or count, so the re-pack's runs say nothing about them. confirmKept runs the
// same confirmation on the plan that is returned: the same simulator (Options.Simulate), budget
// (Options.ConfirmRequests), seeds, pool-size limit (confirmMaxTenants), runs, thresholds and
// sharing-component runs for tenants too slow for the pool-wide runs. A tenant is judged on the
// slice kind it runs on in that plan (inForceCand), at the replicas it runs there, when the
// queueing model sized it (as confirmable: not a fixed count, a measured profile, or a bursty or
// diurnal pattern). A tenant the plan leaves short already (held with fewer replicas than its
// load needs) is simulated and its reason says what its replicas saw, but it is not raised.
//
// A tenant the runs find short gets a replica more only where the plan allows one without a GPU
// change or a move: in the room its busy GPUs leave free (keptRoom, the same room fillKept starts
// tenants in), of its own group, and the plan is simulated again, for at most confirmRounds
// rounds in all. Where there is no such room (or maxReplicas allows no more, or no round is left)
// the tenant is marked short, its first reason saying why. Every tenant the runs simulated
// carries a Simulated reason of this plan's runs; the re-pack's are removed.
//
// A replica started in room is a start on a GPU that already runs replicas and keeps its layout:
// the plan's GPUs, replica moves and GPU changes stay as they were when it was weighed against
// the re-pack, so a raise needs no new weighing. A tenant marked short does change the weighing
// (fewest tenants short first), and replan weighs the confirmed plan again.

// keptConfirmable reports whether the runs may judge tn on c, the slice kind it runs on in a
// kept or held plan: as confirmable, for that candidate.
func keptConfirmable(tn *tenant, c *cand) bool {
	if c == nil || c.ev == nil || c.ev.q == nil || tn.measured != nil || tn.t.Replicas != nil || tn.t.Traffic.RPS <= 0 {
		return false
	}
	switch tn.t.Traffic.Pattern {
	case "", v1.PatternPoisson, v1.PatternConstant:
		return true
	}
	return false
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
}

// Texts of the kept-load reason (keptLoadReason) for a tenant whose sizing is not simulated in
// the kept plan, and what they read once the plan's runs have judged it.
const (
	keptNotSimulated   = "the sizing above is for its load now on that slice kind, not simulated in this plan"
	keptRepackVerdict  = "the sizing and the simulation's verdict above are the re-pack's, which runs it on the same slice kind and count"
	keptSimulatedAfter = "the sizing above is for its load now on that slice kind; the Simulated reason is this plan's own runs"
	keptRepackSizing   = "the sizing above is the re-pack's, which runs it on the same slice kind and count; the Simulated reason is this plan's own runs"
)

// confirmKept confirms pl, a kept or held plan (held: the plan in force held within max-moves
// limit), by simulation as described above. pl is changed in place. It returns the simulator's
// or the context's error.
func (p *planner) confirmKept(pl *v1.Plan, held bool, limit int) error {
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
				j = &keptJudged{tn: tn, st: &confirmState{model: model}}
				judged[name] = j
			}
			j.c, j.n, j.short = c, len(uses[name]), pl.Tenants[at].Infeasible
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
		reports, err := p.simulateRuns(sp, spl, time.Duration(secs*float64(time.Second)))
		if err != nil {
			return err
		}
		for _, tn := range judge {
			j := judged[tn.t.Name]
			j.st.tally(j.n, tn.t.Name, reports)
			j.st.poolOver, j.st.component, j.st.boardless = j.st.over, "", false
			j.st.left, j.code, j.why = "", "", ""
		}
		state := func(tn *tenant) (*confirmState, int) { j := judged[tn.t.Name]; return j.st, j.n }
		if err := p.confirmComponents(judge, pl, budget, state); err != nil {
			return err
		}
		var short []*keptJudged
		for _, tn := range judge {
			if j := judged[tn.t.Name]; !j.short && j.st.judged && (j.st.att < confirmKeep || j.st.worst < confirmRunKeep) {
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
		if !p.raiseInRoom(pl, short, byName, held, limit) {
			break
		}
	}
	p.keptSimReasons(pl, judged)
	return nil
}

// raiseInRoom starts a replica more for each tenant of short in the room pl's busy GPUs leave
// free, of its own group (keptRoom), and says where; a tenant with no such room (or whose
// maxReplicas allows no more) is left as it is, with why. A raise that leaves pl not valid for
// the pool is undone. It reports whether any tenant was raised.
func (p *planner) raiseInRoom(pl *v1.Plan, short []*keptJudged, byName map[string]*tenant, held bool, limit int) bool {
	undo := clonePlan(pl)
	raised := 0
	var notes []*keptJudged
	room := p.keptRoom(pl, byName, planUses(pl))
	for _, j := range short {
		tn, c := j.tn, j.c
		name := tn.t.Name
		if m := maxReplicasOf(tn.t); m > 0 && j.n >= m {
			j.st.left, j.code, j.why = maxReplicasName(tn.t), v1.ReasonOverCap, fmt.Sprintf("and %s allows no more", maxReplicasName(tn.t))
			continue
		}
		var slots []keptSlot
		if c.tp <= 1 && c.kind != v1.SliceExclusive {
			slots = room.take(keyOf(tn, c), 1, false)
		}
		at := slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == name })
		tmpl, ok := replicaOf(pl, name)
		if slots == nil || at < 0 || !ok {
			kept := "the plan it keeps"
			if held {
				kept = fmt.Sprintf("the plan in force, held within max-moves %d,", limit)
			}
			j.st.left, j.code = "no room", v1.ReasonNoCapacity
			j.why = fmt.Sprintf("and %s has no room of its kind (%s of %s) for a replica more on the GPUs it runs replicas on; a replica on a GPU it leaves idle, or a move, is the re-pack's to make",
				kept, c.label(), c.board.Name)
			continue
		}
		where := startInRoom(pl, &pl.Tenants[at], tmpl, c.kind, slots)
		j.before = append(j.before, fmt.Sprintf("%s × %d (%.2f %%, %.2f %% in the worst run)", c.label(), j.n, 100*j.st.att, 100*j.st.worst))
		j.why = strings.Join(where, ", ")
		notes = append(notes, j)
		raised++
	}
	if raised == 0 {
		return false
	}
	if err := v1.ValidatePlan(pl, p.pool); err != nil {
		*pl = *undo
		for _, j := range notes {
			j.before = j.before[:len(j.before)-1]
			j.st.left, j.code = "the pool's rules", v1.ReasonNoCapacity
			j.why = fmt.Sprintf("and a replica more in the room the plan leaves free is not valid for the pool (%s)", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		return false
	}
	uses := planUses(pl)
	for _, j := range notes {
		name := j.tn.t.Name
		at := slices.IndexFunc(pl.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == name })
		t := &pl.Tenants[at]
		t.Predicted = p.predictInForce(j.tn, uses[name], len(uses[name]), t.Predicted)
		t.Reasons = append(slices.Clone(t.Reasons), v1.NewReason(v1.ReasonMoveBudget,
			"tenant %s starts 1 replica more in room the plan in force leaves free (%s), on a GPU that keeps its layout: %s, as this plan's simulation found %d short",
			name, j.c.label(), j.why, j.n))
		j.why = ""
	}
	pl.Summary.GPUsUsed = usedGPUs(pl.GPUs)
	refreshGPUReasons(pl, byName, uses)
	return true
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
			rs = append([]v1.Reason{v1.NewReason(j.code, "this plan's simulation finds %d replica(s) of %s short of the SLO (%.2f %% of %d requests within it over %d runs, %.2f %% in the worst) %s",
				j.n, j.c.label(), 100*j.st.att, j.st.over, confirmRuns, 100*j.st.worst, j.why)}, rs...)
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
