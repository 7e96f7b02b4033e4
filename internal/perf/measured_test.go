package perf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readParva(t testing.TB, name string) *Measured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "parvagpu", name+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseParvaGPU(name, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseAllParvaGPUFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "parvagpu", "*.csv"))
	if err != nil || len(files) != 11 {
		t.Fatalf("want the 11 ParvaGPU profiles, found %d (%v)", len(files), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".csv")
		m := readParva(t, name)
		// 5 instance sizes × 9 batches × 5 process counts = 225 rows after the header.
		if n := len(m.Points()); n != 225 {
			t.Errorf("%s: %d rows, want 225", name, n)
		}
	}
}

func TestMeasuredAt(t *testing.T) {
	m := readParva(t, "bert")
	for _, c := range []struct {
		gpcs, procs int
		batch       float64
		tput        float64
		lat         time.Duration
	}{
		{1, 1, 1, 74.408, 13 * time.Millisecond}, // bert.csv line 2: 1,1,1,74.408,0.013
		{1, 1, 2, 85.926, 23 * time.Millisecond}, // line 7
		// Between batch 2 (85.926/s, 23 ms) and batch 4 (95.206/s, 42 ms): half way.
		{1, 1, 3, (85.926 + 95.206) / 2, 32500 * time.Microsecond},
		// Between batch 4 and 8 (101.907/s, 79 ms), a quarter of the way: 95.206 + 0.25 × 6.701.
		{1, 1, 5, 95.206 + 0.25*(101.907-95.206), 42*time.Millisecond + 9250*time.Microsecond},
	} {
		p, err := m.At(c.gpcs, c.procs, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "throughput", p.Throughput, c.tput, 1e-9)
		if d := p.Latency - c.lat; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("At(%d,%d,%v) latency %v, want %v", c.gpcs, c.procs, c.batch, p.Latency, c.lat)
		}
	}
}

func TestMeasuredAtErrors(t *testing.T) {
	m := readParva(t, "bert")
	for _, c := range []struct {
		gpcs, procs int
		batch       float64
		want        string
	}{
		{5, 1, 8, "no rows for a 5-GPC instance with 1 processes"},
		{1, 1, 0.5, "outside the measured range [1, 256]"},
		{1, 1, 300, "outside the measured range"},
		{1, 5, 1, "not runnable"},         // bert.csv line 6: 1,1,5,0,0
		{1, 4, 192, "neighbouring batch"}, // batch 256 with 4 processes is 0,0
	} {
		_, err := m.At(c.gpcs, c.procs, c.batch)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bert") {
			t.Errorf("At(%d,%d,%v): error %v, want it to name bert and say %q", c.gpcs, c.procs, c.batch, err, c.want)
		}
	}
	if _, err := m.At(1, 5, 1); !errors.Is(err, errNotRunnable) {
		t.Errorf("not-runnable error should wrap errNotRunnable: %v", err)
	}
}

func TestMeasuredBest(t *testing.T) {
	m := readParva(t, "bert")
	// With a 50 ms latency bound, 1 GPC, 1 process: batch 4 (42 ms, 95.206/s) is the best;
	// batch 8 takes 79 ms.
	p, err := m.Best(1, 1, 50*time.Millisecond)
	if err != nil || p.Batch != 4 {
		t.Errorf("Best = %+v, %v; want batch 4", p, err)
	}
	if _, err := m.Best(1, 1, time.Millisecond); err == nil {
		t.Error("Best within 1 ms: no error")
	}
}

func TestParseParvaGPUErrors(t *testing.T) {
	const head = "Mig instance,Batch size,Workload Number,Throughput,Latency\n"
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", []string{"line 1", "header"}},
		{"wrong header", "a,b,c,d,e\n1,1,1,1,1\n", []string{"line 1", `column 1 is "a"`}},
		{"short header", "Mig instance,Batch size\n", []string{"header has 2 columns"}},
		{"no rows", head, []string{"no rows"}},
		{"bad ints", head + "x,1,1,1,1\n1,0,1,1,1\n", []string{"line 2: field mig instance", "line 3: field batch size"}},
		{"bad floats", head + "1,1,1,NaN,1\n1,2,1,1,-3\n1,4,1,1,Inf\n", []string{"line 2", "line 3", "line 4"}},
		{"half zero", head + "1,1,1,0,0.5\n", []string{"line 2", "both must be positive"}},
		{"duplicate", head + "1,1,1,2,0.5\n1,1,1,3,0.6\n", []string{"line 3: duplicate of line 2"}},
		{"field count", head + "1,1,1,2\n", []string{"line 2: 4 fields"}},
		{"bare quote", head + "1,1\"x,1,2,3\n", []string{"line 2"}},
	} {
		_, err := ParseParvaGPU("t", strings.NewReader(c.in))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	// A BOM, CRLF line ends and spaces are accepted.
	in := "\ufeffMig instance, Batch size ,Workload Number,Throughput,Latency\r\n 1, 2 ,1,3.5,0.25\r\n"
	if _, err := ParseParvaGPU("t", strings.NewReader(in)); err != nil {
		t.Errorf("BOM/CRLF/spaces: %v", err)
	}
}

func FuzzParseParvaGPU(f *testing.F) {
	for _, name := range []string{"bert", "vgg19"} {
		b, err := os.ReadFile(filepath.Join("testdata", "parvagpu", name+".csv"))
		if err != nil {
			f.Fatal(err)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		f.Add(bytes.Join(lines[:min(12, len(lines))], nil)) // short seeds keep minimization fast
	}
	f.Add([]byte("Mig instance,Batch size,Workload Number,Throughput,Latency\n1,1,1,0,0\n"))
	f.Add([]byte("Mig instance,Batch size,Workload Number,Throughput,Latency\n1,\"2\",1,1e308,1e-300\n"))
	f.Add([]byte("a,b\n\"unterminated\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseParvaGPU("fuzz", bytes.NewReader(in))
		if err != nil {
			if m != nil {
				t.Fatal("table and error both returned")
			}
			if !strings.Contains(err.Error(), "line ") && !strings.Contains(err.Error(), "no rows") {
				t.Fatalf("error without a line number: %v", err)
			}
			return
		}
		for _, p := range m.Points() {
			if p.GPCs < 1 || p.Procs < 1 || p.Batch < 1 || p.Throughput < 0 || p.Latency < 0 || p.Runnable != (p.Throughput > 0) {
				t.Fatalf("invalid point accepted: %+v", p)
			}
			if _, err := m.At(p.GPCs, p.Procs, p.Batch); (err == nil) != p.Runnable {
				t.Fatalf("At(%+v): %v", p, err)
			}
		}
	})
}

func TestEngineWithMeasured(t *testing.T) {
	// A measured table (here ParvaGPU's bert profile, read as step latencies) wins over the
	// model for decode-only steps it covers; prefill and uncovered batches use the model.
	m := readParva(t, "bert")
	b := a100Literal()
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: b, Profile: &b.Profiles[3], Mode: MPS})
	me, err := e.WithMeasured(m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.At(3, 2, 8)
	if got := me.StepTime(Batch{DecodeSeqs: 8, KVTokens: 4096}, Load{Active: 1}); got != want.Latency {
		t.Errorf("measured step %v, want the table's %v", got, want.Latency)
	}
	if got, model := me.StepTime(Batch{DecodeSeqs: 1000}, Load{}), e.StepTime(Batch{DecodeSeqs: 1000}, Load{}); got != model {
		t.Errorf("batch outside the table: %v, want the model's %v", got, model)
	}
	pre := Batch{PrefillTokens: 512}
	if me.StepTime(pre, Load{}) != e.StepTime(pre, Load{}) {
		t.Error("prefill should use the model")
	}
	h := h100Literal()
	other := mustEngine(t, mustModel(t, llama7B), Slice{Board: h, Profile: &h.Profiles[1]}) // 1g.20gb: 1 GPC, present
	if _, err := other.WithMeasured(m); err != nil {
		t.Errorf("1-GPC instance: %v", err)
	}
	five := b.Profiles[4]
	five.Name, five.ComputeSlices = "5g.test", 5
	fe := mustEngine(t, mustModel(t, llama7B), Slice{Board: b, Profile: &five})
	if _, err := fe.WithMeasured(m); err == nil || !strings.Contains(err.Error(), "5-GPC") {
		t.Errorf("no 5-GPC rows: error %v", err)
	}
	if _, err := e.WithMeasured(nil); err == nil {
		t.Error("nil table: no error")
	}
}
