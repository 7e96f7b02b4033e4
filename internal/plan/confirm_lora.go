package plan

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// Confirming the shared LoRA engines' counts by simulation (the dense tenants' rules, applied to
// the engines of each shared group: ADR 0035, with ADR 0078, 0083 and 0089 since ADR 0095).
//
// PlanLoRA sizes a group's engines by the queueing model alone, and near an engine's decode
// capacity the model is optimistic (on examples/lora-200.yaml it predicts an engine's TPOT p99
// at 24.7 ms where the LoRA engine simulator measures 28.4 ms). So when Build confirms the dense
// tenants (Options.Simulate, ConfirmRequests not negative), BuildWithLoRA given
// Options.SimulateLoRA also simulates, before the engines are placed, the engines each group
// would be placed with (the board allocate chooses given the GPUs the other tenants leave idle),
// each engine with its adapters' traffic, in confirmRuns runs of seeds ConfirmSeed, +1, +2, each
// long enough for confirmRequests requests of the group's slowest engine within the budget. Each
// engine (its requests, all its adapters' together) and each adapter (over all its engines) has
// a confirmState and is judged as a dense tenant is (confirm.go, confirmextra.go): an adapter
// with fewer than confirmMinJudged requests over the runs is judged through its engine alone,
// and an engine has no p99 of its own (the simulator reports its adapters'), so only an
// adapter's p99 makes runs borderline by ADR 0089. Short after the first runs (below confirmKeep
// over them, or confirmRunKeep in one) raises the group; borderline (below confirmSure or
// confirmRunSure, or an adapter's p99 above confirmNearP99 of its target) runs all the engines
// confirmExtraRuns times more and judges the borderline ones on all their runs (missEstimate);
// one that only the spread floor fails gets confirmTailRuns runs of confirmCheckRequests of its
// own requests, of its own engines, and passes with at most confirmTailAllowed below
// confirmCheckKeep. A group with a short engine or adapter is planned again on one engine more
// (PlanLoRAWith: the adapters binned anew) and simulated again, for at most confirmRounds
// rounds, while its board has an idle GPU for the engine; when it has none, the adapters found
// short are left infeasible with a NoCapacity reason that gives what the runs measured. A group
// whose engines all pass its first runs clear keeps its plan untouched: no reason is added, and
// the plan is byte for byte the model's; one that passes after runs more for a borderline
// result says so in a Simulated reason. A group that spills over boards is not simulated.

// LoRASimInput is one run of one shared LoRA engine being confirmed.
type LoRASimInput struct {
	// Engine is the base model on the engine's GPU and Cost its LoRA cost model.
	Engine *perf.Engine
	Cost   *perf.LoRACost
	// LoRA is the engine: its limits, adapters and each adapter's load (LoRA.Load).
	LoRA LoRAEngine
	// Adapters are the engine's adapters (shapes, objectives), RPS set to their load on it.
	Adapters []LoRAAdapter
	Duration time.Duration
	// Seed and Stream seed the run (the engine's index in its group is the stream).
	Seed, Stream uint64
}

// LoRASimulator runs one engine with its adapters and reports each adapter by tenant name
// (Judged: its arrivals; Attainment: their share completed within its objectives).
// internal/plansim.RunLoRA is internal/sim's LoRA engine simulator.
type LoRASimulator func(ctx context.Context, in LoRASimInput) (map[string]SimTenant, error)

// loraVerdict is what the confirming runs did to one group.
type loraVerdict struct {
	// found lists, per round that found the group short, its engines then and why; model is
	// the queueing model's count and engines the count simulated last.
	found          []string
	model, engines int
	// final is what the last round measured (its worst engine's share); short maps each
	// adapter left short, when no engine could be added, to its runs' figures, and left says
	// why none could.
	final string
	short map[string]string
	left  string
	// borderline says what the runs added for a borderline result in the last round judged
	// (ADR 0078, 0083, 0089), "" when the last round's first runs were clear or short.
	borderline string
}

// loraRuns are the confirming runs of one round of a group's engines: a confirmState per engine
// (its requests, all adapters' together) and per adapter (over all its engines), judged by the
// dense tenants' rules (confirm.go, confirmextra.go).
type loraRuns struct {
	in     LoRAInput
	p      LoRAPlan
	budget int
	o      Options
	d      time.Duration // the first runs' length
	engs   []*confirmState
	ads    map[string]*confirmState
	order  []string // the adapters, in the group's order
}

// engineKey is an engine's key in the runs' reports, apart from its adapters' tenant names.
func engineKey(name string) string { return "engine:" + name }

// firstLoRARuns runs every engine of p confirmRuns times, each run long enough for
// confirmRequests requests of the slowest engine, as the dense runs are for their slowest judged
// tenant, within the budget's requests of the group's traffic (and confirmMaxRun), and tallies
// each engine and each adapter over the runs. nil when the budget buys less than a second.
func firstLoRARuns(ctx context.Context, in LoRAInput, p LoRAPlan, pool *v1.Pool, budget int, o Options) (*loraRuns, error) {
	slowest := math.Inf(1)
	for _, e := range p.Engines {
		if e.RPS > 0 {
			slowest = min(slowest, e.RPS)
		}
	}
	secs := min(confirmRequests/slowest, float64(budget)/groupRate(p), confirmMaxRun.Seconds())
	if !(secs >= 1) {
		return nil, nil
	}
	lr := &loraRuns{in: in, p: p, budget: budget, o: o, d: time.Duration(secs * float64(time.Second)), ads: map[string]*confirmState{}}
	reports, err := lr.simulate(ctx, lr.d, 0, confirmRuns, nil)
	if err != nil {
		return nil, err
	}
	for _, e := range p.Engines {
		st := &confirmState{}
		st.tally(len(p.Engines), &v1.Tenant{Name: engineKey(e.Name)}, lr.d, reports)
		st.judged = st.over > 0 // an engine is judged on whatever its runs held
		lr.engs = append(lr.engs, st)
	}
	for _, a := range in.Group.Adapters {
		t := tenantOf(pool, a.Tenant)
		t.Name = a.Tenant
		st := &confirmState{}
		st.tally(len(p.Engines), &t, lr.d, reports)
		lr.ads[a.Tenant] = st
		lr.order = append(lr.order, a.Tenant)
	}
	return lr, nil
}

func groupRate(p LoRAPlan) float64 {
	var rate float64
	for _, e := range p.Engines {
		rate += e.RPS
	}
	return rate
}

// simulate runs the engines of the plan (those in only, or all when only is nil) n times for d,
// at seeds ConfirmSeed+first onwards (engine i on stream i), and returns each run's report: each
// adapter over all its engines run (its requests and their share within its objectives added
// up, its highest p99s), and each engine run over all its adapters (engineKey).
func (lr *loraRuns) simulate(ctx context.Context, d time.Duration, first, n int, only map[int]bool) ([]map[string]SimTenant, error) {
	by := map[string]LoRAAdapter{}
	for _, a := range lr.in.Group.Adapters {
		by[a.Tenant] = a
	}
	res := make([][]map[string]SimTenant, len(lr.p.Engines))
	errs := make([][]error, len(lr.p.Engines))
	var wg sync.WaitGroup
	for ei, e := range lr.p.Engines {
		res[ei], errs[ei] = make([]map[string]SimTenant, n), make([]error, n)
		if only != nil && !only[ei] {
			continue
		}
		si := LoRASimInput{Engine: lr.in.Engine, Cost: lr.in.Cost, LoRA: e, Duration: d, Stream: uint64(ei)}
		for _, t := range e.Adapters {
			a := by[t]
			a.RPS = e.Load[t]
			si.Adapters = append(si.Adapters, a)
		}
		for r := range n {
			wg.Go(func() {
				run := si
				run.Seed = lr.o.ConfirmSeed + uint64(first+r)
				res[ei][r], errs[ei][r] = lr.o.SimulateLoRA(ctx, run)
			})
		}
	}
	wg.Wait()
	for ei := range errs {
		for _, err := range errs[ei] {
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("build plan: %w", ctx.Err())
			}
			return nil, fmt.Errorf("build plan: simulate lora engine %s to confirm its group's engines: %w", lr.p.Engines[ei].Name, err)
		}
	}
	out := make([]map[string]SimTenant, n)
	for r := range n {
		rep := map[string]SimTenant{}
		merge := func(k string, st SimTenant) {
			m := rep[k]
			met := m.Attainment*float64(m.Judged) + st.Attainment*float64(st.Judged)
			m.Judged += st.Judged
			if m.Judged > 0 {
				m.Attainment = met / float64(m.Judged)
			}
			m.TTFTP99, m.TPOTP99 = max(m.TTFTP99, st.TTFTP99), max(m.TPOTP99, st.TPOTP99)
			rep[k] = m
		}
		for ei, e := range lr.p.Engines {
			if only != nil && !only[ei] {
				continue
			}
			for _, t := range e.Adapters {
				st := res[ei][r][t]
				merge(t, st)
				// The engine's share; its p99s are not the simulator's (none is reported for an
				// engine), so the engine is judged by its share alone.
				merge(engineKey(e.Name), SimTenant{Judged: st.Judged, Attainment: st.Attainment})
			}
		}
		out[r] = rep
	}
	return out, nil
}

// borderline runs confirmExtraRuns runs more (seeds ConfirmSeed+confirmRuns onwards, of the
// first runs' length) when an engine or an adapter is borderline after the first runs
// (confirmState.borderline: ADR 0078's share, ADR 0089's p99), and judges every borderline one
// on all its runs (missEstimate); one that only the spread floor fails gets confirmTailRuns runs
// of confirmCheckRequests of its requests (ADR 0083), of its own engines (an engine alone, an
// adapter its engines). It returns the borderline engines' and adapters' names (none when one
// is short after the first runs: it is raised without runs more).
func (lr *loraRuns) borderline(ctx context.Context) ([]string, error) {
	type judged struct {
		key  string
		st   *confirmState
		rps  float64
		engs map[int]bool // the engines that carry it
	}
	var all, near []judged
	for ei, e := range lr.p.Engines {
		all = append(all, judged{engineKey(e.Name), lr.engs[ei], e.RPS, map[int]bool{ei: true}})
	}
	for _, t := range lr.order {
		j := judged{key: t, st: lr.ads[t], engs: map[int]bool{}}
		for ei, e := range lr.p.Engines {
			if r, ok := e.Load[t]; ok {
				j.rps += r
				j.engs[ei] = true
			}
		}
		all = append(all, j)
	}
	for _, j := range all {
		if j.st.short() {
			return nil, nil // found short: raised, not run more
		}
		if j.st.borderline() {
			near = append(near, j)
		}
	}
	if len(near) == 0 {
		return nil, nil
	}
	reports, err := lr.simulate(ctx, lr.d, confirmRuns, confirmExtraRuns, nil)
	if err != nil {
		return nil, err
	}
	type tailJob struct {
		d    time.Duration
		engs map[int]bool
		js   []judged
	}
	var tails []*tailJob
	at := map[string]*tailJob{}
	var names []string
	for _, j := range near {
		names = append(names, strings.TrimPrefix(j.key, "engine:"))
		j.st.add(j.key, reports)
		j.st.extra = confirmExtraRuns
		j.st.miss = missEstimate(j.st.runs, confirmSpreadFloor)
		if j.st.miss <= confirmMissMax || missEstimate(j.st.runs, 1) > confirmMissMax {
			continue
		}
		// Only the floor fails it: its tail, in runs of the bar's length of its own requests,
		// within the budget over the group's rate, on its engines. Those of one set of engines
		// with runs of one length share the runs.
		secs := min(confirmCheckRequests/j.rps, float64(lr.budget)/groupRate(lr.p), confirmMaxRun.Seconds())
		d := time.Duration(secs * float64(time.Second))
		key := fmt.Sprint(d, j.engs)
		if at[key] == nil {
			at[key] = &tailJob{d: d, engs: j.engs}
			tails = append(tails, at[key])
		}
		at[key].js = append(at[key].js, j)
	}
	for _, tj := range tails {
		reports, err := lr.simulate(ctx, tj.d, confirmRuns+confirmExtraRuns, confirmTailRuns, tj.engs)
		if err != nil {
			return nil, err
		}
		for _, j := range tj.js {
			j.st.tallyTail(j.key, tj.d, reports)
		}
	}
	return names, nil
}

// loraText is what st's runs measured, for a reason.
func loraText(st *confirmState) string {
	return fmt.Sprintf("%.2f %% of %d requests over %d runs, %.2f %% in the worst", 100*st.att, st.over, len(st.runs), 100*st.worst) + st.missText()
}

// confirmLoRA confirms the groups' engines (see above) against pl, the plan of the other
// tenants, changing the chosen option's plan of a group it raises. It returns a verdict per
// group (nil where not simulated).
func confirmLoRA(ctx context.Context, pl *v1.Plan, pool *v1.Pool, fg []LoRAFleetGroup, o Options) ([]*loraVerdict, error) {
	budget := o.ConfirmRequests
	if budget == 0 {
		budget = DefaultConfirmRequests
	}
	if o.SimulateLoRA == nil || budget < 0 {
		return nil, nil
	}
	avail := map[string]int{} // the idle GPUs of each board, as PlaceLoRAEngines counts them
	free, _ := engineGPUs(pl, pool)
	for i, g := range pl.GPUs {
		if free(i) {
			avail[g.Board]++
		}
	}
	out := make([]*loraVerdict, len(fg))
	for gi := range fg {
		grp := &fg[gi]
		oi := slices.IndexFunc(grp.Options, func(op LoRABoardPlan) bool { return avail[op.Board] >= len(op.Plan.Engines) })
		if oi < 0 {
			grp.allocate(avail, nil) // spills: not simulated; takes what placing it takes
			continue
		}
		opt := &grp.Options[oi]
		b := grp.boardNamed(opt.Board)
		if b == nil {
			grp.allocate(avail, nil)
			continue
		}
		in := LoRAInput{Group: grp.Group, Engine: b.Engine, Cost: b.Cost, Prefix: grp.Prefix}
		v := &loraVerdict{model: len(opt.Plan.Engines)}
		for round := range confirmRounds {
			lr, err := firstLoRARuns(ctx, in, opt.Plan, pool, budget, o)
			if err != nil {
				return nil, err
			}
			if lr == nil {
				break // too little traffic to simulate
			}
			near, err := lr.borderline(ctx)
			if err != nil {
				return nil, err
			}
			v.engines = len(opt.Plan.Engines)
			var why []string
			shortAds := map[string]string{}
			worst := 1.0
			for ei, e := range opt.Plan.Engines {
				st := lr.engs[ei]
				worst = min(worst, st.att)
				if st.short() {
					why = append(why, fmt.Sprintf("engine %s: %s", e.Name, loraText(st)))
					for _, t := range e.Adapters {
						shortAds[t] = fmt.Sprintf("its engine %s met it for %s", e.Name, loraText(st))
					}
				}
				for _, t := range e.Adapters {
					if a := lr.ads[t]; a.short() {
						if !st.short() { // a short engine speaks for its adapters
							why = append(why, fmt.Sprintf("adapter %s: %s", t, loraText(a)))
						}
						shortAds[t] = fmt.Sprintf("the adapter met it for %s", loraText(a))
					}
				}
			}
			v.final = fmt.Sprintf("%.2f %% of the requests of its worst engine", 100*worst)
			v.borderline = ""
			if len(near) > 0 && len(why) == 0 {
				v.borderline = fmt.Sprintf("borderline in its first %d runs (%s: below %.1f %% over them or %.1f %% in one, or an adapter's p99 above %.0f %% of its target), so %d runs more",
					confirmRuns, strings.Join(near, ", "), 100*confirmSure, 100*confirmRunSure, 100*confirmNearP99, confirmExtraRuns)
			}
			if len(why) == 0 {
				break
			}
			n := len(opt.Plan.Engines)
			if round == confirmRounds-1 || avail[opt.Board] < n+1 {
				v.short = shortAds
				v.left = fmt.Sprintf("board %s has no idle GPU for another engine", opt.Board)
				if round == confirmRounds-1 {
					v.left = fmt.Sprintf("%d rounds of raises are spent", confirmRounds)
				}
				v.found = append(v.found, fmt.Sprintf("%d engine(s) (%s), not raised: %s", n, strings.Join(why, "; "), v.left))
				break
			}
			p, _, err := PlanLoRAWith(in, n+1)
			if err != nil {
				return nil, err
			}
			v.found = append(v.found, fmt.Sprintf("%d engine(s) (%s)", n, strings.Join(why, "; ")))
			opt.Plan = p
		}
		avail[opt.Board] -= len(opt.Plan.Engines)
		if oi == 0 {
			grp.Plan = opt.Plan
		}
		if len(v.found) > 0 || v.borderline != "" {
			out[gi] = v
		}
	}
	return out, nil
}

// loraVerdictReasons gives the adapters of each group the confirming runs changed a Simulated
// reason, and those left short their NoCapacity (or SLOUnmet) reason: infeasible, as dense
// tenants the runs find short and cannot raise are.
func loraVerdictReasons(pl *v1.Plan, fg []LoRAFleetGroup, vs []*loraVerdict) {
	idx := map[string]int{}
	for i, t := range pl.Tenants {
		idx[t.Name] = i
	}
	for gi, v := range vs {
		if v == nil {
			continue
		}
		msg := fmt.Sprintf("the plan's simulation of group %s found it short of the SLO on %s; at %d engine(s), %s met it; the queueing model's count is %d",
			fg[gi].Group.Key, strings.Join(v.found, ", then "), v.engines, v.final, v.model)
		if len(v.found) == 0 {
			msg = fmt.Sprintf("the plan's simulation of group %s passes its %d engine(s), the queueing model's count: %s met it", fg[gi].Group.Key, v.engines, v.final)
		}
		if v.borderline != "" {
			msg += "; " + v.borderline + ", which pass it"
		}
		for _, a := range fg[gi].Group.Adapters {
			i, ok := idx[a.Tenant]
			if !ok {
				continue
			}
			pt := &pl.Tenants[i]
			pt.Reasons = append(pt.Reasons, v1.NewReason(v1.ReasonSimulated, "%s", msg))
			why, short := v.short[a.Tenant]
			if !short || pt.Infeasible {
				continue
			}
			code := v1.ReasonNoCapacity
			if len(v.found) >= confirmRounds {
				code = v1.ReasonSLOUnmet
			}
			pt.Infeasible, pt.Predicted = true, v1.Prediction{}
			pt.Reasons = append([]v1.Reason{v1.NewReason(code, "the plan's simulation finds %d engine(s) of %s short of the SLO (%s), and %s",
				v.engines, fg[gi].Group.Key, why, v.left)}, pt.Reasons...)
		}
	}
}
