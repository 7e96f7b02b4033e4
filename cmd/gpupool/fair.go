package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/fair"
)

// fairScenario is the document a `gpupool fair` run reads (api/v1 FairScenario).
type fairScenario = v1.FairScenario

// fairStepOut is one step of the output.
type fairStepOut struct {
	At        string             `json:"at"`
	Time      time.Time          `json:"time"`
	Tenants   []fair.TenantState `json:"tenants"`
	Decisions []fair.Item        `json:"decisions"`
}

type fairOut struct {
	Notes []string      `json:"notes,omitempty"`
	Steps []fairStepOut `json:"steps"`
	// History says the table has a HISTORY column (usage history is on).
	History bool `json:"-" yaml:"-"`
}

func newFairCmd(e *env) *cobra.Command {
	var output *string
	var poolPath, planPath string
	cmd := &cobra.Command{
		Use:   "fair [SCENARIO | --pool POOL --plan PLAN [STEPS]]",
		Short: "Replay a fair-share scenario through the allocator: tasks, shares and decisions per step",
		Long: "fair reads a scenario (YAML: capacity or slices, tenants with task or slice, demand,\n" +
			"reservation, cap, weight and path, optional burstPoolPercent and leaseDuration, and steps at\n" +
			"offsets that change demand, add or remove tenants or change capacity) and runs it through the\n" +
			"weighted hierarchical DRF allocator. Each step prints every tenant's tasks and dominant share\n" +
			"and the decisions taken, each with its reason. Nothing runs anywhere: preemptions are planned.\n\n" +
			"With --pool and --plan the capacity is the slices the plan created instead: a MIG instance is\n" +
			"one BOARD/PROFILE slice, an MPS share one BOARD/mps-P, a whole GPU one BOARD/exclusive (a\n" +
			"replica sharing an instance or a time-sliced GPU takes its part of it). Canary and idle GPUs\n" +
			"count nothing; burst GPUs count and form the burst pool (burstPoolPercent is their part of the\n" +
			"counted SMs). Tenants come from the pool (path, weight, reservation, cap); a tenant's task is\n" +
			"the slice its replicas use and its demand its replica count in the plan. The optional STEPS\n" +
			"file is a scenario with only start, leaseDuration (default 5m here), maxMinRuntime,\n" +
			"historyHalfLife, limits, groups and steps. With historyHalfLife set, shares count past use too,\n" +
			"decayed by half every half-life (the HISTORY column: decayed task count).\n\n" +
			"The scenario is a gpupool.dev/v1 FairScenario document (apiVersion and kind optional), YAML\n" +
			"(up to 16 MiB; names kept as written) or JSON (up to 64 MiB, the fast path for large files).",
		Example: "  gpupool fair examples/fair/drf-paper.yaml\n  gpupool fair examples/fair/burst-preemption.yaml -o json\n" +
			"  gpupool fair --pool examples/h100x8-mixed.yaml --plan examples/fair/h100x8-mixed.plan.yaml examples/fair/h100x8-mixed.steps.yaml",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseOutput(*output)
			if err != nil {
				return err
			}
			res, err := fairFromArgs(e.ctx, poolPath, planPath, args)
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(e.stdout, 1<<16)
			if f != outTable {
				err = writeStructured(w, f, res)
			} else {
				err = fairTable(w, res)
			}
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&poolPath, "pool", "", "Pool file whose tenants to use (with --plan)")
	cmd.Flags().StringVar(&planPath, "plan", "", "Plan file whose slices are the capacity (with --pool)")
	output = addOutputFlag(cmd)
	return cmd
}

// fairFromArgs reads the scenario, or the pool, plan and optional steps, and replays them.
func fairFromArgs(ctx context.Context, poolPath, planPath string, args []string) (fairOut, error) {
	if poolPath == "" && planPath == "" {
		if len(args) != 1 {
			return fairOut{}, invalid(errors.New("fair: give a SCENARIO file, or --pool and --plan"))
		}
		data, err := readInput(ctx, args[0], "scenario")
		if err != nil {
			return fairOut{}, invalid(err)
		}
		res, err := runFairScenario(ctx, data)
		if err != nil {
			return fairOut{}, invalid(fmt.Errorf("scenario %s: %w", args[0], err))
		}
		return res, nil
	}
	if poolPath == "" || planPath == "" {
		return fairOut{}, invalid(errors.New("fair: --pool and --plan go together"))
	}
	var steps []byte
	if len(args) == 1 {
		data, err := readInput(ctx, args[0], "steps")
		if err != nil {
			return fairOut{}, invalid(err)
		}
		steps = data
	}
	poolData, err := readInput(ctx, poolPath, "flag --pool")
	if err != nil {
		return fairOut{}, invalid(err)
	}
	planData, err := readInput(ctx, planPath, "flag --plan")
	if err != nil {
		return fairOut{}, invalid(err)
	}
	res, err := runFairPoolPlan(ctx, poolData, planData, steps)
	if err != nil {
		return fairOut{}, invalid(fmt.Errorf("fair %s with %s: %w", poolPath, planPath, err))
	}
	return res, nil
}

// runFairScenario decodes, validates and replays a scenario; any problem is returned before
// anything is written.
func runFairScenario(ctx context.Context, data []byte) (fairOut, error) {
	sc, err := decodeFairScenario(data)
	if err != nil {
		return fairOut{}, err
	}
	start, cfg, notes, err := scenarioConfig(sc)
	if err != nil {
		_, aerr := fair.New(cfg) // every problem at once
		return fairOut{}, errors.Join(err, aerr)
	}
	return replayFair(ctx, sc, start, cfg, notes)
}

// runFairPoolPlan replays a pool and its plan, then the steps of an optional scenario that may
// hold only start, leaseDuration, groups and steps.
func runFairPoolPlan(ctx context.Context, poolData, planData, steps []byte) (fairOut, error) {
	pool, err := v1.LoadPool(poolData)
	if err != nil {
		return fairOut{}, fmt.Errorf("pool: %w", err)
	}
	plan, err := v1.DecodePlan(planData)
	if err != nil {
		return fairOut{}, fmt.Errorf("plan: %w", err)
	}
	if err := v1.ValidatePlan(plan, pool); err != nil {
		return fairOut{}, fmt.Errorf("plan: %w", err)
	}
	sc := fairScenario{LeaseDuration: "5m"}
	if steps != nil {
		if sc, err = decodeFairScenario(steps); err != nil {
			return fairOut{}, fmt.Errorf("steps: %w", err)
		}
		var errs []error
		for _, f := range []struct {
			name string
			set  bool
		}{{"capacity", len(sc.Capacity) > 0}, {"slices", len(sc.Slices) > 0},
			{"tenants", len(sc.Tenants) > 0}, {"burstPoolPercent", sc.BurstPoolPercent != 0}} {
			if f.set {
				errs = append(errs, fmt.Errorf("steps: %s: comes from the pool and plan, leave it out", f.name))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fairOut{}, err
		}
		if sc.LeaseDuration == "" {
			sc.LeaseDuration = "5m"
		}
	}
	start, head, _, err := scenarioConfig(sc)
	if err != nil {
		return fairOut{}, fmt.Errorf("steps: %w", err)
	}
	cfg, notes, err := poolPlanConfig(pool, plan)
	if err != nil {
		return fairOut{}, err
	}
	// The pool has no weights for interior nodes: every group weighs 1 unless the steps say.
	cfg.LeaseDuration, cfg.Groups = head.LeaseDuration, head.Groups
	cfg.MaxMinRuntime, cfg.Limits, cfg.HistoryHalfLife = head.MaxMinRuntime, head.Limits, head.HistoryHalfLife
	return replayFair(ctx, sc, start, cfg, notes)
}

// replayFair runs the allocator over the configuration and then every step of sc; it stops at
// the first step after ctx is cancelled.
func replayFair(ctx context.Context, sc fairScenario, start time.Time, cfg fair.Config, notes []string) (fairOut, error) {
	a, err := fair.New(cfg)
	if err != nil {
		return fairOut{}, err
	}
	out := fairOut{Notes: notes, History: cfg.HistoryHalfLife > 0}
	d, err := a.Recompute(start)
	if err != nil {
		return fairOut{}, err
	}
	out.Steps = append(out.Steps, fairStepOut{At: "0s", Time: start, Tenants: a.Snapshot(), Decisions: d.Clone().Items})
	for i, st := range sc.Steps {
		if err := ctx.Err(); err != nil {
			return fairOut{}, err
		}
		at, evs, err := stepEvents(st, i)
		if err != nil {
			return fairOut{}, err
		}
		now := start.Add(at)
		d, err = a.Apply(now, evs...)
		if err != nil {
			return fairOut{}, fmt.Errorf("steps[%d]: %w", i, err)
		}
		items := d.Clone().Items // the next call reuses the decision's buffer
		if st.Recompute {
			// The step's own decisions (e.g. expired leases reclaimed), then the reconciliation's.
			// The reconciliation lists a queue item for every tenant that still waits, after its
			// own moves, so the step's queue items (for the tenants its events touched) are
			// dropped: each waiting tenant is listed once, with what it waits for at the end.
			items = slices.DeleteFunc(items, func(it fair.Item) bool { return it.Kind == fair.KindQueue })
			if d, err = a.Recompute(now); err != nil {
				return fairOut{}, fmt.Errorf("steps[%d]: %w", i, err)
			}
			items = append(items, d.Clone().Items...)
		}
		out.Steps = append(out.Steps, fairStepOut{At: at.String(), Time: now, Tenants: a.Snapshot(), Decisions: items})
	}
	return out, nil
}

// decodeFairScenario decodes and validates a scenario document (api/v1): every problem with its
// field path.
func decodeFairScenario(data []byte) (fairScenario, error) {
	sc, err := v1.DecodeFairScenario(data)
	if err != nil {
		return fairScenario{}, err
	}
	// The tenant limit is checked before anything else costs time per tenant.
	lim := scenarioLimits(sc)
	if n := len(sc.Tenants); n > lim.MaxTenants {
		return fairScenario{}, fmt.Errorf("tenants: %d tenants exceed the limit of %d (limits.maxTenants)", n, lim.MaxTenants)
	}
	if err := v1.ValidateFairScenario(sc); err != nil {
		return fairScenario{}, err
	}
	if err := checkScenarioLimits(sc, lim); err != nil {
		return fairScenario{}, err
	}
	return *sc, nil
}

// scenarioLimits are the allocator's limits with the scenario's overrides.
func scenarioLimits(sc *fairScenario) fair.Limits {
	lim := fair.DefaultLimits
	if l := sc.Limits; l != nil {
		if l.MaxTenants > 0 {
			lim.MaxTenants = fairCount(l.MaxTenants)
		}
		if l.MaxDemand > 0 {
			lim.MaxDemand = fairCount(l.MaxDemand)
		}
		if l.MaxTotalDemand > 0 {
			lim.MaxTotalDemand = fairCount(l.MaxTotalDemand)
		}
	}
	return lim
}

// checkScenarioLimits names, with its field path, every count above the limits (the allocator
// would refuse them too, naming the tenant).
func checkScenarioLimits(sc *fairScenario, lim fair.Limits) error {
	var errs []error
	check := func(path string, t v1.FairTenant) {
		for _, f := range []struct {
			name string
			v    int64
		}{{"demand", t.Demand}, {"reservation", t.Reservation}, {"cap", t.Cap}} {
			if f.v > int64(lim.MaxDemand) {
				errs = append(errs, fmt.Errorf("%s.%s: %d exceeds the limit of %d (limits.maxDemand)", path, f.name, f.v, lim.MaxDemand))
			}
		}
	}
	for i, t := range sc.Tenants {
		check(fmt.Sprintf("tenants[%d]", i), t)
	}
	for i, st := range sc.Steps {
		for j, t := range st.Add {
			check(fmt.Sprintf("steps[%d].add[%d]", i, j), t)
		}
		for _, name := range sortedStrings(st.Demand) {
			if n := st.Demand[name]; n > int64(lim.MaxDemand) {
				errs = append(errs, fmt.Errorf("steps[%d].demand.%s: %d exceeds the limit of %d (limits.maxDemand)", i, name, n, lim.MaxDemand))
			}
		}
	}
	return errors.Join(errs...)
}

// config turns the scenario head into the allocator's configuration.
func scenarioConfig(sc fairScenario) (time.Time, fair.Config, []string, error) {
	var errs []error
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if sc.Start != "" {
		start, _ = time.Parse(time.RFC3339, sc.Start)
	}
	capv, notes, err := capacityOf(sc.Capacity, sc.Slices, "")
	errs = append(errs, err)
	cfg := fair.Config{Capacity: capv, BurstPoolPercent: sc.BurstPoolPercent}
	cfg.LeaseDuration = fairDur(sc.LeaseDuration)
	cfg.MaxMinRuntime = fairDur(sc.MaxMinRuntime)
	cfg.HistoryHalfLife = fairDur(sc.HistoryHalfLife)
	if l := sc.Limits; l != nil {
		cfg.Limits = fair.Limits{MaxTenants: fairCount(l.MaxTenants), MaxDemand: fairCount(l.MaxDemand),
			MaxTotalDemand: fairCount(l.MaxTotalDemand)}
	}
	for _, g := range sc.Groups {
		cfg.Groups = append(cfg.Groups, fair.Group{Path: g.Path, Weight: g.Weight, MaxMinRuntime: fairDur(g.MaxMinRuntime),
			Deserved: g.Deserved, Limit: g.Limit})
	}
	for i, t := range sc.Tenants {
		ft, err := fairTenant(t, fmt.Sprintf("tenants[%d]", i))
		errs = append(errs, err)
		cfg.Tenants = append(cfg.Tenants, ft)
	}
	return start, cfg, notes, errors.Join(errs...)
}

// capacityOf adds slice kinds to a raw capacity; it notes the kinds whose shape is estimated.
func capacityOf(raw map[string]float64, slices64 map[string]int64, path string) (fair.Vector, []string, error) {
	slices := make(map[string]int, len(slices64))
	for k, n := range slices64 {
		slices[k] = fairCount(n)
	}
	c := fair.Vector{}
	for k, v := range raw {
		c[k] = v
	}
	var notes []string
	if len(slices) > 0 {
		sv, est, err := fair.SliceCapacity(slices)
		if err != nil {
			return nil, nil, fmt.Errorf("%sslices: %w", path, err)
		}
		for k, v := range sv {
			c[k] += v
		}
		for _, kind := range sortedStrings(est) {
			notes = append(notes, fmt.Sprintf("%s: %s estimated by proportion (no measured value in the board table)",
				kind, strings.Join(est[kind], ", ")))
		}
	}
	return c, notes, nil
}

func sortedStrings[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// fairTenant converts one validated tenant entry (durations and bounds were checked by
// ValidateFairScenario), naming path in its errors.
func fairTenant(t v1.FairTenant, path string) (fair.Tenant, error) {
	ft := fair.Tenant{Name: t.Name, Path: t.Path, Weight: t.Weight, Deserved: t.Deserved, Demand: fairCount(t.Demand),
		Reservation: fairCount(t.Reservation), Cap: fairCount(t.Cap), Task: fair.Vector{},
		MinRuntime: fairDur(t.MinRuntime)}
	if t.Slice != "" {
		s, err := fair.SliceVector(t.Slice)
		if err != nil {
			return ft, fmt.Errorf("%s.slice: %w", path, err)
		}
		ft.Task = s.Vector
	}
	for k, v := range t.Task {
		ft.Task[k] = v
	}
	for _, c := range t.Classes {
		ft.Classes = append(ft.Classes, fair.ReplicaClass{Name: c.Name, Replicas: fairCount(c.Replicas)})
	}
	return ft, nil
}

// fairDur parses a duration the validator has accepted ("" is 0).
func fairDur(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// fairCount converts a validated count (at most 2^53) to int.
func fairCount(n int64) int {
	return int(min(max(n, 0), 1<<53))
}

// events turns step i into allocator events: removals, arrivals, capacity, then demand changes
// in name order.
func stepEvents(st v1.FairStep, i int) (time.Duration, []fair.Event, error) {
	path := fmt.Sprintf("steps[%d]", i)
	at := fairDur(st.At)
	var evs []fair.Event
	for _, name := range st.Remove {
		evs = append(evs, fair.RemoveTenant{Tenant: name})
	}
	for j, t := range st.Add {
		ft, err := fairTenant(t, fmt.Sprintf("%s.add[%d]", path, j))
		if err != nil {
			return 0, nil, err
		}
		evs = append(evs, fair.AddTenant{Tenant: ft})
	}
	if len(st.Capacity) > 0 || len(st.Slices) > 0 {
		c, _, err := capacityOf(st.Capacity, st.Slices, path+".")
		if err != nil {
			return 0, nil, err
		}
		evs = append(evs, fair.SetCapacity{Capacity: c})
	}
	for _, name := range sortedStrings(st.Demand) {
		evs = append(evs, fair.SetDemand{Tenant: name, Demand: fairCount(st.Demand[name])})
	}
	return at, evs, nil
}

func fairTable(w io.Writer, res fairOut) error {
	for _, n := range res.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	for i, st := range res.Steps {
		fmt.Fprintf(w, "\nstep %d at +%s (%s): %d decisions\n", i, st.At, st.Time.Format(time.RFC3339), len(st.Decisions))
		tw := newTable(w)
		hist := res.History
		head := "TENANT\tPATH\tDEMAND\tTASKS\tSTEADY\tLEASED\tDOMINANT SHARE\tWEIGHTED"
		if hist {
			head += "\tHISTORY"
		}
		fmt.Fprintln(tw, head)
		for _, t := range st.Tenants {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.4f\t%.4f", t.Name, t.Path, t.Demand, t.Tasks, t.Steady, t.Leased,
				t.DominantShare, t.WeightedShare)
			if hist {
				fmt.Fprintf(tw, "\t%.4f", t.History)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, it := range st.Decisions {
			line := "  " + it.String()
			if !it.Expires.IsZero() {
				line += " until " + it.Expires.Format(time.RFC3339)
			}
			if !it.RetryAt.IsZero() {
				line += " retry at " + it.RetryAt.Format(time.RFC3339)
			}
			if !it.Retry && it.Kind == fair.KindQueue {
				line += " (retrying will not help)"
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
		}
	}
	return nil
}
