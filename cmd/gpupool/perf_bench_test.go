package main

import (
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// perfSweep runs what `gpupool perf` computes for every row of a sweep over catalog models,
// every board, and every slice kind the command shows (with its default four concurrencies and
// the max rate), and returns the number of rows.
func perfSweep(tb testing.TB, models []string) int {
	tb.Helper()
	rows := 0
	w := perf.Workload{InputTokens: 512, OutputTokens: 256}
	slo := perf.SLO{TTFT: time.Second, TPOT: 50 * time.Millisecond}
	for _, name := range models {
		a, err := llm.Lookup(name)
		if err != nil {
			tb.Fatal(err)
		}
		o := perf.DefaultOptions()
		o.Context = perfContext(0, a.MaxPositions)
		m, err := perf.New(a, llm.QuantBF16, o)
		if err != nil {
			tb.Fatal(err)
		}
		for _, b := range gpu.Boards() {
			if b.SMs <= 0 || b.BF16TFLOPS <= 0 {
				continue // not modelled: the catalog does not know its SMs or its peak
			}
			for _, c := range perfCases(b, m) {
				if _, err := perfRow(m, c, w, slo, []int{1, 8, 32, 128}); err != nil {
					tb.Fatal(err)
				}
				rows++
			}
		}
	}
	return rows
}

// perfSweepModels are seven catalog LLMs from 1B to 70B.
var perfSweepModels = []string{"llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "qwen2.5-7b", "llama-2-13b", "llama-2-7b", "llama-3.1-70b"}

// TestPerfSweepSize keeps the benchmark's sweep at 1,000 rows or more (models × boards × slice
// kinds), the size the performance bar is stated for.
func TestPerfSweepSize(t *testing.T) {
	if n := perfSweep(t, perfSweepModels); n < 1000 {
		t.Errorf("sweep of %d rows, want at least 1000", n)
	}
}

// BenchmarkPerfSweep is `gpupool perf` over the sweep: the bar is under 2 s per sweep.
func BenchmarkPerfSweep(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(float64(perfSweep(b, perfSweepModels)), "rows/op")
	}
}
