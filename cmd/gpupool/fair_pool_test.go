package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/fair"
)

var (
	mixedPool     = filepath.Join("..", "..", "examples", "h100x8-mixed.yaml")
	mixedPlanCopy = filepath.Join("..", "..", "examples", "fair", "h100x8-mixed.plan.yaml")
	mixedSteps    = filepath.Join("..", "..", "examples", "fair", "h100x8-mixed.steps.yaml")
)

// mixedPlan plans the example pool now (exit 2 is fine: some tenants may be short of capacity)
// and returns the plan's path, so that the tests follow the pool and the planner.
func mixedPlan(t *testing.T) string {
	t.Helper()
	stdout, stderr, code := runCmd(t, "plan", mixedPool, "-o", "yaml")
	if code != exitOK && code != exitPartial {
		t.Fatalf("plan %s: exit %d: %s", mixedPool, code, stderr)
	}
	return writeTemp(t, "plan.yaml", stdout)
}

// The committed example plan is what `gpupool plan examples/h100x8-mixed.yaml -o yaml` printed;
// it must still be a valid plan of the pool (regenerate it when this fails).
func TestFairPoolPlanExampleCopy(t *testing.T) {
	_, stderr, code := runCmd(t, "fair", "--pool", mixedPool, "--plan", mixedPlanCopy, mixedSteps, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// planReplicas counts each tenant's replicas in the plan, straight from the document.
func planReplicas(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := v1.DecodePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, pt := range pl.Tenants {
		n[pt.Name] = len(pt.Replicas)
	}
	return n
}

// With the plan's replicas as demand and the plan's slices as capacity, every placed tenant is
// granted exactly its replicas, steadily, and nothing queues.
func TestFairPoolPlanMatchesPlan(t *testing.T) {
	plan := mixedPlan(t)
	stdout, stderr, code := runCmd(t, "fair", "--pool", mixedPool, "--plan", plan, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res := decodeFairOut(t, stdout)
	want := planReplicas(t, plan)
	placed := 0
	for _, s := range res.Steps[0].Tenants {
		if want[s.Name] == 0 || s.Demand != want[s.Name] || s.Tasks != s.Demand || s.Steady != s.Demand {
			t.Errorf("%s: demand %d tasks %d steady %d, plan has %d replicas", s.Name, s.Demand, s.Tasks, s.Steady, want[s.Name])
		}
		placed++
	}
	for name, n := range want {
		if n > 0 {
			placed--
		}
		_ = name
	}
	if placed != 0 || len(res.Steps[0].Tenants) == 0 {
		t.Errorf("%d tenants in the output, plan places a different number", len(res.Steps[0].Tenants))
	}
	for _, d := range res.Steps[0].Decisions {
		if d.By != "grant/FairShare" {
			t.Errorf("step 0: %s %s, want only fair-share grants", d.By, d.Tenant)
		}
	}
}

// The steps file: a newcomer below its floor preempts over-share tasks, an extra demand queues, a
// capped tenant leases idle GPUs, steady demand reclaims a lease, and the last lease is renewed in
// place at its expiry; every decision carries a reason.
func TestFairPoolPlanSteps(t *testing.T) {
	stdout, stderr, code := runCmd(t, "fair", "--pool", mixedPool, "--plan", mixedPlan(t), mixedSteps, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res := decodeFairOut(t, stdout)
	for _, w := range []string{"preempt/BelowFloor", "queue/PoolFull", "lease/Burst", "reclaim/NeededBySteady", "lease/LeaseRenewed"} {
		if !has(res, w) {
			t.Errorf("no %s decision", w)
		}
	}
	for i, st := range res.Steps {
		for _, d := range st.Decisions {
			if strings.HasSuffix(d.By, "/") || d.Tenant == "" {
				t.Errorf("step %d: decision without reason or tenant: %+v", i, d)
			}
		}
	}
}

// Reservations from the pool hold against a newcomer that preempts: the reserved 70B tenants
// keep their GPU, so the victims are the others.
func TestFairPoolPlanReservations(t *testing.T) {
	poolData, _ := os.ReadFile(mixedPool)
	planData, _ := os.ReadFile(mixedPlan(t))
	pool, err := v1.LoadPool(poolData)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := v1.DecodePlan(planData)
	if err != nil {
		t.Fatal(err)
	}
	reserved := map[string]int{}
	for i := range pool.Tenants {
		if strings.HasPrefix(pool.Tenants[i].Name, "chat-") {
			pool.Tenants[i].Reservation = 1
			reserved[pool.Tenants[i].Name] = 1
		}
	}
	cfg, _, err := poolPlanConfig(pool, plan)
	if err != nil {
		t.Fatal(err)
	}
	a, err := fair.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := a.Recompute(now); err != nil {
		t.Fatal(err)
	}
	gpu, err := fair.SliceVector("H100-SXM5-80GB/exclusive")
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.Apply(now.Add(time.Minute), fair.AddTenant{Tenant: fair.Tenant{Name: "batch", Path: "research", Task: gpu.Vector, Demand: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range d.Items {
		if it.Kind == fair.KindPreempt && reserved[it.Tenant] > 0 {
			t.Errorf("reserved tenant preempted: %s", it)
		}
	}
	for _, s := range a.Snapshot() {
		if s.Steady < reserved[s.Name] {
			t.Errorf("%s: %d steady tasks below its reservation %d", s.Name, s.Steady, reserved[s.Name])
		}
	}
}

func TestFairPoolPlanErrors(t *testing.T) {
	mixedPlan := mixedPlan(t)
	steps := writeTemp(t, "steps.yaml", "tenants: [{name: x, task: {cpu: 1}, demand: 1}]\nburstPoolPercent: 5\n")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"fair", "--pool", mixedPool}, "--pool and --plan go together"},
		{[]string{"fair"}, "give a SCENARIO file"},
		{[]string{"fair", "--pool", mixedPool, "--plan", mixedPlan, steps}, "tenants: comes from the pool and plan"},
		{[]string{"fair", "--pool", mixedPool, "--plan", mixedPool}, "plan:"},
	}
	for _, c := range cases {
		_, stderr, code := runCmd(t, c.args...)
		if code != exitInvalid || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 1 with %q", c.args, code, stderr, c.want)
		}
	}
	// Every field the pool and plan give is named, in the scenario's field order, on every run.
	all := writeTemp(t, "all.yaml", "capacity: {a: 1}\nslices: {b: 1}\ntenants: [{name: x, task: {cpu: 1}, demand: 1}]\nburstPoolPercent: 10\nsteps: []\n")
	want := "steps: capacity: comes from the pool and plan, leave it out\n" +
		"steps: slices: comes from the pool and plan, leave it out\n" +
		"steps: tenants: comes from the pool and plan, leave it out\n" +
		"steps: burstPoolPercent: comes from the pool and plan, leave it out"
	for i := 0; i < 10; i++ {
		_, stderr, code := runCmd(t, "fair", "--pool", mixedPool, "--plan", mixedPlan, all)
		if code != exitInvalid || !strings.Contains(stderr, want) {
			t.Fatalf("run %d: exit %d, %q; want exit 1 with\n%s", i, code, stderr, want)
		}
	}
}

// An adapter's share of several engines' cost is summed in one order: the same bits on every run.
func TestSplitEngineCostSameSum(t *testing.T) {
	tokens := map[string]map[string]int64{}
	for e := 0; e < 20; e++ {
		tokens[fmt.Sprintf("engine-%02d", e)] = map[string]int64{"a": int64(1000 + 37*e), "b": int64(3 + e*e), "c": 7}
	}
	first, err := splitEngineCost(23027.97, tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		got, err := splitEngineCost(23027.97, tokens)
		if err != nil {
			t.Fatal(err)
		}
		for a, v := range first {
			if got[a] != v {
				t.Fatalf("run %d: adapter %s costs %v, first run %v", i, a, got[a], v)
			}
		}
	}
}

// A hand-written plan: what each role, mode and sharing contributes. H100 SXM5: 132 SMs; 3g.40gb
// has 60 SMs; an MPS 50% share 66 SMs.
func TestPoolPlanConfigShapes(t *testing.T) {
	w := 2.0
	capN := 3
	pool := &v1.Pool{Tenants: []v1.Tenant{
		{Name: "a", Path: "org", Weight: &w, Reservation: 1, Cap: &capN},
		{Name: "b"}, {Name: "c"}, {Name: "unplaced"},
	}}
	rep := func(tn string, sm, ts int) v1.PlanReplica {
		return v1.PlanReplica{Tenant: tn, Limits: v1.Limits{SMPercent: sm, TimeSliceReplicas: ts}}
	}
	const board = "H100-SXM5-80GB"
	plan := &v1.Plan{GPUs: []v1.PlanGPU{
		// MIG: a 3g.40gb shared by MPS (a 50%, b unset → the other 50%) and a lone 3g.40gb of a.
		{Node: "n", Index: 0, Board: board, Role: v1.RolePool, Mode: v1.ModeMIG, Instances: []v1.PlanInstance{
			{Profile: "3g.40gb", Start: 0, Sharing: v1.Sharing{Mode: v1.SharingMPS}, Replicas: []v1.PlanReplica{rep("a", 50, 0), rep("b", 0, 0)}},
			{Profile: "3g.40gb", Start: 4, Replicas: []v1.PlanReplica{rep("a", 0, 0)}},
		}},
		// MPS: two 50% shares, both c.
		{Node: "n", Index: 1, Board: board, Role: v1.RolePool, Mode: v1.ModeMPS, Replicas: []v1.PlanReplica{rep("c", 50, 0), rep("c", 50, 0)}},
		// Time-slicing: b takes 1 of 4 references, c 3.
		{Node: "n", Index: 2, Board: board, Role: v1.RolePool, Mode: v1.ModeTimeSlice, Replicas: []v1.PlanReplica{rep("b", 0, 1), rep("c", 0, 3)}},
		{Node: "n", Index: 3, Board: board, Role: v1.RoleCanary, Mode: v1.ModeExclusive},
		{Node: "n", Index: 4, Board: board, Role: v1.RoleIdle, Mode: v1.ModeExclusive},
		{Node: "n", Index: 5, Board: board, Role: v1.RoleBurst, Mode: v1.ModeExclusive},
	}}
	cfg, notes, err := poolPlanConfig(pool, plan)
	if err != nil {
		t.Fatal(err)
	}
	// 3g.40gb ×2, mps-50 ×2, exclusive ×2 (time-sliced GPU + burst GPU); canary and idle: nothing.
	for k, want := range map[string]float64{board + "/3g.40gb": 2, board + "/mps-50": 2, board + "/exclusive": 2} {
		if got := cfg.Capacity[k]; got != want {
			t.Errorf("capacity %s = %g, want %g", k, got, want)
		}
	}
	// SMs: 2·60 + 2·66 + 132 + 132 (burst) = 516; the burst GPU is 132/516 of them.
	if got := cfg.Capacity[fair.ResourceSM]; got != 516 {
		t.Errorf("capacity sm = %g, want 516", got)
	}
	if want := 100 * 132.0 / 516; math.Abs(cfg.BurstPoolPercent-want) > 1e-9 {
		t.Errorf("burstPoolPercent = %g, want %g", cfg.BurstPoolPercent, want)
	}
	got := map[string]fair.Tenant{}
	for _, tn := range cfg.Tenants {
		got[tn.Name] = tn
	}
	if _, ok := got["unplaced"]; ok || len(got) != 3 {
		t.Errorf("tenants %v: want a, b, c", got)
	}
	// a: half of one 3g.40gb and all of another → mean 0.75 of a 3g.40gb (45 SMs), demand 2.
	if a := got["a"]; a.Demand != 2 || a.Weight != 2 || a.Path != "org" || a.Reservation != 1 || a.Cap != 3 ||
		math.Abs(a.Task[board+"/3g.40gb"]-0.75) > 1e-12 || math.Abs(a.Task[fair.ResourceSM]-45) > 1e-9 {
		t.Errorf("a = %+v", a)
	}
	// b: half a 3g.40gb (30 SMs) and a quarter of a GPU (33 SMs) → mean 31.5 SMs, on two kinds.
	if b := got["b"]; b.Demand != 2 || math.Abs(b.Task[fair.ResourceSM]-31.5) > 1e-9 {
		t.Errorf("b = %+v", b)
	}
	// c: two mps-50 (66 SMs) and three quarters of a GPU (99 SMs) → mean 77 SMs.
	if c := got["c"]; c.Demand != 3 || math.Abs(c.Task[fair.ResourceSM]-77) > 1e-9 {
		t.Errorf("c = %+v", c)
	}
	joined := strings.Join(notes, "\n")
	for _, w := range []string{"tenant unplaced: no replicas", "tenant b: replicas on", "tenant c: replicas on"} {
		if !strings.Contains(joined, w) {
			t.Errorf("notes %q: no %q", joined, w)
		}
	}
	// The whole plan fits its own capacity: every tenant is granted its replicas.
	cfg.LeaseDuration = 5 * time.Minute // the command's default: a burst pool needs one
	a, err := fair.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Recompute(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	for _, s := range a.Snapshot() {
		if s.Tasks != s.Demand {
			t.Errorf("%s: %d tasks of %d", s.Name, s.Tasks, s.Demand)
		}
	}
}

// FuzzFairPoolPlanSteps: any steps file with the example pool and plan gives an error or a
// result, never a panic; the plan is the committed copy, read once.
func FuzzFairPoolPlanSteps(f *testing.F) {
	seed, err := os.ReadFile(mixedSteps)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("steps: [{at: 1m, demand: {chat-0: 3}}, {at: 2m, remove: [bot-0]}]\n"))
	f.Add([]byte("groups: [{path: bigco, weight: 2}]\nleaseDuration: 0s\n"))
	poolData, err := os.ReadFile(mixedPool)
	if err != nil {
		f.Fatal(err)
	}
	planData, err := os.ReadFile(mixedPlanCopy)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sc fairScenario
		if len(data) > 4096 || yaml.UnmarshalStrict(data, &sc) != nil || !smallScenario(sc) {
			return
		}
		_, _ = runFairPoolPlan(context.Background(), poolData, planData, data)
	})
}
