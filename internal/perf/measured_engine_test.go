package perf

import (
	"os"
	"testing"
	"time"
)

func parvaTable(t *testing.T, name string) *Measured {
	t.Helper()
	f, err := os.Open("testdata/parvagpu/" + name + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ParseParvaGPU(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A measured-only engine takes the table's latency for the step's batch and process count, on
// its instance size, for any model name; between two measured batches it interpolates, and it
// refuses the token-level estimates it has no data for.
func TestMeasuredEngine(t *testing.T) {
	tab := parvaTable(t, "resnet50")
	a := a100(t)
	p3 := profile(t, a, "3g.40gb")
	e, err := NewMeasuredEngine(tab, Slice{Board: a, Profile: p3}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !e.MeasuredOnly() || e.Model().Name() != "resnet50" || !e.FitsWeights() || e.MaxSeqs() < 1 {
		t.Fatalf("engine %s: measured-only %v, fits %v, max seqs %d", e.Model().Name(), e.MeasuredOnly(), e.FitsWeights(), e.MaxSeqs())
	}
	for _, pt := range tab.Points() {
		if pt.GPCs != 3 || !pt.Runnable || pt.Procs > 2 {
			continue
		}
		b := Batch{PrefillTokens: int(pt.Batch), PrefillSeqs: int(pt.Batch)}
		if got := e.StepTime(b, Load{Active: pt.Procs - 1}); absDur(got-pt.Latency) > time.Microsecond {
			t.Errorf("batch %v with %d processes: %v, table %v", pt.Batch, pt.Procs, got, pt.Latency)
		}
	}
	// Halfway between two measured batches, halfway between their latencies.
	lo, err := tab.At(3, 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	hi, err := tab.At(3, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	mid := e.StepTime(Batch{DecodeSeqs: 12}, Load{})
	want := (lo.Latency + hi.Latency) / 2
	if absDur(mid-want) > 2*time.Microsecond {
		t.Errorf("batch 12: %v, want %v between %v and %v", mid, want, lo.Latency, hi.Latency)
	}
	if j := e.StepEnergy(Batch{DecodeSeqs: 8}, Load{}); !(j > 0) {
		t.Errorf("step energy %v", j)
	}
	if _, err := e.Estimate(Workload{InputTokens: 1, OutputTokens: 1}, Load{}); err == nil {
		t.Error("Estimate on a measured-only engine should fail")
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
