package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/metrics"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/sim"
)

func newCostCmd(e *env) *cobra.Command {
	var poolFile string
	var from []string
	var period time.Duration
	var csvOut bool
	cmd := &cobra.Command{
		Use:   "cost PLAN --pool POOL",
		Short: "Bill a plan per tenant: monthly chargeback and showback, energy and carbon (docs/cost.md)",
		Long: "cost applies gpupool's attribution rule (docs/cost.md) to a plan with the prices and factors of the\n" +
			"pool's policy.cost and prints the monthly table (730 h): per tenant the reserved GPUs, cost on the allocation\n" +
			"basis (chargeback) and the usage basis (showback), the idle-cost share, facility energy, joules per output\n" +
			"token, cost per 1M output tokens and gCO2e per 1M tokens; then the idle line and the total. Without --from\n" +
			"the load is the plan's prediction (planned); --from REPORT takes it from a `gpupool simulate -o json`\n" +
			"report of the same plan (simulated); --from START --from END --period D takes it from two reads of the\n" +
			"node agents' /metrics, D apart (measured: the energy counters' increase, the agents' idle line and each\n" +
			"tenant's energy per GPU). A shared LoRA engine's GPU is split among its adapter tenants by the tokens it\n" +
			"computed for each (planned: their offered tokens; simulated: the report's loraEngines).\n" +
			"Prices the pool does not give are not made up: the figures that\n" +
			"need them are left out and the notes say why. -o csv (or --csv) writes the table as CSV.",
		Args: cobra.ExactArgs(1),
	}
	out := cmd.Flags().StringP("output", "o", string(outTable), "output format: table|json|yaml|csv")
	cmd.Flags().StringVar(&poolFile, "pool", "", "the Pool the plan was made for (required)")
	cmd.Flags().StringArrayVar(&from, "from", nil, "a `gpupool simulate -o json` report of the plan (simulated), or twice: two reads of the agents' /metrics (measured, with --period)")
	cmd.Flags().DurationVar(&period, "period", 0, "with two --from reads of the agents' metrics: the time between them")
	cmd.Flags().BoolVar(&csvOut, "csv", false, "write the monthly table as CSV (same as -o csv)")
	_ = cmd.MarkFlagRequired("pool")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		format := *out
		if csvOut {
			format = "csv"
		}
		if format != "csv" {
			if _, err := parseOutput(format); err != nil {
				return invalid(fmt.Errorf("flag -o: unknown output format %q (valid: table, json, yaml, csv)", format))
			}
		}
		return runCost(e, args[0], poolFile, from, period, format)
	}
	return cmd
}

// costOutput is the structured output of `gpupool cost`: the monthly rows and the report they
// come from (over its own period).
type costOutput struct {
	Pool    string       `json:"pool"`
	Plan    string       `json:"plan"`
	Monthly []monthlyRow `json:"monthly"`
	Report  *cost.Report `json:"report"`
}

func runCost(e *env, planPath, poolPath string, from []string, period time.Duration, format string) error {
	pool, err := readPoolFlag(e.ctx, poolPath)
	if err != nil {
		return invalid(err)
	}
	pl, err := readPlan(e.ctx, planPath, "plan")
	if err != nil {
		return invalid(err)
	}
	if err := v1.ValidatePlan(pl, pool); err != nil {
		return invalid(fmt.Errorf("plan %s against pool %s: %w", planPath, poolPath, err))
	}
	models, err := loadDirModels(e.ctx, pool, filepath.Dir(poolPath))
	if err != nil {
		return invalid(err)
	}
	devs, err := costDevices(e, pl, pool, models, from, period)
	if err != nil {
		return invalid(err)
	}
	rep, err := cost.Compute(devs, cost.PricesFrom(pool.Policy.Cost))
	if err != nil {
		return invalid(err)
	}
	o := costOutput{Pool: pool.Metadata.Name, Plan: pl.Metadata.Name, Monthly: monthly(rep), Report: rep}
	switch format {
	case "csv":
		return writeCostCSV(e.stdout, o.Monthly)
	case string(outTable):
		return writeCostTable(e.stdout, rep, o.Monthly)
	}
	return writeStructured(e.stdout, outputFormat(format), o)
}

// costDevices builds the devices to bill: planned without --from, simulated from one report,
// measured from two reads of the agents' metrics.
func costDevices(e *env, pl *v1.Plan, pool *v1.Pool, models map[string]llm.Model, from []string, period time.Duration) ([]cost.Device, error) {
	idle := perf.DefaultOptions().IdlePowerFraction
	if period != 0 && len(from) != 2 {
		return nil, errors.New("flag --period: only with two --from reads of the agents' metrics")
	}
	var data [][]byte
	for _, f := range from {
		b, err := readInput(e.ctx, f, "flag --from")
		if err != nil {
			return nil, err
		}
		data = append(data, b)
	}
	switch len(from) {
	case 0:
		o := plannedOptions(pl, pool, 0)
		o.IdlePowerFraction = idle
		devs, err := cost.FromPlan(pl, pool, o)
		if err != nil || len(pl.LoRAEngines) == 0 {
			return devs, err
		}
		ms, err := loraEngineModels(pl, pool, models)
		if err != nil {
			return nil, err
		}
		return devs, cost.AddLoRAEngines(devs, pl, plannedEngineUse(pl, pool, ms, 3600), idle)
	case 1:
		ro, err := parseSimUse(data[0], pl)
		if err != nil {
			return nil, fmt.Errorf("flag --from: %s: %w", from[0], err)
		}
		devs, err := cost.FromRun(pl, ro)
		if err != nil || len(pl.LoRAEngines) == 0 {
			return devs, err
		}
		eu, err := parseSimEngines(data[0], pl)
		if err != nil {
			return nil, fmt.Errorf("flag --from: %s: %w", from[0], err)
		}
		return devs, cost.AddLoRAEngines(devs, pl, eu, idle)
	case 2:
		if !(period > 0) {
			return nil, errors.New("flag --period: required with two --from reads, the time between them (e.g. 720h)")
		}
		mo, err := measuredUse(data[0], data[1], period)
		if err != nil {
			return nil, fmt.Errorf("flag --from: %w", err)
		}
		return cost.FromMeasured(pl, mo)
	}
	return nil, fmt.Errorf("flag --from: give one simulate report or two reads of the agents' metrics (got %d)", len(from))
}

// measuredUse turns two reads of the agents' metrics into the increases over the period. A
// counter that went down (the agent or the driver restarted) counts its later value.
func measuredUse(start, end []byte, period time.Duration) (cost.MeasuredOptions, error) {
	a, err := metrics.ParseAgent(bytes.NewReader(start))
	if err != nil {
		return cost.MeasuredOptions{}, fmt.Errorf("first read: %w", err)
	}
	b, err := metrics.ParseAgent(bytes.NewReader(end))
	if err != nil {
		return cost.MeasuredOptions{}, fmt.Errorf("second read: %w", err)
	}
	mo := cost.MeasuredOptions{Seconds: period.Seconds(), GPUs: map[string]cost.MeasuredGPU{}, Tokens: map[string]float64{},
		OutputTokens: map[string]float64{}}
	for uuid, g := range b.GPUs {
		if g.Node == "" {
			continue
		}
		p := a.GPUs[uuid]
		m := cost.MeasuredGPU{EnergyJ: metrics.CounterDelta(p.EnergyJoules, g.EnergyJoules), IdleJ: metrics.CounterDelta(p.IdleJ, g.IdleJ),
			Tenants: map[string]float64{}, Split: g.Split}
		for t, j := range b.TenantGPU[uuid] {
			m.Tenants[t] = metrics.CounterDelta(a.TenantGPU[uuid][t], j)
		}
		mo.GPUs[g.Node+"/"+strconv.Itoa(g.Index)] = m
	}
	for t, n := range b.TenantTokens {
		mo.Tokens[t] = metrics.CounterDelta(a.TenantTokens[t], n)
	}
	for t, n := range b.TenantOutputTokens {
		mo.OutputTokens[t] = metrics.CounterDelta(a.TenantOutputTokens[t], n)
	}
	return mo, nil
}

// parseSimUse reads a `gpupool simulate -o json` report: the run's length and each replica's
// dynamic energy and tokens, which must name replicas of pl.
func parseSimUse(data []byte, pl *v1.Plan) (cost.RunOptions, error) {
	var rep sim.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rep); err != nil {
		return cost.RunOptions{}, fmt.Errorf("decode simulate report: %w", err)
	}
	if !(rep.DurationSeconds > 0 && rep.DurationSeconds < 1e9) {
		return cost.RunOptions{}, fmt.Errorf("durationSeconds: must be positive (got %g)", rep.DurationSeconds)
	}
	known := map[string]bool{}
	for _, t := range pl.Tenants {
		for _, r := range t.Replicas {
			known[t.Name+"/"+strconv.Itoa(r.Index)] = true
		}
	}
	ro := cost.RunOptions{Basis: cost.Simulated, Seconds: rep.DurationSeconds, IdlePowerFraction: perf.DefaultOptions().IdlePowerFraction,
		Replicas: map[string]cost.ReplicaUse{}}
	var errs []error
	for i, r := range rep.Replicas {
		switch {
		case !known[r.Name]:
			errs = append(errs, fmt.Errorf("replicas[%d].name: %q is not a replica of plan %s", i, r.Name, pl.Metadata.Name))
		case !(r.DynamicJoules >= 0 && r.DynamicJoules < math.MaxFloat64) || r.OutputTokens < 0 || r.PromptTokens < 0:
			errs = append(errs, fmt.Errorf("replicas[%d]: energy and tokens must be finite and not negative", i))
		default:
			ro.Replicas[r.Name] = cost.ReplicaUse{DynamicJ: r.DynamicJoules, OutputTokens: float64(r.OutputTokens),
				Tokens: float64(r.OutputTokens) + float64(r.PromptTokens)}
		}
	}
	return ro, errors.Join(errs...)
}

// parseSimEngines reads the shared LoRA engines' runs of a `gpupool simulate -o json` report of
// pl: each must be an engine of pl, with finite energy and tokens only for its own adapters.
func parseSimEngines(data []byte, pl *v1.Plan) (map[string]cost.EngineUse, error) {
	var rep struct {
		LoRAEngines []loraEngineRun `json:"loraEngines"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("decode simulate report: %w", err)
	}
	adapters := map[string]map[string]bool{}
	for _, e := range pl.LoRAEngines {
		adapters[e.Name] = map[string]bool{}
		for _, a := range e.Adapters {
			adapters[e.Name][a.Tenant] = true
		}
	}
	var errs []error
	for i, r := range rep.LoRAEngines {
		p := fmt.Sprintf("loraEngines[%d]", i)
		if adapters[r.Name] == nil {
			errs = append(errs, fmt.Errorf("%s.name: %q is not a LoRA engine of plan %s", p, r.Name, pl.Metadata.Name))
			continue
		}
		if !(r.DynamicJoules >= 0 && r.DynamicJoules < math.MaxFloat64) {
			errs = append(errs, fmt.Errorf("%s.dynamicJoules: must be finite and not negative (got %v)", p, r.DynamicJoules))
		}
		for j, a := range r.Adapters {
			if !adapters[r.Name][a.Name] {
				errs = append(errs, fmt.Errorf("%s.adapters[%d].name: %q is not an adapter tenant of engine %s", p, j, a.Name, r.Name))
			}
			if a.InputTokens < 0 || a.OutputTokens < 0 || a.InputTokens > math.MaxInt64/2 || a.OutputTokens > math.MaxInt64/2 {
				errs = append(errs, fmt.Errorf("%s.adapters[%d]: tokens must not be negative", p, j))
			}
		}
	}
	if len(rep.LoRAEngines) == 0 {
		errs = append(errs, fmt.Errorf("loraEngines: plan %s has %d shared LoRA engines, the report none (simulate the plan, not a copy without them)",
			pl.Metadata.Name, len(pl.LoRAEngines)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return simulatedEngineUse(rep.LoRAEngines), nil
}

// monthlyRow is one line of the monthly table; nil where a price is missing.
type monthlyRow struct {
	Name            string   `json:"name"`
	Basis           string   `json:"basis"`
	ReservedGPUs    float64  `json:"reservedGpus"`
	Chargeback      *float64 `json:"chargebackPerMonth,omitempty"`
	Showback        *float64 `json:"showbackPerMonth,omitempty"`
	IdleShare       *float64 `json:"idleSharePerMonth,omitempty"`
	EnergyKWh       float64  `json:"energyKWhPerMonth"` // facility energy when PUE is known, else IT
	JPerOutputToken float64  `json:"joulesPerOutputToken,omitempty"`
	CostPer1MOutput *float64 `json:"costPer1MOutputTokens,omitempty"`
	GCO2ePer1MLoc   *float64 `json:"gCO2ePer1MTokensLocationBased,omitempty"`
	GCO2ePer1MMkt   *float64 `json:"gCO2ePer1MTokensMarketBased,omitempty"`
}

func monthly(r *cost.Report) []monthlyRow {
	perMonth := func(v *float64) *float64 {
		if v == nil {
			return nil
		}
		x := *v * cost.HoursPerMonth
		return &x
	}
	kwhScale := cost.HoursPerMonth * 3600 / r.Seconds
	row := func(l cost.Line) monthlyRow {
		kwh := l.ITEnergyKWh
		if l.FacilityKWh != nil {
			kwh = *l.FacilityKWh
		}
		return monthlyRow{Name: l.Name, Basis: string(l.Basis), ReservedGPUs: l.ReservedGPUs, Chargeback: perMonth(l.ChargebackPerHour),
			Showback: perMonth(l.ShowbackPerHour), IdleShare: perMonth(l.IdleCostPerHour), EnergyKWh: kwh * kwhScale,
			JPerOutputToken: l.JPerOutputToken, CostPer1MOutput: l.CostPer1MOutput, GCO2ePer1MLoc: l.GCO2ePer1MLoc, GCO2ePer1MMkt: l.GCO2ePer1MMarket}
	}
	var out []monthlyRow
	for _, l := range r.Tenants {
		out = append(out, row(l))
	}
	return append(out, row(r.Idle), row(r.Total))
}

var costHeader = []string{"TENANT", "GPUS", "CHARGEBACK/MO", "SHOWBACK/MO", "IDLE SHARE/MO", "KWH/MO", "J/OUT TOK", "PER 1M OUT", "GCO2E/1M TOK LOC", "GCO2E/1M TOK MKT"}

func (m monthlyRow) cells(money func(*float64) string) []string {
	return []string{m.Name, strconv.FormatFloat(m.ReservedGPUs, 'f', 3, 64), money(m.Chargeback), money(m.Showback), money(m.IdleShare),
		strconv.FormatFloat(m.EnergyKWh, 'f', 1, 64), strconv.FormatFloat(m.JPerOutputToken, 'f', 3, 64), money(m.CostPer1MOutput),
		num(m.GCO2ePer1MLoc, 1), num(m.GCO2ePer1MMkt, 1)}
}

func num(v *float64, digits int) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', digits, 64)
}

func writeCostTable(w io.Writer, r *cost.Report, rows []monthlyRow) error {
	fmt.Fprintf(w, "basis %s, idle policy %s, per month of %g h", r.Basis, r.IdlePolicy, cost.HoursPerMonth)
	if r.Currency != "" {
		fmt.Fprintf(w, ", %s", r.Currency)
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	for i, h := range costHeader {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, h)
	}
	fmt.Fprintln(tw)
	for _, m := range rows {
		for i, c := range m.cells(func(v *float64) string { return num(v, 2) }) {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if b := r.IdleBeforePolicy; b.Chargeback > 0 || b.IdleJ > 0 {
		fmt.Fprintf(w, "note: (idle) GPUS are unallocated GPUs; before the idle policy the idle line held %.2f/mo of hardware and %.1f kWh/mo of idle IT energy\n",
			b.Chargeback/(r.Seconds/3600)*cost.HoursPerMonth, (b.IdleJ/3.6e6)*cost.HoursPerMonth*3600/r.Seconds)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func writeCostCSV(w io.Writer, rows []monthlyRow) error {
	cw := csv.NewWriter(w)
	hdr := append([]string{}, costHeader...)
	hdr = append(hdr, "BASIS")
	if err := cw.Write(hdr); err != nil {
		return err
	}
	for _, m := range rows {
		rec := m.cells(func(v *float64) string {
			if v == nil {
				return ""
			}
			return strconv.FormatFloat(*v, 'f', 4, 64)
		})
		for i, c := range rec {
			if c == "-" {
				rec[i] = ""
			}
		}
		if err := cw.Write(append(rec, m.Basis)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// planCostLine is the plan's cost per hour beside its GPU count and the baselines' at the mean
// price of a pool GPU, for the plan table; empty without policy.cost.
// planCostSummary is the plan's summary.cost: its cost per hour on the planned basis with the
// Pool's policy.cost; nil without one or when the plan cannot be billed.
func planCostSummary(pl *v1.Plan, pool *v1.Pool) *v1.PlanCost {
	if pool.Policy.Cost == nil {
		return nil
	}
	devs, err := cost.FromPlan(pl, pool, plannedOptions(pl, pool, 3600))
	if err != nil || len(devs) == 0 {
		return nil
	}
	prices := cost.PricesFrom(pool.Policy.Cost)
	r, err := cost.Compute(devs, prices)
	if err != nil {
		return nil
	}
	pc := &v1.PlanCost{Basis: string(cost.Planned), ITEnergyKWhPerHour: r.Total.ITEnergyKWh,
		GCO2ePerHourLocationBased: r.Total.GCO2eLocation, GCO2ePerHourMarketBased: r.Total.GCO2eMarket}
	priced := true
	used, fleet := 0.0, 0.0
	for _, g := range pl.GPUs {
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			return nil
		}
		h, ok := prices.Hourly[b.Name]
		priced = priced && ok
		fleet += h
		if g.ReplicaCount() > 0 { // replicas on the GPU or its instances, or a shared LoRA engine
			used += h
		}
	}
	if priced {
		pc.Currency = r.Currency
		pc.UsedHardwarePerHour, pc.FleetHardwarePerHour = &used, &fleet
		perGPU := fleet / float64(max(len(pl.GPUs), 1))
		for _, b := range pl.Summary.Baselines {
			pc.Baselines = append(pc.Baselines, v1.BaselineCost{Name: b.Name, HardwarePerHour: perGPU * float64(b.GPUs)})
		}
		if e := r.Total.EnergyCostPerHour; e != nil {
			total := fleet + *e
			pc.EnergyPerHour, pc.TotalPerHour = e, &total
		}
	}
	return pc
}

func planCostLine(pl *v1.Plan, pool *v1.Pool) string {
	if pool.Policy.Cost == nil {
		return ""
	}
	devs, err := cost.FromPlan(pl, pool, plannedOptions(pl, pool, 0))
	if err != nil {
		return ""
	}
	r, err := cost.Compute(devs, cost.PricesFrom(pool.Policy.Cost))
	if err != nil {
		return "cost: not computed (" + err.Error() + ")"
	}
	for _, n := range r.Notes {
		if strings.HasPrefix(n, "no price for board") {
			return "cost: not computed (" + n + ")"
		}
	}
	// Hardware of the GPUs used only: idle GPUs of the fleet could be sold or switched off.
	perGPU := r.Total.Chargeback / float64(max(len(pl.GPUs), 1))
	s := fmt.Sprintf("cost (planned, %s/h): %d GPUs used %.2f hardware", r.Currency, pl.Summary.GPUsUsed, perGPU*float64(pl.Summary.GPUsUsed))
	if e := r.Total.EnergyCostPerHour; e != nil {
		s += fmt.Sprintf(" + %.2f energy (fleet %.2f)", *e, *r.Total.ChargebackPerHour)
	}
	for _, b := range pl.Summary.Baselines {
		s += fmt.Sprintf("; %s %.2f hardware", b.Name, perGPU*float64(b.GPUs))
	}
	return s
}

// simulateCost bills a simulated run of pl; nil when the run cannot be billed (no replicas).
func simulateCost(pl *v1.Plan, pool *v1.Pool, rep sim.Report, engines map[string]cost.EngineUse) *cost.Report {
	uses := map[string]cost.ReplicaUse{}
	for _, r := range rep.Replicas {
		uses[r.Name] = cost.ReplicaUse{DynamicJ: r.DynamicJoules, OutputTokens: float64(r.OutputTokens),
			Tokens: float64(r.OutputTokens) + float64(r.PromptTokens)}
	}
	devs, err := cost.FromRun(pl, cost.RunOptions{Basis: cost.Simulated, Seconds: rep.DurationSeconds,
		IdlePowerFraction: perf.DefaultOptions().IdlePowerFraction, Replicas: uses})
	if err != nil || len(devs) == 0 {
		return nil
	}
	if err := cost.AddLoRAEngines(devs, pl, engines, perf.DefaultOptions().IdlePowerFraction); err != nil {
		return nil
	}
	r, err := cost.Compute(devs, cost.PricesFrom(pool.Policy.Cost))
	if err != nil {
		return nil
	}
	return r
}

// simulateCostTable prints the run's bill per tenant: energy, J per output token, cost per hour
// on both bases and per 1M output tokens, carbon per 1M tokens.
func simulateCostTable(w io.Writer, r *cost.Report) error {
	if r == nil {
		return nil
	}
	fmt.Fprintf(w, "\ncost (simulated, idle policy %s%s):\n", r.IdlePolicy, map[bool]string{true: ", " + r.Currency, false: ""}[r.Currency != ""])
	tw := newTable(w)
	fmt.Fprintln(tw, "TENANT\tGPUS\tIT WH\tJ/OUT TOK\tJ/TOK\tCHARGEBACK/H\tSHOWBACK/H\tIDLE SHARE/H\tPER 1M OUT\tGCO2E/1M TOK LOC\tGCO2E/1M TOK MKT")
	for _, l := range append(append([]cost.Line{}, r.Tenants...), r.Idle, r.Total) {
		fmt.Fprintf(tw, "%s\t%.3f\t%.1f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.ReservedGPUs, l.ITEnergyKWh*1000, l.JPerOutputToken, l.JPerToken,
			num(l.ChargebackPerHour, 2), num(l.ShowbackPerHour, 2), num(l.IdleCostPerHour, 2), num(l.CostPer1MOutput, 2), num(l.GCO2ePer1MLoc, 1), num(l.GCO2ePer1MMarket, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.IdlePolicy == "none" || r.IdlePolicy == "" {
		fmt.Fprintln(w, "J/OUT TOK, J/TOK: billed energy per output token and per token (prompt + output); under idle policy none a tenant is billed its active energy only (its steps above idle power), idle power staying on the (idle) line, so these are below the tenant table's J/OUT TOK+IDLE")
	} else {
		fmt.Fprintf(w, "J/OUT TOK, J/TOK: billed energy per output token and per token (prompt + output): a tenant's active energy plus its share of the idle line under idle policy %s\n", r.IdlePolicy)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

// plannedOptions are the planned basis's options over seconds (0: an hour): the performance
// model's idle power, and each replica's power at its planned load from the fitted step power
// model (plan.ReplicaPower).
func plannedOptions(pl *v1.Plan, pool *v1.Pool, seconds float64) cost.PlanOptions {
	o := perf.DefaultOptions()
	return cost.PlanOptions{Seconds: seconds, IdlePowerFraction: o.IdlePowerFraction, DynamicWatts: plan.ReplicaPower(pool, pl, o)}
}
