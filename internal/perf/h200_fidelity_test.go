package perf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// h200File holds step times measured on one H200 by the project's GPU harness (see
// testdata/measured/README.md): random-weight LLaMA-shaped models in PyTorch, bf16, decode
// replayed from CUDA graphs over a dense KV cache, prefill run eagerly.
const h200File = "testdata/measured/h200-sharing-2026-11-29.jsonl"

// h200File4 holds the four-tenant runs of the same harness (run4.sh): four llama-7b processes
// busy at once, time-sliced (ts4-*) and under MPS at 25 % each (mps4-25-*).
const h200File4 = "testdata/measured/h200-sharing4-2026-11-29.jsonl"

// h200Window is the time over which a sharing worker counted its decode steps: it runs each
// phase for 5 s and discards the first second, so the wall time per step is 4000 ms / steps.
const h200Window = 4000.0

// h200Row is one JSON line of the measurement; fields not used by a kind stay zero.
type h200Row struct {
	Kind         string  `json:"kind"`
	Model        string  `json:"model"`
	Label        string  `json:"label"`
	Batch        int     `json:"batch"`
	Seq          int     `json:"seq"`
	Ctx          int     `json:"ctx"`
	Ms           float64 `json:"ms"`
	PrefillBatch int     `json:"prefill_batch"`
	PrefillSeq   int     `json:"prefill_seq"`
	MPSPct       string  `json:"mps_pct"`
	DecodeMs     float64 `json:"decode_ms"`
	DecodeN      int     `json:"decode_n"`
	PrefillMs    float64 `json:"prefill_ms"`
	Gbs          float64 `json:"gbs"`
	TFLOPS       float64 `json:"tflops"`
	M            int     `json:"m"`
	K            int     `json:"k"`
	N            int     `json:"n"`
}

// h200Case is one measured step and the perf inputs that describe it.
type h200Case struct {
	name   string
	model  string // catalog slug
	group  string // worker rows: alone, ts2, mps-alone-<pct>, mps2-<pct>
	phase  string // worker rows: decode or prefill
	slice  Slice
	batch  Batch
	load   Load
	ms     float64 // what the model is compared with
	alt    string  // another reading of the same measurement, shown for reference
	events float64 // worker rows: the step's median from CUDA events
	bound  float64 // allowed |relative error|
}

// h200Bound is the per-row target. h200LooseBound is allowed only for the rows named in
// h200Loose, for the reasons given there.
const (
	h200Bound      = 0.20
	h200LooseBound = 0.50
)

// h200Loose names the rows held to h200LooseBound, with the reason the model cannot reach
// h200Bound on them. Each reason is a property of the harness a serving engine does not share.
var h200Loose = map[string]string{
	"llama-3.1-8b prefill 1×128": h200EagerPrefill,
	"llama-2-7b prefill 1×128":   h200EagerPrefill,
}

// h200EagerPrefill: the harness runs prefill eagerly, not from a CUDA graph. Python dispatches
// about 19 operators per layer, some 600 per forward, and at 128 tokens a layer's kernels take
// about as long as their dispatch, so the GPU idles between them; from 512 tokens on the kernels
// are long enough to hide it. The harness options model GPU time only (no host time per step),
// so they undershoot these two rows. A serving engine's host time per step is StepOverhead.
const h200EagerPrefill = "eager-mode prefill of 128 tokens: the GPU waits for Python's operator dispatch"

func loadH200(t *testing.T) []h200Row {
	t.Helper()
	var data []byte
	for _, f := range []string{h200File, h200File4} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = append(append(data, b...), '\n')
	}
	var rows []h200Row
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r h200Row
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", h200File, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// h200Slug maps the harness's model names to the llm catalog: llama-7b has the shape of
// llama-2-7b (32 layers, hidden 4096, 32 heads, MHA, 11008, vocabulary 32000).
func h200Slug(name string) string {
	if name == "llama-7b" {
		return "llama-2-7b"
	}
	return name
}

func h200Cases(t *testing.T, rows []h200Row, board *gpu.Board) []h200Case {
	t.Helper()
	var cs []h200Case
	for _, r := range rows {
		slug := h200Slug(r.Model)
		switch r.Kind {
		case "prefill":
			cs = append(cs, h200Case{
				name: "prefill " + itoa(r.Batch) + "×" + itoa(r.Seq), model: slug, slice: Slice{Board: board},
				batch: Batch{PrefillTokens: r.Batch * r.Seq, PrefillSeqs: r.Batch}, ms: r.Ms,
			})
		case "decode":
			cs = append(cs, h200Case{
				name: "decode b" + itoa(r.Batch) + " ctx" + itoa(r.Ctx), model: slug, slice: Slice{Board: board},
				batch: Batch{DecodeSeqs: r.Batch, KVTokens: int64(r.Batch) * int64(r.Ctx)}, ms: r.Ms,
			})
		case "worker":
			wc, err := workerCases(r, slug, board)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, wc...)
		}
	}
	for i := range cs {
		cs[i].bound = h200Bound
		if _, ok := h200Loose[cs[i].model+" "+cs[i].name]; ok {
			cs[i].bound = h200LooseBound
		}
	}
	return cs
}

// workerCases turns one sharing worker into its decode and prefill steps. Its label says how the
// GPU was shared: alone, ts2-a/b and ts4-a…d (two or four time-sliced processes), mps-alone-<pct>
// (one MPS client with that active-thread percentage), mps2-<pct>-a/b and mps4-<pct>-a…d (two or
// four MPS clients, all busy).
func workerCases(r h200Row, slug string, board *gpu.Board) ([]h200Case, error) {
	s, l, group := Slice{Board: board}, Load{}, r.Label
	pct, err := 0.0, error(nil)
	if r.MPSPct != "" {
		if pct, err = strconv.ParseFloat(r.MPSPct, 64); err != nil {
			return nil, fmt.Errorf("worker %s: mps_pct: %w", r.Label, err)
		}
	}
	switch {
	case r.Label == "alone":
	case strings.HasPrefix(r.Label, "ts2-"):
		s, l, group = Slice{Board: board, Mode: TimeSlice, Replicas: 2}, Load{Active: 1, Duty: 1}, "ts2"
	case strings.HasPrefix(r.Label, "ts4-"):
		s, l, group = Slice{Board: board, Mode: TimeSlice, Replicas: 4}, Load{Active: 3, Duty: 1}, "ts4"
	case strings.HasPrefix(r.Label, "mps4-"):
		s, l = Slice{Board: board, Mode: MPS, SMPercent: pct, Replicas: 4}, Load{Active: 3, Duty: 1}
		group = r.Label[:strings.LastIndex(r.Label, "-")]
	case strings.HasPrefix(r.Label, "mps-alone-"):
		s.Mode, s.SMPercent = MPS, pct
	case strings.HasPrefix(r.Label, "mps2-"):
		s, l = Slice{Board: board, Mode: MPS, SMPercent: pct, Replicas: 2}, Load{Active: 1, Duty: 1}
		group = r.Label[:strings.LastIndex(r.Label, "-")]
	default:
		return nil, fmt.Errorf("worker %s: unknown label", r.Label)
	}
	wall := h200Window / float64(max(r.DecodeN, 1))
	dec := h200Case{
		name: r.Label + " decode b" + itoa(r.Batch) + " ctx" + itoa(r.Ctx), model: slug, group: group, phase: "decode",
		slice: s, load: l, batch: Batch{DecodeSeqs: r.Batch, KVTokens: int64(r.Batch) * int64(r.Ctx)},
		ms: r.DecodeMs, alt: "wall " + ftoa(wall, 2), events: r.DecodeMs,
	}
	if s.Mode == TimeSlice {
		// CUDA events time a step from its first kernel; under time-slicing that kernel waits for
		// the other context's slice first, so the events miss part of the step. The step's wall
		// time, from the number of steps in the window, is what StepTime predicts.
		dec.ms, dec.alt = wall, "events "+ftoa(r.DecodeMs, 2)
	}
	pre := h200Case{
		name: r.Label + " prefill " + itoa(r.PrefillBatch) + "×" + itoa(r.PrefillSeq), model: slug, group: group, phase: "prefill",
		slice: s, load: l, batch: Batch{PrefillTokens: r.PrefillBatch * r.PrefillSeq, PrefillSeqs: r.PrefillBatch},
		ms: r.PrefillMs, events: r.PrefillMs,
	}
	return []h200Case{dec, pre}, nil
}

// h200Options are the model's constants for the harness rather than a serving engine. One
// differs from DefaultOptions, for what the harness is, not to fit its rows: StepOverhead 0, as
// the harness times GPU work between CUDA events, decode replays a CUDA graph, and there is no
// scheduler, sampler or detokenizer; DefaultOptions' 1 ms is a serving engine's host time per
// step. KVBWEfficiency is set to WeightBWEfficiency explicitly (DefaultOptions has the same
// value): the harness's KV cache is one dense tensor per layer that attention reads front to
// back, like the weights.
//
// The ctx-2048 rows confirm the second: going from 512 to 2048 cached tokens costs 5.66 ms for
// 25.8 GB at batch 128 (llama-3.1-8b) and 5.62 ms for 25.8 GB at batch 32 (llama-7b), 4.5 TB/s,
// 95 % of the peak.
func h200Options() Options {
	o := DefaultOptions()
	o.StepOverhead = 0
	o.KVBWEfficiency = o.WeightBWEfficiency
	return o
}

// h200Result is a case with the model's answer.
type h200Result struct {
	h200Case
	pred float64 // the model's step time, ms
}

func (r h200Result) rel() float64 { return (r.pred - r.ms) / r.ms }

func h200Results(t *testing.T) []h200Result {
	t.Helper()
	board, err := gpu.Lookup("H200-141GB")
	if err != nil {
		t.Fatal(err)
	}
	cs := h200Cases(t, loadH200(t), board)
	if len(cs) != 23+2*(11+8) {
		t.Fatalf("%d cases from %s and %s, want 23 calibration steps and 2 × 19 worker steps", len(cs), h200File, h200File4)
	}
	models := map[string]*Model{}
	var rs []h200Result
	for _, c := range cs {
		m := models[c.model]
		if m == nil {
			a, err := llm.Lookup(c.model)
			if err != nil {
				t.Fatal(err)
			}
			if m, err = New(a, llm.QuantBF16, h200Options()); err != nil {
				t.Fatal(err)
			}
			models[c.model] = m
		}
		e := mustEngine(t, m, c.slice)
		rs = append(rs, h200Result{h200Case: c, pred: ms64(e.StepTime(c.batch, c.load))})
	}
	return rs
}

func ms64(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// TestH200Fidelity compares every prefill, decode and sharing-worker step measured on the H200
// with the model's step time under h200Options, and prints the table.
func TestH200Fidelity(t *testing.T) {
	var b strings.Builder
	b.WriteString(pad("model", 13) + pad("step", 36) + pad("measured ms", 12) + pad("model ms", 10) + pad("error", 9) + "note\n")
	worst, loose := 0.0, 0
	for _, r := range h200Results(t) {
		note := r.alt
		if why, ok := h200Loose[r.model+" "+r.name]; ok {
			note = strings.TrimSpace(note + " loose: " + why)
			loose++
		} else {
			worst = math.Max(worst, math.Abs(r.rel()))
		}
		b.WriteString(pad(r.model, 13) + pad(r.name, 36) + pad(ftoa(r.ms, 2), 12) + pad(ftoa(r.pred, 2), 10) +
			pad(ftoa(100*r.rel(), 1)+"%", 9) + note + "\n")
		if math.Abs(r.rel()) > r.bound {
			t.Errorf("%s %s: model %.2f ms vs measured %.2f ms: error %+.1f%% beyond ±%.0f%%",
				r.model, r.name, r.pred, r.ms, 100*r.rel(), 100*r.bound)
		}
	}
	if loose != len(h200Loose) {
		t.Errorf("%d of the %d rows named in h200Loose exist", loose, len(h200Loose))
	}
	t.Logf("H200 step times, measured vs the model (worst row held to ±%.0f%%: %.1f%%):\n%s", 100*h200Bound, 100*worst, b.String())
}

// h200RatioBound holds the sharing model to the measured slowdowns: a shared step over the same
// step alone, which cancels what the model gets wrong about the step itself (for prefill, the
// serving engine's MFU against raw cuBLAS).
const h200RatioBound = 0.10

// h200HeldOutRatioBound holds the four-tenant runs, which were measured after the constants were
// set and were not used to set them: a held-out check of the sharing model. Unchanged constants
// predict them within 1.3 % (time-slicing), 5.3 % (MPS decode) and 10.4 % (MPS prefill, where
// four 25 % clients lose a little more to each other than the model charges).
const h200HeldOutRatioBound = 0.15

// TestH200SharingRatios checks the sharing model: each two-tenant step (time-slicing, MPS 50+50,
// MPS 100+100) over the alone step, and each MPS active-thread step over the 100 % one.
func TestH200SharingRatios(t *testing.T) {
	rs := h200Results(t)
	base := map[string]h200Result{}
	for _, r := range rs {
		if r.group == "alone" || r.group == "mps-alone-100" {
			base[r.group+" "+r.phase] = r
		}
	}
	var b strings.Builder
	b.WriteString(pad("step", 36) + pad("over", 15) + pad("measured", 10) + pad("model", 8) + "error\n")
	for _, r := range rs {
		ref := "alone"
		switch {
		case r.group == "" || r.group == "alone" || r.group == "mps-alone-100":
			continue
		case strings.HasPrefix(r.group, "mps-alone-"):
			ref = "mps-alone-100"
		}
		a, ok := base[ref+" "+r.phase]
		if !ok {
			t.Fatalf("no %s %s step", ref, r.phase)
		}
		want, got := r.ms/a.ms, r.pred/a.pred
		rel := (got - want) / want
		bound := h200RatioBound
		if r.group == "ts4" || strings.HasPrefix(r.group, "mps4-") {
			bound = h200HeldOutRatioBound
		}
		b.WriteString(pad(r.name, 36) + pad(ref, 15) + pad(ftoa(want, 3), 10) + pad(ftoa(got, 3), 8) + ftoa(100*rel, 1) + "%\n")
		if math.Abs(rel) > bound {
			t.Errorf("%s over %s: model %.3f× vs measured %.3f×: error %+.1f%% beyond ±%.0f%%",
				r.name, ref, got, want, 100*rel, 100*bound)
		}
	}
	t.Logf("H200 slowdowns from sharing, measured vs the model:\n%s", b.String())
}

// TestH200TimeSliceEvents checks the time-slice constants a second way. The harness's CUDA
// events start at a step's first kernel, which under time-slicing runs only once the other
// context's slice is over: the events miss one neighbour slice and the two switches around it,
// TimeSliceQuantum + 2 × ContextSwitch (2.3 ms; measured: 13.47-13.65 ms of wall time per step
// against 11.09 ms from the events, 2.4-2.6 ms).
func TestH200TimeSliceEvents(t *testing.T) {
	o := h200Options()
	miss := ms64(o.TimeSliceQuantum + 2*o.ContextSwitch)
	n := 0
	for _, r := range h200Results(t) {
		if r.group != "ts2" || r.phase != "decode" {
			continue
		}
		n++
		got := r.pred - miss
		if rel := (got - r.events) / r.events; math.Abs(rel) > 0.05 {
			t.Errorf("%s: model %.2f ms − %.2f ms missed = %.2f ms vs events %.2f ms: %+.1f%%", r.name, r.pred, miss, got, r.events, 100*rel)
		}
		near(t, "wall − events (ms)", r.ms-r.events, miss, 0.15)
	}
	if n != 2 {
		t.Fatalf("%d time-sliced decode workers, want 2", n)
	}
}

// TestH200Microbenchmarks sets the model's rates beside the harness's copy and GEMM rows: the
// weight-streaming rate against the device copy (4,279 GB/s), the compute rate of a whole,
// busy H200 against cuBLAS BF16 GEMMs (769 TFLOPS at 8192³, 696 at 4096 × 4096 × 14336).
func TestH200Microbenchmarks(t *testing.T) {
	board, err := gpu.Lookup("H200-141GB")
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: board})
	for _, r := range loadH200(t) {
		switch {
		case r.Kind == "bandwidth":
			got := e.alone.bwW / 1e9
			t.Logf("weight streaming %.0f GB/s vs device copy %.0f GB/s", got, r.Gbs)
			near(t, "streaming GB/s against copy", got, r.Gbs, 0.05)
		case r.Kind == "gemm" && r.M >= 4096:
			got := e.alone.flops / 1e12
			t.Logf("compute %.0f TFLOPS vs GEMM %d×%d×%d %.0f TFLOPS", got, r.M, r.K, r.N, r.TFLOPS)
			near(t, "TFLOPS against a large GEMM", got, r.TFLOPS, 0.15)
		}
	}
}

// TestDefaultsAgainstH200 holds the defaults that perf, plan and simulate use (DefaultOptions,
// a serving engine) to the H200 rows measured alone: the step's GPU time (the step less the
// engine's host time, which the harness does not have) against the measured step, within
// h200Bound, except the eager-prefill rows named in h200Loose. The one remaining difference is
// the KV read: DefaultOptions reads a paged cache at KVBWEfficiency, the harness a dense one.
func TestDefaultsAgainstH200(t *testing.T) {
	board, err := gpu.Lookup("H200-141GB")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	n := 0
	for _, c := range h200Cases(t, loadH200(t), board) {
		if c.group != "" && c.group != "alone" {
			continue
		}
		a, err := llm.Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(a, llm.QuantBF16, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		bd := mustEngine(t, m, c.slice).Breakdown(c.batch, c.load)
		got := ms64(bd.Total - bd.Overhead)
		rel := (got - c.ms) / c.ms
		n++
		b.WriteString(pad(c.model, 13) + pad(c.name, 36) + pad(ftoa(c.ms, 2), 12) + pad(ftoa(got, 2), 10) + ftoa(100*rel, 1) + "%\n")
		if math.Abs(rel) > c.bound {
			t.Errorf("%s %s: defaults' GPU time %.2f ms vs measured %.2f ms: %+.1f%% beyond ±%.0f%%", c.model, c.name, got, c.ms, 100*rel, 100*c.bound)
		}
	}
	if n < 20 {
		t.Fatalf("%d rows measured alone, want at least 20", n)
	}
	t.Logf("H200 steps measured alone vs DefaultOptions' GPU time (host time per step %v left out):\n%s", DefaultOptions().StepOverhead, b.String())
}

// TestDefaultsSharingH200 holds DefaultOptions' sharing slowdowns (GPU time of the shared step
// over the step alone, host time left out as in TestDefaultsAgainstH200) to the measured ones of
// the two- and four-tenant runs, within h200HeldOutRatioBound.
func TestDefaultsSharingH200(t *testing.T) {
	board, err := gpu.Lookup("H200-141GB")
	if err != nil {
		t.Fatal(err)
	}
	a, err := llm.Lookup("llama-2-7b")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	gpuMs := func(c h200Case) float64 {
		bd := mustEngine(t, m, c.slice).Breakdown(c.batch, c.load)
		return ms64(bd.Total - bd.Overhead)
	}
	base := map[string]h200Case{}
	cs := h200Cases(t, loadH200(t), board)
	for _, c := range cs {
		if c.group == "alone" {
			base[c.phase] = c
		}
	}
	var b strings.Builder
	n := 0
	for _, c := range cs {
		if c.group != "ts2" && c.group != "ts4" && !strings.HasPrefix(c.group, "mps2-") && !strings.HasPrefix(c.group, "mps4-") {
			continue
		}
		al := base[c.phase]
		want, got := c.ms/al.ms, gpuMs(c)/gpuMs(al)
		rel := (got - want) / want
		n++
		b.WriteString(pad(c.name, 36) + pad(ftoa(want, 3), 10) + pad(ftoa(got, 3), 8) + ftoa(100*rel, 1) + "%\n")
		if math.Abs(rel) > h200HeldOutRatioBound {
			t.Errorf("%s: defaults' slowdown %.3f× vs measured %.3f×: %+.1f%% beyond ±%.0f%%", c.name, got, want, 100*rel, 100*h200HeldOutRatioBound)
		}
	}
	if n == 0 {
		t.Fatal("no shared rows")
	}
	t.Logf("H200 sharing slowdowns, measured vs DefaultOptions:\n%s", b.String())
}
