package migparted

import (
	"flag"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestDefaultFileOnCatalog is the acceptance test: every one of NVIDIA's 81 configs validates on
// the boards it applies to in the real catalog.
func TestDefaultFileOnCatalog(t *testing.T) {
	r := Validate(decodeDefault(t), Options{})
	if err := r.Err(); err != nil {
		t.Fatalf("default file does not validate:\n%v", err)
	}
	if r.Summary.Configs != 81 {
		t.Fatalf("configs = %d, want 81", r.Summary.Configs)
	}
	// Every config passes on at least one board, and every profile the file names exists on some
	// board: the 189 GB GB200 names (3g.95gb, 4g.95gb, 7g.189gb) are on GB200-189GB.
	var notChecked []string
	for _, c := range r.Configs {
		if configStatus(c) != "ok" {
			notChecked = append(notChecked, c.Name)
		}
		for _, f := range c.Findings {
			if strings.Contains(f.Message, "exists on no MIG board") {
				t.Errorf("%s: %s", c.Name, f.Message)
			}
		}
	}
	if len(notChecked) > 0 {
		t.Errorf("configs not ok on any board: %v", notChecked)
	}

	layouts := map[string]string{} // "config[entry] board" -> layout
	for _, c := range r.Configs {
		for _, ch := range c.Checks {
			layouts[c.Name+"["+itoa(ch.Entry)+"] "+ch.Board] = FormatLayout(ch.Layout)
		}
	}
	for key, want := range map[string]string{
		// 2g@0 + 1g@2 + 1g@3 + 3g@4: 2+1+1+3 = 7 compute slices, memory slices 0-7 all used.
		"all-balanced[8] H100-SXM5-80GB": "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4",
		"all-balanced[9] A100-SXM4-40GB": "2g.10gb@0 1g.5gb@2 1g.5gb@3 3g.20gb@4",
		// A30 has 4 memory slices: 2g@0 + 1g@2 + 1g@3.
		"all-balanced[10] A30-24GB": "2g.12gb@0 1g.6gb@2 1g.6gb@3",
		// all-1g.10gb's two branches: 7 one-slice instances on 80GB parts, 4 two-slice ones on A100-40GB.
		"all-1g.10gb[0] H100-SXM5-80GB": "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6",
		"all-1g.10gb[1] A100-SXM4-40GB": "1g.10gb@0 1g.10gb@2 1g.10gb@4 1g.10gb@6",
		"all-3g.40gb[0] H100-SXM5-80GB": "3g.40gb@0 3g.40gb@4",
		// The GB200 189 GB configs: 3g at 0 and 4 (4 memory slices each), 4g and 7g at 0.
		"all-3g.95gb[0] GB200-189GB":  "3g.95gb@0 3g.95gb@4",
		"all-4g.95gb[0] GB200-189GB":  "4g.95gb@0",
		"all-7g.189gb[0] GB200-189GB": "7g.189gb@0",
	} {
		if got, ok := layouts[key]; !ok || got != want {
			t.Errorf("%s: layout %q (checked: %v), want %q", key, got, ok, want)
		}
	}
	// Filter-less 3g.40gb is not checked on A100-40GB, where the profile does not exist.
	if _, ok := layouts["all-3g.40gb[0] A100-SXM4-40GB"]; ok {
		t.Error("all-3g.40gb was checked on A100-SXM4-40GB, which has no 3g.40gb")
	}

	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/config-default.report.golden", b.String())
}

// TestDefaultFileOnOneBoard answers "which configs may a node with this board select?".
func TestDefaultFileOnOneBoard(t *testing.T) {
	board, err := gpu.Lookup("A100-SXM4-40GB")
	if err != nil {
		t.Fatal(err)
	}
	r := Validate(decodeDefault(t), Options{Board: board})
	var usable []string
	for _, c := range r.Configs {
		if configStatus(c) == "ok" {
			usable = append(usable, c.Name)
		}
	}
	want := []string{"all-disabled", "all-enabled", "all-1g.5gb", "all-1g.5gb.me", "all-2g.10gb", "all-3g.20gb",
		"all-4g.20gb", "all-7g.40gb", "all-1g.10gb", "all-balanced"}
	if !reflect.DeepEqual(usable, want) {
		t.Errorf("configs usable on A100-SXM4-40GB:\n got %v\nwant %v", usable, want)
	}
	if r.OK() {
		t.Fatal("report OK, want errors for the configs of other boards")
	}
	c := configReport(t, r, "all-3g.40gb")
	if len(c.Checks) != 1 || c.Checks[0].OK() || !strings.HasPrefix(c.Checks[0].Findings[0].Message, `profile "3g.40gb" does not exist on A100-SXM4-40GB (valid: `) {
		t.Errorf("all-3g.40gb on A100-SXM4-40GB = %+v, want a missing-profile error", c.Checks)
	}
	if c.Checks[0].Findings[0].Profile != "3g.40gb" {
		t.Errorf("finding profile = %q, want 3g.40gb", c.Checks[0].Findings[0].Profile)
	}
	// all-1g.35gb has filters for H200 and GB300 only: nothing to do on an A100.
	if c := configReport(t, r, "all-1g.35gb"); len(c.Checks) != 0 || !c.OK() || len(c.Findings) != 1 {
		t.Errorf("all-1g.35gb on A100-SXM4-40GB = %+v, want no checks and one warning", c)
	}
}

func configReport(t *testing.T, r Report, name string) ConfigReport {
	t.Helper()
	for _, c := range r.Configs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no config %q in report", name)
	return ConfigReport{}
}

func itoa(i int) string { return strconv.Itoa(i) }

// golden compares got with the file at path, or rewrites the file with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the report (run go test -update and review the diff):\n%s", path, got)
	}
}

func BenchmarkDecodeDefault(b *testing.B) {
	data := readDefault(b)
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateDefault(b *testing.B) {
	cfg := decodeDefault(b)
	for b.Loop() {
		Validate(cfg, Options{})
	}
}
