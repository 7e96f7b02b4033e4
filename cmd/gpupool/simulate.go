package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/sim"
)

// simulateFlags are the simulate command's inputs.
type simulateFlags struct {
	plan, strategy, plotDir, trace, traceTenant, lengths string
	output                                               *string
	duration                                             time.Duration
	seed                                                 uint64
	force                                                bool
}

func newSimulateCmd(e *env) *cobra.Command {
	f := &simulateFlags{}
	cmd := &cobra.Command{
		Use:   "simulate POOL (--plan PLAN | --strategy S)",
		Short: "Replay a plan under the pool's traffic in a discrete-event simulation",
		Long: "simulate builds every replica of a plan as a vLLM-like engine (continuous batching, chunked\n" +
			"prefill, KV cache, preemption by recompute) on the performance model, generates each tenant's\n" +
			"traffic (or replays --trace) and reports per tenant TTFT, TPOT and end-to-end p50/p95/p99, SLO\n" +
			"attainment, goodput and tokens/s; per GPU utilisation and energy; and Jain's fairness index.\n" +
			"--strategy builds a uniform plan (exclusive, mig, mps or timeslice) instead of reading one, so\n" +
			"that strategies can be compared on the same traffic. A plan's shared LoRA engines (loraEngines) run in\n" +
			"the LoRA engine simulator with their adapters, and the bill splits each among its adapters by tokens.\n" +
			"The same input and seed give the same\n" +
			"output. A plan that does not match the pool, or a slice too small for its model, is rejected.",
		Example: "  gpupool simulate examples/h100-7b-sharing.yaml --strategy mps\n" +
			"  gpupool simulate pool.yaml --plan plan.yaml --duration 1h --seed 7 -o json --plot out/\n" +
			"  gpupool simulate pool.yaml --strategy mig --trace trace.csv",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSimulate(e, f, args[0], cmd.Flags().Changed("duration"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.plan, "plan", "", "the Plan to simulate")
	fl.StringVar(&f.strategy, "strategy", "", "build a uniform plan instead: exclusive, mig, mps or timeslice")
	fl.DurationVar(&f.duration, "duration", 10*time.Minute, "simulated time (with --trace and no --duration: the trace's span)")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed (recorded in the report)")
	fl.StringVar(&f.lengths, "lengths", "", "request token lengths around the pool's means for every tenant: fixed, uniform, exponential (default: each tenant's traffic.lengths, fixed where unset)")
	fl.StringVar(&f.trace, "trace", "", "replay this CSV trace instead of generating traffic (columns timestamp,tenant,input_tokens,output_tokens, or an Azure LLM trace: TIMESTAMP,ContextTokens,GeneratedTokens)")
	fl.StringVar(&f.traceTenant, "trace-tenant", "", "tenant of an Azure trace's rows (default: the pool's first tenant)")
	fl.StringVar(&f.plotDir, "plot", "", "write latency CDFs and a utilisation timeline as PNG and SVG into this directory (replaced as a whole)")
	fl.BoolVar(&f.force, "force", false, "with --plot: replace a non-empty directory gpupool did not write")
	f.output = addOutputFlag(cmd)
	return cmd
}

func runSimulate(e *env, f *simulateFlags, poolPath string, durationSet bool) error {
	out, err := parseOutput(*f.output)
	if err != nil {
		return err
	}
	if (f.plan == "") == (f.strategy == "") {
		return invalid(errors.New("flags --plan and --strategy: give exactly one"))
	}
	in, cfg, adapters, err := simulateInputs(e.ctx, f, poolPath, durationSet)
	if err != nil {
		return invalid(err)
	}
	// A plan's shared LoRA engines run in the LoRA engine simulator, the rest in the replica one.
	full := in
	lin, err := loraSimInputs(in, adapters)
	if err != nil {
		return invalid(err)
	}
	in.Pool, in.Plan = withoutLoRAEngines(in.Pool, in.Plan)
	if err := checkSimulateSize(in, cfg); err != nil {
		return invalid(err)
	}
	bar := newProgress(e.stderr, cfg.Duration)
	if bar != nil {
		cfg.Progress = bar.update
	}
	s, err := sim.New(in, cfg)
	if err != nil {
		return invalid(err)
	}
	res, err := s.Run(e.ctx)
	bar.finish() // before any output, so that the bar does not mix with it
	if err != nil {
		return err
	}
	res.Report.Notes = append(res.Report.Notes, simulateNotes(in)...)
	var runs []loraEngineRun
	if lin != nil {
		if runs, err = simulateLoRAEngines(full.Plan, full.Pool, lin.models, lin.loaded, cfg.Defaults().Duration, cfg.Defaults().Seed, cfg.Lengths); err != nil {
			return err
		}
	}
	if f.plotDir != "" {
		files, err := renderPlots(in.Pool, res)
		if err != nil {
			return err
		}
		if err := writeOutDir(e.ctx, f.plotDir, files, f.force); err != nil {
			return err
		}
	}
	rep := simulateReport{Pool: in.Pool.Metadata.Name, Plan: in.Plan.Metadata.Name, Strategy: f.strategy, Report: res.Report,
		LoRAEngines: runs, Cost: simulateCost(full.Plan, full.Pool, res.Report, simulatedEngineUse(runs))}
	if out != outTable {
		return writeStructured(e.stdout, out, rep)
	}
	if err := simulateTable(e.stdout, rep); err != nil {
		return err
	}
	if len(runs) > 0 {
		fmt.Fprintln(e.stdout, "\nshared LoRA engines (each adapter's requests on its engine):")
		for _, l := range loraRunLines(runs) {
			fmt.Fprintln(e.stdout, "  "+l)
		}
	}
	return simulateCostTable(e.stdout, rep.Cost)
}

// simulateReport is the command's output: the simulator's report and what it ran.
type simulateReport struct {
	Pool     string `json:"pool"`
	Plan     string `json:"plan"`
	Strategy string `json:"strategy,omitempty"`
	sim.Report
	// LoRAEngines are the plan's shared LoRA engines, each simulated with its adapters.
	LoRAEngines []loraEngineRun `json:"loraEngines,omitempty"`
	// Cost bills the run per tenant (docs/cost.md) with the pool's policy.cost.
	Cost *cost.Report `json:"cost,omitempty"`
}

// simulateInputs reads what the run needs: the pool, its models and profiles, the plan (read, or
// made for --strategy), the trace, and the pool's adapters (read once, for the plan and the
// engines' simulation).
func simulateInputs(ctx context.Context, f *simulateFlags, poolPath string, durationSet bool) (sim.Input, sim.Config, map[string]llm.Adapter, error) {
	var in sim.Input
	if durationSet && (f.duration <= 0 || f.duration > maxSimDuration) {
		return in, sim.Config{}, nil, fmt.Errorf("flag --duration: must be between 1ns and %s (got %s)", v1.Duration(maxSimDuration), v1.Duration(f.duration))
	}
	pool, err := readPool(ctx, poolPath)
	if err != nil {
		return in, sim.Config{}, nil, err
	}
	in.Pool = pool
	base := filepath.Dir(poolPath)
	if in.Models, err = loadDirModels(ctx, pool, base); err != nil {
		return in, sim.Config{}, nil, err
	}
	if in.Profiles, err = loadProfiles(pool, base); err != nil {
		return in, sim.Config{}, nil, err
	}
	adapters, _, err := loadAdapters(pool, base)
	if err != nil {
		return in, sim.Config{}, nil, err
	}
	if f.plan != "" {
		if in.Plan, err = readPlan(ctx, f.plan, "flag --plan"); err != nil {
			return in, sim.Config{}, nil, err
		}
	} else if in.Plan, err = uniformPlan(pool, v1.Mode(f.strategy), in.Models, adapters); err != nil {
		return in, sim.Config{}, nil, fmt.Errorf("flag --strategy: %w", err)
	}
	cfg := sim.Config{Duration: f.duration, Seed: f.seed, Lengths: sim.Lengths(f.lengths)}
	if f.trace != "" {
		if in.Trace, err = readTraceFile(f.trace, f.traceTenant, pool); err != nil {
			return in, cfg, nil, err
		}
		if n := len(in.Trace.Requests); !durationSet && n > 0 {
			cfg.Duration = in.Trace.Requests[n-1].At + time.Second
			if cfg.Duration > maxSimDuration {
				return in, cfg, nil, fmt.Errorf("flag --trace: %s spans %s, more than the %s one simulation covers; give --duration to replay its start",
					f.trace, v1.Duration(cfg.Duration), v1.Duration(maxSimDuration))
			}
		}
	}
	return in, cfg, adapters, nil
}

// uniformPlan is sim.UniformPlan for the tenants that get replicas, with the pool's shared
// adapter groups planned and their engines placed as `gpupool plan` places them
// (plan.LoRAFleetGroups, plan.PlaceLoRAEngines): each on a whole GPU the uniform plan leaves
// idle, or its adapters are infeasible.
func uniformPlan(pool *v1.Pool, strategy v1.Mode, models map[string]llm.Model, adapters map[string]llm.Adapter) (*v1.Plan, error) {
	groups, rest, err := plan.LoRAFleetGroups(pool, plan.Options{Models: models}, adapters)
	if err != nil {
		return nil, err
	}
	pl, err := sim.UniformPlan(rest, strategy)
	if err != nil {
		return nil, err
	}
	if len(groups) > 0 {
		plan.PlaceLoRAEngines(pl, pool, groups, nil)
	}
	return pl, nil
}

func readTraceFile(path, tenant string, pool *v1.Pool) (*sim.Trace, error) {
	fh, err := openInput(path, "flag --trace")
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	names := make([]string, 0, len(pool.Tenants))
	for _, t := range pool.Tenants {
		names = append(names, t.Name)
	}
	if tenant == "" && len(names) > 0 {
		tenant = names[0]
	}
	tr, err := sim.ReadTrace(newCapped(fh, "flag --trace", path), sim.TraceOptions{Tenant: tenant, Tenants: names})
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return tr, nil
}

// loadDirModels reads the checkpoint directory of every tenant whose model is one, relative to
// the pool file's directory.
func loadDirModels(ctx context.Context, pool *v1.Pool, base string) (map[string]llm.Model, error) {
	out := map[string]llm.Model{}
	var errs []error
	for _, t := range pool.Tenants {
		if t.Model.Dir == "" {
			continue
		}
		dir := t.Model.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(base, dir)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := loadModelDir(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: load model %s: %w", t.Name, t.Model.Dir, err))
			continue
		}
		out[t.Name] = m
	}
	return out, errors.Join(errs...)
}

// loraSimInput is what simulating a plan's shared LoRA engines needs beside the replica
// simulator's input: each engine's model and the adapters read from PEFT folders.
type loraSimInput struct {
	models map[string]loraEngineModel
	loaded map[string]llm.Adapter
}

// loraSimInputs checks a plan with shared LoRA engines against its pool and prepares its engines;
// nil when the plan has none.
func loraSimInputs(in sim.Input, loaded map[string]llm.Adapter) (*loraSimInput, error) {
	if in.Plan == nil || len(in.Plan.LoRAEngines) == 0 {
		return nil, nil
	}
	if err := v1.ValidatePlan(in.Plan, in.Pool); err != nil {
		return nil, fmt.Errorf("flag --plan: %w", err)
	}
	ms, err := loraEngineModels(in.Plan, in.Pool, in.Models)
	if err != nil {
		return nil, err
	}
	return &loraSimInput{models: ms, loaded: loaded}, nil
}

func simulateNotes(in sim.Input) []string {
	var notes []string
	for _, t := range in.Pool.Tenants {
		if in.Profiles[t.Name] != nil {
			notes = append(notes, fmt.Sprintf("tenant %s: steps take its measured profile's batch latency (%s); a request is one batch item", t.Name, t.Profile))
		}
	}
	if in.Trace != nil && in.Trace.ZeroTokens > 0 {
		notes = append(notes, fmt.Sprintf("trace: %d rows with 0 tokens were replayed with 1", in.Trace.ZeroTokens))
	}
	return notes
}

func simulateTable(w io.Writer, r simulateReport) error {
	what := "plan " + r.Plan
	switch {
	case r.Strategy != "":
		what = "uniform " + r.Strategy + " plan"
	case r.Plan == "" || r.Plan == r.Pool:
		what = "its plan"
	}
	fmt.Fprintf(w, "pool %s, %s: %s simulated, seed %d, %d events\n\n", r.Pool, what,
		time.Duration(r.DurationSeconds*1e9).String(), r.Seed, r.Events)
	tw := newTable(w)
	fmt.Fprintln(tw, "TENANT\tREPL\tDONE\tDROP\tUNFIN\tTTFT p50/p99\tTPOT p50/p99\tE2E p50/p99\tSLO MET\tOUT TOK/S\tSERVED\tJ/OUT TOK+IDLE")
	for _, t := range r.Tenants {
		slo := fmt.Sprintf("%.1f%%", 100*t.SLOAttainment)
		if t.SLOJudged == 0 {
			slo = "-" // no request completed or dropped: nothing met or missed the SLO
		}
		served := fmt.Sprintf("%.1f%%", 100*t.NormalisedThroughput)
		if t.Arrived == 0 {
			served = "-" // nothing asked for: nothing served or not
		}
		jpt := fmt.Sprintf("%.3f", t.JoulesPerToken)
		if t.OutputTokens == 0 {
			jpt = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\n", t.Name, t.Replicas, t.Completed, t.Dropped,
			t.Unfinished, pair(t.TTFT), pair(t.TPOT), pair(t.E2E), slo, t.OutputTokensPerSec, served, jpt)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "GPU\tBOARD\tMODE\tUTIL\tAVG W\tENERGY kJ\tJ/OUT TOK+IDLE")
	for _, g := range r.GPUs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%.0f\t%.1f\t%.3f\n", g.GPU, g.Board, g.Mode, 100*g.Utilization, g.AvgPowerWatts,
			g.EnergyJoules/1000, g.JoulesPerToken)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nJain's fairness index (served/offered tokens): %.3f\n", r.JainIndex)
	fmt.Fprintln(w, "J/OUT TOK+IDLE: joules per output token with idle power (a tenant: its replicas' share of their GPUs' idle power plus its steps' dynamic energy; a GPU: all its energy)")
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	return nil
}

// pair formats p50/p99 in ms, with a dash for no samples.
func pair(l sim.Latency) string {
	if l.P50 == 0 && l.P99 == 0 {
		return "-"
	}
	return ms(l.P50) + " / " + ms(l.P99)
}

func ms(v float64) string {
	if v >= 10000 {
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "s"
	}
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + "ms"
}

// maxSimDuration bounds --duration: a simulated day (a run's cost grows with the simulated time
// as well as with the requests: a day of one replica takes about 0.7 s).
const maxSimDuration = 24 * time.Hour

// maxSimRequests bounds the requests one simulation generates (the pool's total rate times the
// duration), so that no input makes simulate run for long or hold much memory on one number: a
// million requests take about 1.6 s.
const maxSimRequests = 1_000_000

// checkSimulateSize refuses a simulation that would generate more than maxSimRequests requests.
func checkSimulateSize(in sim.Input, cfg sim.Config) error {
	if in.Trace != nil {
		return nil // a trace is bounded by the file size limit
	}
	d := cfg.Defaults().Duration
	var rps float64
	for _, t := range in.Pool.Tenants {
		rps += t.Traffic.RPS
	}
	if n := rps * d.Seconds(); n > maxSimRequests {
		return fmt.Errorf("flag --duration: %s at the pool's %.6g req/s (the sum of tenants[].traffic.rps) is %.3g requests, more than the %d one simulation takes; shorten --duration",
			v1.Duration(d), rps, n, maxSimRequests)
	}
	return nil
}
