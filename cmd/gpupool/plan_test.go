package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

const planPool = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: small}
fleet:
  nodes:
  - name: n1
    gpus: [{board: H100-SXM5-80GB, count: 2}]
policy: {burstPoolPercent: 0}
tenants:
- name: chat
  model: {name: qwen2.5-7b}
  traffic: {rps: 1, inputTokens: 500, outputTokens: 200}
  slo: {ttftP99: 1s, tpotP99: 50ms}
`

func TestPlanTable(t *testing.T) {
	out, errOut, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", planPool))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"n1/0 H100-SXM5-80GB", "chat#0", "lower bound", "exclusive"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// --out writes plan.yaml, which decodes and validates against the pool.
func TestPlanOutDir(t *testing.T) {
	dir := t.TempDir()
	poolFile := writeTemp(t, "pool.yaml", planPool)
	if _, errOut, code := runCmd(t, "plan", poolFile, "-o", "json", "--out", dir); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, "plan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := v1.DecodePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := readPool(context.Background(), poolFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := v1.ValidatePlan(pl, pool); err != nil {
		t.Fatal(err)
	}
}

// A 405B model at bf16 fits no H100 slice, nor a tensor-parallel group of the node's GPUs: exit
// 2, and the rest is still planned and written.
func TestPlanInfeasibleExit2(t *testing.T) {
	pool := planPool + `- name: big
  model: {name: llama-3.1-405b, quantization: bf16}
  traffic: {rps: 1}
`
	dir := t.TempDir()
	out, errOut, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", pool), "--out", dir)
	if code != exitPartial || !strings.Contains(errOut, "big") || !strings.Contains(out, "INFEASIBLE: NoFit") {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, errOut, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "plan.yaml")); err != nil {
		t.Errorf("plan.yaml not written: %v", err)
	}
}

func TestPlanInvalidInput(t *testing.T) {
	_, _, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", "kind: Pool\n"))
	if code != exitInvalid {
		t.Errorf("exit %d, want %d", code, exitInvalid)
	}
	if _, _, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", planPool), "-o", "xml"); code != exitInvalid {
		t.Errorf("bad -o: exit %d", code)
	}
}

// --current with the plan just made changes no GPU and writes migration.yaml.
func TestPlanCurrent(t *testing.T) {
	poolFile := writeTemp(t, "pool.yaml", planPool)
	cur, errOut, code := runCmd(t, "plan", poolFile, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	dir := t.TempDir()
	out, errOut, code := runCmd(t, "plan", poolFile, "--current", writeTemp(t, "cur.yaml", cur), "--out", dir)
	if code != exitOK || !strings.Contains(out, "migration: no GPU changes") {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, errOut, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "migration.yaml")); err != nil {
		t.Error(err)
	}
	if _, _, code := runCmd(t, "plan", poolFile, "--current", writeTemp(t, "bad.yaml", "kind: Plan\n")); code != exitInvalid {
		t.Errorf("bad --current: exit %d", code)
	}
	// the same plan again moves nothing, so a budget of 0 keeps the re-packed plan
	if _, errOut, code := runCmd(t, "plan", poolFile, "--current", writeTemp(t, "cur2.yaml", cur), "--max-moves", "0"); code != exitOK {
		t.Errorf("--max-moves 0 with nothing to move: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{{"plan", poolFile, "--max-moves", "3"}, {"plan", poolFile, "--current", writeTemp(t, "cur3.yaml", cur), "--max-moves", "-2"}} {
		if _, errOut, code := runCmd(t, args...); code != exitInvalid || !strings.Contains(errOut, "--max-moves") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// --current without --max-moves takes the budget from the pool's policy.maxMoves, as the
// controller does: on the articles' node after dropping two tenants, re-packing moves replicas, so
// maxMoves: 0 keeps the plan in force (every tenant says why), the same as --max-moves 0, and
// --max-moves -1 lifts the pool's budget.
func TestPlanPolicyMaxMoves(t *testing.T) {
	data, err := os.ReadFile("../../examples/h100x8-mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cur, errOut, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", string(data)), "-o", "yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	curFile := writeTemp(t, "cur.yaml", cur)
	pool, err := v1.DecodePool(data)
	if err != nil {
		t.Fatal(err)
	}
	pool.Tenants = slices.DeleteFunc(pool.Tenants, func(t v1.Tenant) bool { return t.Name == "product-0" || t.Name == "tools-1" })
	budgetOf := func(p *v1.Pool) string {
		t.Helper()
		b, err := yaml.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return writeTemp(t, "smaller.yaml", string(b))
	}
	keptReasons := func(out string) int {
		t.Helper()
		pl, err := v1.DecodePlan([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tn := range pl.Tenants {
			if len(tn.Reasons) > 0 && tn.Reasons[len(tn.Reasons)-1].Code == v1.ReasonMoveBudget {
				n++
			}
		}
		return n
	}
	free := budgetOf(pool)
	out, errOut, code := runCmd(t, "plan", free, "--current", curFile, "-o", "yaml")
	if code != exitOK || keptReasons(out) != 0 {
		t.Fatalf("no budget: exit %d, %d tenants kept by a move budget: %s", code, keptReasons(out), errOut)
	}
	flag0, _, _ := runCmd(t, "plan", free, "--current", curFile, "--max-moves", "0", "-o", "yaml")
	if keptReasons(flag0) == 0 {
		t.Fatal("--max-moves 0 keeps nothing: the test needs a re-plan that moves replicas")
	}
	zero := 0
	pool.Policy.MaxMoves = &zero
	budget := budgetOf(pool)
	out, errOut, code = runCmd(t, "plan", budget, "--current", curFile, "-o", "yaml")
	if code != exitOK || keptReasons(out) != keptReasons(flag0) {
		t.Errorf("policy.maxMoves 0: exit %d, %d tenants kept by the budget, want %d as with --max-moves 0: %s", code, keptReasons(out), keptReasons(flag0), errOut)
	}
	out, _, code = runCmd(t, "plan", budget, "--current", curFile, "--max-moves", "-1", "-o", "yaml")
	if code != exitOK || keptReasons(out) != 0 {
		t.Errorf("--max-moves -1 over policy.maxMoves 0: exit %d, %d tenants kept by a budget, want none", code, keptReasons(out))
	}
}

// Llama-3.1-70B at bf16 on a node of 8 H100s: planned tensor-parallel, shown as such in the
// tenant table, and `plan --out` exits 0 with one pod asking for the group's GPUs.
func TestPlanTensorParallel(t *testing.T) {
	pool := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: tp}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100-SXM5-80GB, count: 8}]
policy: {burstPoolPercent: 0}
tenants:
- name: big
  model: {name: llama-3.1-70b, quantization: bf16}
  concurrency: 32
  traffic: {rps: 0.5, inputTokens: 1024, outputTokens: 256}
  slo: {ttftP99: 5s, tpotP99: 100ms}
`
	dir := t.TempDir()
	out, errOut, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", pool), "--out", dir)
	if code != exitOK || !strings.Contains(out, "1×tp2") {
		t.Fatalf("exit %d, stderr %q, out:\n%s", code, errOut, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "k8s", "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `nvidia.com/gpu: "2"`) || !strings.Contains(string(data), "--tensor-parallel-size") {
		t.Errorf("k8s/big.yaml:\n%s", data)
	}
}

// The plan is simulated to confirm its replica counts unless --sim-requests -1 says not to; a
// budget below -1 is invalid input.
func TestPlanSimRequests(t *testing.T) {
	poolFile := writeTemp(t, "pool.yaml", planPool)
	on, errOut, code := runCmd(t, "plan", poolFile, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	off, errOut, code := runCmd(t, "plan", poolFile, "-o", "json", "--sim-requests", "-1")
	if code != exitOK {
		t.Fatalf("--sim-requests -1: exit %d: %s", code, errOut)
	}
	if !strings.Contains(on, `"code": "Simulated"`) {
		t.Errorf("no Simulated reason in the default plan:\n%s", on)
	}
	if strings.Contains(off, `"code": "Simulated"`) {
		t.Errorf("--sim-requests -1: a Simulated reason:\n%s", off)
	}
	if _, errOut, code := runCmd(t, "plan", poolFile, "--sim-requests", "-2"); code != exitInvalid || !strings.Contains(errOut, "--sim-requests") {
		t.Errorf("--sim-requests -2: exit %d, stderr %q", code, errOut)
	}
}

// The review's re-plan, with its newcomer at 4 req/s (at 1 req/s it starts in room the departed
// tenants leave, and no GPU changes), re-partitions MIG GPUs of a pool whose reconfigCooldown is
// 24h: the planner cannot check the cooldown (a plan records no re-partition times), and says so on
// stderr; the same re-plan with no cooldown, and a re-plan that changes no GPU, say nothing.
func TestPlanCurrentNotesCooldown(t *testing.T) {
	const d0, d1 = "../../testdata/review7/d0-pool.yaml", "../../testdata/review7/d1-pool.yaml"
	cur, errOut, code := runCmd(t, "plan", d0, "-o", "yaml", "--sim-requests", "-1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	curFile := writeTemp(t, "p0.yaml", cur)
	raw, err := os.ReadFile(d1)
	if err != nil {
		t.Fatal(err)
	}
	const slow, fast = "traffic: {rps: 1.0, inputTokens: 800", "traffic: {rps: 4.0, inputTokens: 800"
	if strings.Count(string(raw), slow) != 1 {
		t.Fatalf("%s: the newcomer's traffic %q is not found once", d1, slow)
	}
	busy := strings.Replace(string(raw), slow, fast, 1)
	busyFile := writeTemp(t, "d1-busy.yaml", busy)
	const note = "policy.reconfigCooldown (24h) is not checked here"
	out, errOut, _ := runCmd(t, "plan", busyFile, "--current", curFile, "--sim-requests", "-1")
	if !strings.Contains(out, "gpu ") || !strings.Contains(errOut, note) || !strings.Contains(errOut, "re-partitions 4 MIG GPU(s)") {
		t.Errorf("stderr %q lacks the cooldown note for the migration:\n%s", errOut, out)
	}
	if _, errOut, _ := runCmd(t, "plan", d0, "--current", curFile, "--sim-requests", "-1"); strings.Contains(errOut, "reconfigCooldown") {
		t.Errorf("a re-plan that changes no GPU notes the cooldown: %q", errOut)
	}
	noCooldown := writeTemp(t, "d1.yaml", strings.Replace(busy, "reconfigCooldown: 24h", "reconfigCooldown: 0s", 1))
	if _, errOut, _ := runCmd(t, "plan", noCooldown, "--current", curFile, "--sim-requests", "-1"); strings.Contains(errOut, "reconfigCooldown") {
		t.Errorf("a pool without a cooldown gets the note: %q", errOut)
	}
}

// Starting two MPS replicas beside n2/0's eight changes node n2's device-plugin setting (8 → 10
// references a GPU) with no GPU step: the migration says so, in its summary line, a line for
// the node and migration.yaml's devicePlugin entry, instead of "0 GPU change(s)" alone; the
// change is a node-config step in a wave of its own before the starts, with the restarts of the
// eight running MPS clients (the node's MPS control daemon restarts with the config).
func TestPlanCurrentListsDevicePluginChange(t *testing.T) {
	const a0, f1 = "../../testdata/review8/a-mps0-pool.yaml", "../../testdata/review8/f-mpsadd1-pool.yaml"
	cur, errOut, code := runCmd(t, "plan", a0, "-o", "yaml", "--sim-requests", "-1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	curFile := writeTemp(t, "p0.yaml", cur)
	dir := filepath.Join(t.TempDir(), "out")
	out, errOut, code := runCmd(t, "plan", f1, "--current", curFile, "--max-moves", "0", "--sim-requests", "-1", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"migration: 0 GPU change(s), 1 node device-plugin config change(s), 10 replica step(s): 0 move(s) to another GPU, 8 in place",
		"node n2: the device-plugin config's sharing of whole GPUs goes from mps 8 to mps 10 (references a GPU), in wave 1 before the first replica step",
		"1     node-config  n2    -       false  mps 8  mps 10",
		"1     restart      n2/0  s7      false  n2/0   n2/0",
		"2     start        n2/0  new-1   false  none   n2/0",
		"the 8 replica(s) running on the node's MPS GPUs then restart (stop, start on the same slot) in this wave",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	mig, err := os.ReadFile(filepath.Join(dir, "migration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mig), "devicePlugin:\n- from: mps 8\n  node: n2\n  reason: 'before the first replica step") {
		t.Errorf("migration.yaml lacks n2's device-plugin change:\n%s", mig)
	}
	for _, want := range []string{"  restarts: 8\n  running: 8\n  to: mps 10\n  wave: 1\n", "- drain: false\n  from: mps 8\n  gpu: n2/0\n  kind: node-config\n  to: mps 10\n  wave: 1\n"} {
		if !strings.Contains(string(mig), want) {
			t.Errorf("migration.yaml lacks %q:\n%s", want, mig)
		}
	}
	if out, _, _ := runCmd(t, "plan", a0, "--current", curFile, "--sim-requests", "-1"); strings.Contains(out, "device-plugin") {
		t.Errorf("a re-plan that changes no node's setting lists one:\n%s", out)
	}
}

// Review 8, L1: with the simulation on, e-grow1 re-planned against e-grow0's plan (max-moves 0)
// keeps g0 where it runs and grows it to 15 mps 1/32 replicas; its reasons size it at 60 req/s
// over those 15, and the plan in force's simulation verdict (1 replica at 1 req/s) is gone: its
// Simulated reason is the kept plan's own runs, at 15 replicas (before, it had none, the kept
// plan not being simulated).
func TestPlanCurrentKeptSizingReasons(t *testing.T) {
	const e0, e1 = "../../testdata/review8/e-grow0-pool.yaml", "../../testdata/review8/e-grow1-pool.yaml"
	cur, errOut, code := runCmd(t, "plan", e0, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(cur, "in 3 simulated runs of the plan at 1 replica(s)") {
		t.Fatalf("setup: the plan in force carries no simulation verdict")
	}
	out, errOut, code := runCmd(t, "plan", e1, "--current", writeTemp(t, "p0.yaml", cur), "--max-moves", "0", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var pl v1.Plan
	if err := json.Unmarshal([]byte(out), &pl); err != nil {
		t.Fatal(err)
	}
	at := slices.IndexFunc(pl.Tenants, func(x v1.PlanTenant) bool { return x.Name == "g0" })
	if at < 0 || len(pl.Tenants[at].Replicas) != 15 {
		t.Fatalf("setup: g0 not kept with 15 replicas")
	}
	var msgs []string
	for _, r := range pl.Tenants[at].Reasons {
		msgs = append(msgs, string(r.Code)+": "+r.Message)
	}
	all := strings.Join(msgs, "\n")
	if !strings.Contains(all, "ComputeBound: one replica on A100-SXM4-80GB mps 1/32 sustains") || !strings.Contains(all, "; 60 req/s over 15 replica(s) with") {
		t.Errorf("g0 not sized at 60 req/s over 15 mps 1/32 replicas:\n%s", all)
	}
	if !strings.Contains(all, "Simulated: in 3 simulated runs of the plan at 15 replica(s), ") {
		t.Errorf("g0 carries no Simulated reason of the kept plan's runs at 15 replicas:\n%s", all)
	}
	for _, stale := range []string{"1 req/s over 1 replica(s)", "at 1 replica(s)", "not simulated in this plan", "the plan in force's"} {
		if strings.Contains(all, stale) {
			t.Errorf("g0 carries %q of the plan in force:\n%s", stale, all)
		}
	}
}

// With the simulation on, the r7→r8 re-plan of review 3 with --max-moves 0 holds the plan in
// force, t-14b (1 of the 2 mig 4g.90gb replicas it now needs) and t-8b-c2 short. The held plan is
// simulated as it will run: every tenant's Simulated reason is its runs at the replicas it holds,
// and the short tenants' say what those replicas see at the load now and what the queueing model
// asks. Before, the held plan was not simulated and they carried the plan in force's verdict
// (t-14b: "at 1 replica(s), 100.00 %", at its old load).
func TestPlanCurrentHeldPlanSimulated(t *testing.T) {
	const r7, r8 = "testdata/review3/r7-b200-dense.yaml", "testdata/review3/r8-b200-dense-v2.yaml"
	cur, errOut, code := runCmd(t, "plan", r7, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out, errOut, _ := runCmd(t, "plan", r8, "--current", writeTemp(t, "p7.yaml", cur), "--max-moves", "0", "-o", "json")
	var pl v1.Plan
	if err := json.Unmarshal([]byte(out), &pl); err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	for _, pt := range pl.Tenants {
		r, ok := pt.Reason(v1.ReasonSimulated)
		want := fmt.Sprintf("in 3 simulated runs of the plan at %d replica(s), ", len(pt.Replicas))
		if !ok || !strings.HasPrefix(r.Message, want) {
			t.Errorf("%s (%d replicas, short %v): Simulated reason %q, want one starting %q", pt.Name, len(pt.Replicas), pt.Infeasible, r.Message, want)
		}
	}
	at := slices.IndexFunc(pl.Tenants, func(x v1.PlanTenant) bool { return x.Name == "t-14b" })
	if at < 0 || !pl.Tenants[at].Infeasible || len(pl.Tenants[at].Replicas) != 1 {
		t.Fatalf("setup: t-14b is not held short on 1 replica")
	}
	if r, _ := pl.Tenants[at].Reason(v1.ReasonSimulated); !strings.HasSuffix(r.Message, "; the queueing model's count is 2") || strings.Contains(r.Message, "100.00 %") {
		t.Errorf("t-14b's Simulated reason is not its held replica's runs at the load now: %q", r.Message)
	}
}

// g-mpsbig1 against a-mps0's plan with --max-moves 0: the small newcomer is not started in n2/0's
// MPS room, which would take n2 to mps 9 and restart its eight clients; both newcomers go to an
// idle GPU on as many GPUs, and the migration restarts nobody. Before, new-1 started on n2/0 and
// the eight clients restarted in a node-config wave.
func TestPlanCurrentAvoidsMPSRestarts(t *testing.T) {
	const a0, g1 = "../../testdata/review8/a-mps0-pool.yaml", "../../testdata/review8/g-mpsbig1-pool.yaml"
	cur, errOut, code := runCmd(t, "plan", a0, "-o", "yaml", "--sim-requests", "-1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out, errOut, code := runCmd(t, "plan", g1, "--current", writeTemp(t, "p0.yaml", cur), "--max-moves", "0", "--sim-requests", "-1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "restart ") || strings.Contains(out, "mps 8  mps 9") {
		t.Errorf("the migration restarts n2's MPS clients:\n%s", out)
	}
	if !strings.Contains(out, "0 move(s) to another GPU, 0 in place") {
		t.Errorf("output lacks a migration with no move and nothing in place:\n%s", out)
	}
}

// Where the plan was simulated, the summary line marks each baseline (confirmed) or (model) as
// summary.baselines[].confirmed says; where it was not, every count is the model's and the line
// marks none.
func TestPlanBaselineMarks(t *testing.T) {
	poolFile := writeTemp(t, "pool.yaml", planPool)
	for _, sim := range []bool{true, false} {
		args := []string{"plan", poolFile}
		if !sim {
			args = append(args, "--sim-requests", "-1")
		}
		table, errOut, code := runCmd(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		js, errOut, code := runCmd(t, append(args, "-o", "json")...)
		if code != exitOK {
			t.Fatalf("%v -o json: exit %d: %s", args, code, errOut)
		}
		var pl v1.Plan
		if err := json.Unmarshal([]byte(js), &pl); err != nil {
			t.Fatal(err)
		}
		if len(pl.Summary.Baselines) == 0 {
			t.Fatalf("%v: no baselines", args)
		}
		for _, b := range pl.Summary.Baselines {
			plain := fmt.Sprintf(" %s %d", b.Name, b.GPUs)
			want := plain
			switch {
			case b.Confirmed:
				want += " (confirmed)"
			case sim:
				want += " (model)"
			}
			if !sim && b.Confirmed {
				t.Errorf("--sim-requests -1: baseline %+v confirmed", b)
			}
			if !strings.Contains(table, want+" ") && !strings.Contains(table, want+"\n") {
				t.Errorf("%v: summary line lacks %q:\n%s", args, want, table)
			}
			if !sim && strings.Contains(table, plain+" (") {
				t.Errorf("--sim-requests -1: baseline %s marked:\n%s", b.Name, table)
			}
		}
	}
}
