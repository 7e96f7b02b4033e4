package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// perfFlags are the perf command's inputs.
type perfFlags struct {
	model, board, quant       string
	kvDType, energyClass      string
	output                    *string
	context, input, outputTok int
	concurrency               []int
	ttft, tpot                time.Duration
}

func newPerfCmd(e *env) *cobra.Command {
	f := &perfFlags{}
	cmd := &cobra.Command{
		Use:   "perf --model M --board B",
		Short: "Predict tokens/s, TTFT, TPOT and the max request rate within an SLO, per slice kind",
		Long: "perf runs the performance model for a model on every kind of slice of a board: the whole GPU,\n" +
			"tensor-parallel replicas over 2, 4 and 8 GPUs, every MIG profile, MPS clients at 25/50/75 % SMs next to one busy client with the rest, and\n" +
			"time-slicing with 2 and 4 active contexts. For each it prints the tokens/s, TTFT and TPOT of a\n" +
			"closed-loop client at a few concurrencies (beyond what the KV cache or the sequence limit holds,\n" +
			"the rest wait in the engine's queue and their wait counts in TTFT), and the\n" +
			"highest Poisson request rate one replica sustains with the p99 targets met. The p99 values come\n" +
			"from a queueing approximation; `gpupool simulate` checks them.",
		Example: "  gpupool perf --model qwen2.5-7b --board H100-SXM5-80GB\n" +
			"  gpupool perf --model llama-3.1-8b --board A100-SXM4-80GB --input-tokens 2048 --output-tokens 256 \\\n" +
			"      --ttft-p99 2s --tpot-p99 40ms -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runPerf(e, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model: a catalog name or Hugging Face id (required)")
	fl.StringVar(&f.board, "board", "", "board: a catalog name, alias or NVML name (required)")
	fl.StringVar(&f.quant, "quantization", "bf16", "weights: bf16, fp16, fp8, int8, int4-awq, int4-gptq")
	fl.StringVar(&f.kvDType, "kv-cache-dtype", "auto", "KV cache: auto (the weights' 16-bit type) or fp8")
	fl.StringVar(&f.energyClass, "energy-class", "balanced", "clocks: performance, balanced (the driver's) or efficiency (locked at 70 % of boost)")
	fl.IntVar(&f.context, "context", 0, "max model length the engine is configured for (0: min(8192, the model's))")
	fl.IntVar(&f.input, "input-tokens", 512, "prompt tokens per request")
	fl.IntVar(&f.outputTok, "output-tokens", 256, "output tokens per request")
	fl.IntSliceVar(&f.concurrency, "concurrency", []int{1, 8, 32, 128}, "requests in flight for the closed-loop columns")
	fl.DurationVar(&f.ttft, "ttft-p99", time.Second, "TTFT p99 target for the max rate (0: none)")
	fl.DurationVar(&f.tpot, "tpot-p99", 50*time.Millisecond, "TPOT p99 target for the max rate (0: none)")
	f.output = addOutputFlag(cmd)
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("board")
	return cmd
}

// perfReport is the command's output.
type perfReport struct {
	Model        string      `json:"model"`
	Quantization string      `json:"quantization"`
	WeightsGB    float64     `json:"weightsGB"`
	Board        string      `json:"board"`
	InputTokens  int         `json:"inputTokens"`
	OutputTokens int         `json:"outputTokens"`
	Context      int         `json:"context"`
	KVCacheDType string      `json:"kvCacheDtype"`
	EnergyClass  string      `json:"energyClass"`
	TTFTp99Ms    float64     `json:"ttftP99Ms"`
	TPOTp99Ms    float64     `json:"tpotP99Ms"`
	Slices       []perfSlice `json:"slices"`
	Notes        []string    `json:"notes"`
}

type perfSlice struct {
	Slice            string      `json:"slice"`
	Mode             string      `json:"mode"`
	Profile          string      `json:"profile,omitempty"`
	TensorParallel   int         `json:"tensorParallel,omitempty"`
	SMPercent        float64     `json:"smPercent,omitempty"`
	ActiveNeighbours int         `json:"activeNeighbours"`
	Fits             bool        `json:"fits"`
	KVCapacityTokens int64       `json:"kvCapacityTokens"`
	MaxSeqs          int         `json:"maxSeqs"`
	MaxBatchedTokens int         `json:"maxBatchedTokens"`
	Points           []perfPoint `json:"points"`
	MaxRate          perfRate    `json:"maxRate"`
}

type perfPoint struct {
	Concurrency        int     `json:"concurrency"`
	Skipped            string  `json:"skipped,omitempty"`
	Running            int     `json:"running,omitempty"`
	Limit              string  `json:"limit,omitempty"`
	OutputTokensPerSec float64 `json:"outputTokensPerSec,omitempty"`
	TotalTokensPerSec  float64 `json:"totalTokensPerSec,omitempty"`
	TTFTMs             float64 `json:"ttftMs,omitempty"`
	TPOTMs             float64 `json:"tpotMs,omitempty"`
	E2EMs              float64 `json:"e2eMs,omitempty"`
	PowerWatts         float64 `json:"powerWatts,omitempty"`
	JoulesPerToken     float64 `json:"joulesPerToken,omitempty"`
}

type perfRate struct {
	RequestsPerSec     float64 `json:"requestsPerSec"`
	OutputTokensPerSec float64 `json:"outputTokensPerSec"`
	TTFTp99Ms          float64 `json:"ttftP99Ms"`
	TPOTp99Ms          float64 `json:"tpotP99Ms"`
	Limit              string  `json:"limit"`
}

// perfCase is one slice kind with the sharing situation it is shown under.
type perfCase struct {
	slice perf.Slice
	load  perf.Load
}

func runPerf(e *env, f *perfFlags) error {
	out, err := parseOutput(*f.output)
	if err != nil {
		return err
	}
	m, board, err := perfInputs(f)
	if err != nil {
		return invalid(err)
	}
	rep := perfReport{Model: m.Name(), Quantization: string(m.Quantization()), WeightsGB: float64(m.WeightBytes()) / 1e9,
		Board: board.Name, InputTokens: f.input, OutputTokens: f.outputTok, Context: m.Options().Context, KVCacheDType: f.kvDType,
		EnergyClass: f.energyClass,
		TTFTp99Ms:   perfDurMs(f.ttft), TPOTp99Ms: perfDurMs(f.tpot)}
	w := perf.Workload{InputTokens: f.input, OutputTokens: f.outputTok}
	slo := perf.SLO{TTFT: f.ttft, TPOT: f.tpot}
	clock, _ := m.Options().ClockCap(f.energyClass) // checked by perfInputs
	for _, c := range perfCases(board, m) {
		c.slice.ClockCap = clock
		s, err := perfRow(m, c, w, slo, f.concurrency)
		if err != nil {
			return err
		}
		rep.Slices = append(rep.Slices, s)
	}
	rep.Notes = []string{
		"tok/s, TTFT and TPOT are closed-loop means; max rate uses a p99 queueing approximation",
		"×N tp rows: one replica over N whole GPUs (vLLM --tensor-parallel-size N), all-reducing over the board's " +
			board.Interconnect.Kind + " link; KV tokens and tok/s are the replica's",
		"mps rows: this client at the SM share, one busy neighbour with the rest, memory split in two",
		"timeslice rows: N contexts, all active, memory split N ways",
		"J/TOKEN: the replica's share of idle power plus its steps' dynamic power over its output tokens/s (power model: docs/perf-fidelity.md)",
	}
	if out != outTable {
		return writeStructured(e.stdout, out, rep)
	}
	return perfTable(e.stdout, rep)
}

func perfInputs(f *perfFlags) (*perf.Model, *gpu.Board, error) {
	var errs []error
	tokensOK := true
	for _, n := range []struct {
		name string
		v    int
	}{{"input-tokens", f.input}, {"output-tokens", f.outputTok}} {
		if n.v < 1 || n.v > v1.MaxTokens {
			errs = append(errs, fmt.Errorf("flag --%s: must be between 1 and %d (got %d)", n.name, v1.MaxTokens, n.v))
			tokensOK = false
		}
	}
	switch {
	case f.context < 0 || f.context > v1.MaxTokens:
		errs = append(errs, fmt.Errorf("flag --context: must be between 0 and %d (got %d)", v1.MaxTokens, f.context))
	case tokensOK && f.context > 0 && f.input+f.outputTok > f.context:
		errs = append(errs, fmt.Errorf("flag --context: %d is shorter than %d input + %d output tokens", f.context, f.input, f.outputTok))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttft-p99", f.ttft}, {"tpot-p99", f.tpot}} {
		if d.v < 0 || d.v > v1.MaxSLO.Std() {
			errs = append(errs, fmt.Errorf("flag --%s: must be between 0s and %s (got %s)", d.name, v1.MaxSLO, d.v))
		}
	}
	for _, c := range f.concurrency {
		if c < 1 || c > v1.MaxConcurrency {
			errs = append(errs, fmt.Errorf("flag --concurrency: must be between 1 and %d (got %d)", v1.MaxConcurrency, c))
		}
	}
	if _, err := perf.DefaultOptions().ClockCap(f.energyClass); err != nil {
		errs = append(errs, fmt.Errorf("flag --energy-class: %w", err))
	}
	kvElem, err := llm.KVElemBytes(f.kvDType)
	if err != nil {
		errs = append(errs, fmt.Errorf("flag --kv-cache-dtype: %w", err))
	}
	q, err := llm.ParseQuantization(f.quant)
	if err != nil {
		errs = append(errs, fmt.Errorf("flag --quantization: %w", err))
	}
	a, err := llm.Lookup(f.model)
	if err != nil {
		errs = append(errs, fmt.Errorf("flag --model: %w", err))
	}
	b, err := gpu.Lookup(f.board)
	if err != nil {
		errs = append(errs, fmt.Errorf("flag --board: %w", err))
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	o := perf.DefaultOptions()
	o.Context = perfContext(f.context, a.MaxPositions)
	o.KVElemBytes = kvElem
	m, err := perf.New(a, q, o)
	if err != nil {
		return nil, nil, err
	}
	return m, b, nil
}

// perfCases lists the slice kinds of a board: exclusive, tensor-parallel replicas over 2, 4 and
// 8 whole GPUs (where the model and the board's link allow), each MIG profile (variants such as
// +me folded into their base), MPS at 25/50/75 % beside one busy client, time-slicing ×2 and ×4.
func perfCases(b *gpu.Board, m *perf.Model) []perfCase {
	cs := []perfCase{{slice: perf.Slice{Board: b}}}
	for _, tp := range m.TensorParallelDegrees(b) {
		cs = append(cs, perfCase{slice: perf.Slice{Board: b, TensorParallel: tp}})
	}
	for i := range b.Profiles {
		p := &b.Profiles[i]
		if p.MediaExtension || strings.ContainsAny(p.Name, "+") {
			continue
		}
		cs = append(cs, perfCase{slice: perf.Slice{Board: b, Profile: p}})
	}
	for _, pct := range []float64{25, 50, 75} {
		cs = append(cs, perfCase{slice: perf.Slice{Board: b, Mode: perf.MPS, SMPercent: pct, Replicas: 2},
			load: perf.Load{Active: 1, SMPercent: 100 - pct}})
	}
	for _, n := range []int{2, 4} {
		cs = append(cs, perfCase{slice: perf.Slice{Board: b, Mode: perf.TimeSlice, Replicas: n}, load: perf.Load{Active: n - 1}})
	}
	return cs
}

func perfRow(m *perf.Model, c perfCase, w perf.Workload, slo perf.SLO, concurrency []int) (perfSlice, error) {
	eng, err := m.Place(c.slice)
	if err != nil {
		return perfSlice{}, err
	}
	s := perfSlice{Slice: c.slice.Name(), Mode: c.slice.Mode.String(), SMPercent: c.slice.SMPercent, TensorParallel: c.slice.TensorParallel,
		ActiveNeighbours: c.load.Active, Fits: eng.FitsWeights(), KVCapacityTokens: eng.KVCapacityTokens(),
		MaxSeqs: eng.MaxSeqs(), MaxBatchedTokens: eng.MaxBatchedTokens()}
	if c.slice.Profile != nil {
		s.Profile = c.slice.Profile.Name
	}
	for _, n := range concurrency {
		p := perfPoint{Concurrency: n}
		w.Concurrency = n
		r, err := eng.Estimate(w, c.load)
		switch {
		case err != nil:
			return perfSlice{}, err
		case !s.Fits || r.Running == 0:
			p.Skipped = "the weights, or one sequence of the engine's context, do not fit"
		default:
			p.Running, p.Limit = r.Running, string(r.Limit)
			p.OutputTokensPerSec, p.TotalTokensPerSec = r.OutputTokensPerSec, r.TotalTokensPerSec
			p.PowerWatts, p.JoulesPerToken = r.PowerWatts, r.JoulesPerToken
			p.TTFTMs, p.TPOTMs, p.E2EMs = perfDurMs(r.TTFT), perfDurMs(r.TPOT), perfDurMs(r.E2E)
		}
		s.Points = append(s.Points, p)
	}
	r, err := eng.MaxRate(w, slo, c.load)
	if err != nil {
		return perfSlice{}, err
	}
	s.MaxRate = perfRate{RequestsPerSec: r.RequestsPerSec, OutputTokensPerSec: r.OutputTokensPerSec,
		TTFTp99Ms: perfDurMs(r.TTFT), TPOTp99Ms: perfDurMs(r.TPOT), Limit: string(r.Limit)}
	return s, nil
}

func perfDurMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func perfTable(w io.Writer, r perfReport) error {
	fmt.Fprintf(w, "%s (%s, %.1f GB of weights, KV cache %s) on %s, %s clocks: %d input / %d output tokens; SLO TTFT p99 ≤ %s, TPOT p99 ≤ %s\n\n",
		r.Model, r.Quantization, r.WeightsGB, r.KVCacheDType, r.Board, r.EnergyClass, r.InputTokens, r.OutputTokens, perfTarget(r.TTFTp99Ms), perfTarget(r.TPOTp99Ms))
	tw := newTable(w)
	fmt.Fprintln(tw, "SLICE\tBUSY NEIGHBOURS\tKV TOKENS\tCONC\tRUNNING\tOUT TOK/S\tTTFT\tTPOT\tJ/TOKEN\tMAX REQ/S\tLIMIT")
	for _, s := range r.Slices {
		for i, p := range s.Points {
			name, nb, kv, rate, lim := "", "", "", "", ""
			if i == 0 {
				name, nb, kv = s.Slice, strconv.Itoa(s.ActiveNeighbours), strconv.FormatInt(s.KVCapacityTokens, 10)
				rate, lim = strconv.FormatFloat(s.MaxRate.RequestsPerSec, 'f', 2, 64), s.MaxRate.Limit
				if !s.Fits {
					kv, lim = "does not fit", string(perf.LimitNoFit)
				}
			}
			run, tok, ttft, tpot, jpt := "-", "-", "-", "-", "-"
			if p.Skipped == "" {
				run = strconv.Itoa(p.Running)
				if p.Running < p.Concurrency {
					run += " (" + p.Limit + ")"
				}
				tok = strconv.FormatFloat(p.OutputTokensPerSec, 'f', 0, 64)
				ttft, tpot = perfMs(p.TTFTMs), perfMs(p.TPOTMs)
				jpt = strconv.FormatFloat(p.JoulesPerToken, 'f', 3, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, nb, kv, p.Concurrency, run, tok, ttft, tpot, jpt, rate, lim)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, n := range append(r.Notes, "RUNNING = requests the engine runs at once (KV cache, max-num-seqs); the rest queue and their wait is in TTFT",
		"- = skipped: the weights, or one sequence of the engine's context, do not fit") {
		fmt.Fprintln(w, "note: "+n)
	}
	return nil
}

func perfMs(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" }

func perfTarget(v float64) string {
	if v == 0 {
		return "none"
	}
	return perfMs(v)
}

// perfContext is the --max-model-len the engines are sized for: the flag, or min(8192, the
// model's maximum) as vLLM is launched by gpupool.
func perfContext(flag, maxPos int) int {
	if flag > 0 {
		return flag
	}
	if maxPos > 0 && maxPos < llm.DefaultContext {
		return maxPos
	}
	return llm.DefaultContext
}
