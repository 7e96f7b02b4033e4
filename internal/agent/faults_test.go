package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

// TestGateUnderNVMLFaults injects an error, then a hang (bounded by the driver's timeout), at the
// first occurrence of every NVML call a change makes, and runs the whole change through the
// executor: every run ends with the GPU in its old or new layout, nothing half-made, the node
// uncordoned, or cordoned in phase failed with the reason on record.
func TestGateUnderNVMLFaults(t *testing.T) {
	from, _ := gpu.ParseLayout("4g.40gb@0 3g.40gb@4")
	to, _ := gpu.ParseLayout("2g.20gb@0 2g.20gb@2 3g.40gb@4")
	var mu sync.Mutex
	calls := map[string]bool{}
	change(t, from, to, func(c string) nvml.Fault { mu.Lock(); calls[c] = true; mu.Unlock(); return nvml.Fault{} })
	names := make([]string, 0, len(calls))
	for c := range calls {
		names = append(names, c)
	}
	sort.Strings(names)
	if len(names) < 8 {
		t.Fatalf("a change made only %d distinct NVML calls: %v", len(names), names)
	}
	outcomes := map[string]int{}
	for _, call := range names {
		for _, f := range []nvml.Fault{{Err: true}, {Hang: true}} {
			var n int
			var fmu sync.Mutex
			st, got, partial := change(t, from, to, func(c string) nvml.Fault {
				fmu.Lock()
				defer fmu.Unlock()
				if c == call {
					n++
					if n == 1 {
						return f
					}
				}
				return nvml.Fault{}
			})
			name := fmt.Sprintf("%s hang=%t", call, f.Hang)
			old, neu := from.Sorted(), to.Sorted()
			switch {
			case len(partial) > 0:
				t.Errorf("%s: half-made instances left: %q", name, partial)
			case st.Phase() == gate.PhaseFailed:
				if !st.Cordoned || st.CordonReason == "" {
					t.Errorf("%s: failed without a cordon reason", name)
				}
			case st.Phase() != gate.PhaseIdle || st.Cordoned:
				t.Errorf("%s: ends in phase %s cordoned %t", name, st.Phase(), st.Cordoned)
			case !slices.Equal(got, old) && !slices.Equal(got, neu):
				t.Errorf("%s: GPU at %q, neither old nor new", name, got)
			}
			switch {
			case slices.Equal(got, neu):
				outcomes["new"]++
			case st.Counts[gate.ReasonRolledBack] > 0:
				outcomes["rolled back"]++
			default:
				outcomes["untouched"]++
			}
		}
	}
	t.Logf("%d calls × {error, hang}: %v", len(names), outcomes)
	if outcomes["rolled back"] == 0 {
		t.Fatal("no injected fault caused a rollback")
	}
}

// change lays out from on a fresh fake GPU and runs one change to to through the executor.
func change(t *testing.T, from, to gpu.Layout, faults func(string) nvml.Fault) (gate.State, gpu.Layout, gpu.Layout) {
	t.Helper()
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	u, board := fake.UUIDs()[0], fake.Board().Name
	clean := nvml.New(fake.Interface(), nvml.Options{})
	for _, in := range fake.Board().CreationOrder(from) {
		if err := clean.Create(u, board, in); err != nil {
			t.Fatal(err)
		}
	}
	lib := nvml.New(fake.Interface(), nvml.Options{Timeout: 20 * time.Millisecond, Faults: faults})
	dir := t.TempDir()
	j, rep, err := OpenJournal(filepath.Join(dir, "j"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	x, err := NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: lib, Node: &LocalNode{Path: filepath.Join(dir, "c")}, Smoke: okSmoker{}})
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := clean.Observe(u, board)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Submit(ctx, gate.Desired{GPU: u, Board: board, Layout: to, Current: cur}); err != nil {
		t.Fatal(err)
	}
	got, partial, err := clean.Observe(u, board)
	if err != nil {
		t.Fatal(err)
	}
	return x.State(), got, partial
}
