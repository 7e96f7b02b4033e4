package main

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/render"
	"gpupool.dev/gpupool/internal/sim"
)

// loraGroupOut is one shared group's plan and simulation.
type loraGroupOut struct {
	Group string `json:"group"`
	Board string `json:"board"`
	// GPUs is the engines' GPU count (one whole GPU each); OnePerAdapter what one replica per
	// adapter would take.
	GPUs          int               `json:"gpus"`
	OnePerAdapter int               `json:"onePerAdapter"`
	Engines       []loraEngineOut   `json:"engines"`
	Reasons       map[string]string `json:"reasons"`
	Shares        []plan.LoRAShare  `json:"shares"`
	// FairCaps are each adapter's concurrency cap per engine when every adapter wants the whole
	// engine: its weighted fair part of the engine's sequence slots (sim.LoRAFairCaps).
	FairCaps  map[string]map[string]int `json:"fairCaps"`
	Simulated *loraSimOut               `json:"simulated,omitempty"`
	Adapters  []sim.LoRAAdapterResult   `json:"adapters,omitempty"`
	// MonthlyCost is each adapter's part of its engines' GPU cost for a month (cost.HoursPerMonth
	// at the board's hourly price in policy.cost), every engine's cost split among its adapters by
	// the tokens the simulation computed for each (cost.SplitByTokens); absent without a price or
	// a simulation.
	MonthlyCost map[string]float64 `json:"monthlyCost,omitempty"`
	Currency    string             `json:"currency,omitempty"`
	// EngineMonthlyCost is one engine's GPU cost for a month.
	EngineMonthlyCost float64 `json:"engineMonthlyCost,omitempty"`
}

type loraEngineOut struct {
	Name      string   `json:"name"`
	Adapters  int      `json:"adapters"`
	RPS       float64  `json:"rps"`
	MaxLoRAs  int      `json:"maxLoras"`
	ActiveP99 int      `json:"activeP99"`
	VLLMFlags []string `json:"vllmFlags"`
}

type loraSimOut struct {
	Duration        string  `json:"duration"`
	MeetsAll        bool    `json:"meetsAll"`
	WorstAttainment float64 `json:"worstAttainment"`
	WorstTTFTP99    string  `json:"worstTtftP99"`
	Loads           int64   `json:"loads"`
}

type loraOut struct {
	Groups []loraGroupOut  `json:"groups"`
	Solos  []plan.LoRASolo `json:"solos,omitempty"`
	// Notes says where the fleet has fewer GPUs of a group's board than its engines need.
	Notes []string `json:"notes,omitempty"`
}

func newLoRACmd(e *env) *cobra.Command {
	var board, gateway, namespace, outDir string
	var force bool
	var simFor time.Duration
	var seed uint64
	cmd := &cobra.Command{
		Use:   "lora POOL",
		Short: "Plan LoRA-adapter tenants onto shared engines, simulate them, render their gateway objects",
		Long: "lora groups the Pool's adapter tenants (model.adapter) by base model, quantization and trust\n" +
			"group, plans the fewest engines (one whole GPU of --board each, or of the fleet's board that needs the\n" +
			"fewest and still has that many GPUs; a note and exit 2 when the fleet has too few) that keep every adapter's\n" +
			"objectives, chooses each engine's --max-loras, and simulates every engine with its adapters'\n" +
			"traffic; with a price for the board in policy.cost, each engine's monthly GPU cost is split among its\n" +
			"adapters by the tokens the simulation computed for each. With --gateway it prints the Gateway API\n" +
			"Inference Extension objects instead: an InferencePool per engine, an InferenceObjective per adapter,\n" +
			"and HTTPRoutes by model name. --out DIR (with --gateway) writes the engines themselves as well: a vLLM\n" +
			"Deployment per engine (one GPU, --enable-lora and its adapters' --lora-modules, the label its\n" +
			"InferencePool selects), the gateway objects, lora.json and a README; a non-empty directory gpupool\n" +
			"did not write (no .gpupool-output file) is refused unless --force. An adapter on a volume\n" +
			"(model.adapter.volume) is mounted read-only from its PersistentVolumeClaim; one given by dir alone\n" +
			"would need a hostPath volume, which the Pod Security baseline forbids: it is passed to vLLM as\n" +
			"written and listed as a problem (the files are still written, exit 2).\n" +
			"Adapters given by dir are read from their PEFT folders (headers only).",
		Args: cobra.ExactArgs(1),
	}
	out := addOutputFlag(cmd)
	cmd.Flags().StringVar(&board, "board", "", "the engines' board (default: per group, the fleet's board that needs the fewest engines and has that many GPUs left)")
	cmd.Flags().DurationVar(&simFor, "simulate", 300*time.Second, "simulate each engine this long (0: do not)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "the simulation's random seed")
	cmd.Flags().StringVar(&gateway, "gateway", "", "print the gateway objects for this Gateway instead of the plan")
	cmd.Flags().StringVar(&namespace, "namespace", "default", "the gateway objects' and engines' namespace")
	cmd.Flags().StringVar(&outDir, "out", "", "with --gateway: directory to write the engines' Deployments, the gateway objects and a README to")
	cmd.Flags().BoolVar(&force, "force", false, "with --out: replace a non-empty directory gpupool did not write")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		format, err := parseOutput(*out)
		if err != nil {
			return err
		}
		if simFor < 0 || simFor > 24*time.Hour {
			return invalid(fmt.Errorf("flag --simulate: %v is outside [0, 24h]", simFor))
		}
		if outDir != "" && gateway == "" {
			return invalid(errors.New("flag --gateway: required with --out (the Gateway the written HTTPRoutes attach to)"))
		}
		if force && outDir == "" {
			return invalid(errors.New("flag --force: only with --out"))
		}
		pool, err := readPool(e.ctx, args[0])
		if err != nil {
			return invalid(err)
		}
		res, plans, names, err := planLoRA(pool, filepath.Dir(args[0]), board, simFor, seed)
		if err != nil {
			return err
		}
		var problems *render.ProblemsError
		if outDir != "" {
			var files []outFile
			if files, problems, err = loraOutFiles(pool, res, plans, names, namespace, gateway); err != nil {
				return err
			}
			if err := writeOutDir(e.ctx, outDir, files, force); err != nil {
				return err
			}
		} else if gateway != "" {
			for _, p := range plans {
				y, err := render.LoRAGateway(render.LoRAGatewayInput{Namespace: namespace, Gateway: gateway, Plan: p, AdapterName: names})
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(e.stdout, "---\n%s", y); err != nil {
					return err
				}
			}
			return fleetTooSmall(res)
		}
		if format != outTable {
			err = writeStructured(e.stdout, format, res)
		} else {
			err = writeLoRATable(e, res)
		}
		if err == nil && problems != nil {
			// The files are written; what they cannot express exactly is listed (exit 2).
			return partial(errors.Join(problems, fleetTooSmall(res)))
		}
		if err == nil {
			err = fleetTooSmall(res)
		}
		return err
	}
	return cmd
}

// fleetTooSmall is the plan's notes as a partial result (exit 2: the engines are planned, but
// the fleet cannot run them all), nil without notes.
func fleetTooSmall(res loraOut) error {
	if len(res.Notes) == 0 {
		return nil
	}
	return partial(fmt.Errorf("the fleet is too small: %s", strings.Join(res.Notes, "; ")))
}

// planLoRA plans and simulates every shared group of pool; relative model and adapter folders
// are read from base, the Pool file's folder.
func planLoRA(pool *v1.Pool, base, boardName string, simFor time.Duration, seed uint64) (loraOut, []plan.LoRAPlan, map[string]string, error) {
	ins, solos, names, notes, err := loraInputs(pool, base, boardName)
	if err != nil {
		return loraOut{}, nil, nil, err
	}
	res := loraOut{Solos: solos, Notes: notes}
	var plans []plan.LoRAPlan
	for _, gi := range ins {
		in, g, b, p := gi.in, gi.in.Group, gi.board, gi.plan
		plans = append(plans, p)
		gout := loraGroupOut{Group: g.Key, Board: b.Name, GPUs: len(p.Engines), OnePerAdapter: len(g.Adapters),
			Reasons: p.Reasons, Shares: p.Shares}
		if gout.Engines, gout.FairCaps, err = engineOuts(p, in.Engine, names, adapterPaths(pool)); err != nil {
			return loraOut{}, nil, nil, err
		}
		if simFor > 0 {
			var tokens map[string]map[string]int64
			gout.Simulated, gout.Adapters, tokens, err = simulateGroup(in, p, simFor, seed)
			if err != nil {
				return loraOut{}, nil, nil, err
			}
			prices := cost.PricesFrom(pool.Policy.Cost)
			if hourly, ok := prices.Hourly[b.Name]; ok {
				gout.Currency, gout.EngineMonthlyCost = prices.Currency, hourly*cost.HoursPerMonth
				if gout.MonthlyCost, err = splitEngineCost(gout.EngineMonthlyCost, tokens); err != nil {
					return loraOut{}, nil, nil, fmt.Errorf("group %s: %w", g.Key, err)
				}
			}
		}
		res.Groups = append(res.Groups, gout)
	}
	return res, plans, names, nil
}

// loraGroupIn is one shared group ready to plan: its input, the board its engines are sized on,
// the group's base tenant (any of them: they share model, quantization and trust group) and the
// base model's architecture.
type loraGroupIn struct {
	in    plan.LoRAInput
	plan  plan.LoRAPlan
	board *gpu.Board
	base  v1.Tenant
	arch  llm.Arch
}

// loraInputs groups pool's adapter tenants (plan.GroupLoRA) and plans each group
// (plan.PlanLoRA) on whole GPUs of boardName, or without it of each board of the fleet that holds
// its base model on one GPU (plan.PlanLoRABoards), taking the preferred board whose GPUs in the
// fleet, less those the groups before it take, hold all its engines, else the preferred board.
// A group whose engines outnumber the GPUs of its board the fleet has left gets a note. It
// returns the hard-isolated adapter tenants apart and every tenant's adapter name.
func loraInputs(pool *v1.Pool, base, boardName string) ([]loraGroupIn, []plan.LoRASolo, map[string]string, []string, error) {
	var boards []*gpu.Board
	if boardName != "" {
		b, err := gpu.Lookup(boardName)
		if err != nil {
			return nil, nil, nil, nil, invalid(fmt.Errorf("flag --board: %w", err))
		}
		boards = append(boards, b)
	}
	left := map[string]int{} // the fleet's GPUs of each board the groups before have not taken
	for _, n := range pool.Fleet.Nodes {
		for _, g := range n.GPUs {
			left[g.Board] += g.Count
			if b, err := gpu.Lookup(g.Board); boardName == "" && err == nil && !slices.Contains(boards, b) {
				boards = append(boards, b)
			}
		}
	}
	if len(boards) == 0 {
		return nil, nil, nil, nil, invalid(errors.New("flag --board: the fleet has no known board; name one"))
	}
	loaded, names, err := loadAdapters(pool, base)
	if err != nil {
		return nil, nil, nil, nil, invalid(err)
	}
	groups, solos := plan.GroupLoRA(pool, loaded)
	var out []loraGroupIn
	var notes []string
	prefixes := map[string]int{}
	for _, g := range groups {
		t := tenantNamed(pool, g.Adapters[0].Tenant)
		a, err := baseArch(t, base)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		for i := range g.Adapters {
			if g.Adapters[i].Bytes == 0 {
				g.Adapters[i].Bytes, _ = llm.LoRAAdapterBytes(a, g.Adapters[i].Rank, nil)
			}
		}
		clock, err := plan.LoRAGroupClock(g)
		if err != nil {
			return nil, nil, nil, nil, invalid(err)
		}
		var lb []plan.LoRABoard
		var fitErrs []error
		for _, b := range boards {
			eng, lc, err := perf.PlaceLoRAAt(a, t.Model.Quantization, b, clock)
			if err != nil {
				fitErrs = append(fitErrs, err)
				continue
			}
			lb = append(lb, plan.LoRABoard{Board: b.Name, Engine: eng, Cost: lc})
		}
		if len(lb) == 0 {
			return nil, nil, nil, nil, fmt.Errorf("group %s: %w", g.Key, errors.Join(fitErrs...))
		}
		// Groups of one base model in different trust groups get engines of distinct names.
		pb := plan.LoRAEnginePrefix(t, 1)
		prefixes[pb]++
		prefix := plan.LoRAEnginePrefix(t, prefixes[pb])
		opts, err := plan.PlanLoRABoards(g, lb, prefix)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		pick := 0
		for i, o := range opts {
			if left[o.Board] >= len(o.Plan.Engines) {
				pick = i
				break
			}
		}
		o := opts[pick]
		if n := len(o.Plan.Engines); left[o.Board] < n {
			notes = append(notes, fmt.Sprintf("group %s needs %s of %s and the fleet has %d of them left for it%s",
				g.Key, plural(n, "GPU"), o.Board, left[o.Board], otherBoards(opts, o.Board)))
		}
		left[o.Board] = max(0, left[o.Board]-len(o.Plan.Engines))
		var lbo plan.LoRABoard
		for _, b := range lb {
			if b.Board == o.Board {
				lbo = b
			}
		}
		b, _ := gpu.Lookup(o.Board)
		out = append(out, loraGroupIn{in: plan.LoRAInput{Group: g, Engine: lbo.Engine, Cost: lbo.Cost, Prefix: prefix}, plan: o.Plan,
			board: b, base: t, arch: a})
	}
	return out, solos, names, notes, nil
}

// otherBoards lists what the group needs on the boards of opts but the one named, for a note.
func otherBoards(opts []plan.LoRABoardPlan, but string) string {
	var parts []string
	for _, o := range opts {
		if o.Board != but {
			parts = append(parts, fmt.Sprintf("%d of %s", len(o.Plan.Engines), o.Board))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (elsewhere: " + strings.Join(parts, ", ") + ", no more left)"
}

// engineOuts lists a plan's engines with their vLLM flags, and each engine's fair caps: every
// adapter's weighted part of the engine's sequence slots when all want the whole engine.
func engineOuts(p plan.LoRAPlan, eng *perf.Engine, names, paths map[string]string) ([]loraEngineOut, map[string]map[string]int, error) {
	var outs []loraEngineOut
	fairCaps := map[string]map[string]int{}
	for _, en := range p.Engines {
		weights := map[string]float64{}
		want := map[string]int{}
		for _, s := range p.Shares {
			if s.Engine == en.Name {
				weights[s.Tenant] += s.Weight
				want[s.Tenant] = eng.MaxSeqs()
			}
		}
		caps, err := sim.LoRAFairCaps(en.Name, weights, eng.MaxSeqs(), want, nil, time.Unix(0, 0))
		if err != nil {
			return nil, nil, err
		}
		fairCaps[en.Name] = caps
		la, err := render.LoRAModuleArgs(en, names, paths)
		if err != nil {
			return nil, nil, err
		}
		outs = append(outs, loraEngineOut{Name: en.Name, Adapters: len(en.Adapters), RPS: en.RPS,
			MaxLoRAs: en.MaxLoRAs, ActiveP99: en.ActiveP99, VLLMFlags: la.Flags()})
	}
	return outs, fairCaps, nil
}

// loadAdapters reads every adapter given by dir (through an os.Root) and returns them by tenant,
// with every tenant's adapter name.
func loadAdapters(pool *v1.Pool, base string) (map[string]llm.Adapter, map[string]string, error) {
	loaded := map[string]llm.Adapter{}
	names := map[string]string{}
	var errs []error
	for i, t := range pool.Tenants {
		a := t.Model.Adapter
		if a == nil {
			continue
		}
		names[t.Name] = a.Name
		if a.Dir == "" {
			continue
		}
		ad, err := loadAdapterDir(relTo(base, a.Dir))
		if err != nil {
			errs = append(errs, fmt.Errorf("tenants[%d].model.adapter.dir: %w", i, err))
			continue
		}
		if a.Rank != 0 && a.Rank != ad.Config.Rank {
			errs = append(errs, fmt.Errorf("tenants[%d].model.adapter.rank: %d, but %s says r = %d", i, a.Rank, llm.AdapterConfigFile, ad.Config.Rank))
			continue
		}
		loaded[t.Name] = ad
	}
	return loaded, names, errors.Join(errs...)
}

// loadAdapterDir reads a PEFT folder through an os.Root, as loadModelDir reads checkpoints.
func loadAdapterDir(dir string) (llm.Adapter, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return llm.Adapter{}, err
	}
	defer root.Close()
	return llm.LoadAdapterDir(root.FS())
}

func tenantNamed(p *v1.Pool, name string) v1.Tenant {
	for _, t := range p.Tenants {
		if t.Name == name {
			return t
		}
	}
	return v1.Tenant{}
}

// relTo is p, or p under base when p is relative.
func relTo(base, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

func baseArch(t v1.Tenant, base string) (llm.Arch, error) {
	if t.Model.Dir != "" {
		m, err := loadModelDir(relTo(base, t.Model.Dir))
		if err != nil {
			return llm.Arch{}, fmt.Errorf("tenant %s: load model %s: %w", t.Name, t.Model.Dir, err)
		}
		return m.Arch, nil
	}
	return llm.Lookup(t.Model.Name)
}

// adapterPaths maps each adapter tenant to the path its engines' --lora-modules give it
// (render.LoRAEnginesInput.WithAdapters).
func adapterPaths(p *v1.Pool) map[string]string {
	return render.LoRAEnginesInput{}.WithAdapters(p).AdapterPath
}

// simulateGroup runs every engine of p with its adapters' traffic.
// simulateGroup also returns, per engine, the tokens (input and output) it computed for each of
// its adapters.
func simulateGroup(in plan.LoRAInput, p plan.LoRAPlan, d time.Duration, seed uint64) (*loraSimOut, []sim.LoRAAdapterResult, map[string]map[string]int64, error) {
	by := map[string]plan.LoRAAdapter{}
	for _, a := range in.Group.Adapters {
		by[a.Tenant] = a
	}
	out := &loraSimOut{Duration: d.String(), MeetsAll: true, WorstAttainment: 1}
	var worst time.Duration
	var all []sim.LoRAAdapterResult
	tokens := map[string]map[string]int64{}
	for i, en := range p.Engines {
		cfg := sim.LoRAConfig{Engine: in.Engine, Cost: in.Cost, MaxLoRAs: en.MaxLoRAs, MaxRank: en.MaxRank,
			MaxCPULoRAs: en.MaxCPULoRAs, Duration: d}
		for _, name := range en.Adapters {
			a := by[name]
			cfg.Adapters = append(cfg.Adapters, sim.LoRAAdapter{Name: name, RPS: en.Load[name], InputTokens: a.InputTokens,
				OutputTokens: a.OutputTokens, Lengths: a.Lengths, MaxContext: a.MaxContext, Bytes: a.Bytes, Rank: a.Rank, TTFT: a.SLO.TTFT, TPOT: a.SLO.TPOT})
		}
		r, err := sim.SimulateLoRA(cfg, rand.New(rand.NewPCG(seed, uint64(i))))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("simulate engine %s: %w", en.Name, err)
		}
		tokens[en.Name] = map[string]int64{}
		out.MeetsAll = out.MeetsAll && r.MeetsAll()
		out.Loads += r.Loads
		for _, a := range r.Adapters {
			out.WorstAttainment = min(out.WorstAttainment, a.Attainment)
			worst = max(worst, a.TTFTP99)
			tokens[en.Name][a.Name] = a.InputTokens + a.OutputTokens
		}
		all = append(all, r.Adapters...)
	}
	out.WorstTTFTP99 = worst.String()
	return out, all, tokens, nil
}

// splitEngineCost gives each adapter its part of every engine it runs on, amount per engine, by
// the tokens the engine computed for it; an adapter spread over engines sums its parts.
func splitEngineCost(amount float64, tokens map[string]map[string]int64) (map[string]float64, error) {
	out := map[string]float64{}
	// Engines in name order and each engine's adapters in name order: float sums then come out
	// the same on every run.
	for _, en := range slices.Sorted(maps.Keys(tokens)) {
		ts := tokens[en]
		if len(ts) == 0 {
			continue
		}
		parts, err := cost.SplitByTokens(amount, ts)
		if err != nil {
			return nil, fmt.Errorf("engine %s: %w", en, err)
		}
		for _, a := range slices.Sorted(maps.Keys(parts)) {
			out[a] += parts[a]
		}
	}
	return out, nil
}

func writeLoRATable(e *env, res loraOut) error {
	tw := newTable(e.stdout)
	for _, g := range res.Groups {
		fmt.Fprintf(tw, "group %s: %d adapters on %d × %s (one replica per adapter: %d GPUs, %.1f× more)\n",
			g.Group, g.OnePerAdapter, g.GPUs, g.Board, g.OnePerAdapter, float64(g.OnePerAdapter)/float64(max(g.GPUs, 1)))
		fmt.Fprintln(tw, "ENGINE\tADAPTERS\tREQ/S\tMAX_LORAS\tIN FLIGHT P99")
		for _, en := range g.Engines {
			fmt.Fprintf(tw, "%s\t%d\t%.3g\t%d\t%d\n", en.Name, en.Adapters, en.RPS, en.MaxLoRAs, en.ActiveP99)
		}
		if s := g.Simulated; s != nil {
			fmt.Fprintf(tw, "simulated %s: every adapter meets its SLO: %v; worst attainment %.4f; worst TTFT p99 %s; %d adapter loads\n",
				s.Duration, s.MeetsAll, s.WorstAttainment, s.WorstTTFTP99, s.Loads)
		}
		if len(g.MonthlyCost) > 0 {
			fmt.Fprintf(tw, "monthly GPU cost: %.2f %s per engine, split by the simulated tokens of its adapters; most: %s\n",
				g.EngineMonthlyCost, g.Currency, topCosts(g.MonthlyCost, 3))
		}
		fmt.Fprintln(tw)
	}
	for _, s := range res.Solos {
		fmt.Fprintf(tw, "%s: %s\n", s.Tenant, s.Reason)
	}
	return tw.Flush()
}

// topCosts lists the n largest parts, largest first ("ad-001 812.34, …").
func topCosts(parts map[string]float64, n int) string {
	names := make([]string, 0, len(parts))
	for a := range parts {
		names = append(names, a)
	}
	sort.Slice(names, func(i, j int) bool {
		if parts[names[i]] != parts[names[j]] {
			return parts[names[i]] > parts[names[j]]
		}
		return names[i] < names[j]
	})
	var out []string
	for _, a := range names[:min(n, len(names))] {
		out = append(out, fmt.Sprintf("%s %.2f", a, parts[a]))
	}
	return strings.Join(out, ", ")
}

// loraOutFiles renders the output directory of lora --out: per engine its Deployment
// (k8s/<engine>.yaml), per group its gateway objects (gateway/<first engine>.yaml), the plan as
// lora.json and a README.
func loraOutFiles(pool *v1.Pool, res loraOut, plans []plan.LoRAPlan, names map[string]string, namespace, gateway string) ([]outFile, *render.ProblemsError, error) {
	var files []outFile
	var problems []render.Problem
	for _, p := range plans {
		if len(p.Engines) == 0 {
			continue
		}
		deps, err := render.LoRAEngineDeployments(render.LoRAEnginesInput{Namespace: namespace,
			Base: tenantNamed(pool, p.Engines[0].Adapters[0]), Plan: p}.WithAdapters(pool))
		var pe *render.ProblemsError
		if errors.As(err, &pe) {
			problems = append(problems, pe.Problems...)
		} else if err != nil {
			return nil, nil, err
		}
		for _, d := range deps {
			files = append(files, outFile{Path: d.Path, Data: d.Data})
		}
		gw, err := render.LoRAGateway(render.LoRAGatewayInput{Namespace: namespace, Gateway: gateway, Plan: p, AdapterName: names})
		if err != nil {
			return nil, nil, err
		}
		epp, err := render.LoRAEndpointPickers(namespace, p)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, outFile{Path: "gateway/" + p.Engines[0].Name + ".yaml", Data: gw},
			outFile{Path: "gateway/" + p.Engines[0].Name + "-epp.yaml", Data: epp})
	}
	var js bytes.Buffer
	if err := writeStructured(&js, outJSON, res); err != nil {
		return nil, nil, err
	}
	files = append(files, outFile{Path: "lora.json", Data: js.Bytes()},
		outFile{Path: "README.md", Data: render.LoRAReadme(namespace, gateway, plans, names)})
	if len(problems) > 0 {
		return files, &render.ProblemsError{Problems: problems}, nil
	}
	return files, nil, nil
}
