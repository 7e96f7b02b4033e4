package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
    gpus: [{board: H100-SXM5-80GB, count: 2}]
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

// plan leaves the adapter tenants that share an engine to `gpupool lora` and says so; a hard
// adapter tenant (which never shares) and the other tenants are planned as before.
func TestPlanLeavesSharedAdaptersToLoRA(t *testing.T) {
	pool := loraPool(t, peftDir(t, 32), 0)
	stdout, stderr, code := runCmd(t, "plan", pool, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "2 adapter tenants share base-model engines") || !strings.Contains(stderr, "gpupool lora") ||
		!strings.Contains(stderr, "llama-3.1-8b/as-stored/soft:acme/x: a, b") {
		t.Errorf("stderr %q", stderr)
	}
	var pl struct {
		Tenants []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(stdout), &pl); err != nil {
		t.Fatal(err)
	}
	if len(pl.Tenants) != 1 || pl.Tenants[0].Name != "h" {
		t.Errorf("planned tenants %+v, want only the hard adapter tenant h", pl.Tenants)
	}

	// The 200-adapter example is all shared adapters: plan --out exits 0, writes nothing and says
	// where they are planned.
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, code = runCmd(t, "plan", "../../examples/lora-200.yaml", "--out", out)
	if code != 0 || !strings.Contains(stderr, "200 adapter tenants share base-model engines") || !strings.Contains(stderr, "nothing planned or written") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want nothing written", out, err)
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
