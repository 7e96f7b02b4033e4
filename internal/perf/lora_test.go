package perf

import (
	"bufio"
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

func loraEngine(t testing.TB, a llm.Arch, board string, tp int) (*Engine, *LoRACost) {
	t.Helper()
	b, err := gpu.Lookup(board)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mustModel(t, a).Place(Slice{Board: b, TensorParallel: tp})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.LoRA(LoRAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

// A decode step of 32 sequences of Llama-3.1-8B on an H100 with one rank-16 adapter: 8 kernels ×
// 32 layers × 4 µs = 1.024 ms of launches; the slot holds 81,920 × 32 layers = 2,621,440 weights
// per unit of rank, so 41,943,040 at rank 16: 83.9 MB read once at the engine's weight bandwidth
// (3.35 TB/s × WeightBWEfficiency) against 32 × 2 × 41.9 M = 2.7 GFLOP; the read bounds it, and
// the kernels reach a quarter of the roofline.
func TestLoRAStepOverheadParts(t *testing.T) {
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	e, c := loraEngine(t, a, "H100-SXM5-80GB", 1)
	got := c.StepOverhead(32, 1, 16)
	read := 41_943_040.0 * 2 / e.alone.bwW / 0.25
	want := 1.024e-3 + read
	if math.Abs(got.Seconds()-want) > 1e-6 {
		t.Errorf("overhead %v, want %.4f ms", got, want*1e3)
	}
	if c.StepOverhead(0, 1, 16) != 0 || c.StepOverhead(32, 0, 16) != 0 {
		t.Error("an empty step or one without adapters costs LoRA time")
	}
}

// More distinct adapters, higher rank and more tokens never make a step cheaper; distinct
// adapters beyond the tokens in the batch add nothing (each token uses one adapter).
func TestLoRAStepOverheadMonotone(t *testing.T) {
	_, c := loraEngine(t, llama7B, "A100-SXM4-80GB", 1)
	prev := time.Duration(0)
	for _, d := range []int{1, 2, 4, 8, 16, 32} {
		o := c.StepOverhead(32, d, 16)
		if o < prev {
			t.Errorf("%d adapters: %v < %v", d, o, prev)
		}
		prev = o
	}
	if c.StepOverhead(32, 64, 16) != c.StepOverhead(32, 32, 16) {
		t.Error("adapters beyond the batch's tokens add time")
	}
	for _, r := range []int{8, 16, 64, 256} {
		if c.StepOverhead(64, 4, 2*r) <= c.StepOverhead(64, 4, r) {
			t.Errorf("rank %d not cheaper than %d", r, 2*r)
		}
	}
	if c.StepOverhead(8192, 1, 16) <= c.StepOverhead(64, 1, 16) {
		t.Error("a long prefill is not dearer than a small decode")
	}
}

// Loading an 80 MiB adapter on an H100 (PCIe Gen5, 64 GB/s × 0.8): 83,886,080 / 51.2e9 = 1.638 ms
// plus 14 copies × 32 layers × 8 µs = 3.584 ms; from disk another 83,886,080 / 2e9 = 41.9 ms.
// A GH200 reads host memory over NVLink-C2C: the copy part is 7× shorter.
func TestLoRALoadTime(t *testing.T) {
	a, _ := llm.Lookup("llama-3.1-8b")
	e, c := loraEngine(t, a, "H100-SXM5-80GB", 1)
	host := c.LoadTime(83_886_080, false)
	if want := 83_886_080/51.2e9 + 3.584e-3; math.Abs(host.Seconds()-want) > 1e-6 {
		t.Errorf("host load %v, want %.3f ms", host, want*1e3)
	}
	disk := c.LoadTime(83_886_080, true)
	if d := disk - host; math.Abs(d.Seconds()-83_886_080/2e9) > 1e-6 {
		t.Errorf("disk adds %v, want 41.9 ms", d)
	}
	if HostLinkGBs("GH200-144GB") != 450 || HostLinkGBs("A100-SXM4-80GB") != 32 || HostLinkGBs("H200-141GB") != 64 {
		t.Error("host links wrong")
	}
	if _, err := e.LoRA(LoRAOptions{KernelEfficiency: 2, DiskGBs: -1}); err == nil ||
		!strings.Contains(err.Error(), "kernelEfficiency") || !strings.Contains(err.Error(), "diskGBs") {
		t.Errorf("bad options: %v", err)
	}
}

// loraRow is one row of testdata/fidelity/lora.csv.
type loraRow struct {
	source, link, model, board, metric, note string
	in, out, maxLoras, rank, adapters        int
	value                                    float64
	inSample                                 bool
}

func loadLoRARows(t *testing.T) []loraRow {
	f, err := os.Open("testdata/fidelity/lora.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []loraRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		p := strings.SplitN(line, ",", 15)
		if len(p) != 15 {
			t.Fatalf("row %q: %d fields", line, len(p))
		}
		n := func(s string) int {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("row %q: %v", line, err)
			}
			return v
		}
		v, err := strconv.ParseFloat(p[12], 64)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, loraRow{source: p[0], link: p[3], model: p[4], board: p[5], in: n(p[6]), out: n(p[7]),
			maxLoras: n(p[8]), rank: n(p[9]), adapters: n(p[10]), metric: p[11], value: v, inSample: p[13] == "yes", note: p[14]})
	}
	return rows
}

// predictLoRA is the model's LoRA-to-base throughput ratio at full load: the mean step of the
// base engine (TPOT at its sequence limit) against the same step plus the LoRA kernels over its
// tokens (total tokens/s × TPOT).
func predictLoRA(t *testing.T, r loraRow) float64 {
	a := llama7B
	a.MaxPositions = 4096
	if r.model != "llama-2-7b" {
		var err error
		if a, err = llm.Lookup(r.model); err != nil {
			t.Fatal(err)
		}
	}
	e, c := loraEngine(t, a, r.board, 1)
	res, err := e.Estimate(Workload{InputTokens: r.in, OutputTokens: r.out, Concurrency: e.MaxSeqs()}, Load{})
	if err != nil {
		t.Fatal(err)
	}
	step := res.TPOT.Seconds()
	tokens := int(res.TotalTokensPerSec * step)
	return step / (step + c.StepOverhead(tokens, r.adapters, llm.RankFor(r.rank)).Seconds())
}

// loraMisses are published rows the model misses by more than loraRowBar, each with why.
var loraMisses = map[string]string{
	"vllm-pr-11267/1": "vLLM V0's LoRA path (Triton punica kernels, no torch.compile) cost a third of the throughput; the model's constants describe the V1 kernels, which the same authors measured at 2577.68 tok/s with LoRA (vllm PR 11613) but without a base run beside it",
	"vllm-pr-11267/4": "same engine and adapter as the row above",
}

const loraRowBar = 0.20

// TestLoRAFidelity prints every published LoRA row beside the model and holds the rows that are
// not listed as misses to ±20 %. A listed miss that comes within the bar must leave the list.
func TestLoRAFidelity(t *testing.T) {
	rows := loadLoRARows(t)
	var b strings.Builder
	within := 0
	for _, r := range rows {
		if r.metric != "loraThroughputRatio" {
			t.Fatalf("unknown metric %s", r.metric)
		}
		got := predictLoRA(t, r)
		ratio := got / r.value
		key := fmt.Sprintf("%s/%d", r.source, r.maxLoras)
		fmt.Fprintf(&b, "%-16s %-12s %-15s maxLoras %d rank %3d adapters %2d: published %.3f model %.3f (%.2f×) in-sample %v\n",
			r.source, r.model, r.board, r.maxLoras, r.rank, r.adapters, r.value, got, ratio, r.inSample)
		ok := math.Abs(ratio-1) <= loraRowBar
		_, listed := loraMisses[key]
		switch {
		case ok && listed:
			t.Errorf("%s is within ±20 %% now: take it off loraMisses", key)
		case !ok && !listed:
			t.Errorf("%s: model %.3f against %.3f, beyond ±20 %%", key, got, r.value)
		case ok:
			within++
		}
	}
	t.Logf("LoRA rows: %d, within ±20 %%: %d\n%s", len(rows), within, b.String())
}

// StepOverhead runs once per simulated step: it must not allocate.
func BenchmarkLoRAStepOverhead(b *testing.B) {
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		b.Fatal(err)
	}
	_, c := loraEngine(b, a, "H100-SXM5-80GB", 1)
	b.ReportAllocs()
	var sink time.Duration
	for i := 0; b.Loop(); i++ {
		sink += c.StepOverhead(32+i%256, 1+i%64, 16)
	}
	_ = sink
}
