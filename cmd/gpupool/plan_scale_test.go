package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// processCPU is the user and system CPU time this process has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestPlanScaleVaried guards the scale bars through the CLI, pool decoding and JSON output
// included, on the varied generator's pools: 1,000 tenants on 1,000 GPUs within 1 s and 20,000
// on 10,000 GPUs within 10 s on two cores. The machine running the tests is shared, so the
// test measures the process's CPU time (user and system, the garbage collector's included),
// not wall time, against a limit 1.2× (1,000) and 1.15× (20,000) the bar, and tries a slow run
// once more (measured 0.68 s and 9.1 s on a loaded machine, where the limits were 1.5× and 1.3×
// before the sizing's rate on one replica was computed on first read); docs/planner-history.md
// records the side-by-side measurements. Skipped with -short and
// under the race detector.
func TestPlanScaleVaried(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans 20,000 tenants; a CPU-time bar means nothing under the race detector")
	}
	for _, c := range []struct {
		tenants, gpus int
		limit         time.Duration
	}{{1000, 1000, 1200 * time.Millisecond}, {20000, 10000, 11500 * time.Millisecond}} {
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: c.tenants, GPUs: c.gpus, Varied: true}, rand.New(rand.NewPCG(1, 2)))
		data, err := v1.EncodeYAML(pool)
		if err != nil {
			t.Fatal(err)
		}
		file := writeTemp(t, "pool.yaml", string(data))
		for attempt := 1; ; attempt++ {
			start := processCPU(t)
			_, errOut, code := runCmd(t, "plan", file, "-o", "json")
			took := processCPU(t) - start
			if code != 0 {
				t.Fatalf("plan of %d tenants: exit %d: %s", c.tenants, code, errOut)
			}
			t.Logf("%d tenants on %d GPUs: %v of CPU (limit %v)", c.tenants, c.gpus, took.Round(time.Millisecond), c.limit)
			if took <= c.limit {
				break
			}
			if attempt == 2 {
				t.Errorf("planning %d tenants on %d GPUs took %v of CPU twice, more than %v", c.tenants, c.gpus, took, c.limit)
				break
			}
		}
	}
}

// genscalePool writes a pool as testdata/review7/genscale.py draws them, from r: gpus GPUs in
// nodes of eight (H100, A100-SXM4-80GB, H200 and B200 in turn), tenants of catalog models from
// 0.5B to 72B (fp8 for some large ones), prompts of 100–8,000 tokens and outputs of 20–800 at
// fixed lengths, concurrency unset or 1–256, TTFT and TPOT targets or an e2e target alone,
// hard, soft and shared tiers in 40 paths, low-frequency tenants, redundancy, minimum and
// maximum or fixed replica counts and three energy classes. Unlike plan.Synthetic's pools, its
// tenants differ in request shape and SLO nearly all, and many run on capped or KV-bound
// replicas of long prompts.
func genscalePool(tenants, gpus int, r *rand.Rand) string {
	boards := []string{"H100", "A100-SXM4-80GB", "H200", "B200"}
	var names []string
	for _, m := range []struct {
		name   string
		weight int
	}{{"qwen2.5-0.5b", 1}, {"qwen2.5-1.5b", 2}, {"llama-3.2-1b", 2}, {"llama-3.2-3b", 3}, {"qwen2.5-3b", 3},
		{"llama-3.1-8b", 6}, {"qwen2.5-7b", 6}, {"mistral-7b-v0.3", 4}, {"qwen2.5-14b", 3},
		{"qwen2.5-32b", 2}, {"mixtral-8x7b", 1}, {"llama-3.1-70b", 1}, {"qwen2.5-72b", 1}} {
		for range m.weight {
			names = append(names, m.name)
		}
	}
	pick := func(xs ...int) int { return xs[r.IntN(len(xs))] }
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata:\n  name: scale-%d-%d\nfleet:\n  nodes:\n", tenants, gpus)
	for i, left := 0, gpus; left > 0; i++ {
		c := min(8, left)
		fmt.Fprintf(&b, "  - name: node-%05d\n    gpus:\n    - {board: %s, count: %d}\n", i, boards[i%len(boards)], c)
		left -= c
	}
	b.WriteString("policy:\n  burstPoolPercent: 5\ntenants:\n")
	for k := range tenants {
		m := names[r.IntN(len(names))]
		big := m == "llama-3.1-70b" || m == "qwen2.5-72b" || m == "mixtral-8x7b" || m == "qwen2.5-32b"
		iso := "hard"
		switch x := r.IntN(10); {
		case x >= 5:
			iso = "shared"
		case x >= 2:
			iso = "soft"
		}
		low := iso == "shared" && r.Float64() < 0.3
		in, out := pick(100, 300, 600, 1000, 2000, 4000, 8000), pick(20, 80, 150, 300, 800)
		rps := []float64{0.02, 0.1, 0.3, 0.8, 2, 5}[r.IntN(6)]
		if big {
			rps *= 0.3
		}
		if low {
			rps *= 0.1
		}
		fmt.Fprintf(&b, "- name: t%05d\n  path: org%d/team\n  isolation: %s\n  model: {name: %s", k, k%40, iso, m)
		if big && r.Float64() < 0.5 {
			b.WriteString(", quantization: fp8")
		}
		b.WriteString("}\n")
		if in+out > 8192 {
			fmt.Fprintf(&b, "  maxContext: %d\n", in+out)
		}
		if r.Float64() < 0.3 {
			fmt.Fprintf(&b, "  concurrency: %d\n", pick(1, 4, 16, 64, 256))
		}
		fmt.Fprintf(&b, "  traffic: {rps: %.3f, inputTokens: %d, outputTokens: %d, lengths: fixed}\n", rps, in, out)
		if r.Float64() < 0.15 {
			fmt.Fprintf(&b, "  slo: {e2eP99: %ds}\n", pick(30, 60, 120))
		} else {
			ttft := pick(300, 800, 1500, 3000, 5000)
			if in > 2000 {
				ttft += in / 4
			}
			fmt.Fprintf(&b, "  slo: {ttftP99: %dms, tpotP99: %dms}\n", ttft, pick(25, 40, 60, 100, 150))
		}
		switch x := r.Float64(); {
		case x < 0.05:
			fmt.Fprintf(&b, "  replicas: %d\n", pick(1, 2))
		case x < 0.12:
			fmt.Fprintf(&b, "  minReplicas: 2\n  maxReplicas: %d\n", pick(2, 4, 8))
		case x < 0.2:
			b.WriteString("  redundancy: true\n")
		}
		if low {
			b.WriteString("  lowFrequency: true\n")
		}
		if r.Float64() < 0.2 {
			fmt.Fprintf(&b, "  energyClass: %s\n", []string{"performance", "efficiency"}[r.IntN(2)])
		}
	}
	return b.String()
}

// TestPlanScaleGenscale guards the planning time of 1,000 tenants of distinct request shapes
// and SLOs on 1,000 GPUs (genscalePool, fixed lengths) through the CLI, as TestPlanScaleVaried
// does plan.Synthetic's: the process's CPU time, tried up to three times while slow, against
// 3 s, three times the bar (the pool is still above it, docs/planner.md's Not done yet), where
// it took 2.5 s in process on a loaded machine and 2.1 s through the CLI, against 11.5 s before
// Erlang C against a limit stopped early (erlangCAbove). The first plan in a fresh process
// pays for growing the heap (about 100,000 page faults for 400 MB, 0.6-0.9 s of system time on
// a virtual machine) and takes about 1.5 s more than the next on an idle machine (4.0 s, then
// 2.5 s); with two tries a shared runner's load on the second failed the test at 3.6 s (the
// planner then about 15 % slower than now), so the third try gives the guard the least of two
// warm plans. Skipped with -short and under the race detector.
func TestPlanScaleGenscale(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("plans 1,000 tenants; a CPU-time bar means nothing under the race detector")
	}
	const limit = 3 * time.Second
	file := writeTemp(t, "pool.yaml", genscalePool(1000, 1000, rand.New(rand.NewPCG(1, 1))))
	for attempt := 1; ; attempt++ {
		start := processCPU(t)
		out, errOut, code := runCmd(t, "plan", file, "--sim-requests", "-1", "-o", "json")
		took := processCPU(t) - start
		if code != exitOK && code != exitPartial || !strings.Contains(out, `"vllmArgs"`) {
			t.Fatalf("plan: exit %d: %s", code, errOut)
		}
		t.Logf("1,000 tenants on 1,000 GPUs: %v of CPU (limit %v), exit %d: %s", took.Round(time.Millisecond), limit, code, strings.TrimSpace(errOut))
		if took <= limit {
			break
		}
		if attempt == 3 {
			t.Errorf("planning 1,000 tenants on 1,000 GPUs took %v of CPU three times, more than %v", took, limit)
			break
		}
	}
}
