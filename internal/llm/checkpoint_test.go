package llm

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures")

// tinyArch is a two-layer Llama-shaped model small enough to ship as a fixture.
func tinyArch() Arch {
	return Arch{Name: "tiny-llama", Family: "llama", Layers: 2, Hidden: 32, Heads: 4, KVHeads: 2,
		Intermediate: 64, Vocab: 128, MaxPositions: 2048, TorchDtype: "bfloat16"}
}

const tinyConfig = `{
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 32,
  "intermediate_size": 64,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 4,
  "num_hidden_layers": 2,
  "num_key_value_heads": 2,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 128
}
`

// tinyParams: embed 128·32 = 4096; per layer q 32·32 + k,v 2·16·32 + o 32·32 = 3072, MLP
// 3·64·32 = 6144, norms 64 → 9280 × 2 = 18,560; final norm 32; lm_head 4096 → 26,784.
const tinyParams = 26_784

func tinyDir(t testing.TB) fstest.MapFS {
	return fstest.MapFS{
		"config.json":       {Data: []byte(tinyConfig)},
		"model.safetensors": {Data: mustEncode(t, llamaTensors(tinyArch(), "BF16"), map[string]string{"format": "pt"})},
	}
}

func TestTinyFixtureIsCurrent(t *testing.T) {
	dir := filepath.Join("testdata", "tiny-llama")
	fresh := tinyDir(t)
	for _, name := range []string{"config.json", "model.safetensors"} {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, fresh[name].Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestTinyFixtureIsCurrent -update)", err)
		}
		if !bytes.Equal(got, fresh[name].Data) {
			t.Errorf("%s is stale; run go test -run TestTinyFixtureIsCurrent -update", path)
		}
	}
}

func TestLoadDirFixture(t *testing.T) {
	m, err := LoadDir(os.DirFS(filepath.Join("testdata", "tiny-llama")))
	if err != nil {
		t.Fatal(err)
	}
	want := tinyArch()
	want.Name = ""
	if m.Arch != want {
		t.Errorf("arch = %+v, want %+v", m.Arch, want)
	}
	ck := m.Checkpoint
	if ck == nil {
		t.Fatal("no checkpoint")
	}
	total, _ := m.Arch.Params()
	if total != tinyParams || ck.Params != tinyParams {
		t.Errorf("params: formula %d, checkpoint %d, want %d", total, ck.Params, tinyParams)
	}
	if ck.Bytes != 2*tinyParams || ck.Tensors != 21 || len(ck.Files) != 1 || ck.ByDType[0].DType != "BF16" {
		t.Errorf("checkpoint = %+v", ck)
	}
	// The checkpoint's bytes equal the bf16 formula: the formula's layout is the real one.
	if got := m.Arch.WeightBytes(QuantBF16); got != ck.Bytes {
		t.Errorf("formula %d bytes, checkpoint %d", got, ck.Bytes)
	}
}

// shard splits tensors into n safetensors files with an index.
func shard(t testing.TB, ts []Tensor, n int, totalSize int64) fstest.MapFS {
	fsys := fstest.MapFS{"config.json": {Data: []byte(tinyConfig)}}
	wm := map[string]string{}
	per := (len(ts) + n - 1) / n
	var sum int64
	for i := 0; i < n; i++ {
		part := ts[i*per : min((i+1)*per, len(ts))]
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		fsys[name] = &fstest.MapFile{Data: mustEncode(t, part, nil)}
		for _, p := range part {
			wm[p.Name] = name
			sum += p.Elements() * dtypeBits[p.DType] / 8
		}
	}
	if totalSize < 0 {
		totalSize = sum
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": totalSize}, "weight_map": wm})
	fsys[IndexFile] = &fstest.MapFile{Data: idx}
	return fsys
}

func TestLoadDirSharded(t *testing.T) {
	m, err := LoadDir(shard(t, llamaTensors(tinyArch(), "BF16"), 3, -1))
	if err != nil {
		t.Fatal(err)
	}
	ck := m.Checkpoint
	if len(ck.Files) != 3 || ck.Params != tinyParams || ck.Bytes != 2*tinyParams || ck.IndexTotalSize != ck.Bytes {
		t.Errorf("checkpoint = %+v", ck)
	}
	for _, n := range m.Notes {
		if strings.Contains(n, "total_size") {
			t.Errorf("unexpected note %q", n)
		}
	}
}

func TestLoadDirTotalSizeDisagreement(t *testing.T) {
	m, err := LoadDir(shard(t, llamaTensors(tinyArch(), "BF16"), 2, 12345))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range m.Notes {
		found = found || strings.Contains(n, "metadata.total_size 12345 disagrees with the 53568 tensor bytes")
	}
	if !found || m.Checkpoint.Bytes != 2*tinyParams {
		t.Errorf("notes %q, bytes %d", m.Notes, m.Checkpoint.Bytes)
	}
}

func TestLoadDirErrorsNameTheFile(t *testing.T) {
	good := func() fstest.MapFS { return shard(t, llamaTensors(tinyArch(), "BF16"), 2, -1) }
	shard1 := "model-00001-of-00002.safetensors"
	tests := []struct {
		name string
		edit func(fstest.MapFS)
		want string
	}{
		{"no config", func(f fstest.MapFS) { delete(f, "config.json") }, "read config.json"},
		{"bad config", func(f fstest.MapFS) { f["config.json"] = &fstest.MapFile{Data: []byte(`{"hidden_size":1}`)} },
			"config.json: parse config.json: field num_hidden_layers: missing"},
		{"missing shard", func(f fstest.MapFS) { delete(f, shard1) }, "read " + shard1},
		{"corrupt shard", func(f fstest.MapFS) { f[shard1] = &fstest.MapFile{Data: rawFile(`{"a":1}`, 0)} }, shard1 + ": read safetensors header"},
		{"bad index", func(f fstest.MapFS) { f[IndexFile] = &fstest.MapFile{Data: []byte(`{`)} }, "parse " + IndexFile},
		{"empty weight map", func(f fstest.MapFS) { f[IndexFile] = &fstest.MapFile{Data: []byte(`{"weight_map":{}}`)} }, "weight_map is missing"},
		{"escaping path", func(f fstest.MapFS) {
			f[IndexFile] = &fstest.MapFile{Data: []byte(`{"weight_map":{"a":"../x.safetensors"}}`)}
		}, "is not a .safetensors file in the directory"},
		{"bad total size", func(f fstest.MapFS) {
			f[IndexFile] = &fstest.MapFile{Data: []byte(`{"metadata":{"total_size":-5},"weight_map":{"a":"x.safetensors"}}`)}
		}, "metadata.total_size -5"},
		{"tensor not in its file", func(f fstest.MapFS) {
			f[IndexFile] = &fstest.MapFile{Data: []byte(`{"weight_map":{"model.norm.weight":"` + shard1 + `"}}`)}
		}, `weight_map puts tensor "model.norm.weight" in ` + shard1},
		{"duplicate tensor", func(f fstest.MapFS) {
			f["model-00002-of-00002.safetensors"] = f[shard1]
		}, "is also in " + shard1},
		{"shard is a directory", func(f fstest.MapFS) {
			delete(f, shard1)
			f[shard1+"/x"] = &fstest.MapFile{}
		}, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := good()
			tt.edit(f)
			_, err := LoadDir(f)
			if err == nil {
				t.Fatal("LoadDir accepted it")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestLoadDirWithoutSafetensors(t *testing.T) {
	m, err := LoadDir(fstest.MapFS{"config.json": {Data: []byte(tinyConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Checkpoint != nil || len(m.Notes) == 0 || !strings.Contains(m.Notes[0], "from the formula") {
		t.Errorf("model = %+v", m)
	}
}

func TestLoadDirGlobsOtherSafetensorsNames(t *testing.T) {
	f := tinyDir(t)
	f["consolidated.safetensors"] = f["model.safetensors"]
	delete(f, "model.safetensors")
	m, err := LoadDir(f)
	if err != nil || m.Checkpoint == nil || m.Checkpoint.Files[0].Name != "consolidated.safetensors" {
		t.Fatalf("LoadDir = %+v, %v", m, err)
	}
}

func TestLoadDirAWQCountsPackedWeights(t *testing.T) {
	// One AWQ linear of 64 outputs × 128 inputs, group 128: qweight I32 [128, 64/8],
	// qzeros I32 [1, 64/8], scales F16 [1, 64]; plus a 16-bit norm of 64.
	ts := []Tensor{
		{Name: "model.layers.0.mlp.down_proj.qweight", DType: "I32", Shape: []int64{128, 8}},
		{Name: "model.layers.0.mlp.down_proj.qzeros", DType: "I32", Shape: []int64{1, 8}},
		{Name: "model.layers.0.mlp.down_proj.scales", DType: "F16", Shape: []int64{1, 64}},
		{Name: "model.norm.weight", DType: "F16", Shape: []int64{64}},
	}
	cfg := strings.Replace(tinyConfig, `"vocab_size": 128`,
		`"vocab_size": 128, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}`, 1)
	m, err := LoadDir(fstest.MapFS{
		"config.json":       {Data: []byte(cfg)},
		"model.safetensors": {Data: mustEncode(t, ts, nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// weights: 128·8 I32 × 8 int4 each = 8192 + 64 norm = 8256. Bytes: 4096 + 32 + 128 + 128.
	if ck := m.Checkpoint; ck.Params != 8256 || ck.Bytes != 4384 {
		t.Errorf("params %d bytes %d, want 8256 and 4384", ck.Params, ck.Bytes)
	}
	if m.Arch.Quantization != string(QuantInt4AWQ) || m.QuantBits != 4 {
		t.Errorf("quantization %q bits %d", m.Arch.Quantization, m.QuantBits)
	}
}

// forwardOnly hides ReadAt so LoadDir must fall back to sequential reads.
type forwardOnly struct{ fs.FS }

type plainFile struct{ f fs.File }

func (p plainFile) Stat() (fs.FileInfo, error) { return p.f.Stat() }
func (p plainFile) Read(b []byte) (int, error) { return p.f.Read(b) }
func (p plainFile) Close() error               { return p.f.Close() }

func (f forwardOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return plainFile{file}, nil
}

func TestLoadDirWithoutReaderAt(t *testing.T) {
	m, err := LoadDir(forwardOnly{tinyDir(t)})
	if err != nil || m.Checkpoint == nil || m.Checkpoint.Params != tinyParams {
		t.Fatalf("LoadDir = %+v, %v", m, err)
	}
}

// An index with several bad weight_map entries names the same one on every read (the first in
// tensor order); the walk over the map used to name whichever its order met first.
func TestParseIndexNamesTheSameBadEntry(t *testing.T) {
	in := []byte(`{"weight_map":{"c":"/z.safetensors","b":"y.bin","a":"../x.safetensors","d":"ok.safetensors"}}`)
	want := `parse model.safetensors.index.json: weight_map["a"]: "../x.safetensors" is not a .safetensors file in the directory`
	for i := 0; i < 100; i++ {
		_, _, err := parseIndex(in)
		if err == nil || err.Error() != want {
			t.Fatalf("read %d: %v\nwant %s", i+1, err, want)
		}
	}
}
