package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// simPool is one H100 shared by two online tenants of a small model.
const simPool = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: sim-cli}
fleet:
  nodes:
  - name: node1
    gpus: [{board: H100-SXM5-80GB, count: 1}]
policy: {burstPoolPercent: 0}
tenants:
- name: a
  path: org/team
  isolation: shared
  model: {name: qwen2.5-1.5b}
  maxContext: 4096
  traffic: {rps: 5, inputTokens: 300, outputTokens: 80}
  slo: {ttftP99: 200ms, tpotP99: 50ms}
- name: b
  path: org/team
  isolation: shared
  model: {name: qwen2.5-1.5b}
  maxContext: 4096
  traffic: {rps: 2, inputTokens: 1000, outputTokens: 200, pattern: bursty}
`

func TestSimulateTable(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", simPool)
	out, errs, code := runCmd(t, "simulate", pool, "--strategy", "mps", "--duration", "30s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{"uniform mps plan", "TENANT", "a ", "b ", "node1/0", "H100-SXM5-80GB", "Jain's fairness index"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q:\n%s", w, out)
		}
	}
}

func TestSimulateJSONDeterministic(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", simPool)
	args := []string{"simulate", pool, "--strategy", "mig", "--duration", "20s", "--seed", "9", "-o", "json"}
	out1, errs, code := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	out2, _, _ := runCmd(t, args...)
	if out1 != out2 {
		t.Error("two runs with the same seed differ")
	}
	var rep struct {
		Pool     string `json:"pool"`
		Strategy string `json:"strategy"`
		Seed     uint64 `json:"seed"`
		Tenants  []struct {
			Name      string `json:"name"`
			Completed int64  `json:"completed"`
		} `json:"tenants"`
		GPUs []struct {
			Utilization float64 `json:"utilization"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out1), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out1)
	}
	if rep.Pool != "sim-cli" || rep.Strategy != "mig" || rep.Seed != 9 || len(rep.Tenants) != 2 || rep.Tenants[0].Completed == 0 ||
		len(rep.GPUs) != 1 || rep.GPUs[0].Utilization <= 0 {
		t.Errorf("unexpected report: %+v", rep)
	}
}

func TestSimulatePlanTraceAndPlots(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", simPool)
	trace := writeTemp(t, "trace.csv", "timestamp,tenant,input_tokens,output_tokens\n0,a,100,20\n0.5,b,200,30\n1,a,50,10\n")
	plots := filepath.Join(t.TempDir(), "plots")
	out, errs, code := runCmd(t, "simulate", pool, "--strategy", "timeslice", "--trace", trace, "--plot", plots, "-o", "yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Without --duration a trace runs for its span plus a second: 1 s + 1 s.
	if !strings.Contains(out, "durationSeconds: 2") || !strings.Contains(out, "arrived: 2") {
		t.Errorf("yaml report:\n%s", out)
	}
	for _, f := range []string{"latency-ttft", "latency-tpot", "latency-e2e", "utilisation"} {
		for _, ext := range []string{".png", ".svg"} {
			if st, err := os.Stat(filepath.Join(plots, f+ext)); err != nil || st.Size() == 0 {
				t.Errorf("plot %s%s: %v", f, ext, err)
			}
		}
	}
}

func TestSimulateBadInput(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", simPool)
	badTrace := writeTemp(t, "bad.csv", "timestamp,tenant,input_tokens,output_tokens\n1,a,10,10\n0,a,-3,10\n2,ghost,1,1\n")
	otherPlan := writeTemp(t, "plan.yaml", `apiVersion: gpupool.dev/v1
kind: Plan
metadata: {name: p}
pool: another
gpus:
- {node: node1, index: 0, board: H100-SXM5-80GB, role: pool, mode: exclusive, replicas: [{tenant: ghost, index: 0}]}
summary: {gpusUsed: 1, gpusTotal: 1}
`)
	cases := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"no plan or strategy", []string{"simulate", pool}, []string{"plan", "strategy"}},
		{"both", []string{"simulate", pool, "--plan", otherPlan, "--strategy", "mps"}, []string{"plan", "strategy"}},
		{"unknown strategy", []string{"simulate", pool, "--strategy", "vgpu"}, []string{`unknown strategy "vgpu"`}},
		{"exclusive on too few GPUs", []string{"simulate", pool, "--strategy", "exclusive"}, []string{"2 replicas, 1 pool GPUs"}},
		{"plan for another pool", []string{"simulate", pool, "--plan", otherPlan}, []string{`unknown tenant "ghost"`, `"another"`}},
		{"bad trace", []string{"simulate", pool, "--strategy", "mps", "--trace", badTrace}, []string{"line 3", "negative", "before the previous row", "line 4", `"ghost"`}},
		{"missing pool", []string{"simulate", filepath.Join(t.TempDir(), "none.yaml"), "--strategy", "mps"}, []string{"none.yaml"}},
		{"bad duration", []string{"simulate", pool, "--strategy", "mps", "--duration", "-5s"}, []string{"duration"}},
		{"bad lengths", []string{"simulate", pool, "--strategy", "mps", "--lengths", "normal"}, []string{"lengths"}},
		{"bad output", []string{"simulate", pool, "--strategy", "mps", "-o", "xml"}, []string{"xml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs, code := runCmd(t, c.args...)
			if code != exitInvalid {
				t.Fatalf("exit %d, want %d: %s", code, exitInvalid, errs)
			}
			for _, w := range c.wants {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not say %q", errs, w)
				}
			}
		})
	}
}

// TestSimulateProgress: no bar unless the writer is a terminal; a bar, once drawn, shows the
// simulated time.
func TestSimulateProgress(t *testing.T) {
	var buf strings.Builder
	if newProgress(&buf, time.Minute) != nil {
		t.Error("a bar on a strings.Builder")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if newProgress(f, time.Minute) != nil {
		t.Error("a bar on a regular file")
	}
	p := &progress{w: &buf, start: time.Now().Add(-time.Hour)}
	p.update(30*time.Second, time.Minute)
	p.finish()
	if !strings.Contains(buf.String(), "simulating") {
		t.Errorf("bar output %q", buf.String())
	}
}

// TestSimulateAzureTrace: an Azure trace's rows go to --trace-tenant.
func TestSimulateAzureTrace(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", simPool)
	trace := writeTemp(t, "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"+
		"2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.0000000,396,10\n")
	out, errs, code := runCmd(t, "simulate", pool, "--strategy", "mig", "--trace", trace, "--trace-tenant", "b", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Tenants []struct {
			Name    string `json:"name"`
			Arrived int64  `json:"arrived"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Tenants[0].Arrived != 0 || rep.Tenants[1].Name != "b" || rep.Tenants[1].Arrived != 2 {
		t.Errorf("arrivals %+v, want a: 0, b: 2", rep.Tenants)
	}
	if _, errs, code := runCmd(t, "simulate", pool, "--strategy", "mig", "--trace", trace, "--trace-tenant", "zed"); code != exitInvalid ||
		!strings.Contains(errs, `unknown tenant "zed"`) {
		t.Errorf("unknown --trace-tenant: exit %d, %s", code, errs)
	}
}

// TestSimulateStrategySharesLoRAEngines: a uniform plan (--strategy) gives the pool's shared
// adapter tenants the engines `gpupool plan` gives them (same names and adapters), each on a GPU
// the uniform plan leaves idle, and simulates them in the engine simulator, not as replicas.
func TestSimulateStrategySharesLoRAEngines(t *testing.T) {
	pool := "../../examples/lora-mixed.yaml"
	out, errs, code := runCmd(t, "simulate", pool, "--strategy", "mps", "--duration", "30s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Tenants []struct {
			Name string `json:"name"`
		} `json:"tenants"`
		Replicas []struct {
			Tenant string `json:"tenant"`
			GPU    string `json:"gpu"`
		} `json:"replicas"`
		LoRAEngines []struct {
			Name     string `json:"name"`
			GPU      string `json:"gpu"`
			Adapters []struct {
				Name string `json:"name"`
			} `json:"adapters"`
		} `json:"loraEngines"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	planned, errs, code := runCmd(t, "plan", pool, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	var pl v1.Plan
	if err := json.Unmarshal([]byte(planned), &pl); err != nil {
		t.Fatal(err)
	}
	if len(rep.LoRAEngines) != len(pl.LoRAEngines) || len(pl.LoRAEngines) == 0 {
		t.Fatalf("simulated engines %+v, the plan's %+v", rep.LoRAEngines, pl.LoRAEngines)
	}
	used := map[string]bool{}
	for _, r := range rep.Replicas {
		used[r.GPU] = true
	}
	for i, e := range rep.LoRAEngines {
		want := pl.LoRAEngines[i]
		if e.Name != want.Name || len(e.Adapters) != len(want.Adapters) {
			t.Errorf("engine %d: %s with %d adapters, the plan has %s with %d", i, e.Name, len(e.Adapters), want.Name, len(want.Adapters))
		}
		if used[e.GPU] {
			t.Errorf("engine %s on %s, which holds replicas of the uniform plan", e.Name, e.GPU)
		}
	}
	for _, tn := range rep.Tenants {
		for _, a := range pl.LoRAEngines[0].Adapters {
			if tn.Name == a.Tenant {
				t.Errorf("adapter tenant %s simulated as a replica tenant", tn.Name)
			}
		}
	}
}

// The header names the pool once and the plan by its name only when it differs from the pool's.
func TestSimulateHeaderNamesPlan(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", simPool)
	planOut, errs, code := runCmd(t, "plan", pool, "-o", "yaml")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	for _, c := range []struct{ name, want string }{
		{"sim-cli", "pool sim-cli, its plan: 30s simulated"},
		{"other", "pool sim-cli, plan other: 30s simulated"},
	} {
		doc := strings.Replace(planOut, "name: sim-cli", "name: "+c.name, 1)
		out, errs, code := runCmd(t, "simulate", pool, "--plan", writeTemp(t, "plan-"+c.name+".yaml", doc), "--duration", "30s")
		if code != 0 {
			t.Fatalf("simulate: exit %d: %s", code, errs)
		}
		if first, _, _ := strings.Cut(out, "\n"); !strings.HasPrefix(first, c.want) {
			t.Errorf("header %q, want it to start with %q", first, c.want)
		}
	}
}

// The tenant table's energy per token (idle power included) and the bill's (active energy under
// idle policy none) are labelled apart; a tenant with no traffic shows "-" served, not 0.0 %.
func TestSimulateEnergyLabelsAndIdleTenant(t *testing.T) {
	const dir = "../../testdata/review2/"
	out, errs, code := runCmd(t, "simulate", dir+"pool-h100x2.yaml", "--plan", dir+"plan-h100x2.yaml", "--duration", "30s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{"SERVED  J/OUT TOK+IDLE", "J/OUT TOK+IDLE: joules per output token with idle power",
		"J/OUT TOK, J/TOK: billed energy per output token", "under idle policy none a tenant is billed its active energy only"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	found := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 12 && f[0] == "idle" {
			found = true
			if f[10] != "-" || f[11] != "-" {
				t.Errorf("row %q: a tenant with rps 0 wants SERVED - and J/OUT TOK+IDLE -", line)
			}
		}
	}
	if !found {
		t.Errorf("no row for the idle tenant:\n%s", out)
	}
}

// A trace request longer than the replica's --max-model-len is rejected and said so.
func TestSimulateTraceOverMaxModelLen(t *testing.T) {
	const dir = "../../testdata/review2/"
	out, errs, code := runCmd(t, "simulate", dir+"pool-h100x2.yaml", "--plan", dir+"plan-h100x2.yaml", "--trace", dir+"trace-edge.csv")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{"note: tenant rag: 1 request(s) rejected: prompt + output tokens over --max-model-len 32768",
		"note: tenant chat: 1 request(s) rejected: prompt + output tokens over --max-model-len 4096"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 3 && (f[0] == "rag" || f[0] == "chat") && f[1] == "1" && f[3] != "1" {
			t.Errorf("row %q: want DROP 1", line)
		}
	}
}
