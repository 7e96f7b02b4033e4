package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/fair"
)

func decodeFairOut(t *testing.T, stdout string) fairOut {
	t.Helper()
	var res struct {
		Steps []struct {
			Tenants   []fair.TenantState `json:"tenants"`
			Decisions []struct {
				Kind   string `json:"kind"`
				Tenant string `json:"tenant"`
				Reason string `json:"reason"`
			} `json:"decisions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("decode output: %v\n%s", err, stdout)
	}
	var out fairOut
	for _, st := range res.Steps {
		so := fairStepOut{Tenants: st.Tenants}
		for _, d := range st.Decisions {
			so.Decisions = append(so.Decisions, fair.Item{Tenant: d.Tenant, By: d.Kind + "/" + d.Reason})
		}
		out.Steps = append(out.Steps, so)
	}
	return out
}

// has reports whether some decision of the run is kind/reason.
func has(res fairOut, kindReason string) bool {
	for _, st := range res.Steps {
		for _, d := range st.Decisions {
			if d.By == kindReason {
				return true
			}
		}
	}
	return false
}

func TestFairExamples(t *testing.T) {
	cases := []struct {
		file string
		want []string // kind/reason pairs the run must contain
	}{
		{"drf-paper.yaml", []string{"grant/FairShare", "release/DemandDropped", "queue/PoolFull", "preempt/OverShare"}},
		{"hierarchical-gpu.yaml", []string{"grant/Reservation", "preempt/CapacityLost", "queue/OverCap"}},
		{"burst-preemption.yaml", []string{"lease/Burst", "reclaim/NeededBySteady", "preempt/OverShare", "reclaim/LeaseExpired"}},
		{"usage-history.yaml", []string{"preempt/BelowFloor", "preempt/OverShare"}},
	}
	for _, c := range cases {
		stdout, stderr, code := runCmd(t, "fair", filepath.Join("..", "..", "examples", "fair", c.file), "-o", "json")
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", c.file, code, stderr)
		}
		res := decodeFairOut(t, stdout)
		for _, w := range c.want {
			if !has(res, w) {
				t.Errorf("%s: no %s decision", c.file, w)
			}
		}
		if c.file == "usage-history.yaml" {
			// research used the pool for an hour (history 11·½): serving gets the odd GPU.
			got := map[string]fair.TenantState{}
			for _, s := range res.Steps[1].Tenants {
				got[s.Name] = s
			}
			if got["research"].Steady != 5 || got["serving"].Steady != 6 || math.Abs(got["research"].History-5.5) > 1e-12 {
				t.Errorf("usage history: %+v", got)
			}
		}
		if c.file == "drf-paper.yaml" {
			// §4.1: A 3 tasks, B 2 tasks, dominant shares 2/3 each.
			got := map[string]fair.TenantState{}
			for _, s := range res.Steps[0].Tenants {
				got[s.Name] = s
			}
			if got["A"].Tasks != 3 || got["B"].Tasks != 2 || math.Abs(got["A"].DominantShare-2.0/3) > 1e-12 ||
				math.Abs(got["B"].DominantShare-2.0/3) > 1e-12 {
				t.Errorf("DRF paper: %+v", got)
			}
			// The last step: B wants 10 again and takes A's newest task back, (3, 2) as at first.
			last := map[string]fair.TenantState{}
			for _, s := range res.Steps[len(res.Steps)-1].Tenants {
				last[s.Name] = s
			}
			if last["A"].Steady != 3 || last["B"].Steady != 2 {
				t.Errorf("DRF paper, after B's demand returns: %+v", last)
			}
		}
	}
}

func TestFairTableAndYAML(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "fair", "burst-preemption.yaml")
	stdout, stderr, code := runCmd(t, "fair", path)
	if code != exitOK || !strings.Contains(stdout, "DOMINANT SHARE") || !strings.Contains(stdout, "preempt batch#") ||
		!strings.Contains(stdout, "retry at ") {
		t.Errorf("table: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "HISTORY") {
		t.Errorf("table without usage history has a HISTORY column")
	}
	stdout, _, code = runCmd(t, "fair", filepath.Join("..", "..", "examples", "fair", "usage-history.yaml"))
	if code != exitOK || !strings.Contains(stdout, "HISTORY") || !strings.Contains(stdout, "5.5000") {
		t.Errorf("table with usage history: exit %d\n%s", code, stdout)
	}
	stdout, _, code = runCmd(t, "fair", path, "-o", "yaml")
	var v map[string]any
	if code != exitOK || yaml.Unmarshal([]byte(stdout), &v) != nil || v["steps"] == nil {
		t.Errorf("yaml: exit %d\n%s", code, stdout)
	}
}

func TestFairBadInput(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown fields", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}, demand: 1, colour: red}]\nsteps: [{at: 1s, demnd: {a: 2}}]\n",
			[]string{"tenants[0].colour: unknown field", "steps[0].demnd: unknown field"}},
		{"wrong type", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}, demand: many}]\n", []string{"demand"}},
		{"negative half-life", "capacity: {cpu: 1}\nhistoryHalfLife: -1m\ntenants: [{name: a, task: {cpu: 1}, demand: 1}]\n",
			[]string{"historyHalfLife: -1m0s is negative"}},
		{"task and slice", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}, slice: H100-SXM5-80GB/3g.40gb}]\n",
			[]string{"tenants[0]: give task or slice, not both"}},
		{"no shape", "capacity: {cpu: 1}\ntenants: [{name: a, demand: 1}]\n", []string{"tenants[0]: task or slice is required"}},
		{"bad slice", "capacity: {cpu: 1}\ntenants: [{name: a, slice: H100-SXM5-80GB/9g.99gb}]\n", []string{"tenants[0].slice", "9g.99gb"}},
		{"bad duration", "capacity: {cpu: 1}\nleaseDuration: soon\ntenants: [{name: a, task: {cpu: 1}, minRuntime: 5 minutes}]\n",
			[]string{"leaseDuration", "tenants[0].minRuntime"}},
		{"field validation", "capacity: {cpu: 1}\nleaseDuration: soon\ntenants: [{name: a, task: {gpu: 1}, demand: -1}]\n",
			[]string{`leaseDuration: "soon" is not a duration`, "tenants[0].demand: -1 is negative"}},
		{"allocator validation", "capacity: {cpu: 1}\ntenants: [{name: a, task: {gpu: 1}, demand: 1, reservation: 2}]\n",
			[]string{`tenant "a"`, "task.gpu: resource is not in the pool capacity"}},
		{"bounds and non-finite numbers", "capacity: {cpu: .inf}\nburstPoolPercent: .nan\ngroups: [{path: g, weight: 5e-324}]\n" +
			"tenants: [{name: a, task: {cpu: 1}, reservation: 1e13, demand: 1e16}, {name: b, weight: .nan, task: {cpu: -1}}]\n",
			[]string{"capacity.cpu: +Inf is not a finite number", "burstPoolPercent: NaN is outside", "groups[0].weight: 5e-324 is outside",
				"tenants[0].demand: 10000000000000000 is above 2^53", "tenants[1].weight: NaN is not a finite number", "tenants[1].task.cpu: -1 is negative"}},
		{"reservation beyond the limits", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}, reservation: 1e13, demand: 1e13}]\n",
			[]string{"tenants[0].demand: 10000000000000 exceeds the limit of 1048576 (limits.maxDemand)",
				"tenants[0].reservation: 10000000000000 exceeds the limit"}},
		{"demand beyond the limits in a step", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}}]\nsteps: [{at: 1s, demand: {a: 2e9}}]\n",
			[]string{"steps[0].demand.a: 2000000000 exceeds the limit of 1048576 (limits.maxDemand)"}},
		{"too many tenants", "capacity: {cpu: 1}\nlimits: {maxTenants: 1}\ntenants: [{name: a, task: {cpu: 1}}, {name: b, task: {cpu: 1}}]\n",
			[]string{"tenants: 2 tenants exceed the limit of 1 (limits.maxTenants)"}},
		{"names kept as written", "capacity: {cpu: 1}\ntenants: [{name: yes, task: {cpu: 1}}, {name: y, task: {cpu: 1}}]\nsteps: [{at: 1s, demand: {007: 1}}]\n",
			[]string{`tenant "007": not found`}},
		{"unknown tenant in a step", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}}]\nsteps: [{at: 1s, demand: {b: 1}}]\n",
			[]string{"steps[0]", `tenant "b": not found`}},
		{"steps out of order", "capacity: {cpu: 1}\ntenants: [{name: a, task: {cpu: 1}}]\nsteps: [{at: 2s}, {at: 1s}]\n",
			[]string{"steps[1].at", "before the previous step"}},
		{"bad slices", "slices: {NoSuchBoard/1g.10gb: 2}\ntenants: []\n", []string{"slices", "NoSuchBoard"}},
	}
	for _, c := range cases {
		stdout, stderr, code := runCmd(t, "fair", writeTemp(t, "s.yaml", c.yaml))
		if code != exitInvalid || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q", c.name, code, stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: error %q lacks %q", c.name, stderr, w)
			}
		}
	}
	if _, _, code := runCmd(t, "fair", filepath.Join(t.TempDir(), "missing.yaml")); code != exitInvalid {
		t.Errorf("missing file: exit %d", code)
	}
	if _, _, code := runCmd(t, "fair", writeTemp(t, "s.yaml", "capacity: {cpu: 1}\ntenants: []\n"), "-o", "xml"); code != exitInvalid {
		t.Errorf("bad -o: exit %d", code)
	}
}

func FuzzFairScenario(f *testing.F) {
	f.Add([]byte("capacity: {cpu: 9, mem: 18}\ntenants: [{name: A, task: {cpu: 1, mem: 4}, demand: 5}, {name: B, task: {cpu: 3, mem: 1}, demand: 5}]\nsteps: [{at: 1s, demand: {B: 1}}]\n"))
	f.Add([]byte("capacity: {gpu: 4}\nburstPoolPercent: 25\nleaseDuration: 1m\ntenants: [{name: a, task: {gpu: 1}, demand: 9, cap: 2}]\nsteps: [{at: 2m, recompute: true}]\n"))
	f.Add([]byte("slices: {H100-SXM5-80GB/1g.10gb: 7}\ntenants: [{name: a, slice: H100-SXM5-80GB/1g.10gb, demand: 3}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc fairScenario
		if len(data) > 4096 || yaml.UnmarshalStrict(data, &sc) != nil || !smallScenario(sc) {
			return
		}
		_, _ = runFairScenario(context.Background(), data) // any input: an error or a result, never a panic
	})
}

// smallScenario keeps fuzzing fast: few tasks to hand out.
func smallScenario(sc fairScenario) bool {
	var n int64
	for _, t := range sc.Tenants {
		n += max(t.Demand, 0)
	}
	for _, st := range sc.Steps {
		for _, d := range st.Demand {
			n += max(d, 0)
		}
		for _, t := range st.Add {
			n += max(t.Demand, 0)
		}
	}
	return n <= 200 && len(sc.Steps) <= 20
}

// A step with recompute: true reports its own decisions (here: the lease that reached its expiry
// at 4m is renewed in place) and then the reconciliation's; before, the first were lost.
func TestFairRecomputeStepKeepsItsOwnDecisions(t *testing.T) {
	path := writeTemp(t, "scenario.yaml", `start: 2025-01-01T00:00:00Z        # optional
capacity: {cpu: 9, mem: 18}        # resources by name
slices: {H100-SXM5-80GB/3g.40gb: 8} # and/or slices of a board (each adds its sm, hbm, bandwidth)
burstPoolPercent: 20               # optional; needs leaseDuration
leaseDuration: 2m
groups: [{path: research, weight: 2}]
tenants:
  - {name: a, path: research, weight: 1, task: {cpu: 1, mem: 4}, demand: 5,
     reservation: 1, cap: 4, minRuntime: 30s}
  - {name: b, slice: H100-SXM5-80GB/3g.40gb, demand: 2}
steps:
  - {at: 30s, demand: {a: 7}}
  - {at: 1m, add: [{name: c, task: {cpu: 1}, demand: 1}], remove: [b]}
  - {at: 2m, capacity: {cpu: 6, mem: 18}}   # replaces the capacity (or slices:)
  - {at: 5m, recompute: true}
`)
	out, errs, code := runCmd(t, "fair", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	last := out[strings.LastIndex(out, "step 4 at +5m0s"):]
	for _, want := range []string{"LeaseRenewed", "PoolFull"} {
		if !strings.Contains(last, want) {
			t.Errorf("the recompute step lacks a %s decision:\n%s", want, last)
		}
	}
}

// A step that changes demand and recomputes lists each waiting tenant's queue item once: the
// reconciliation's, with what it waits for after its moves. Pool 4, a and b hold 2 each; a asks
// 5 at 1m and waits for 3 (PoolFull); at 2m b asks 3 and c (demand 1) arrives and takes one of
// b's two (equal shares, the larger name gives way), so b waits for 2 and c for none. Before, the
// step's own queue items came first and the reconciliation's again after them.
func TestFairRecomputeStepQueuesEachTenantOnce(t *testing.T) {
	path := writeTemp(t, "scenario.yaml", `capacity: {gpu: 4}
tenants:
  - {name: a, task: {gpu: 1}, demand: 2}
  - {name: b, task: {gpu: 1}, demand: 2}
steps:
  - {at: 1m, demand: {a: 5}, recompute: true}
  - {at: 2m, demand: {b: 3}, add: [{name: c, task: {gpu: 1}, demand: 1}], recompute: true}
`)
	out, errs, code := runCmd(t, "fair", path, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Steps []struct {
			Decisions []struct {
				Kind   string `json:"kind"`
				Tenant string `json:"tenant"`
				Count  int    `json:"count"`
			} `json:"decisions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Steps) != 3 {
		t.Fatalf("decode output (%d steps): %v\n%s", len(res.Steps), err, out)
	}
	for i, want := range [][]string{{"a x3"}, {"a x3", "b x2"}} {
		var got []string
		for _, it := range res.Steps[i+1].Decisions {
			if it.Kind == "queue" {
				got = append(got, fmt.Sprintf("%s x%d", it.Tenant, it.Count))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("step %d queue items %v, want %v", i+1, got, want)
		}
	}
}
