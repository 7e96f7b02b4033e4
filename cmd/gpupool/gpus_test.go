package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
)

func TestGpusTable(t *testing.T) {
	out, stderr, code := runCmd(t, "gpus")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "BF16 TFLOPS") {
		t.Errorf("header %q", lines[0])
	}
	// One row per board, sorted, plus the footnote.
	for _, b := range gpu.Boards() {
		if !strings.Contains(out, "\n"+b.Name+" ") {
			t.Errorf("no row for %s", b.Name)
		}
	}
	h100 := gpusRow(t, out, "H100-SXM5-80GB")
	// 989.5 BF16 is backed (Baseten), 1979 FP8 is a datasheet number: marked.
	if want := []string{"H100-SXM5-80GB", "hopper", "79.6", "GiB?", "132", "3350", "GB/s", "700", "W?", "989.5", "1979?", "7"}; !slices.Equal(h100, want) {
		t.Errorf("H100 row %q, want %q", h100, want)
	}
	if gb200 := gpusRow(t, out, "GB200-186GB"); gb200[4] != "152?" { // SMs estimated
		t.Errorf("GB200 SMs cell %q, want 152?", gb200[4])
	}
	// An SM count the catalog lacks prints as "?". Every board has one now, so take GB200's away.
	b, err := gpu.Lookup("GB200-186GB")
	if err != nil {
		t.Fatal(err)
	}
	sms := b.SMs
	b.SMs = 0
	out, _, _ = runCmd(t, "gpus")
	b.SMs = sms
	if gb200 := gpusRow(t, out, "GB200-186GB"); gb200[4] != "?" {
		t.Errorf("GB200 SMs cell with no SM count %q, want ?", gb200[4])
	}
	if !strings.Contains(out, "? = unverified") {
		t.Error("no footnote for ?")
	}
}

// gpusRow returns the whitespace-split row that starts with name.
func gpusRow(t *testing.T, out, name string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row %s in\n%s", name, out)
	return nil
}

func TestGpusStructured(t *testing.T) {
	out, _, code := runCmd(t, "gpus", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var boards []gpu.Board
	if err := json.Unmarshal([]byte(out), &boards); err != nil {
		t.Fatal(err)
	}
	if len(boards) != len(gpu.Boards()) {
		t.Fatalf("%d boards in JSON", len(boards))
	}
	for _, b := range boards {
		if b.Name == "H100-SXM5-80GB" && (!slices.Contains(b.Unverified, "fp8Tflops") || len(b.Profiles) != 7) {
			t.Errorf("H100 JSON: unverified %v, %d profiles", b.Unverified, len(b.Profiles))
		}
	}
	out, _, code = runCmd(t, "gpus", "H200", "-o", "yaml")
	for _, want := range []string{"name: H200-141GB", "- NVIDIA H200", "name: 3g.71gb", "memoryMiB: 71168", "unverified:"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("gpus H200 -o yaml (exit %d) lacks %q", code, want)
		}
	}
}

func TestGpusBoard(t *testing.T) {
	out, _, code := runCmd(t, "gpus", "nvidia h100 pcie")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Board           H100-PCIe-80GB", "0x233110DE", "81559 MiB (79.6 GiB)\n", "350 W\n", "756 TFLOPS?"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// On PCIe 1g.20gb has 14 SMs (26 on SXM5).
	if row := gpusRow(t, out, "1g.20gb"); !slices.Equal(row, []string{"1g.20gb", "15", "1/7", "2/8", "20096", "14", "4", "0,2,4,6", "1/1/0/0/1"}) {
		t.Errorf("1g.20gb row %q", row)
	}
	out, _, _ = runCmd(t, "gpus", "B200")
	if row := gpusRow(t, out, "3g.90gb"); row[4] != "89344?" || row[5] != "?" { // estimate 90 x 0.97 GiB; SMs unknown
		t.Errorf("B200 3g.90gb row %q", row)
	}
	out, _, _ = runCmd(t, "gpus", "A30")
	if row := gpusRow(t, out, "1g.6gb"); row[1] != "14?" || row[7] != "0,1,2,3?" {
		t.Errorf("A30 1g.6gb row %q: id and starts must be marked", row)
	}
}

func TestGpusErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gpus", "H300"}, `lookup board "H300": unknown board (valid: A100-PCIe-40GB, A100-PCIe-80GB, A100-SXM4-40GB`},
		{[]string{"gpus", "-o", "xml"}, `unknown output format "xml"`},
		{[]string{"gpus", "H100", "A100"}, "accepts at most 1 arg"},
	} {
		_, stderr, code := runCmd(t, tc.args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
