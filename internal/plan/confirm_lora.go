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

// Confirming the shared LoRA engines' counts by simulation (ADR 0035's rule, applied to the
// engines of each shared group).
//
// PlanLoRA sizes a group's engines by the queueing model alone, and near an engine's decode
// capacity the model is optimistic (on examples/lora-200.yaml it predicts an engine's TPOT p99
// at 24.7 ms where the LoRA engine simulator measures 28.4 ms). So when Build confirms the dense
// tenants (Options.Simulate, ConfirmRequests not negative), BuildWithLoRA given
// Options.SimulateLoRA also simulates, before the engines are placed, the engines each group
// would be placed with (the board allocate chooses given the GPUs the other tenants leave idle),
// each engine with its adapters' traffic, in confirmRuns runs of seeds ConfirmSeed, +1, +2, each
// long enough for confirmRequests requests of the group's slowest engine within the budget. An
// engine is short when the share of its requests that met their adapter's SLO over the runs is
// below confirmKeep, or below confirmRunKeep in one run, or when one of its adapters with at
// least confirmMinJudged requests over the runs is (its own attainment, by the same rule). A
// group with a short engine is planned again on one engine more (PlanLoRAWith: the adapters
// binned anew) and simulated again, for at most confirmRounds rounds, while its board has an
// idle GPU for the engine; when it has none, the adapters found short are left infeasible with a
// NoCapacity reason that gives what the runs measured. A group whose engines all pass keeps its
// plan untouched: no reason is added, and the plan is byte for byte the model's. A group that
// spills over boards is not simulated.

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
}

// loraTally is one engine's (or adapter's) requests over the runs.
type loraTally struct {
	met, over float64
	worst     float64
}

func (t *loraTally) add(judged int64, att float64) {
	t.met += att * float64(judged)
	t.over += float64(judged)
	if judged > 0 {
		t.worst = min(t.worst, att)
	}
}

func (t loraTally) att() float64 {
	if t.over == 0 {
		return 1
	}
	return t.met / t.over
}

func (t loraTally) short() bool { return t.att() < confirmKeep || t.worst < confirmRunKeep }

func (t loraTally) String() string {
	return fmt.Sprintf("%.2f %% of %d requests over %d runs, %.2f %% in the worst", 100*t.att(), int64(t.over), confirmRuns, 100*t.worst)
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
			engs, ads, err := simulateLoRAEngines(ctx, in, opt.Plan, budget, o)
			if err != nil {
				return nil, err
			}
			if engs == nil {
				break // too little traffic to simulate
			}
			v.engines = len(opt.Plan.Engines)
			var why []string
			shortAds := map[string]string{}
			worst := 1.0
			for ei, e := range opt.Plan.Engines {
				worst = min(worst, engs[ei].att())
				if engs[ei].short() {
					why = append(why, fmt.Sprintf("engine %s: %s", e.Name, engs[ei]))
					for _, t := range e.Adapters {
						shortAds[t] = fmt.Sprintf("its engine %s met it for %s", e.Name, engs[ei])
					}
				}
				for _, t := range e.Adapters {
					if a := ads[t]; a.over >= confirmMinJudged && a.short() {
						if !engs[ei].short() { // a short engine speaks for its adapters
							why = append(why, fmt.Sprintf("adapter %s: %s", t, a))
						}
						shortAds[t] = fmt.Sprintf("the adapter met it for %s", a)
					}
				}
			}
			v.final = fmt.Sprintf("%.2f %% of the requests of its worst engine", 100*worst)
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
		if len(v.found) > 0 {
			out[gi] = v
		}
	}
	return out, nil
}

// simulateLoRAEngines runs every engine of p confirmRuns times, each run long enough for
// confirmRequests requests of the slowest engine, as the dense runs are for their slowest judged
// tenant, within the budget's requests of the group's traffic (and confirmMaxRun), and tallies each engine and
// each adapter over the runs. nil when the budget buys less than a second.
func simulateLoRAEngines(ctx context.Context, in LoRAInput, p LoRAPlan, budget int, o Options) ([]loraTally, map[string]*loraTally, error) {
	var rate float64
	slowest := math.Inf(1)
	for _, e := range p.Engines {
		rate += e.RPS
		if e.RPS > 0 {
			slowest = min(slowest, e.RPS)
		}
	}
	secs := min(confirmRequests/slowest, float64(budget)/rate, confirmMaxRun.Seconds())
	if !(secs >= 1) {
		return nil, nil, nil
	}
	d := time.Duration(secs * float64(time.Second))
	by := map[string]LoRAAdapter{}
	for _, a := range in.Group.Adapters {
		by[a.Tenant] = a
	}
	res := make([][]map[string]SimTenant, len(p.Engines))
	errs := make([][]error, len(p.Engines))
	var wg sync.WaitGroup
	for ei, e := range p.Engines {
		res[ei], errs[ei] = make([]map[string]SimTenant, confirmRuns), make([]error, confirmRuns)
		si := LoRASimInput{Engine: in.Engine, Cost: in.Cost, LoRA: e, Duration: d, Stream: uint64(ei)}
		for _, t := range e.Adapters {
			a := by[t]
			a.RPS = e.Load[t]
			si.Adapters = append(si.Adapters, a)
		}
		for r := range confirmRuns {
			wg.Go(func() {
				run := si
				run.Seed = o.ConfirmSeed + uint64(r)
				res[ei][r], errs[ei][r] = o.SimulateLoRA(ctx, run)
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
				return nil, nil, fmt.Errorf("build plan: %w", ctx.Err())
			}
			return nil, nil, fmt.Errorf("build plan: simulate lora engine %s to confirm its group's engines: %w", p.Engines[ei].Name, err)
		}
	}
	engs := make([]loraTally, len(p.Engines))
	ads := map[string]*loraTally{}
	for ei, e := range p.Engines {
		engs[ei].worst = 1
		for r := range confirmRuns {
			var run loraTally
			run.worst = 1
			for _, t := range e.Adapters {
				st := res[ei][r][t]
				run.met += st.Attainment * float64(st.Judged)
				run.over += float64(st.Judged)
				if ads[t] == nil {
					ads[t] = &loraTally{worst: 1}
				}
			}
			engs[ei].add(int64(run.over), run.att())
		}
	}
	// An adapter spread over engines: each run's share over all its engines.
	for t, a := range ads {
		for r := range confirmRuns {
			var run loraTally
			run.worst = 1
			for ei, e := range p.Engines {
				if slices.Contains(e.Adapters, t) {
					st := res[ei][r][t]
					run.met += st.Attainment * float64(st.Judged)
					run.over += float64(st.Judged)
				}
			}
			a.add(int64(run.over), run.att())
		}
	}
	return engs, ads, nil
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
