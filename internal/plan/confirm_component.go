package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Judging in runs of a sharing component (ADR 0045).
//
// The pool-wide runs are as long as the budget (Options.ConfirmRequests over the whole pool's
// rate) allows, so a slow tenant beside a fast one gets too few requests to be judged: on the
// review pool c5 (cmd/gpupool/testdata/review/c5-rnd-300-tpot-edge.yaml) a tenant at 0.088 req/s
// got 544 requests in three runs beside one at 20 req/s, and missed its SLO in longer runs
// (97.1 % in 6 h). Such a tenant is judged in runs of its own sharing component instead: the
// tenant and every tenant it shares a GPU with, transitively, on the plan's own slices, with
// the rest of the plan left out. A replica's steps depend only on its GPU's replicas (its MIG
// instance's or its GPU's, and the board's other instances through the power-limited clock), so
// the component's runs see what the pool-wide runs would have seen, only longer.
//
// The component is first taken by board: tenants on other MIG instances of the same GPU belong
// to it, since the simulator slows a busy board's clock for all its instances. When that
// component cannot give its slowest unjudged tenant confirmMinJudged requests within the budget
// (a fast tenant on the board's other instances), it is cut at the MIG instance: the tenant and
// its instance's sharers (MPS, time-slicing), a hard or unshared tenant alone; the board's other
// instances are then idle in those runs, which is optimistic by at most the clock's cut
// (8 % of the compute at a full board), and the tenant's Simulated reason says so.
//
// Each component's run is as long as confirmRequests requests of its slowest unjudged tenant,
// within confirmMaxRun (confirmPeakRun with an unjudged diurnal tenant, ADR 0071) and within
// the budget over the component's rate; the components of one round together get at most
// confirmComponentShare of the budget per run. A tenant that still
// gets fewer than confirmMinJudged requests (slower than confirmMinJudged / (confirmRuns ×
// confirmMaxRun), about 0.00083 req/s or three requests an hour, or beside too fast a sharer)
// stays simulated but not judged. Judged tenants are raised and reported short exactly as the
// pool-wide runs' are; a tenant the pool-wide runs judged keeps their verdict.

// confirmComponentShare is the share of the budget (Options.ConfirmRequests, requests a run)
// that the component runs of one round may use together: half, so that a round costs at most
// half again as many simulated requests as its pool-wide runs.
const confirmComponentShare = 0.5

// confirmUnreachedShare is the share of the budget (requests a run) that the runs of the at-risk
// tenants the component runs did not reach may use together, in a pool above confirmFullTenants
// (ADR 0092).
const confirmUnreachedShare = 0.5

// confirmUnreachedRequests is the length of those runs: requests of the component's slowest such
// tenant a run, enough over confirmRuns runs for confirmMinJudged with room for the arrivals'
// spread (2,100 expected, 1,500 about 13 standard deviations below).
const confirmUnreachedRequests = 700

// confirmUnreachedBoard bounds the board's component those runs take: at most this many times
// the requests of the tenant's MIG instance alone, else the instance runs alone. A board's
// component of dozens of fast tenants costs the extra and tail runs of a borderline tenant as
// many times more (ADR 0092).
const confirmUnreachedBoard = 4

// components maps every tenant with a replica under pl's GPUs to its sharing component's
// representative: tenants on one GPU in modes exclusive, mps or timeslice, or on one MIG
// instance, share; with board, tenants on different MIG instances of one GPU share too.
func components(pl *v1.Plan, board bool) map[string]string {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if parent[x] == x {
			return x
		}
		parent[x] = find(parent[x])
		return parent[x]
	}
	union := func(reps []v1.PlanReplica, first *string) {
		for _, r := range reps {
			if _, ok := parent[r.Tenant]; !ok {
				parent[r.Tenant] = r.Tenant
			}
			if *first == "" {
				*first = r.Tenant
				continue
			}
			if a, b := find(*first), find(r.Tenant); a != b {
				parent[b] = a
			}
		}
	}
	for _, g := range pl.GPUs {
		var first string
		union(g.Replicas, &first)
		for _, in := range g.Instances {
			if !board {
				first = ""
			}
			union(in.Replicas, &first)
		}
	}
	out := map[string]string{}
	for t := range parent {
		out[t] = find(t)
	}
	return out
}

// restrict returns pool and pl cut to the tenants in names: the pool's other tenants, their
// replicas and the LoRA engines are left out; every GPU stays listed, as the plan's check against
// the fleet requires. Neither pool nor pl is changed.
func restrict(pool *v1.Pool, pl *v1.Plan, names map[string]bool) (*v1.Pool, *v1.Plan) {
	keep := func(reps []v1.PlanReplica) []v1.PlanReplica {
		return slices.DeleteFunc(slices.Clone(reps), func(r v1.PlanReplica) bool { return !names[r.Tenant] })
	}
	sp := *pool
	sp.Tenants = slices.DeleteFunc(slices.Clone(pool.Tenants), func(t v1.Tenant) bool { return !names[t.Name] })
	out := *pl
	out.LoRAEngines = nil
	out.Tenants = slices.DeleteFunc(slices.Clone(pl.Tenants), func(t v1.PlanTenant) bool { return !names[t.Name] })
	out.GPUs = make([]v1.PlanGPU, len(pl.GPUs))
	// The totals are the cut plan's: no lower bound, baselines or cost of the whole pool.
	out.Summary = v1.Summary{GPUsTotal: len(pl.GPUs), Objective: pl.Summary.Objective}
	for i, g := range pl.GPUs {
		g.LoRAEngine = ""
		g.Replicas = keep(g.Replicas)
		g.Instances = slices.Clone(g.Instances)
		for j := range g.Instances {
			g.Instances[j].Replicas = keep(g.Instances[j].Replicas)
		}
		if g.ReplicaCount() > 0 {
			out.Summary.GPUsUsed++
		}
		out.GPUs[i] = g
	}
	return &sp, &out
}

// confirmComponents judges, in runs of their sharing components of pl, the tenants of judge the
// pool-wide runs left unjudged (their confirmState already holds those runs); state gives a
// tenant's confirmState and the replicas it runs in pl.
func (p *planner) confirmComponents(judge []*tenant, pl *v1.Plan, budget int, state func(*tenant) (*confirmState, int)) error {
	open := map[string]*tenant{}
	lora := map[string]bool{}
	for _, pt := range pl.Tenants {
		lora[pt.Name] = len(pt.LoRAEngines) > 0
	}
	for _, tn := range judge {
		if st, _ := state(tn); !st.judged && !lora[tn.t.Name] {
			open[tn.t.Name] = tn
		}
	}
	if len(open) == 0 {
		return nil
	}
	rate := map[string]float64{}
	for _, t := range p.pool.Tenants {
		rate[t.Name] = t.Traffic.RPS
	}
	byBoard, byInstance := components(pl, true), components(pl, false)
	members := func(of map[string]string, name string) []string {
		var out []string
		for _, t := range p.pool.Tenants { // pool order: deterministic
			if r, ok := of[t.Name]; ok && r == of[name] {
				out = append(out, t.Name)
			}
		}
		return out
	}
	left := confirmComponentShare * float64(budget) // requests a run, all components together
	// length is a run of comp's: confirmRequests requests of its slowest open tenant, within
	// confirmMaxRun and the budget; enough reports whether that tenant then gets
	// confirmMinJudged requests over the runs.
	// A component with an open diurnal tenant runs at most confirmPeakRun, the runs that judge it.
	large := len(p.tenants) > confirmFullTenants
	risk := map[string]bool{} // in a pool above confirmFullTenants, the open tenants at risk
	if large {
		for name, tn := range open {
			st, n := state(tn)
			risk[name] = confirmAtRisk(tn, st.q, n)
		}
	}
	// for reports whether the runs are for tenant n: every open tenant, or in a pool above
	// confirmFullTenants the open tenants at risk
	for_ := func(n string) bool { return open[n] != nil && (!large || risk[n]) }
	length := func(comp []string) (secs, cost float64, enough bool) {
		slowest, sum, most := componentRates(comp, rate, open, for_)
		secs = min(confirmRequests/slowest, left/sum, most)
		return secs, secs * sum, secs*slowest*confirmRuns >= confirmMinJudged
	}
	done := map[string]bool{}
	type compRun struct {
		comp      []string
		boardless bool
		cost      float64
	}
	var later []compRun // in a pool above confirmFullTenants, the components to run, cheapest first
	for _, tn := range p.tenants {
		name := tn.t.Name
		if open[name] == nil || done[name] {
			continue
		}
		if _, ok := byBoard[name]; !ok {
			continue // no replica under the plan's GPUs
		}
		if large && !risk[name] {
			if st, _ := state(tn); !st.judged {
				st.unreached = fmt.Sprintf(confirmNotAtRisk, confirmFullTenants)
			}
			continue
		}
		comp, boardless := members(byBoard, name), false
		secs, cost, enough := length(comp)
		if inst := members(byInstance, name); !enough && len(inst) < len(comp) {
			comp, boardless = inst, true
			secs, cost, _ = length(comp)
		}
		for _, n := range comp {
			done[n] = true
		}
		if large {
			later = append(later, compRun{comp, boardless, cost})
			continue
		}
		if !(secs >= 1) {
			continue
		}
		if err := p.runComponent(comp, boardless, secs, pl, open, state); err != nil {
			return err
		}
		left -= cost
	}
	// In a pool above confirmFullTenants the at-risk tenants' components run cheapest first
	// within the budget's share (ADR 0086); those it does not reach say so.
	slices.SortStableFunc(later, func(a, b compRun) int { return cmp.Compare(a.cost, b.cost) })
	for _, r := range later {
		secs, cost, _ := length(r.comp)
		if !(secs >= 1) {
			for _, n := range r.comp {
				if tn := open[n]; tn != nil {
					if st, _ := state(tn); !st.judged {
						st.unreached = confirmUnreached
					}
				}
			}
			continue
		}
		if err := p.runComponent(r.comp, r.boardless, secs, pl, open, state); err != nil {
			return err
		}
		left -= cost
	}
	return p.confirmUnreached(open, pl, budget, state, rate, for_, byBoard, byInstance, members)
}

// componentRates returns, over a component's tenants comp, the slowest rate of those its runs
// are for (for_; +Inf when none), the sum of all their rates (the run's cost a second), and the
// longest run those tenants allow in seconds: confirmPeakRun with a diurnal one among them
// (ADR 0071), else confirmMaxRun.
func componentRates(comp []string, rate map[string]float64, open map[string]*tenant, for_ func(string) bool) (slowest, sum, most float64) {
	slowest, most = math.Inf(1), confirmMaxRun.Seconds()
	for _, n := range comp {
		sum += rate[n]
		if tn := open[n]; tn != nil && for_(n) {
			slowest = min(slowest, rate[n])
			if tn.t.Traffic.Pattern == v1.PatternDiurnal {
				most = confirmPeakRun.Seconds()
			}
		}
	}
	return slowest, sum, most
}

// confirmUnreached runs, in a pool above confirmFullTenants, the sharing components of the at-risk
// tenants the component runs did not reach (ADR 0092), in runs just long enough to judge their
// slowest such tenant (confirmUnreachedRequests a run), cheapest first within a share of the budget
// of their own: the board's component where it fits in what is left of that share and costs at most
// confirmUnreachedBoard times the tenant's MIG instance alone, since a busy board's power limit
// slows its other instances' tenants (ADR 0045), else that instance alone. A tenant found
// borderline there gets the extra and tail runs of ADR 0078 and 0083 on the same cut, which judge
// it on runs of 2,000 of its requests.
func (p *planner) confirmUnreached(open map[string]*tenant, pl *v1.Plan, budget int, state func(*tenant) (*confirmState, int),
	rate map[string]float64, for_ func(string) bool, byBoard, byInstance map[string]string, members func(map[string]string, string) []string) error {
	// length is a run of comp's and what it costs (requests a run)
	length := func(comp []string) (secs, cost float64) {
		slowest, sum, most := componentRates(comp, rate, open, for_)
		secs = min(confirmUnreachedRequests/slowest, most)
		return secs, secs * sum
	}
	unreached := func(tn *tenant) bool {
		st, _ := state(tn)
		return !st.judged && st.unreached == confirmUnreached
	}
	type compRun struct {
		name        string
		board, inst []string
		cost        float64 // of the board's component
	}
	var runs []compRun
	for _, tn := range p.tenants {
		if name := tn.t.Name; open[name] != nil && for_(name) && unreached(tn) {
			board := members(byBoard, name)
			_, cost := length(board)
			runs = append(runs, compRun{name, board, members(byInstance, name), cost})
		}
	}
	slices.SortStableFunc(runs, func(a, b compRun) int { return cmp.Compare(a.cost, b.cost) })
	left := confirmUnreachedShare * float64(budget)
	for _, r := range runs {
		if !unreached(open[r.name]) {
			continue // judged by an earlier run of this pass
		}
		comp, boardless := r.board, false
		secs, cost := length(comp)
		if _, alone := length(r.inst); (cost > left || cost > confirmUnreachedBoard*alone) && len(r.inst) < len(r.board) {
			comp, boardless = r.inst, true
			secs, cost = length(comp)
		}
		if !(secs >= 1) || cost > left {
			continue
		}
		if err := p.runComponent(comp, boardless, secs, pl, open, state); err != nil {
			return err
		}
		left -= cost
	}
	return nil
}

// runComponent simulates component comp of pl (boardless: cut at its MIG instance) in runs of
// secs and gives each open tenant of it that the runs give more requests than the pool-wide
// runs did their verdict.
func (p *planner) runComponent(comp []string, boardless bool, secs float64, pl *v1.Plan, open map[string]*tenant, state func(*tenant) (*confirmState, int)) error {
	in := map[string]bool{}
	for _, n := range comp {
		in[n] = true
	}
	sp, spl := restrict(p.pool, pl, in)
	d := time.Duration(secs * float64(time.Second))
	reports, err := p.simulateRuns(sp, spl, d)
	if err != nil {
		return err
	}
	for _, n := range comp {
		tn := open[n]
		if tn == nil {
			continue
		}
		st, count := state(tn)
		var again confirmState
		again.tally(count, &tn.t, d, reports)
		if !again.judged && again.over <= st.poolOver {
			// no more requests than the pool-wide runs gave it (a diurnal tenant whose
			// pool-wide runs were too long to judge it may get fewer, and be judged)
			continue
		}
		again.model, again.q, again.left, again.poolOver, again.poolOffPeak = st.model, st.q, st.left, st.poolOver, st.poolOffPeak
		again.component, again.boardless, again.members = namesOf(comp), boardless, comp
		*st = again
	}
	return nil
}

// What a tenant of a pool above confirmFullTenants that neither the pool-wide runs nor its
// component's judged is told (ADR 0086).
const (
	confirmNotAtRisk = "in a pool of more than %d tenants only the sharing components of tenants at risk (a fixed count, prompts longer than a step's token budget, a load within 10 %% of the model's capacity) are simulated on their own, and it is not one"
	confirmUnreached = "its sharing component, one of a tenant at risk, was not simulated on its own: the budget's share for such runs went to cheaper components first"
)

// confirmAtRisk reports whether tn, at n replicas, is a tenant the queueing model is least sure
// of, whose sharing component a pool above confirmFullTenants simulates on its own (ADR 0086):
// a count the pool fixes, prompts longer than one step's token budget (prefilled in chunks,
// where the model's pooling gain was seen larger than the simulator's), or a load within about
// 10 % of what the replicas carry within the SLO (confirmRiskLoad); q is the judged candidate's
// queueing model (nil: only the fixed count can say).
func confirmAtRisk(tn *tenant, q *qmodel, n int) bool {
	switch {
	case tn.t.Replicas != nil:
		return true
	case q == nil:
		return false
	case q.k > 1:
		return true
	}
	return !q.admits(peakRate(tn.t.Traffic)/confirmRiskLoad, n, tn.slo)
}

// namesOf lists a component's tenants for a reason: up to four names, then how many more.
func namesOf(comp []string) string {
	if len(comp) <= 4 {
		return strings.Join(comp, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(comp[:4], ", "), len(comp)-4)
}

// runsOf says, for a Simulated reason, which plan st's runs simulated: the plan, or the
// tenant's sharing component of it.
func (st *confirmState) runsOf() string {
	if st.component == "" {
		return "the plan"
	}
	s := fmt.Sprintf("its sharing component of the plan (%s)", st.component)
	if st.boardless {
		s += " without its board's other MIG instances"
	}
	return s
}

// poolText says, for a Simulated reason of a tenant its component's runs judged, how few
// requests the pool-wide runs gave it ("" for a tenant the pool-wide runs judged).
func (st *confirmState) poolText() string {
	switch {
	case st.component == "":
		return ""
	case st.poolOffPeak:
		return fmt.Sprintf("; the pool-wide runs (%d requests) were longer than %s, past its diurnal peak", st.poolOver, roundDur(confirmPeakRun))
	}
	return fmt.Sprintf("; the pool-wide runs gave it %d requests, fewer than %d", st.poolOver, confirmMinJudged)
}
