package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/sim"
)

// simCachePools are pools whose plans put replicas on every kind of slice the simulator sizes a
// KV cache for: unshared MIG instances (qwen2.5-14b fp8 at maxContext 4096, where the fit stays
// at --gpu-memory-utilization 0.9, and at 8192, where it needs 0.95), whole GPUs, MPS shares
// with pinned-memory caps, time-slices with memory budgets, and MPS inside a MIG instance.
var simCachePools = map[string]string{
	"mig": `
fleet: {nodes: [{name: n0, gpus: [{board: H100-SXM5-80GB, count: 2}]}]}
policy: {allowedModes: [mig], burstPoolPercent: 0}
tenants:
- {name: q4k, model: {name: qwen2.5-14b, quantization: fp8}, maxContext: 4096, isolation: hard,
   traffic: {rps: 0.2, inputTokens: 1000, outputTokens: 250}, slo: {ttftP99: 5s, tpotP99: 200ms}}
- {name: q8k, model: {name: qwen2.5-14b, quantization: fp8}, maxContext: 8192, isolation: hard,
   traffic: {rps: 0.2, inputTokens: 1000, outputTokens: 250}, slo: {ttftP99: 5s, tpotP99: 200ms}}
- {name: l2k, model: {name: llama-3.1-8b, kvCacheDtype: fp8}, maxContext: 2048, concurrency: 8, isolation: hard,
   traffic: {rps: 0.5, inputTokens: 512, outputTokens: 128}, slo: {ttftP99: 3s, tpotP99: 150ms}}
`,
	"exclusive": `
fleet: {nodes: [{name: n0, gpus: [{board: A100-SXM4-80GB, count: 2}]}]}
policy: {allowedModes: [exclusive], burstPoolPercent: 0}
tenants:
- {name: x2k, model: {name: llama-3.1-8b}, maxContext: 2048, isolation: hard,
   traffic: {rps: 1, inputTokens: 512, outputTokens: 128}, slo: {ttftP99: 2s, tpotP99: 100ms}}
`,
	"mps": `
fleet: {nodes: [{name: n0, gpus: [{board: H100-SXM5-80GB, count: 2}]}]}
policy: {allowedModes: [mps], burstPoolPercent: 0}
tenants:
- {name: m1, model: {name: llama-3.1-8b}, maxContext: 4096, isolation: soft, path: org/a,
   traffic: {rps: 0.3, inputTokens: 512, outputTokens: 128}, slo: {ttftP99: 3s, tpotP99: 150ms}}
- {name: m2, model: {name: qwen2.5-7b, kvCacheDtype: fp8}, isolation: soft, path: org/a,
   traffic: {rps: 0.3, inputTokens: 512, outputTokens: 128}, slo: {ttftP99: 3s, tpotP99: 150ms}}
- {name: m3, model: {name: qwen2.5-14b, quantization: fp8}, maxContext: 4096, concurrency: 4, isolation: soft, path: org/a,
   traffic: {rps: 0.2, inputTokens: 1000, outputTokens: 250}, slo: {ttftP99: 5s, tpotP99: 200ms}}
`,
	"timeslice": `
fleet: {nodes: [{name: n0, gpus: [{board: A100-SXM4-80GB, count: 1}]}]}
policy: {allowedModes: [timeslice], burstPoolPercent: 0}
tenants:
- {name: s1, model: {name: llama-3.1-8b}, maxContext: 4096, isolation: shared, lowFrequency: true,
   traffic: {rps: 0.05, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 10s, tpotP99: 500ms}}
- {name: s2, model: {name: qwen2.5-7b}, isolation: shared, lowFrequency: true,
   traffic: {rps: 0.05, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 10s, tpotP99: 500ms}}
`,
	"mig-mps": `
fleet: {nodes: [{name: n0, gpus: [{board: H100-SXM5-80GB, count: 1}]}]}
policy: {allowedModes: [mig, mps], kubernetesDeviceAPI: dra, burstPoolPercent: 0}
tenants:
- {name: d00, model: {name: llama-3.2-1b}, maxContext: 4096, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d01, model: {name: llama-3.2-1b}, maxContext: 2048, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d02, model: {name: llama-3.2-1b}, maxContext: 4096, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d03, model: {name: llama-3.2-1b}, maxContext: 2048, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d04, model: {name: llama-3.2-1b}, maxContext: 4096, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d05, model: {name: llama-3.2-1b}, maxContext: 2048, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d06, model: {name: llama-3.2-1b}, maxContext: 4096, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d07, model: {name: llama-3.2-1b}, maxContext: 2048, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d08, model: {name: llama-3.2-1b}, maxContext: 4096, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d09, model: {name: llama-3.2-1b}, maxContext: 2048, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d10, model: {name: llama-3.2-1b}, maxContext: 4096, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
- {name: d11, model: {name: llama-3.2-1b}, maxContext: 2048, isolation: soft, path: org/b,
   traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}, slo: {ttftP99: 3s, tpotP99: 200ms}}
`,
}

// TestSimulatorRunsPlannedCache: the simulator's engine for every planned replica has the KV
// cache of the vLLM the plan starts — the memory fit the planner chose the replica's slice and
// vLLM arguments by (its MaxTokens) — on MIG instances, whole GPUs, MPS shares and time-slices
// inside their memory limits, and MPS inside a MIG instance. The qwen2.5-14b fp8 tenant at
// maxContext 4096 on an H100 1g.20gb instance is planned at --gpu-memory-utilization 0.9, where
// an engine sized at the model's own context (what the simulator ran before) holds more.
func TestSimulatorRunsPlannedCache(t *testing.T) {
	kinds := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(simCachePools)) {
		pool, err := v1.LoadPool([]byte("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: " + name + "}\n" + simCachePools[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, pl := planWith(t, pool, func(*planner) {})
		want := map[string]int64{} // replica name → the planned cache
		for _, tn := range p.tenants {
			if tn.choice == nil {
				t.Fatalf("%s: tenant %s not served: %v", name, tn.t.Name, tn.infeas)
			}
			c := tn.choice
			kinds[string(c.kind)] = true
			if c.shared() && c.ev.capBytes <= 0 {
				t.Errorf("%s: tenant %s on %s has no memory limit", name, tn.t.Name, c.label())
			}
			for _, pt := range pl.Tenants {
				if pt.Name == tn.t.Name {
					for _, r := range pt.Replicas {
						want[fmt.Sprintf("%s/%d", pt.Name, r.Index)] = c.ev.fit.MaxTokens
					}
				}
			}
			if tn.t.Name == "q4k" {
				args := strings.Join(vllmFlags(c), " ")
				if c.profile == nil || c.profile.Name != "1g.20gb" || !strings.Contains(args, "--gpu-memory-utilization 0.9 ") ||
					!strings.Contains(args, "--max-model-len 4096 ") {
					t.Errorf("%s: q4k planned on %s with %s, want an H100 1g.20gb instance at utilization 0.9 and max-model-len 4096",
						name, c.label(), args)
				}
				// The engine perf builds for the slice at the model's own context: the old cache.
				e, err := tn.perfM.Place(perf.Slice{Board: c.board, Profile: c.profile})
				if err != nil {
					t.Fatal(err)
				}
				if e.KVCapacityTokens() <= c.ev.fit.MaxTokens {
					t.Errorf("%s: q4k: perf's engine at the model's context holds %d tokens, the plan's vLLM %d: the case no longer tells the two apart",
						name, e.KVCapacityTokens(), c.ev.fit.MaxTokens)
				}
			}
		}
		s, err := sim.New(sim.Input{Pool: pool, Plan: pl}, sim.Config{Duration: 10 * time.Second, Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := s.Run(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(res.Report.Replicas) != len(want) {
			t.Errorf("%s: simulated %d replicas, planned %d", name, len(res.Report.Replicas), len(want))
		}
		for _, r := range res.Report.Replicas {
			w, ok := want[r.Name]
			if !ok || r.KVCapacityTokens != w || w <= 0 {
				t.Errorf("%s: replica %s on %s runs with a KV cache of %d tokens in simulation, planned %d",
					name, r.Name, r.Domain, r.KVCapacityTokens, w)
			}
		}
	}
	for _, k := range []v1.SliceKind{v1.SliceMIG, v1.SliceExclusive, v1.SliceMPS, v1.SliceTimeSlice, v1.SliceMIGMPS} {
		if !kinds[string(k)] {
			t.Errorf("no planned replica on a %s slice: the test does not cover it (planned on %v)", k, kinds)
		}
	}
}
