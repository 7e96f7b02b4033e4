package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestGoldenReport: the small pool and plan with seed 42 for 2 simulated minutes must give the
// same JSON report, byte for byte, as testdata/golden-small.json (go test -update rewrites it).
func TestGoldenReport(t *testing.T) {
	_, res := small(t, 2*time.Minute, 42)
	got, err := json.MarshalIndent(res.Report, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "golden-small.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("report differs from %s (go test -update rewrites it):\n%s", path, got)
	}
}

// TestDeterminism: the same input and seed give the same report; another seed another one.
func TestDeterminism(t *testing.T) {
	_, a := small(t, time.Minute, 7)
	_, b := small(t, time.Minute, 7)
	_, c := small(t, time.Minute, 8)
	ja, _ := json.Marshal(a.Report)
	jb, _ := json.Marshal(b.Report)
	jc, _ := json.Marshal(c.Report)
	if !bytes.Equal(ja, jb) {
		t.Error("two runs with seed 7 differ")
	}
	if bytes.Equal(ja, jc) {
		t.Error("seeds 7 and 8 give the same report: the seed is not used")
	}
}
