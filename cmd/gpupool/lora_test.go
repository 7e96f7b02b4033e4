package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// peftDir writes a rank-r PEFT folder on q_proj and v_proj of Llama-3.1-8B's 32 layers.
func peftDir(t *testing.T, r int64) string {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"peft_type":"LORA","r":` + strconv.FormatInt(r, 10) +
		`,"lora_alpha":32,"target_modules":["q_proj","v_proj"],"modules_to_save":null}`
	var ts []llm.Tensor
	for l := range 32 {
		p := "base_model.model.model.layers." + strconv.Itoa(l) + ".self_attn."
		ts = append(ts,
			llm.Tensor{Name: p + "q_proj.lora_A.weight", DType: "BF16", Shape: []int64{r, 4096}},
			llm.Tensor{Name: p + "q_proj.lora_B.weight", DType: "BF16", Shape: []int64{4096, r}},
			llm.Tensor{Name: p + "v_proj.lora_A.weight", DType: "BF16", Shape: []int64{r, 4096}},
			llm.Tensor{Name: p + "v_proj.lora_B.weight", DType: "BF16", Shape: []int64{1024, r}})
	}
	b, err := llm.EncodeHeader(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, llm.AdapterConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, llm.AdapterWeightsFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loraPool(t *testing.T, dirA string, rankA int) string {
	t.Helper()
	rank := ""
	if rankA > 0 {
		rank = ", rank: " + strconv.Itoa(rankA)
	}
	y := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: lora}
fleet:
  nodes:
  - name: node-a
    gpus: [{board: H100-SXM5-80GB, count: 3}]
tenants:
- name: a
  path: acme/x
  model: {name: llama-3.1-8b, adapter: {name: a-lora, dir: ` + dirA + rank + `}}
  traffic: {rps: 2, inputTokens: 512, outputTokens: 128}
  slo: {ttftP99: 1s, tpotP99: 50ms}
- name: b
  path: acme/x
  model: {name: llama-3.1-8b, adapter: {name: b-lora, repo: acme/b, rank: 16}}
  traffic: {rps: 1, inputTokens: 512, outputTokens: 128}
  slo: {ttftP99: 1s, tpotP99: 50ms}
- name: h
  path: acme/x
  isolation: hard
  model: {name: llama-3.1-8b, adapter: {name: h-lora, repo: acme/h, rank: 8}}
  traffic: {rps: 1, inputTokens: 512, outputTokens: 128}
`
	f := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// A folder adapter and a repo adapter share one engine; the hard tenant is left alone with its
// reason; the engine's flags carry both adapters; the folder's rank (32) sets --max-lora-rank.
func TestLoRACommand(t *testing.T) {
	pool := loraPool(t, peftDir(t, 32), 0)
	stdout, stderr, code := runCmd(t, "lora", pool, "--simulate", "30s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out loraOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Groups) != 1 || out.Groups[0].GPUs != 1 || len(out.Solos) != 1 || out.Solos[0].Tenant != "h" {
		t.Fatalf("got %+v", out)
	}
	flags := strings.Join(out.Groups[0].Engines[0].VLLMFlags, " ")
	if !strings.Contains(flags, "--max-lora-rank 32") || !strings.Contains(flags, "--lora-modules a-lora=") || !strings.Contains(flags, "b-lora=acme/b") {
		t.Errorf("flags %q", flags)
	}
	s := out.Groups[0].Simulated
	if s == nil || !s.MeetsAll || len(out.Groups[0].Adapters) != 2 || out.Groups[0].Adapters[0].OutputTokens == 0 {
		t.Errorf("simulation %+v %+v", s, out.Groups[0].Adapters)
	}
	// Equal weights: the engine's 1,024 slots split evenly between the two adapters.
	for en, caps := range out.Groups[0].FairCaps {
		if caps["a"] != 512 || caps["b"] != 512 {
			t.Errorf("engine %s: fair caps %v, want 512 each", en, caps)
		}
	}
	gw, _, code := runCmd(t, "lora", pool, "--simulate", "0", "--gateway", "gw")
	if code != 0 || !strings.Contains(gw, "kind: InferencePool") || !strings.Contains(gw, "value: b-lora") {
		t.Errorf("gateway output (exit %d):\n%s", code, gw)
	}
}

// A rank in the Pool that disagrees with the folder is an error naming the field.
func TestLoRACommandRankMismatch(t *testing.T) {
	pool := loraPool(t, peftDir(t, 32), 16)
	_, stderr, code := runCmd(t, "lora", pool, "--simulate", "0")
	if code != 1 || !strings.Contains(stderr, "tenants[0].model.adapter.rank: 16, but adapter_config.json says r = 32") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// fit with --max-loras: the slots come out of the KV cache (8 × 80 MiB at rank 16 for
// Llama-3.1-8B: 640 MiB, 5,120 KV tokens of 128 KiB), and the flags carry the LoRA limits; bad
// LoRA flags are all reported at once.
func TestFitWithLoRAFlags(t *testing.T) {
	kv := func(args ...string) (int64, string) {
		stdout, stderr, code := runCmd(t, append([]string{"fit", "--model", "llama-3.1-8b", "--board", "H100-SXM5-80GB", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var rep struct {
			Fits []struct {
				Slice     struct{ Name string }
				MaxTokens int64
				Args      json.RawMessage `json:"vllmArgs"`
			}
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Fits[0].MaxTokens, string(rep.Fits[0].Args)
	}
	base, _ := kv()
	with, args := kv("--max-loras", "8", "--max-lora-rank", "16", "--max-cpu-loras", "64")
	if base-with != 5120 {
		t.Errorf("KV tokens %d → %d, want 5,120 fewer", base, with)
	}
	if !strings.Contains(args, `"maxLoras": 8`) || !strings.Contains(args, `"maxCpuLoras": 64`) {
		t.Errorf("args %s", args)
	}
	_, stderr, code := runCmd(t, "fit", "--model", "llama-3.1-8b", "--max-loras", "8", "--max-lora-rank", "12", "--max-cpu-loras", "2")
	if code != 1 || !strings.Contains(stderr, "--max-lora-rank") || !strings.Contains(stderr, "--max-cpu-loras") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// plan places the adapter tenants that share an engine on a shared LoRA engine of their own on
// the fleet: a whole GPU the other tenants leave idle (here the hard adapter tenant, which never
// shares, takes one, and the burst pool holds the last); each adapter tenant names its engine.
func TestPlanPlacesSharedLoRAEngines(t *testing.T) {
	pool := loraPool(t, peftDir(t, 32), 0)
	stdout, stderr, code := runCmd(t, "plan", pool, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "1 shared LoRA engine on H100-SXM5-80GB") {
		t.Errorf("stderr %q", stderr)
	}
	var pl v1.Plan
	if err := json.Unmarshal([]byte(stdout), &pl); err != nil {
		t.Fatal(err)
	}
	if len(pl.LoRAEngines) != 1 {
		t.Fatalf("loraEngines %+v, want one engine", pl.LoRAEngines)
	}
	e := pl.LoRAEngines[0]
	if e.Model != "llama-3.1-8b" || e.MaxLoRARank != 32 || e.MaxLoRAs < 1 || len(e.Adapters) != 2 ||
		e.Adapters[0].Adapter != "a-lora" || e.Adapters[1].Adapter != "b-lora" {
		t.Errorf("engine %+v", e)
	}
	onGPU := ""
	for _, g := range pl.GPUs {
		if g.Ref() == e.GPU {
			onGPU = g.LoRAEngine
			if g.Role != v1.RolePool || g.Mode != v1.ModeExclusive || len(g.Replicas) > 0 {
				t.Errorf("engine GPU %+v", g)
			}
		}
	}
	if onGPU != e.Name {
		t.Errorf("GPU %s names engine %q, want %q", e.GPU, onGPU, e.Name)
	}
	got := map[string][]string{}
	for _, tn := range pl.Tenants {
		got[tn.Name] = tn.LoRAEngines
		if len(tn.LoRAEngines) > 0 && (len(tn.Reasons) == 0 || !strings.Contains(tn.Reasons[0].Message, "shares engine "+e.Name+" with 1 other adapters")) {
			t.Errorf("tenant %s reasons %+v", tn.Name, tn.Reasons)
		}
	}
	if len(got["a"]) != 1 || len(got["b"]) != 1 || len(got["h"]) != 0 || len(pl.Tenants) != 3 {
		t.Errorf("tenants' engines %v, want a and b on the engine, h on a replica of its own", got)
	}
	// The engine's GPU is used, and the bound counts at least one GPU for the engines besides h's.
	if pl.Summary.GPUsUsed != 2 || pl.Summary.LowerBound < 2 {
		t.Errorf("summary %+v, want 2 GPUs used and a bound of 2", pl.Summary)
	}

	// --out: a's PEFT folder is on the node only, which would need a hostPath volume: the files are
	// written, a's folder passed as written and nothing mounted from the node, and the problem
	// names a's field (exit 2).
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, code = runCmd(t, "plan", pool, "--out", out, "--gateway", "gw", "--namespace", "ml")
	if code != 2 || !strings.Contains(stderr, "node node-a: "+e.Name+": tenants[0].model.adapter.dir: adapter a-lora: ") ||
		!strings.Contains(stderr, "the Pod Security baseline forbids those: give a volume (model.adapter.volume, a PersistentVolumeClaim) or a repo") {
		t.Fatalf("plan --out, a's folder on the node: exit %d: %s", code, stderr)
	}
	spec := readDeployment(t, filepath.Join(out, "k8s", e.Name+".yaml")).Spec.Template.Spec
	if args := strings.Join(spec.Containers[0].Args, " "); !strings.Contains(args, "a-lora="+adapterDirOf(t, pool)+" ") {
		t.Errorf("a's folder on the node: args %s", args)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("a's folder on the node: hostPath volume %+v", v)
		}
	}

	// With a volume the folder is read from dir and the pod mounts it read-only from the claim;
	// b (a repo) is passed as its id; --gateway adds the gateway objects.
	y, err := os.ReadFile(pool)
	if err != nil {
		t.Fatal(err)
	}
	dirA := adapterDirOf(t, pool)
	onClaim := filepath.Join(t.TempDir(), "pool.yaml")
	y = bytes.Replace(y, []byte("dir: "+dirA), []byte("dir: "+dirA+", volume: {claimName: lora-adapters, subPath: acme/a}"), 1)
	if err := os.WriteFile(onClaim, y, 0o600); err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(t.TempDir(), "out")
	if _, stderr, code := runCmd(t, "plan", onClaim, "--out", out, "--gateway", "gw", "--namespace", "ml"); code != 0 {
		t.Fatalf("plan --out: exit %d: %s", code, stderr)
	}
	spec = readDeployment(t, filepath.Join(out, "k8s", e.Name+".yaml")).Spec.Template.Spec
	c := spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if !strings.Contains(args, "a-lora=/adapters/a-lora") || !strings.Contains(args, "b-lora=acme/b") || !strings.Contains(args, "--max-lora-rank 32") {
		t.Errorf("args %s", args)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/adapters/a-lora" && m.ReadOnly && m.SubPath == "acme/a" {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "lora-adapters" && v.PersistentVolumeClaim.ReadOnly {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("a's folder is not mounted read-only from its claim at /adapters/a-lora: %+v %+v", c.VolumeMounts, spec.Volumes)
	}
	if g, err := os.ReadFile(filepath.Join(out, "gateway", e.Name+".yaml")); err != nil || !strings.Contains(string(g), "kind: InferencePool") {
		t.Errorf("gateway objects: %v\n%s", err, g)
	}
	// --gateway adds the endpoint picker its InferencePool names.
	gw := map[string][]byte{}
	for _, f := range []string{e.Name + ".yaml", e.Name + "-epp.yaml"} {
		b, err := os.ReadFile(filepath.Join(out, "gateway", f))
		if err != nil {
			t.Fatal(err)
		}
		gw["gateway/"+f] = b
	}
	checkEndpointPickers(t, gw, "ml", 1)
}

// readDeployment reads one rendered Deployment, strictly.
func readDeployment(t *testing.T, path string) appsv1.Deployment {
	t.Helper()
	y, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(y, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// adapterDirOf is tenant a's adapter folder in the pool file.
func adapterDirOf(t *testing.T, poolFile string) string {
	t.Helper()
	b, err := os.ReadFile(poolFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v1.DecodePool(b)
	if err != nil {
		t.Fatal(err)
	}
	return p.Tenants[0].Model.Adapter.Dir
}

// The 200-adapter example is all shared adapters: plan --out exits 0 (no renderer problem) and
// renders each engine's Deployment pinned to the node of its planned GPU; so does the mixed
// example, engines beside ordinary tenants (on the device-plugin path the planner shares no MIG
// instance by MPS, which the plugin cannot serve).
func TestPlanOutLoRA200(t *testing.T) {
	mixed := filepath.Join(t.TempDir(), "mixed")
	_, stderr, code := runCmd(t, "plan", "../../examples/lora-mixed.yaml", "--out", mixed, "--gateway", "gw")
	if code != 0 || !strings.Contains(stderr, "1 shared LoRA engine") {
		t.Fatalf("lora-mixed: exit %d: %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, code = runCmd(t, "plan", "../../examples/lora-200.yaml", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "plan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := v1.DecodePlan(b)
	if err != nil {
		t.Fatal(err)
	}
	// The engine count is the LoRA planner's (its own tests hold it against simulation); here:
	// one GPU per engine, at least 10× fewer than one replica per adapter, and said on stderr.
	n := len(pl.LoRAEngines)
	if n < 1 || n > 20 || pl.Summary.GPUsUsed != n || !strings.Contains(stderr, fmt.Sprintf("%d shared LoRA engines", n)) {
		t.Fatalf("%d engines, %d GPUs used, want one GPU per engine and 1 to 20 engines; stderr: %s", n, pl.Summary.GPUsUsed, stderr)
	}
	for _, e := range pl.LoRAEngines {
		d := readDeployment(t, filepath.Join(out, "k8s", e.Name+".yaml"))
		terms := d.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "kubernetes.io/hostname" ||
			strings.Join(terms[0].MatchExpressions[0].Values, ",") != e.GPU.Node {
			t.Errorf("%s: node affinity %+v, want %s", e.Name, terms, e.GPU.Node)
		}
		if d.Annotations["gpupool.dev/replicas"] != "0@"+e.GPU.String() {
			t.Errorf("%s: annotations %v", e.Name, d.Annotations)
		}
	}
}

// With a price for the board, every engine's monthly GPU cost is split among its adapters by
// the tokens the simulation computed: the parts add up to the engines' cost, and an adapter
// with more traffic pays more.
func TestLoRACommandSplitsEngineCost(t *testing.T) {
	stdout, stderr, code := runCmd(t, "lora", "../../examples/lora-200.yaml", "--simulate", "30s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out loraOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	g := out.Groups[0]
	// 30,000 USD over 5 years of 8,760 h, for 730 h.
	want := 30000.0 / (5 * 8760) * 730
	if g.Currency != "USD" || math.Abs(g.EngineMonthlyCost-want) > 1e-6 {
		t.Fatalf("engine cost %v %s, want %v USD", g.EngineMonthlyCost, g.Currency, want)
	}
	var sum float64
	for _, v := range g.MonthlyCost {
		sum += v
	}
	if len(g.MonthlyCost) != 200 || math.Abs(sum-float64(g.GPUs)*want) > 1e-6 {
		t.Errorf("%d adapters' parts add to %v, want %d × %v", len(g.MonthlyCost), sum, g.GPUs, want)
	}
	if !(g.MonthlyCost["ad-001"] > 10*g.MonthlyCost["ad-200"]) {
		t.Errorf("ad-001 (13.6 req/s) pays %v, ad-200 (0.068 req/s) %v", g.MonthlyCost["ad-001"], g.MonthlyCost["ad-200"])
	}
}

// simulate runs a plan's shared LoRA engines with their adapters beside the other tenants'
// replicas, and its bill and `cost` (planned, and from the simulation) split each engine among
// its adapters by tokens: every adapter of the engine pays the same per output token, and the
// busiest adapter pays most.
func TestSimulateAndCostWithLoRAEngines(t *testing.T) {
	pool := "../../examples/lora-mixed.yaml"
	planY, stderr, code := runCmd(t, "plan", pool, "-o", "yaml")
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	planFile := writeTemp(t, "plan.yaml", planY)
	repJ, stderr, code := runCmd(t, "simulate", pool, "--plan", planFile, "--duration", "1m", "-o", "json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	var rep struct {
		Tenants     []struct{ Name string }
		LoRAEngines []loraEngineRun `json:"loraEngines"`
		Cost        struct{ Tenants []struct{ Name string } }
	}
	if err := json.Unmarshal([]byte(repJ), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.LoRAEngines) != 1 || len(rep.LoRAEngines[0].Adapters) != 24 || !rep.LoRAEngines[0].MeetsAll ||
		rep.LoRAEngines[0].DynamicJoules <= 0 || rep.LoRAEngines[0].Loads < 24 {
		t.Fatalf("loraEngines %+v", rep.LoRAEngines)
	}
	for _, tn := range rep.Tenants {
		if strings.HasPrefix(tn.Name, "ad-") && tn.Name != "ad-secure" {
			t.Errorf("adapter tenant %s in the replica simulator", tn.Name)
		}
	}
	if len(rep.Cost.Tenants) != 28 {
		t.Errorf("the simulation's bill has %d tenants, want all 28", len(rep.Cost.Tenants))
	}
	repFile := writeTemp(t, "sim.json", repJ)
	// (planned: an hour's offered tokens, rounded to whole tokens, so equal to 1e-5; simulated:
	// the tokens computed, to 1e-9)
	for i, args := range [][]string{{"cost", planFile, "--pool", pool, "-o", "json"}, {"cost", planFile, "--pool", pool, "--from", repFile, "-o", "json"}} {
		tol := []float64{1e-5, 1e-9}[i]
		out, stderr, code := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var c costOutput
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatal(err)
		}
		jpt := map[string]float64{}
		charge := map[string]float64{}
		for _, m := range c.Monthly {
			jpt[m.Name], charge[m.Name] = m.JPerOutputToken, *m.Chargeback
		}
		if len(jpt) != 30 || !(jpt["ad-01"] > 0) || charge["ad-01"] <= charge["ad-24"] {
			t.Fatalf("%v: rows %v", args, charge)
		}
		for n, v := range jpt {
			if strings.HasPrefix(n, "ad-") && n != "ad-secure" && math.Abs(v-jpt["ad-01"]) > tol*jpt["ad-01"] {
				t.Errorf("%v: %s pays %v J per output token, ad-01 %v: the engine's energy is not split by tokens", args, n, v, jpt["ad-01"])
			}
		}
	}
	// A report without the engines' runs does not bill them silently as idle.
	if _, stderr, code := runCmd(t, "cost", planFile, "--pool", pool, "--from", writeTemp(t, "empty.json", `{"durationSeconds": 60}`)); code != 1 ||
		!strings.Contains(stderr, "the report none") {
		t.Errorf("report without engines: exit %d: %s", code, stderr)
	}
}

// plan --current lists a shared LoRA engine's step once, among the migration's steps: dropping
// one of its two adapter tenants restarts it in place (the table's lora: row, migration.yaml's
// loraEngine).
func TestPlanCurrentLoRAEngineSteps(t *testing.T) {
	pool := loraPool(t, peftDir(t, 32), 0)
	cur, stderr, code := runCmd(t, "plan", pool, "-o", "yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	y, err := os.ReadFile(pool)
	if err != nil {
		t.Fatal(err)
	}
	// drop a (the folder adapter, which --out could not render without a volume)
	i, j := strings.Index(string(y), "- name: a\n"), strings.Index(string(y), "- name: b\n")
	if i < 0 || j < i {
		t.Fatalf("pool without tenants a and b:\n%s", y)
	}
	smaller := writeTemp(t, "smaller.yaml", string(y[:i])+string(y[j:]))
	dir := filepath.Join(t.TempDir(), "out")
	out, stderr, code := runCmd(t, "plan", smaller, "--current", writeTemp(t, "cur.yaml", cur), "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []string
	_, steps, _ := strings.Cut(out, "\nmigration:")
	for _, l := range strings.Split(steps, "\n") {
		if strings.Contains(l, "lora:") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 1 || !strings.Contains(rows[0], "restart") || !strings.Contains(rows[0], "(1 adapters") {
		t.Errorf("engine rows %q, want one restart to 1 adapter:\n%s", rows, out)
	}
	mig, err := os.ReadFile(filepath.Join(dir, "migration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(mig), "loraEngine:"); n != 1 || !strings.Contains(string(mig), "kind: restart") {
		t.Errorf("migration.yaml names an engine %d times, want one restart:\n%s", n, mig)
	}
}

// On a fleet of one H100 and one A100 the lora command plans each group on the fleet's boards
// (the teamx group on the H100, the qwen group on the A100, exit 0); held to one board it says
// that the fleet has too few GPUs of it and exits 2, the plan still printed.
func TestLoRACommandFleetTooSmall(t *testing.T) {
	const pool = "../../testdata/review2/pool-lora-1gpu.yaml"
	stdout, stderr, code := runCmd(t, "lora", pool, "--simulate", "0", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out loraOut
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	boards := map[string]int{}
	for _, g := range out.Groups {
		boards[g.Board] += g.GPUs
	}
	if len(out.Notes) != 0 || boards["H100-SXM5-80GB"] != 1 || boards["A100-SXM4-80GB"] != 1 {
		t.Errorf("engines by board %v, notes %q: want one on each board, no note", boards, out.Notes)
	}
	for _, board := range []string{"A100-SXM4-80GB", "H100-SXM5-80GB"} {
		stdout, stderr, code = runCmd(t, "lora", pool, "--simulate", "0", "--board", board)
		if code != exitPartial || !strings.Contains(stderr, "the fleet is too small") ||
			!strings.Contains(stderr, "of "+board+" and the fleet has 0 of them left") || !strings.Contains(stdout, "ENGINE") {
			t.Errorf("--board %s: exit %d, stderr %q, stdout:\n%s", board, code, stderr, stdout)
		}
	}
	_, stderr, code = runCmd(t, "lora", pool, "--simulate", "0", "--board", "A100-SXM4-80GB", "--gateway", "gw")
	if code != exitPartial || !strings.Contains(stderr, "the fleet is too small") {
		t.Errorf("--gateway: exit %d, stderr %q", code, stderr)
	}
}

// gpupool plan on the same fleet holds a GPU of each board for the two groups' engines before
// it packs the hard adapter tenant, which is then short: 11 of 12 tenants served where packing
// it first serves 8. The plan lines say so.
func TestPlanLoRAEnginesHeldBeforePacking(t *testing.T) {
	stdout, stderr, code := runCmd(t, "plan", "../../testdata/review2/pool-lora-1gpu.yaml", "--sim-requests", "-1")
	if code != exitPartial || !strings.Contains(stderr, "1 shared LoRA engine on H100-SXM5-80GB (1 A100-SXM4-80GB + 1 H100-SXM5-80GB held for shared LoRA engines") ||
		!strings.Contains(stderr, "11 of 12 tenants served, 8 when the engines take the GPUs the packing leaves idle") ||
		!strings.Contains(stderr, "1 tenant(s) infeasible: secret") ||
		!strings.Contains(stdout, "H100-SXM5-80GB exclusive pool   [lora:llama-3-1-8b-lora-0]") ||
		!strings.Contains(stdout, "A100-SXM4-80GB exclusive pool   [lora:qwen2-5-7b-lora-0]") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
}

// The plan table counts an adapter tenant's shared engines as its replicas and shows their
// prediction; the JSON carries it in the tenant's predicted.
func TestPlanTableShowsLoRAEngines(t *testing.T) {
	stdout, stderr, code := runCmd(t, "plan", "../../examples/lora-mixed.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	row := ""
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "ad-01 ") {
			row = l
		}
	}
	f := strings.Fields(row)
	// ad-01  1  shared engine lora:llama-3-1-8b-lora-0  40.9  51.7ms  10.7ms  ok
	if len(f) != 9 || f[1] != "1" || f[2]+" "+f[3]+" "+f[4] != "shared engine lora:llama-3-1-8b-lora-0" ||
		f[5] == "0" || f[6] == "-" || f[7] == "-" || f[8] != "ok" {
		t.Errorf("ad-01's row %q", row)
	}
	stdout, stderr, code = runCmd(t, "plan", "../../examples/lora-mixed.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var pl v1.Plan
	if err := json.Unmarshal([]byte(stdout), &pl); err != nil {
		t.Fatal(err)
	}
	for _, tn := range pl.Tenants {
		if len(tn.LoRAEngines) == 0 {
			continue
		}
		if p := tn.Predicted; p.TTFTP99 <= 0 || p.TPOTP99 <= 0 || p.MaxRPS <= 0 {
			t.Errorf("%s: predicted %+v", tn.Name, p)
		}
	}
}
