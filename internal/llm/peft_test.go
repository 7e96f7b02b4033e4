package llm

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// peftConfig is adapter_config.json as PEFT 0.13 writes it (fields vLLM does not read trimmed).
const peftConfig = `{
  "base_model_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
  "bias": "none",
  "lora_alpha": 32,
  "lora_dropout": 0.05,
  "modules_to_save": null,
  "peft_type": "LORA",
  "r": 16,
  "rank_pattern": {},
  "target_modules": ["v_proj", "q_proj"],
  "task_type": "CAUSAL_LM",
  "use_dora": false,
  "use_rslora": false
}`

// loraTensors are a rank-r adapter on q_proj and v_proj of a 2-layer model with hidden 64 and
// 16-wide KV: lora_A is r × in, lora_B is out × r.
func loraTensors(r int64) []Tensor {
	var ts []Tensor
	for _, l := range []string{"0", "1"} {
		p := "base_model.model.model.layers." + l + ".self_attn."
		ts = append(ts,
			Tensor{Name: p + "q_proj.lora_A.weight", DType: "BF16", Shape: []int64{r, 64}},
			Tensor{Name: p + "q_proj.lora_B.weight", DType: "BF16", Shape: []int64{64, r}},
			Tensor{Name: p + "v_proj.lora_A.weight", DType: "BF16", Shape: []int64{r, 64}},
			Tensor{Name: p + "v_proj.lora_B.weight", DType: "BF16", Shape: []int64{16, r}},
		)
	}
	return ts
}

func adapterDir(t testing.TB, cfg string, ts []Tensor) fstest.MapFS {
	t.Helper()
	b, err := EncodeHeader(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{AdapterConfigFile: {Data: []byte(cfg)}, AdapterWeightsFile: {Data: b}}
}

// Two layers × (q: 16 × (64 + 64) + v: 16 × (64 + 16)) × 2 bytes = 2 × (2048 + 1280) × 2 = 13,312.
func TestLoadAdapterDir(t *testing.T) {
	a, err := LoadAdapterDir(adapterDir(t, peftConfig, loraTensors(16)))
	if err != nil {
		t.Fatal(err)
	}
	c := a.Config
	if c.Rank != 16 || c.MaxRank != 16 || c.Alpha != 32 || c.BaseModel != "meta-llama/Llama-3.1-8B-Instruct" ||
		strings.Join(c.TargetModules, ",") != "q_proj,v_proj" {
		t.Errorf("config %+v", c)
	}
	if a.Bytes != 13_312 || a.Tensors != 8 || strings.Join(a.Modules, ",") != "q_proj,v_proj" {
		t.Errorf("adapter bytes %d tensors %d modules %v", a.Bytes, a.Tensors, a.Modules)
	}
}

func TestAdapterRankPatternRaisesMaxRank(t *testing.T) {
	cfg := strings.Replace(peftConfig, `"rank_pattern": {}`, `"rank_pattern": {"v_proj": 64}`, 1)
	c, err := ParseAdapterConfig([]byte(cfg))
	if err != nil || c.Rank != 16 || c.MaxRank != 64 || c.RankPattern["v_proj"] != 64 {
		t.Errorf("got %+v, %v", c, err)
	}
	// A regular expression as target_modules is kept as such.
	cfg = strings.Replace(peftConfig, `["v_proj", "q_proj"]`, `".*\\.(q|v)_proj"`, 1)
	if c, err := ParseAdapterConfig([]byte(cfg)); err != nil || c.TargetRegex != `.*\.(q|v)_proj` || c.TargetModules != nil {
		t.Errorf("regex: %+v, %v", c, err)
	}
}

// Every problem of a hostile config is reported at once, each under its field.
func TestAdapterConfigHostile(t *testing.T) {
	cfg := `{"peft_type":"PREFIX_TUNING","r":100000,"lora_alpha":-1,"target_modules":["q_proj","a b"],
	"modules_to_save":["lm_head"],"use_dora":true,"use_rslora":"yes","rank_pattern":{"q":2.5}}`
	_, err := ParseAdapterConfig([]byte(cfg))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, f := range []string{"peft_type:", "r:", "lora_alpha:", "target_modules[1]:", "modules_to_save:", "use_dora:",
		"use_rslora:", `rank_pattern["q"]:`} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error does not name %s:\n%v", f, err)
		}
	}
	for name, data := range map[string]string{
		"not json":      "\x00\x01secret",
		"array":         `[1,2]`,
		"missing":       `{}`,
		"bad regex":     `{"r":8,"lora_alpha":8,"target_modules":"(("}`,
		"too many":      `{"r":8,"lora_alpha":8,"target_modules":[` + strings.Repeat(`"a",`, 64) + `"a"]}`,
		"fractional r":  `{"r":8.5,"lora_alpha":8,"target_modules":["q_proj"]}`,
		"rank too high": `{"r":1024,"lora_alpha":8,"target_modules":["q_proj"]}`,
		"huge":          strings.Repeat(" ", MaxAdapterConfigBytes+1),
	} {
		_, err := ParseAdapterConfig([]byte(data))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error quotes the file: %v", name, err)
		}
	}
}

// The header must agree with the config: ranks within it, modules among its targets, names that
// are LoRA weights, two-dimensional shapes.
func TestAdapterHeaderHostile(t *testing.T) {
	ts := loraTensors(32) // rank 32 under a config of rank 16
	ts = append(ts,
		Tensor{Name: "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight", DType: "BF16", Shape: []int64{16, 64}},
		Tensor{Name: "model.embed_tokens.weight", DType: "BF16", Shape: []int64{8, 8}},
		Tensor{Name: "x.k_proj.lora_A.weight", DType: "BF16", Shape: []int64{16, 4, 4}},
	)
	_, err := LoadAdapterDir(adapterDir(t, peftConfig, ts))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"adapter_model.safetensors", "rank 32 is outside 1..16", `"model.embed_tokens.weight"`,
		"must have 2 dimensions", `module "down_proj" is not in`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	if _, err := LoadAdapterDir(adapterDir(t, peftConfig, nil)); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("empty adapter: %v", err)
	}
	if _, err := LoadAdapterDir(fstest.MapFS{AdapterConfigFile: {Data: []byte(peftConfig)}}); err == nil ||
		!strings.Contains(err.Error(), AdapterWeightsFile) {
		t.Errorf("missing weights: %v", err)
	}
}

// Files that are not regular are refused before they are opened; a link out of the folder is
// refused by os.Root.
func TestAdapterDirNonRegularFiles(t *testing.T) {
	d := adapterDir(t, peftConfig, loraTensors(16))
	d[AdapterConfigFile] = &fstest.MapFile{Mode: fs.ModeNamedPipe}
	if _, err := LoadAdapterDir(d); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("FIFO config: %v", err)
	}
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "cfg.json")
	if err := os.WriteFile(outside, []byte(peftConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, AdapterConfigFile)); err != nil {
		t.Skip(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := LoadAdapterDir(root.FS()); err == nil {
		t.Error("a link out of the folder was followed")
	}
}

func FuzzParseAdapterConfig(f *testing.F) {
	f.Add([]byte(peftConfig))
	f.Add([]byte(`{"r":8,"lora_alpha":16,"target_modules":".*proj","rank_pattern":{"q_proj":64}}`))
	f.Add([]byte(`{"r":1e400}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseAdapterConfig(data)
		if err != nil {
			return
		}
		// Whatever parses can be served: ranks vLLM can hold, a positive alpha, some target.
		if c.Rank < 1 || c.MaxRank < c.Rank || c.MaxRank > MaxLoRARank || RankFor(c.MaxRank) == 0 || !(c.Alpha > 0) {
			t.Fatalf("parsed but unservable: %+v", c)
		}
		if len(c.TargetModules) == 0 && c.TargetRegex == "" {
			t.Fatalf("parsed without targets: %+v", c)
		}
	})
}

func FuzzLoadAdapterDir(f *testing.F) {
	good, err := EncodeHeader(loraTensors(16), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(peftConfig), good)
	f.Add([]byte(peftConfig), good[:20])
	f.Fuzz(func(t *testing.T, cfg, weights []byte) {
		a, err := LoadAdapterDir(fstest.MapFS{AdapterConfigFile: {Data: cfg}, AdapterWeightsFile: {Data: weights}})
		if err != nil {
			return
		}
		if a.Bytes < 0 || a.Tensors < 1 || len(a.Modules) == 0 || a.Bytes > int64(len(weights)) {
			t.Fatalf("loaded nonsense: %+v from %d bytes", a, len(weights))
		}
	})
}
