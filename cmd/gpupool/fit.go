package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// fitFlags are the raw flag values of `gpupool fit`.
type fitFlags struct {
	model, modelDir, quant, kvDType, output string
	boards, sharedCaps                      []string
	context, concurrency, batched, seqs     int
	maxLoRAs, loraRank, cpuLoRAs            int
	tokenBudget                             int64
	util                                    float64
	eager                                   bool
}

func newFitCmd(e *env) *cobra.Command {
	var f fitFlags
	var out *string
	cmd := &cobra.Command{
		Use:   "fit --model NAME | --model-dir DIR",
		Short: "Show which GPU slices hold a model, how much KV cache they leave, and the vLLM arguments",
		Long: "fit sizes a model (a catalog name or a Hugging Face directory with config.json and safetensors)\n" +
			"and, for every board (or --board) and slice — the whole GPU, each MIG profile, and any --shared-cap\n" +
			"memory cap for MPS or time-slicing — says whether it fits, how many sequences of --context tokens and\n" +
			"how many KV tokens it holds, every memory term, and the vLLM arguments that make it true.\n" +
			"Catalog models: " + strings.Join(catalogNames(), ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			f.output = *out
			return runFit(e, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "catalog model name or Hugging Face id (llama-3.1-8b, Qwen/Qwen2.5-7B-Instruct)")
	fl.StringVar(&f.modelDir, "model-dir", "", "Hugging Face model directory (config.json, *.safetensors headers)")
	fl.StringVar(&f.quant, "quantization", "", "weights: bf16|fp16|fp8|int8|int4-awq|int4-gptq (also awq, gptq, w4a16); default: the model's")
	fl.StringVar(&f.kvDType, "kv-cache-dtype", "auto", "KV cache: auto|fp8")
	fl.IntVar(&f.context, "context", 0, "tokens per sequence, --max-model-len (default min(8192, the model's maximum))")
	fl.IntVar(&f.concurrency, "concurrency", 0, "sequences of --context tokens in flight at once (default 1)")
	fl.Int64Var(&f.tokenBudget, "token-budget", 0, "peak KV tokens in flight, instead of context × concurrency")
	fl.StringSliceVar(&f.boards, "board", nil, "board name or alias, repeatable (default: every board)")
	fl.StringSliceVar(&f.sharedCaps, "shared-cap", nil, "MPS/time-slice memory cap per tenant, e.g. 40Gi, 20GiB, 21474836480 (repeatable)")
	fl.Float64Var(&f.util, "gpu-memory-utilization", 0, "vLLM's fraction of device memory (default 0.9, raised to 0.95 when that makes it fit)")
	fl.IntVar(&f.batched, "max-num-batched-tokens", 0, "vLLM's batched tokens per step (default: vLLM's, by device memory)")
	fl.IntVar(&f.seqs, "max-num-seqs", 0, "vLLM's sequences per step (default: --concurrency, else vLLM's per device: 1024 on 70 GiB or more but A100s, 256 elsewhere)")
	fl.BoolVar(&f.eager, "enforce-eager", false, "no CUDA graphs (fit falls back to this by itself when graphs do not fit)")
	fl.IntVar(&f.maxLoRAs, "max-loras", 0, "serve LoRA adapters: vLLM's --max-loras adapter slots on the GPU (0: no LoRA)")
	fl.IntVar(&f.loraRank, "max-lora-rank", 16, "with --max-loras: vLLM's --max-lora-rank, the slots' rank (1, 8, 16, 32, 64, 128, 256, 320 or 512)")
	fl.IntVar(&f.cpuLoRAs, "max-cpu-loras", 0, "with --max-loras: adapters kept in host memory (default --max-loras)")
	out = addOutputFlag(cmd)
	return cmd
}

func catalogNames() []string {
	var names []string
	for _, a := range llm.Catalog() {
		names = append(names, a.Name)
	}
	return names
}

// fitReport is the structured output of `gpupool fit`.
type fitReport struct {
	Model fitModel  `json:"model"`
	Notes []string  `json:"notes"`
	Fits  []llm.Fit `json:"fits"`
	// TensorParallel are replicas over 2, 4 and 8 whole GPUs of one node, per board.
	TensorParallel []fitTP `json:"tensorParallel,omitempty"`
}

// fitTP is one tensor-parallel replica: its GPUs, whether it fits, the KV tokens it holds over
// all its GPUs, the sequences of the context those hold, and the link it all-reduces over.
type fitTP struct {
	Board    string  `json:"board"`
	GPUs     int     `json:"gpus"`
	Link     string  `json:"link"`
	Fits     bool    `json:"fits"`
	Seqs     int64   `json:"seqs"`
	KVTokens int64   `json:"kvTokens"`
	Weights  float64 `json:"weightsGiBPerGPU"`
	Args     string  `json:"vllmArgs"`
}

// fitModel describes the model that was fitted.
type fitModel struct {
	Name            string          `json:"name"`
	Source          string          `json:"source"` // "catalog" or the directory given
	Params          int64           `json:"params"`
	ActiveParams    int64           `json:"activeParams"`
	KVBytesPerToken int64           `json:"kvBytesPerToken"`
	Arch            llm.Arch        `json:"arch"`
	Checkpoint      *llm.Checkpoint `json:"checkpoint,omitempty"`
}

// runFit checks every input, computes every fit, and only then writes.
func runFit(e *env, f fitFlags) error {
	format, err := parseOutput(f.output)
	if err != nil {
		return err
	}
	m, src, errModel := fitLoadModel(f)
	o, errOpts := fitOptions(f)
	boards, caps, errTargets := fitTargets(f)
	if err := errors.Join(errModel, errOpts, errTargets); err != nil {
		return invalid(err)
	}
	if ctx := fitContext(m, o); o.TokenBudget > 0 && o.TokenBudget < int64(ctx) {
		return invalid(fmt.Errorf("flag --token-budget: %d tokens is less than one sequence of the %d-token context (vLLM's --max-model-len, which its KV cache must hold); give at least %d or a shorter --context",
			o.TokenBudget, ctx, ctx))
	}
	notes, err := llm.Notes(m, o)
	if err != nil {
		return invalid(fmt.Errorf("fit %s: %w", m.Arch.Name, err))
	}
	total, active := m.Arch.Params()
	kvElem, _ := llm.KVElemBytes(o.KVCacheDType)
	rep := fitReport{Notes: notes, Model: fitModel{Name: m.Arch.Name, Source: src, Params: total, ActiveParams: active,
		KVBytesPerToken: m.Arch.KVBytesPerToken(kvElem), Arch: m.Arch, Checkpoint: m.Checkpoint}}
	for _, b := range boards {
		fits, err := llm.FitBoard(m, o, b, caps...)
		if err != nil {
			return invalid(fmt.Errorf("fit %s on %s: %w", m.Arch.Name, b.Name, err))
		}
		rep.Fits = append(rep.Fits, fits...)
		if len(fits) > 0 {
			rep.TensorParallel = append(rep.TensorParallel, fitTensorParallel(m, o, b, fits[0].Memory.Quantization, fits[0].Args.MaxModelLen)...)
		}
	}
	if format != outTable {
		return writeStructured(e.stdout, format, rep)
	}
	return writeFitTable(e.stdout, rep)
}

// fitTensorParallel sizes replicas over 2, 4 and 8 whole GPUs of board b with the performance
// model's tensor-parallel memory estimate (memory × utilization − weights/tp − a runtime reserve,
// over each GPU's share of a token's KV cache). Degrees the heads or the link do not allow are
// left out.
func fitTensorParallel(m llm.Model, o llm.Options, b *gpu.Board, q llm.Quantization, context int) []fitTP {
	po := perf.DefaultOptions()
	po.Context = context
	if elem, err := llm.KVElemBytes(o.KVCacheDType); err == nil {
		po.KVElemBytes = elem
	}
	if o.GPUMemoryUtilization > 0 {
		po.GPUMemoryUtilization = o.GPUMemoryUtilization
	}
	pm, err := perf.New(m.Arch, q, po)
	if err != nil {
		return nil
	}
	var out []fitTP
	for _, tp := range pm.TensorParallelDegrees(b) {
		e, err := pm.Place(perf.Slice{Board: b, TensorParallel: tp})
		if err != nil {
			continue
		}
		kv := e.KVCapacityTokens()
		r := fitTP{Board: b.Name, GPUs: tp, Link: b.Interconnect.Kind, KVTokens: kv, Seqs: kv / int64(max(context, 1)),
			Weights: float64(pm.WeightBytes()) / float64(tp) / float64(llm.GiB)}
		r.Fits = r.Seqs >= 1
		if r.Fits {
			r.Args = fmt.Sprintf("--tensor-parallel-size %d --max-model-len %d --gpu-memory-utilization %.2f", tp, context, po.GPUMemoryUtilization)
		}
		out = append(out, r)
	}
	return out
}

// fitLoadModel resolves --model or --model-dir.
func fitLoadModel(f fitFlags) (llm.Model, string, error) {
	switch {
	case f.model != "" && f.modelDir != "":
		return llm.Model{}, "", errors.New("flags --model and --model-dir: give one, not both")
	case f.model != "":
		a, err := llm.Lookup(f.model)
		if err != nil {
			return llm.Model{}, "", fmt.Errorf("flag --model: %w", err)
		}
		return llm.FromArch(a), "catalog", nil
	case f.modelDir != "":
		m, err := loadModelDir(f.modelDir)
		if err != nil {
			return llm.Model{}, "", fmt.Errorf("flag --model-dir: load model %s: %w", f.modelDir, err)
		}
		m.Arch.Name = filepath.Base(filepath.Clean(f.modelDir))
		return m, f.modelDir, nil
	}
	return llm.Model{}, "", errors.New("flags --model and --model-dir: give one (catalog: " + strings.Join(catalogNames(), ", ") + ")")
}

// fitOptions turns the flags into llm.Options, reporting every bad flag at once.
func fitOptions(f fitFlags) (llm.Options, error) {
	var errs []error
	o := llm.Options{KVCacheDType: f.kvDType, Context: f.context, Concurrency: f.concurrency, TokenBudget: f.tokenBudget,
		MaxNumBatchedTokens: f.batched, MaxNumSeqs: f.seqs, GPUMemoryUtilization: f.util, EnforceEager: f.eager}
	if f.quant != "" {
		q, err := llm.ParseQuantization(f.quant)
		if err != nil {
			errs = append(errs, fmt.Errorf("flag --quantization: %w", err))
		}
		o.Quantization = q
	}
	if _, err := llm.KVElemBytes(f.kvDType); err != nil {
		errs = append(errs, fmt.Errorf("flag --kv-cache-dtype: %w", err))
	}
	for _, n := range []struct {
		name    string
		v, most int64
	}{{"context", int64(f.context), v1.MaxTokens}, {"concurrency", int64(f.concurrency), v1.MaxConcurrency},
		{"token-budget", f.tokenBudget, v1.MaxTokens * v1.MaxConcurrency},
		{"max-num-batched-tokens", int64(f.batched), v1.MaxTokens}, {"max-num-seqs", int64(f.seqs), v1.MaxConcurrency}} {
		if n.v < 0 || n.v > n.most {
			errs = append(errs, fmt.Errorf("flag --%s: must be between 0 and %d (got %d)", n.name, n.most, n.v))
		}
	}
	if f.concurrency > 0 && f.tokenBudget > 0 {
		errs = append(errs, errors.New("flags --concurrency and --token-budget: give one (the token budget replaces context × concurrency)"))
	}
	if f.util < 0 || f.util > 1 || math.IsNaN(f.util) {
		errs = append(errs, fmt.Errorf("flag --gpu-memory-utilization: %v is outside (0, 1]", f.util))
	}
	switch {
	case f.maxLoRAs < 0 || f.maxLoRAs > v1.MaxConcurrency:
		errs = append(errs, fmt.Errorf("flag --max-loras: must be between 0 and %d (got %d)", v1.MaxConcurrency, f.maxLoRAs))
	case f.maxLoRAs > 0:
		if llm.RankFor(f.loraRank) != f.loraRank {
			errs = append(errs, fmt.Errorf("flag --max-lora-rank: %d is not one of vLLM's %v", f.loraRank, llm.LoRARanks))
		}
		if f.cpuLoRAs != 0 && (f.cpuLoRAs < f.maxLoRAs || f.cpuLoRAs > v1.MaxConcurrency) {
			errs = append(errs, fmt.Errorf("flag --max-cpu-loras: must be between --max-loras (%d) and %d (got %d)", f.maxLoRAs, v1.MaxConcurrency, f.cpuLoRAs))
		}
		o.LoRA = &llm.LoRAOptions{MaxLoRAs: f.maxLoRAs, MaxRank: f.loraRank, MaxCPULoRAs: f.cpuLoRAs}
	}
	return o, errors.Join(errs...)
}

// fitContext is the --max-model-len the fit is for: --context, else min(llm.DefaultContext, the
// model's maximum).
func fitContext(m llm.Model, o llm.Options) int {
	if o.Context > 0 {
		return o.Context
	}
	if p := m.Arch.MaxPositions; p > 0 && p < llm.DefaultContext {
		return p
	}
	return llm.DefaultContext
}

// fitTargets resolves --board and --shared-cap.
func fitTargets(f fitFlags) ([]*gpu.Board, []int64, error) {
	var errs []error
	boards := gpu.Boards()
	if len(f.boards) > 0 {
		boards = nil
		for _, name := range f.boards {
			b, err := gpu.Lookup(name)
			if err != nil {
				errs = append(errs, fmt.Errorf("flag --board: %w", err))
				continue
			}
			boards = append(boards, b)
		}
	}
	var caps []int64
	for _, s := range f.sharedCaps {
		n, err := parseBytes(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("flag --shared-cap: %w", err))
			continue
		}
		caps = append(caps, n)
	}
	return boards, caps, errors.Join(errs...)
}

// byteUnits are the suffixes parseBytes accepts: Kubernetes quantity style (Gi = 2^30, G = 10^9),
// with an optional trailing B.
var byteUnits = map[string]float64{
	"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40,
}

// parseBytes reads a memory size: 21474836480, 20Gi, 20GiB, 40960Mi, 21.5G.
func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "b")
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], t[i:]
	}
	mult, ok := byteUnits[unit]
	v, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || v <= 0 || v*mult > 1<<50 {
		return 0, fmt.Errorf("%q is not a memory size (e.g. 40Gi, 20GiB, 21474836480)", s)
	}
	return int64(v * mult), nil
}

// writeFitTable writes one row per slice, then the notes.
func writeFitTable(w io.Writer, rep fitReport) error {
	m := rep.Model
	fmt.Fprintf(w, "model %s: %s params", m.Name, countCell(m.Params))
	if m.ActiveParams != m.Params {
		fmt.Fprintf(w, " (%s active)", countCell(m.ActiveParams))
	}
	fmt.Fprintf(w, ", KV %d bytes/token\n", m.KVBytesPerToken)
	if ck := m.Checkpoint; ck != nil {
		fmt.Fprintf(w, "checkpoint: %d tensors in %d files, %s bytes, %s weights\n", ck.Tensors, len(ck.Files),
			strconv.FormatInt(ck.Bytes, 10), countCell(ck.Params))
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "BOARD\tSLICE\tGIB\tFITS\tSEQS\tKV TOKENS\tWEIGHTS\tKV NEED\tWORKSPACE\tVLLM ARGS / WHY NOT")
	for _, f := range rep.Fits {
		mem := f.Memory
		fits, detail := "no", ""
		if len(f.Reasons) > 0 {
			detail = f.Reasons[0]
		}
		if f.Fits {
			fits, detail = "yes", strings.Join(f.Args.Flags(), " ")
			if len(f.Reasons) > 0 {
				fits = "yes*"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", f.Slice.Board, f.Slice.Name, gibCell(f.Slice.MemoryBytes),
			fits, f.MaxConcurrency, f.MaxTokens, gibCell(mem.Weights), gibCell(mem.KVCache),
			gibCell(mem.Activations+mem.NonTorch+mem.CUDAGraphs+mem.LoRA), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.TensorParallel) > 0 {
		fmt.Fprintln(w)
		tw = newTable(w)
		fmt.Fprintln(tw, "BOARD\tTENSOR PARALLEL\tLINK\tFITS\tSEQS\tKV TOKENS\tWEIGHTS/GPU\tVLLM ARGS")
		for _, t := range rep.TensorParallel {
			fits := "no"
			if t.Fits {
				fits = "yes"
			}
			fmt.Fprintf(tw, "%s\t%d GPUs\t%s\t%s\t%d\t%d\t%.2f\t%s\n", t.Board, t.GPUs, t.Link, fits, t.Seqs, t.KVTokens, t.Weights, t.Args)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nSEQS = sequences of %s tokens the KV cache holds; WORKSPACE = activations + non-torch + CUDA graphs (+ LoRA adapter slots); yes* = see notes below.\n",
		contextLabel(rep.Fits))
	if len(rep.TensorParallel) > 0 {
		fmt.Fprintln(w, "TENSOR PARALLEL rows: one replica over whole GPUs of one node (never MIG instances); KV tokens over all its GPUs, from a rougher estimate than the single-GPU rows.")
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	for _, f := range rep.Fits {
		if f.Fits && len(f.Reasons) > 0 {
			fmt.Fprintf(w, "note: %s %s: %s\n", f.Slice.Board, f.Slice.Name, strings.Join(f.Reasons, "; "))
		}
	}
	return nil
}

// countCell writes a parameter count: 8.03 B, 494.03 M, 26784.
func countCell(n int64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + " B"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + " M"
	}
	return strconv.FormatInt(n, 10)
}

func gibCell(n int64) string { return strconv.FormatFloat(float64(n)/float64(llm.GiB), 'f', 2, 64) }

// contextLabel is the context length the fits were computed at.
func contextLabel(fits []llm.Fit) string {
	if len(fits) == 0 {
		return "--context"
	}
	return strconv.Itoa(fits[0].Args.MaxModelLen)
}
