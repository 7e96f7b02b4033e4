package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

// fitRow returns the whitespace-split table row for board and slice.
func fitRow(t *testing.T, out, board, slice string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == board && f[1] == slice {
			return f
		}
	}
	t.Fatalf("no row %s %s in:\n%s", board, slice, out)
	return nil
}

func TestFitTable(t *testing.T) {
	out, stderr, code := runCmd(t, "fit", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--board", "H100-SXM5-80GB", "--shared-cap", "40Gi")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "model llama-3.1-8b: 8.03 B params, KV 131072 bytes/token\n") {
		t.Errorf("first line: %q", strings.SplitN(out, "\n", 2)[0])
	}
	if !strings.Contains(out, "BOARD           SLICE") || !strings.Contains(out, "VLLM ARGS / WHY NOT") {
		t.Errorf("no header in:\n%s", out)
	}
	// Worked fit: 1g.20gb holds one 8192-token sequence, 10k–14k tokens.
	r := fitRow(t, out, "H100-SXM5-80GB", "1g.20gb")
	if r[2] != "19.62" || r[3] != "yes" || r[4] != "1" || r[6] != "14.96" {
		t.Errorf("1g.20gb row %q", r)
	}
	if !strings.Contains(strings.Join(r, " "), "--gpu-memory-utilization 0.9 --max-model-len 8192 --max-num-seqs 256 --max-num-batched-tokens 2048") {
		t.Errorf("1g.20gb args %q", r)
	}
	if r := strings.Join(fitRow(t, out, "H100-SXM5-80GB", "1g.10gb"), " "); !strings.Contains(r, "no 0 0 14.96") ||
		!strings.Contains(r, "weights 14.96 GiB exceed H100-SXM5-80GB 1g.10gb's 9.75 GiB") {
		t.Errorf("1g.10gb row %q", r)
	}
	if r := strings.Join(fitRow(t, out, "H100-SXM5-80GB", "shared-40GiB"), " "); !strings.Contains(r, "--gpu-memory-utilization 0.497") {
		t.Errorf("shared row %q", r)
	}
	if strings.Contains(out, "1g.10gb+me") {
		t.Error("+me variant not folded into 1g.10gb")
	}
	if !strings.Contains(out, "note: context 8,192 assumed") {
		t.Errorf("no context note in:\n%s", out)
	}
}

func TestFitTableMarksAdjustedFits(t *testing.T) {
	// Three 8192-token sequences need 0.95 and --enforce-eager on 1g.20gb.
	out, stderr, code := runCmd(t, "fit", "--model", "llama-3.1-8b", "--board", "H100", "--concurrency", "3", "--context", "8192")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := strings.Join(fitRow(t, out, "H100-SXM5-80GB", "1g.20gb"), " ")
	if !strings.Contains(r, "yes*") || !strings.Contains(r, "--gpu-memory-utilization 0.95") || !strings.Contains(r, "--enforce-eager") {
		t.Errorf("row %q", r)
	}
	if !strings.Contains(out, "note: H100-SXM5-80GB 1g.20gb: fits only at --gpu-memory-utilization 0.95 (default 0.90) with --enforce-eager") {
		t.Errorf("no per-slice note in:\n%s", out)
	}
}

func TestFitAllBoards(t *testing.T) {
	out, stderr, code := runCmd(t, "fit", "--model", "qwen2.5-0.5b", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep fitReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range rep.Fits {
		seen[f.Slice.Board] = true
		if f.Slice.Kind == llm.SliceGPU && !f.Fits {
			t.Errorf("a 0.5 B model does not fit the whole %s: %q", f.Slice.Board, f.Reasons)
		}
	}
	for _, b := range gpu.Boards() {
		if !seen[b.Name] {
			t.Errorf("no fits for %s", b.Name)
		}
	}
}

func TestFitJSONAndYAML(t *testing.T) {
	out, _, code := runCmd(t, "fit", "--model", "mixtral-8x7b", "--board", "H200", "--quantization", "awq", "--kv-cache-dtype", "fp8", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var rep fitReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Model.Name != "mixtral-8x7b" || rep.Model.Source != "catalog" || rep.Model.KVBytesPerToken != 65_536 ||
		rep.Model.ActiveParams >= rep.Model.Params {
		t.Errorf("model %+v", rep.Model)
	}
	if len(rep.Fits) == 0 || rep.Fits[0].Args.Quantization != "awq" || rep.Fits[0].Args.KVCacheDType != "fp8" {
		t.Errorf("fits %+v", rep.Fits)
	}
	yout, _, code := runCmd(t, "fit", "--model", "mixtral-8x7b", "--board", "H200", "--quantization", "awq", "--kv-cache-dtype", "fp8", "-o", "yaml")
	var yrep fitReport
	if code != exitOK || yaml.Unmarshal([]byte(yout), &yrep) != nil || len(yrep.Fits) != len(rep.Fits) {
		t.Errorf("yaml: exit %d, %d fits", code, len(yrep.Fits))
	}
}

// writeModelDir writes a two-layer Llama-shaped model: config.json and a real safetensors header
// with zero data.
func writeModelDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny-llama")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"model_type":"llama","num_hidden_layers":2,"hidden_size":32,"num_attention_heads":4,"num_key_value_heads":2,
"intermediate_size":64,"vocab_size":128,"max_position_embeddings":2048,"torch_dtype":"bfloat16"}`
	var ts []llm.Tensor
	add := func(name string, shape ...int64) {
		ts = append(ts, llm.Tensor{Name: name, DType: "BF16", Shape: shape})
	}
	add("model.embed_tokens.weight", 128, 32)
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"self_attn.q_proj.weight", 32, 32)
		add(p+"self_attn.k_proj.weight", 16, 32)
		add(p+"self_attn.v_proj.weight", 16, 32)
		add(p+"self_attn.o_proj.weight", 32, 32)
		add(p+"mlp.gate_proj.weight", 64, 32)
		add(p+"mlp.up_proj.weight", 64, 32)
		add(p+"mlp.down_proj.weight", 32, 64)
		add(p+"input_layernorm.weight", 32)
		add(p+"post_attention_layernorm.weight", 32)
	}
	add("model.norm.weight", 32)
	add("lm_head.weight", 128, 32)
	st, err := llm.EncodeHeader(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"config.json": []byte(cfg), "model.safetensors": st} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFitModelDir(t *testing.T) {
	dir := writeModelDir(t)
	out, stderr, code := runCmd(t, "fit", "--model-dir", dir, "--board", "A100-80GB", "--context", "2048", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep fitReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// 26,784 parameters × 2 bytes = 53,568 bytes, from the header.
	if rep.Model.Name != "tiny-llama" || rep.Model.Checkpoint == nil || rep.Model.Checkpoint.Bytes != 53_568 || rep.Model.Params != 26_784 {
		t.Errorf("model %+v", rep.Model)
	}
	for _, f := range rep.Fits {
		if f.Memory.WeightsSource != "checkpoint" || f.Memory.Weights != 53_568 || !f.Fits {
			t.Errorf("%s: %+v", f.Slice.Name, f.Memory)
		}
	}
}

func TestFitRejectsBadInputWithoutOutput(t *testing.T) {
	dir := writeModelDir(t)
	notDir := filepath.Join(dir, "config.json")
	write := func(dir, name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	badCfg := t.TempDir()
	write(badCfg, "config.json", []byte(`{"hidden_size":"x"}`))
	badST := t.TempDir()
	write(badST, "config.json", []byte(`{"num_hidden_layers":1,"hidden_size":8,"num_attention_heads":1,"vocab_size":8,"intermediate_size":8}`))
	write(badST, "model.safetensors", []byte{255, 255, 255, 255, 255, 255, 255, 255, '{'})
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no model", nil, []string{"give one", "llama-3.1-8b"}},
		{"both", []string{"--model", "llama-3.1-8b", "--model-dir", dir}, []string{"not both"}},
		{"unknown model", []string{"--model", "gpt-5"}, []string{`"gpt-5"`, "valid: deepseek-v3"}},
		{"missing dir", []string{"--model-dir", filepath.Join(dir, "nope")}, []string{"flag --model-dir", filepath.Join(dir, "nope")}},
		{"file not dir", []string{"--model-dir", notDir}, []string{notDir + " is not a directory"}},
		{"bad config", []string{"--model-dir", badCfg}, []string{"load model " + badCfg, "config.json", "field hidden_size: want an integer"}},
		{"bad safetensors", []string{"--model-dir", badST}, []string{"load model " + badST, "model.safetensors", "exceeds the 100000000-byte limit"}},
		{"bad flags together", []string{"--model", "llama-3.1-8b", "--quantization", "int3", "--kv-cache-dtype", "int4", "--context", "-5"},
			[]string{"flag --quantization", "flag --kv-cache-dtype", "flag --context: must be between 0 and 10000000 (got -5)"}},
		{"model and flag errors together", []string{"--model", "gpt-5", "--quantization", "int3", "--board", "Z100"},
			[]string{`"gpt-5"`, "flag --quantization", "flag --board"}},
		{"context too long", []string{"--model", "llama-2-7b", "--context", "8192"}, []string{"max_position_embeddings 4096"}},
		{"utilization", []string{"--model", "llama-2-7b", "--gpu-memory-utilization", "1.5"}, []string{"outside (0, 1]"}},
		{"concurrency and token budget", []string{"--model", "llama-3.1-8b", "--board", "H100", "--concurrency", "64", "--token-budget", "100"},
			[]string{"flags --concurrency and --token-budget: give one"}},
		{"token budget under one sequence", []string{"--model", "llama-3.1-8b", "--board", "H100", "--token-budget", "100"},
			[]string{"flag --token-budget: 100 tokens is less than one sequence of the 8192-token context"}},
		{"token budget under --context", []string{"--model", "llama-3.1-8b", "--context", "4096", "--token-budget", "4095"},
			[]string{"less than one sequence of the 4096-token context"}},
		{"unknown board", []string{"--model", "llama-2-7b", "--board", "Z100"}, []string{"flag --board", "Z100"}},
		{"bad cap", []string{"--model", "llama-2-7b", "--shared-cap", "lots"}, []string{`flag --shared-cap: "lots"`}},
		{"bad output", []string{"--model", "llama-2-7b", "-o", "xml"}, []string{"unknown output format"}},
		{"unknown flag", []string{"--model", "llama-2-7b", "--gpus", "3"}, []string{"unknown flag"}},
		{"positional", []string{"llama-2-7b"}, []string{"unknown command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := runCmd(t, append([]string{"fit"}, tt.args...)...)
			if code != exitInvalid {
				t.Errorf("exit %d, want %d (%s)", code, exitInvalid, stderr)
			}
			if out != "" {
				t.Errorf("wrote output on error:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q lacks %q", stderr, w)
				}
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"21474836480": 20 << 30, "20Gi": 20 << 30, "20GiB": 20 << 30, "20gib": 20 << 30, "40960Mi": 40 << 30,
		"20G": 20e9, "20GB": 20e9, "1.5Gi": 3 << 29, " 512MiB ": 512 << 20,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Gi", "-1Gi", "0", "20Xi", "1e3", "9999999Ti"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
}

// fit shows tensor-parallel replicas: Llama-3.1-70B at bf16 fits no single H100 but replicas over
// 2, 4 and 8 GPUs, each holding more KV tokens than the last, with the vLLM flag that makes it so.
func TestFitTensorParallelRows(t *testing.T) {
	out, stderr, code := runCmd(t, "fit", "--model", "llama-3.1-70b", "--board", "H100-SXM5-80GB", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep fitReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.TensorParallel) != 3 {
		t.Fatalf("%d tensor-parallel rows, want 3: %+v", len(rep.TensorParallel), rep.TensorParallel)
	}
	prev := int64(0)
	for i, r := range rep.TensorParallel {
		if r.GPUs != 2<<i || !r.Fits || r.KVTokens <= prev || r.Link != "nvlink4" ||
			!strings.Contains(r.Args, fmt.Sprintf("--tensor-parallel-size %d", r.GPUs)) {
			t.Errorf("row %d: %+v (previous KV tokens %d)", i, r, prev)
		}
		prev = r.KVTokens
	}
	table, _, _ := runCmd(t, "fit", "--model", "llama-3.1-70b", "--board", "H100-SXM5-80GB")
	if !strings.Contains(table, "TENSOR PARALLEL") || !strings.Contains(table, "8 GPUs") {
		t.Errorf("table lacks the tensor-parallel rows:\n%s", table)
	}
}
