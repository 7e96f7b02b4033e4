package perf

import (
	"strings"
	"testing"
	"time"
)

// seedRow is one row of the comparison table in the seed article on GPU sharing for LLM
// inference (MIG vs vGPU vs MPS, section 2.2 "吞吐量对比（实测估算）"): Qwen-7B-Instruct on one
// H100 80GB, 512 input and 256 output tokens, 16 concurrent requests. The article calls its
// numbers "measured estimates"; its two-process rows are read here as the same 16 requests
// split 8 + 8 over two replicas, and its throughput as the GPU's total.
type seedRow struct {
	name      string
	tokensSec float64 // article
	p99ms     float64 // article
	slice     func(t *testing.T) Slice
	replicas  int
	load      Load
}

func seedRows() []seedRow {
	return []seedRow{
		{"exclusive", 12800, 680, func(t *testing.T) Slice { return Slice{Board: h100(t)} }, 1, Load{}},
		{"mig 1g.10gb", 2100, 920, func(t *testing.T) Slice {
			b := h100(t)
			return Slice{Board: b, Profile: profile(t, b, "1g.10gb")}
		}, 1, Load{}},
		{"mig 2g.20gb", 4800, 750, func(t *testing.T) Slice {
			b := h100(t)
			return Slice{Board: b, Profile: profile(t, b, "2g.20gb")}
		}, 1, Load{}},
		{"mps 2x50%", 11200, 820, func(t *testing.T) Slice { return Slice{Board: h100(t), Mode: MPS, SMPercent: 50, Replicas: 2} }, 2, Load{Active: 1}},
		{"timeslice x2", 8900, 1240, func(t *testing.T) Slice { return Slice{Board: h100(t), Mode: TimeSlice, Replicas: 2} }, 2, Load{Active: 1}},
	}
}

func TestSeedComparisonOrdering(t *testing.T) {
	m := mustModel(t, qwen7B)
	const total = 16
	var b strings.Builder
	b.WriteString("slice          article tok/s  model out tok/s  model in+out tok/s  article p99  model TTFT  model TPOT  model E2E  fits\n")
	got := map[string]Result{}
	for _, r := range seedRows() {
		e := mustEngine(t, m, r.slice(t))
		res, err := e.Estimate(Workload{InputTokens: 512, OutputTokens: 256, Concurrency: total / r.replicas}, r.load)
		if err != nil {
			t.Fatal(err)
		}
		n := float64(r.replicas)
		res.OutputTokensPerSec *= n
		res.TotalTokensPerSec *= n
		got[r.name] = res
		b.WriteString(strings.Join([]string{pad(r.name, 14), pad(ftoa(r.tokensSec, 0), 14), pad(ftoa(res.OutputTokensPerSec, 0), 16),
			pad(ftoa(res.TotalTokensPerSec, 0), 19), pad(ftoa(r.p99ms, 0)+" ms", 12), pad(ms(res.TTFT), 11),
			pad(ms(res.TPOT), 11), pad(ms(res.E2E), 10), fitWord(e)}, " ") + "\n")
	}
	t.Logf("seed comparison, Qwen2.5-7B BF16 on H100 SXM5, 512 in / 256 out, 16 in flight:\n%s", b.String())
	// The article's throughput ordering: exclusive > MPS > time-slicing > MIG 2g > MIG 1g.
	order := []string{"exclusive", "mps 2x50%", "timeslice x2", "mig 2g.20gb", "mig 1g.10gb"}
	for i := 1; i < len(order); i++ {
		hi, lo := got[order[i-1]].TotalTokensPerSec, got[order[i]].TotalTokensPerSec
		if !(hi > lo) {
			t.Errorf("throughput ordering: %s (%.0f tok/s) should beat %s (%.0f tok/s)", order[i-1], hi, order[i], lo)
		}
	}
	// Latency: of the article's ordering, the part physics supports at a fixed 16 in flight.
	// Per-token latency is the inverse of per-replica throughput (Little's law), so the MIG
	// slices are slowest per token; what the model must reproduce is exclusive fastest and
	// time-slicing slower than MPS and exclusive.
	if !(got["exclusive"].TPOT < got["mps 2x50%"].TPOT && got["mps 2x50%"].TPOT < got["timeslice x2"].TPOT) {
		t.Errorf("TPOT ordering exclusive < mps < timeslice broken: %v, %v, %v",
			got["exclusive"].TPOT, got["mps 2x50%"].TPOT, got["timeslice x2"].TPOT)
	}
}

func ms(d time.Duration) string { return ftoa(float64(d.Microseconds())/1000, 1) + " ms" }

func fitWord(e *Engine) string {
	if e.FitsWeights() {
		return "yes"
	}
	return "NO (weights)"
}
