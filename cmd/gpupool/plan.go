package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/control"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/plansim"
)

func newPlanCmd(e *env) *cobra.Command {
	var outDir, currentFile, gateway, namespace string
	var force bool
	var maxMoves, simRequests int
	cmd := &cobra.Command{
		Use:   "plan POOL",
		Short: "Slice every GPU so that every tenant's SLO holds with the fewest GPUs, and say why",
		Long: "plan reads a Pool, sizes every tenant (memory, then the rate one replica sustains within its SLO),\n" +
			"chooses a slice kind per tenant (exclusive, MIG, MPS, time-slicing, MIG + MPS / time-slicing) and packs\n" +
			"them onto the fleet with legal MIG layouts. A tenant whose profile names a measured table (ParvaGPU's CSV,\n" +
			"relative to the pool file) is sized from it: a batch's latency within 0.45 × slo.e2eP99. It prints every\n" +
			"GPU as a row of its slices, every tenant's replicas, a proven lower bound on the GPUs needed and three\n" +
			"baselines. --out DIR writes plan.yaml and the artifacts (mig-parted, device-plugin, MPS, vLLM, Kubernetes,\n" +
			"SVG pool map, README.md), and migration.yaml with --current. The directory is replaced as a whole and\n" +
			"atomically: it holds the old content or all of the new, never a mix, and nothing of an earlier run stays.\n" +
			"A non-empty directory gpupool did not write (no .gpupool-output file) is refused unless --force.\n" +
			"--current PLAN re-plans against the plan in force: as few GPUs as possible change, replicas stay in their\n" +
			"slots where they can, and the migration steps are listed (GPUs that run nothing first, then replica\n" +
			"starts and moves, drains, moves onto drained GPUs and stops; at most policy.maxUnavailable per wave).\n" +
			"Tenants whose replicas in force still meet their SLO where they run stay there when re-packing would\n" +
			"save no GPU; only new tenants and those their replicas no longer carry are placed, on idle GPUs.\n" +
			"--max-moves N (with --current) never moves more than N replicas: when re-packing would, the plan in\n" +
			"force is kept for the tenants it still serves, or only the changes that free the most GPUs within N moves\n" +
			"are made, whichever uses fewer GPUs without leaving a tenant short (every tenant's reasons say what that\n" +
			"gives up); when the tenants that must move exceed N it fails, naming them. Without the flag, the pool's\n" +
			"policy.maxMoves is the budget (as the Kubernetes controller uses it); --max-moves -1 lifts it.\n" +
			"On pools of at most 64 tenants the plan is simulated (three runs, the simulator of `gpupool simulate`)\n" +
			"and a tenant the runs find short of its SLO gets a replica more, for up to four rounds (a Simulated\n" +
			"reason says what the runs saw); --sim-requests N bounds each run (0: the default, 50,000 requests),\n" +
			"-1 plans from the queueing model alone.\n" +
			"Adapter tenants (model.adapter) that may share a base-model engine are served by shared LoRA engines\n" +
			"(planned as `gpupool lora` plans them), each on a whole GPU of the fleet that the other tenants leave\n" +
			"idle, recorded in loraEngines; --out renders each engine's Deployment pinned to its node, and with\n" +
			"--gateway GW the Gateway API Inference Extension objects that route each adapter to its engines.\n" +
			"Exit 2 when some tenant is infeasible (the rest is planned and written) or the renderer reports a\n" +
			"problem, 1 for invalid input.",
		Args: cobra.ExactArgs(1),
	}
	out := addOutputFlag(cmd)
	cmd.Flags().StringVar(&outDir, "out", "", "directory to write plan.yaml and the artifacts to")
	cmd.Flags().StringVar(&currentFile, "current", "", "the plan in force: change as few GPUs as possible and list the migration steps")
	cmd.Flags().BoolVar(&force, "force", false, "with --out: replace a non-empty directory gpupool did not write")
	cmd.Flags().IntVar(&maxMoves, "max-moves", -1, "with --current: the most replicas the migration may move (-1: no limit; unset: the pool's policy.maxMoves)")
	simRequestsFlag(cmd.Flags(), &simRequests)
	cmd.Flags().StringVar(&gateway, "gateway", "", "with --out: write the LoRA engines' gateway objects for this Gateway (gateway/)")
	cmd.Flags().StringVar(&namespace, "namespace", "default", "with --gateway: the gateway objects' namespace")
	cmd.RunE = func(c *cobra.Command, args []string) error {
		format, err := parseOutput(*out)
		if err != nil {
			return err
		}
		if maxMoves < -1 || maxMoves >= 0 && currentFile == "" {
			return invalid(fmt.Errorf("plan: --max-moves: must be -1 (no limit) or ≥ 0 with --current (got %d)", maxMoves))
		}
		if err := checkSimRequests(simRequests); err != nil {
			return invalid(fmt.Errorf("plan: %w", err))
		}
		if gateway != "" && outDir == "" {
			return invalid(errors.New("plan: --gateway: only with --out"))
		}
		return runPlan(e, planArgs{pool: args[0], format: format, outDir: outDir, current: currentFile, force: force, maxMoves: maxMoves,
			maxMovesSet: c.Flags().Changed("max-moves"), gateway: gateway, namespace: namespace, simRequests: simRequests})
	}
	return cmd
}

// planArgs are the arguments and flags of `gpupool plan`.
type planArgs struct {
	pool, outDir, current string
	gateway, namespace    string // with outDir: the LoRA engines' gateway objects
	format                outputFormat
	force                 bool
	maxMoves              int // -1: no limit
	maxMovesSet           bool
	simRequests           int // plan.Options.ConfirmRequests
}

// planGCPercent is the garbage collector's target heap growth while gpupool plan runs (Go's
// default is 100), unless GOGC is set: planning is one short run that builds most of what it
// keeps, and collecting half as often cut a fifth of the CPU time of planning 20,000 tenants on
// 10,000 GPUs for a quarter more peak memory (docs/planner.md, "Planning time").
const planGCPercent = 200

func runPlan(e *env, a planArgs) error {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(planGCPercent))
	}
	pool, err := readPool(e.ctx, a.pool)
	if err != nil {
		return invalid(err)
	}
	models, err := loadDirModels(e.ctx, pool, filepath.Dir(a.pool))
	if err != nil {
		return invalid(err)
	}
	profiles, err := loadProfiles(pool, filepath.Dir(a.pool))
	if err != nil {
		return invalid(err)
	}
	cur, err := readCurrent(e.ctx, a.current)
	if err != nil {
		return invalid(err)
	}
	adapters, _, err := loadAdapters(pool, filepath.Dir(a.pool))
	if err != nil {
		return invalid(err)
	}
	o := plan.Options{Models: models, Profiles: profiles, Current: cur, Simulate: plansim.Run, SimulateLoRA: plansim.RunLoRA, ConfirmRequests: a.simRequests}
	switch {
	case a.maxMovesSet && a.maxMoves >= 0:
		o.MaxMoves = &a.maxMoves
	case !a.maxMovesSet && cur != nil && pool.Policy.MaxMoves != nil:
		// the pool's own budget, as the controller re-plans with it
		o.MaxMoves = pool.Policy.MaxMoves
	}
	pl, lora, err := plan.BuildWithLoRA(e.ctx, pool, o, adapters)
	if err != nil {
		if e.ctx.Err() != nil {
			return err
		}
		return invalid(err)
	}
	for _, g := range lora {
		fmt.Fprintf(e.stderr, "plan: %s (one replica per adapter: %d); lower bound %s\n",
			loraPlacedText(g), len(g.Plan.Reasons), g.Why)
	}
	pl.Summary.Cost = planCostSummary(pl, pool)
	if err := v1.ValidatePlan(pl, pool); err != nil {
		return fmt.Errorf("plan %s: the planner produced an invalid plan: %w", a.pool, err)
	}
	var steps []plan.Step
	var nodes []plan.DevicePluginChange
	if cur != nil {
		mu := pool.Policy.MaxUnavailable.Resolve(pl.Summary.GPUsTotal)
		steps = plan.Migration(cur, pl, mu)
		steps, nodes = plan.OrderDevicePluginChanges(cur, pl, steps, plan.DevicePluginChanges(pool, cur, pl), mu)
	}
	if note := cooldownNote(pool, steps); note != "" {
		fmt.Fprintln(e.stderr, note)
	}
	var problems []string
	if a.outDir != "" {
		if problems, err = writePlanDir(e.ctx, a.outDir, a.force, pl, pool, steps, nodes, cur != nil, a.gateway, a.namespace); err != nil {
			return err
		}
	}
	if err := writePlanOutput(e.stdout, a.format, pl, steps, nodes, cur != nil); err != nil {
		return err
	}
	if line := planCostLine(pl, pool); line != "" && a.format == outTable {
		fmt.Fprintln(e.stdout, line)
	}
	var errs []error
	var bad []string
	for _, t := range pl.Tenants {
		if t.Infeasible {
			bad = append(bad, t.Name)
		}
	}
	if len(bad) > 0 {
		errs = append(errs, fmt.Errorf("plan %s: %d tenant(s) infeasible: %s", a.pool, len(bad), strings.Join(bad, ", ")))
	}
	if len(problems) > 0 {
		errs = append(errs, fmt.Errorf("render artifacts: %d problem(s), listed in %s:\n%s",
			len(problems), filepath.Join(a.outDir, "README.md"), strings.Join(problems, "\n")))
	}
	return partial(errors.Join(errs...))
}

// loadProfiles reads the measured profile (a ParvaGPU profile CSV) of every tenant that names
// one, relative to the pool file's directory, keyed by tenant name.
func loadProfiles(pool *v1.Pool, base string) (map[string]*perf.Measured, error) {
	out := map[string]*perf.Measured{}
	var errs []error
	for _, t := range pool.Tenants {
		if t.Profile == "" {
			continue
		}
		path := t.Profile
		if !filepath.IsAbs(path) {
			path = filepath.Join(base, path)
		}
		m, err := readProfile(t.Model.Name, path)
		if err != nil {
			errs = append(errs, fmt.Errorf("tenant %s: load profile %s: %w", t.Name, t.Profile, err))
			continue
		}
		out[t.Name] = m
	}
	return out, errors.Join(errs...)
}

func readProfile(name, path string) (*perf.Measured, error) {
	f, err := openInput(path, "profile")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return perf.ParseParvaGPU(name, newCapped(f, "profile", path))
}

// readCurrent reads the plan in force for --current; nil without one.
func readCurrent(ctx context.Context, path string) (*v1.Plan, error) {
	if path == "" {
		return nil, nil
	}
	cur, err := readPlan(ctx, path, "flag --current")
	if err != nil {
		return nil, fmt.Errorf("flag --current: %w", err)
	}
	return cur, nil
}

// writePlanOutput prints the plan as a table (with the migration when re-planning), JSON or YAML.
func writePlanOutput(w io.Writer, format outputFormat, pl *v1.Plan, steps []plan.Step, nodes []plan.DevicePluginChange, replan bool) error {
	var b []byte
	var err error
	switch format {
	case outJSON:
		b, err = v1.EncodeJSON(pl)
	case outYAML:
		b, err = v1.EncodeYAML(pl)
	default:
		if err := writePlanTable(w, pl); err != nil || !replan {
			return err
		}
		return writeMigration(w, steps, nodes)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writePlanDir renders everything first, then replaces dir with it atomically (writeOutDir). It
// returns the renderer's problems (things the tools cannot express exactly; the files are
// complete).
func writePlanDir(ctx context.Context, dir string, force bool, pl *v1.Plan, pool *v1.Pool, steps []plan.Step, nodes []plan.DevicePluginChange, replan bool, gateway, namespace string) ([]string, error) {
	y, err := v1.EncodeYAML(pl)
	if err != nil {
		return nil, err
	}
	var mig []byte
	if replan {
		if steps == nil {
			steps = []plan.Step{} // "steps: []", not "steps: null", when no GPU changes
		}
		doc := map[string]any{"steps": steps}
		if len(nodes) > 0 {
			doc["devicePlugin"] = nodes // node configs that change, each a node-config step among steps (OrderDevicePluginChanges)
		}
		if mig, err = yaml.Marshal(doc); err != nil {
			return nil, fmt.Errorf("encode migration: %w", err)
		}
	}
	arts, problems, err := renderArtifacts(pl, pool)
	if err != nil {
		return nil, fmt.Errorf("render artifacts: %w", err)
	}
	files := append([]outFile{{Path: "plan.yaml", Data: y}}, arts...)
	if gateway != "" {
		gw, err := loraGatewayFiles(pl, pool, gateway, namespace)
		if err != nil {
			return nil, err
		}
		files = append(files, gw...)
	}
	if replan {
		files = append(files, outFile{Path: "migration.yaml", Data: mig})
	}
	return problems, writeOutDir(ctx, dir, files, force)
}

// cooldownNote says, for a migration that re-partitions MIG GPUs, that policy.reconfigCooldown
// is not checked by the planner: a plan records no re-partition times, so the least time between
// two re-partitions of one GPU is kept where the change is applied (the node agent's gate, the
// Kubernetes controller), which holds a GPU's change until it has passed. "" when no step
// changes a MIG layout or the pool sets no cooldown.
func cooldownNote(pool *v1.Pool, steps []plan.Step) string {
	cd := pool.Policy.ReconfigCooldown
	if cd == nil || *cd <= 0 {
		return ""
	}
	var gpus []string
	for _, s := range steps {
		if s.Kind == plan.StepGPU && (strings.HasPrefix(s.From, "mig") || strings.HasPrefix(s.To, "mig")) {
			gpus = append(gpus, s.GPU.String())
		}
	}
	if len(gpus) == 0 {
		return ""
	}
	return fmt.Sprintf("plan: note: the migration re-partitions %d MIG GPU(s) (%s); policy.reconfigCooldown (%s) is not checked here, "+
		"as a plan records no re-partition times: where the change is applied, the node agent's gate (per GPU) and the Kubernetes controller "+
		"(per node) hold a change until that long after the last one",
		len(gpus), strings.Join(gpus, ", "), cd.String())
}

// writeMigration lists the migration steps, wave by wave (a node whose device-plugin sharing
// setting changes in a node-config step), then a line per such node (nodes) saying why its wave.
func writeMigration(w io.Writer, steps []plan.Step, nodes []plan.DevicePluginChange) error {
	if len(steps) == 0 && len(nodes) == 0 {
		_, err := io.WriteString(w, "\nmigration: no GPU changes, no replica moves\n")
		return err
	}
	var sb strings.Builder
	configs := plan.NodeConfigSteps(steps)
	moves := plan.Moves(steps) - configs // Moves counts every step that is not a GPU step
	config := ""
	if len(nodes) > 0 {
		config = fmt.Sprintf(", %d node device-plugin config change(s)", len(nodes))
	}
	fmt.Fprintf(&sb, "\nmigration: %d GPU change(s)%s, %d replica step(s): %d move(s) to another GPU, %d in place\n",
		len(steps)-moves-configs, config, moves, plan.CountMoves(steps), plan.Reconfigurations(steps))
	tw := newTable(&sb)
	fmt.Fprintln(tw, "WAVE\tSTEP\tGPU\tTENANT\tDRAIN\tFROM\tTO")
	for _, s := range steps {
		tenant := s.Tenant
		switch {
		case s.LoRAEngine != "":
			tenant = "lora:" + s.LoRAEngine
		case tenant == "":
			tenant = "-"
		}
		gpu := s.GPU.String()
		if s.Kind == plan.StepNodeConfig {
			gpu = s.GPU.Node // the node's config, not one GPU's
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%s\t%s\n", s.Wave, s.Kind, gpu, tenant, s.Drain, s.From, s.To)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range nodes {
		fmt.Fprintf(&sb, "node %s: the device-plugin config's sharing of whole GPUs goes from %s to %s (references a GPU)", n.Node, n.From, n.To)
		if n.Wave > 0 {
			fmt.Fprintf(&sb, ", in wave %d %s", n.Wave, n.Reason)
		}
		if n.Running > n.Restarts {
			fmt.Fprintf(&sb, "; the %d replica(s) that keep running there and do not restart keep the limits they started with until they restart", n.Running-n.Restarts)
		}
		sb.WriteString("\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// writePlanTable draws each GPU as a row of its slices, then the tenants and the summary.
func writePlanTable(w io.Writer, pl *v1.Plan) error {
	var sb strings.Builder
	for _, g := range pl.GPUs {
		fmt.Fprintf(&sb, "%-*s %s %-9s %-6s %s\n", gpuWidth(pl), g.Ref().String(), g.Board, g.Mode, g.Role, gpuCells(g))
	}
	sb.WriteString("\n")
	tw := newTable(&sb)
	fmt.Fprintln(tw, "TENANT\tREPLICAS\tSLICES\tMAX RPS\tP99 TTFT\tP99 TPOT\tSTATUS")
	tps := tpSizes(pl)
	for _, t := range pl.Tenants {
		status := "ok"
		if t.Infeasible {
			status = "INFEASIBLE: " + firstReason(t.Reasons)
		}
		most := fmt.Sprintf("%.3g", t.Predicted.MaxRPS)
		if b := t.Predicted.BurstRPS; b > 0 {
			most += fmt.Sprintf(" (burst %.3g)", b)
		}
		// An adapter tenant's replicas are the shared engines that serve it (tenantSlices).
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.Name, len(t.Replicas)+len(t.LoRAEngines), tenantSlices(t, tps), most,
			shortDur(t.Predicted.TTFTP99), shortDur(t.Predicted.TPOTP99), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := pl.Summary
	fmt.Fprintf(&sb, "\nGPUs used %d of %d; lower bound %d", s.GPUsUsed, s.GPUsTotal, s.LowerBound)
	infeasible := 0
	for _, t := range pl.Tenants {
		if t.Infeasible {
			infeasible++
		}
	}
	switch {
	case infeasible > 0:
		// The GPUs used serve only the feasible tenants: a ratio to the bound would mislead.
		fmt.Fprintf(&sb, " (no gap: %s infeasible)", plural(infeasible, "tenant"))
	case s.LowerBound > 0:
		fmt.Fprintf(&sb, " (gap %.2f×)", float64(s.GPUsUsed)/float64(s.LowerBound))
	}
	sb.WriteString("; baselines:")
	simulated := planSimulated(pl)
	for _, b := range s.Baselines {
		fmt.Fprintf(&sb, " %s %d", b.Name, b.GPUs)
		// Where the plan was simulated, say which baselines' counts its runs confirmed and
		// which are the queueing model's alone (ADR 0074).
		switch {
		case b.Confirmed:
			sb.WriteString(" (confirmed)")
		case simulated:
			sb.WriteString(" (model)")
		}
	}
	sb.WriteString("\n")
	sb.WriteString(estimatedWarning(pl))
	_, err := io.WriteString(w, sb.String())
	return err
}

// estimatedWarning is the table's one-line warning, "" when no tenant carries an
// EstimatedFigures reason: which tenants' predictions rest on which boards' estimated compute
// figures (the reasons say which figures).
func estimatedWarning(pl *v1.Plan) string {
	byTenant := pl.TenantBoards()
	var names, boards []string
	for _, t := range pl.Tenants {
		if _, ok := t.Reason(v1.ReasonEstimatedFigures); !ok {
			continue
		}
		names = append(names, t.Name)
		boards = append(boards, byTenant[t.Name]...)
	}
	if len(names) == 0 {
		return ""
	}
	var estimated []string
	for _, b := range boards {
		if gb, err := gpu.Lookup(b); err == nil && len(gb.Estimated) > 0 && !slices.Contains(estimated, gb.Name) {
			estimated = append(estimated, gb.Name)
		}
	}
	slices.Sort(estimated)
	const most = 5
	list := strings.Join(names[:min(len(names), most)], ", ")
	if len(names) > most {
		list += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return fmt.Sprintf("warning: the predictions for %s (%s) rest on estimated compute figures of %s, not NVIDIA table values (reason EstimatedFigures)\n",
		plural(len(names), "tenant"), list, strings.Join(estimated, ", "))
}

// planSimulated reports whether the plan's counts were simulated: some tenant carries a
// Simulated reason.
func planSimulated(pl *v1.Plan) bool {
	for _, t := range pl.Tenants {
		for _, r := range t.Reasons {
			if r.Code == v1.ReasonSimulated {
				return true
			}
		}
	}
	return false
}

func gpuWidth(pl *v1.Plan) int {
	n := 0
	for _, g := range pl.GPUs {
		n = max(n, len(g.Ref().String()))
	}
	return n
}

// gpuCells renders a GPU's slices: "[3g.40gb:chat-a ][1g.10gb]" for MIG, "[chat-a chat-b]" else.
func gpuCells(g v1.PlanGPU) string {
	var sb strings.Builder
	for _, in := range g.Instances {
		sb.WriteString("[" + in.Profile)
		if len(in.Replicas) > 0 {
			sb.WriteString(":" + replicaNames(in.Replicas))
			if in.Sharing.Mode != "" && in.Sharing.Mode != v1.SharingNone {
				sb.WriteString(" (" + string(in.Sharing.Mode) + ")")
			}
		}
		sb.WriteString("]")
	}
	if len(g.Replicas) > 0 {
		sb.WriteString("[" + replicaNames(g.Replicas) + "]")
	}
	if g.LoRAEngine != "" {
		sb.WriteString("[lora:" + g.LoRAEngine + "]")
	}
	if sb.Len() == 0 {
		return "-"
	}
	return sb.String()
}

func replicaNames(rs []v1.PlanReplica) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = fmt.Sprintf("%s#%d", r.Tenant, r.Index)
	}
	return strings.Join(names, " ")
}

// tpSizes maps tenant/index to the tensor-parallel size of each tensor-parallel replica.
func tpSizes(pl *v1.Plan) map[string]int {
	out := map[string]int{}
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if r.TensorParallel.Size > 1 {
				out[fmt.Sprintf("%s/%d", r.Tenant, r.Index)] = r.TensorParallel.Size
			}
		}
	}
	return out
}

func tenantSlices(t v1.PlanTenant, tp map[string]int) string {
	if len(t.LoRAEngines) > 0 {
		kind := "shared engine"
		if len(t.LoRAEngines) > 1 {
			kind += "s"
		}
		return kind + " lora:" + strings.Join(t.LoRAEngines, ",")
	}
	seen := map[string]int{}
	var order []string
	for _, r := range t.Replicas {
		k := string(r.Slice)
		if n := tp[fmt.Sprintf("%s/%d", t.Name, r.Index)]; n > 1 {
			k = fmt.Sprintf("tp%d", n)
		}
		if r.Instance.Profile != "" {
			k += " " + r.Instance.Profile
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d×%s", seen[k], k)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func firstReason(rs []v1.Reason) string {
	if len(rs) == 0 {
		return ""
	}
	return string(rs[0].Code)
}

// shortDur rounds a prediction for the table: milliseconds with one decimal below a second;
// "-" for none (a tenant sized from a measured profile has no TTFT or TPOT prediction).
func shortDur(d v1.Duration) string {
	x := d.Std()
	if x == 0 {
		return "-"
	}
	if x >= time.Second {
		return x.Round(10 * time.Millisecond).String()
	}
	return x.Round(100 * time.Microsecond).String()
}

// simRequestsFlag defines --sim-requests, the budget of each simulation that confirms a plan's
// replica counts (plan.Options.ConfirmRequests), for every command that plans.
func simRequestsFlag(f *pflag.FlagSet, n *int) {
	f.IntVar(n, "sim-requests", 0, "the most requests one simulation of the plan may generate when confirming its replica counts (0: default; -1: no simulation)")
}

// checkSimRequests refuses a --sim-requests below -1.
func checkSimRequests(n int) error {
	if n < -1 {
		return fmt.Errorf("--sim-requests: must be -1 (no simulation), 0 (the default) or a number of requests (got %d)", n)
	}
	return nil
}

// planning is how the long-running commands (serve, controller) plan: as gpupool plan does,
// confirming the plan by simulation within n requests a run.
func planning(n int) control.Planning {
	return control.Planning{Simulate: plansim.Run, SimulateLoRA: plansim.RunLoRA, ConfirmRequests: n}
}
