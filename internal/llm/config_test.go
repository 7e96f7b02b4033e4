package llm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shapeOf drops the catalog-only fields so a parsed config compares with a catalog entry.
func shapeOf(a Arch) Arch {
	a.Name, a.HFID = "", ""
	return a
}

func readConfig(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseConfigMatchesCatalog(t *testing.T) {
	for _, slug := range []string{"llama-3.1-8b", "llama-3.2-1b", "qwen2.5-7b", "mistral-7b-v0.1", "mixtral-8x7b", "deepseek-v3"} {
		t.Run(slug, func(t *testing.T) {
			got, _, err := ParseConfig(readConfig(t, slug+".json"))
			if err != nil {
				t.Fatal(err)
			}
			want := shapeOf(mustLookup(t, slug))
			if got.HeadDim == 0 {
				got.HeadDim = want.HeadDim // the catalog leaves head_dim implicit where the config does
			}
			if shapeOf(got) != want {
				t.Errorf("ParseConfig =\n%+v\nwant\n%+v", shapeOf(got), want)
			}
		})
	}
}

func TestParseConfigQuantizedAWQ(t *testing.T) {
	got, notes, err := ParseConfig(readConfig(t, "qwen2.5-7b-instruct-awq.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := shapeOf(mustLookup(t, "qwen2.5-7b"))
	want.MaxPositions, want.TorchDtype, want.Quantization = 32768, "float16", string(QuantInt4AWQ)
	if shapeOf(got) != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if len(notes) != 0 {
		t.Errorf("unexpected notes %q", notes)
	}
}

func TestParseConfigTextConfig(t *testing.T) {
	a, notes, err := ParseConfig(readConfig(t, "vlm-text-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Layers != 40 || a.Hidden != 5120 || a.HeadDim != 128 || a.TorchDtype != "bfloat16" || a.Family != "mistral" {
		t.Errorf("text_config read wrong: %+v", a)
	}
	if len(notes) == 0 || !strings.Contains(notes[0], "text_config") {
		t.Errorf("notes %q do not mention text_config", notes)
	}
	// A text_config that leans on library defaults is rejected, naming the nested field.
	_, _, err = ParseConfig([]byte(`{"model_type":"llava","text_config":{"model_type":"llama","vocab_size":32064}}`))
	if err == nil || !strings.Contains(err.Error(), "field text_config.hidden_size: missing") {
		t.Errorf("err = %v, want text_config.hidden_size missing", err)
	}
}

func TestParseConfigVariants(t *testing.T) {
	base := `"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"vocab_size":100,"intermediate_size":128`
	tests := []struct {
		name  string
		extra string
		check func(Arch) bool
	}{
		{"kv heads default to heads", ``, func(a Arch) bool { return a.KVHeads == 4 && a.HeadDimension() == 16 }},
		{"float dims accepted", `,"head_dim":32.0`, func(a Arch) bool { return a.HeadDim == 32 }},
		{"null head_dim derives", `,"head_dim":null`, func(a Arch) bool { return a.HeadDim == 0 && a.HeadDimension() == 16 }},
		{"sliding window on", `,"sliding_window":32`, func(a Arch) bool { return a.SlidingWindow == 32 }},
		{"qwen switch off", `,"sliding_window":32,"use_sliding_window":false`, func(a Arch) bool { return a.SlidingWindow == 0 }},
		{"qwen2 has bias", `,"model_type":"qwen2"`, func(a Arch) bool { return a.QKVBias }},
		{"attention_bias wins", `,"model_type":"qwen2","attention_bias":false`, func(a Arch) bool { return !a.QKVBias }},
		{"dtype alias", `,"dtype":"float16"`, func(a Arch) bool { return a.TorchDtype == "float16" }},
		{"gptq 4-bit", `,"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128}`,
			func(a Arch) bool { return a.Quantization == string(QuantInt4GPTQ) }},
		{"gptq 8-bit", `,"quantization_config":{"quant_method":"gptq","bits":8}`,
			func(a Arch) bool { return a.Quantization == string(QuantInt8) }},
		{"compressed-tensors fp8", `,"quantization_config":{"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":8,"type":"float"}}}}`,
			func(a Arch) bool { return a.Quantization == string(QuantFP8) }},
		{"compressed-tensors w4a16", `,"quantization_config":{"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":4,"type":"int"}}}}`,
			func(a Arch) bool { return a.Quantization == string(QuantInt4GPTQ) }},
		{"unknown method kept", `,"quantization_config":{"quant_method":"bitsandbytes"}`,
			func(a Arch) bool { return a.Quantization == "bitsandbytes" }},
		{"qwen moe shared width", `,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":128`,
			func(a Arch) bool { return a.Experts == 4 && a.SharedExperts == 4 && a.MoEIntermediate == 32 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _, err := ParseConfig([]byte("{" + base + tt.extra + "}"))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(a) {
				t.Errorf("unexpected %+v", a)
			}
		})
	}
}

func TestParseConfigReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []string
	}{
		{"not json", `{"num_hidden_layers":`, []string{"parse config.json"}},
		{"array", `[1,2]`, []string{"parse config.json"}},
		{"null", `null`, []string{"want a JSON object"}},
		{"all missing", `{}`, []string{"field num_hidden_layers: missing", "field hidden_size: missing",
			"field num_attention_heads: missing", "field vocab_size: missing", "field intermediate_size: missing"}},
		{"wrong types", `{"num_hidden_layers":"32","hidden_size":4096.5,"num_attention_heads":true,"vocab_size":1e30,"intermediate_size":1,"tie_word_embeddings":"no"}`,
			[]string{"field num_hidden_layers: want an integer", "field hidden_size: want an integer in range",
				"field num_attention_heads: want an integer", "field vocab_size: want an integer in range", "field tie_word_embeddings: want true or false"}},
		{"bad values", `{"num_hidden_layers":-1,"hidden_size":100,"num_attention_heads":3,"num_key_value_heads":2,"vocab_size":10,"intermediate_size":10}`,
			[]string{"field num_hidden_layers: -1", "field head_dim: missing and hidden_size 100", "field num_key_value_heads: 2 does not divide"}},
		{"moe without top-k", `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"vocab_size":10,"intermediate_size":8,"num_local_experts":8}`,
			[]string{"field num_experts_per_tok: missing"}},
		{"mla missing ranks", `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"vocab_size":10,"intermediate_size":8,"kv_lora_rank":16}`,
			[]string{"field qk_nope_head_dim: missing", "field qk_rope_head_dim: missing", "field v_head_dim: missing"}},
		{"quantization not object", `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"vocab_size":10,"intermediate_size":8,"quantization_config":3}`,
			[]string{"field quantization_config: want an object"}},
		{"text_config not object", `{"text_config":[1]}`, []string{"text_config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseConfig([]byte(tt.json))
			if err == nil {
				t.Fatal("ParseConfig accepted it")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseConfigNoDuplicateErrorsForBadField(t *testing.T) {
	_, _, err := ParseConfig([]byte(`{"num_hidden_layers":"x","hidden_size":64,"num_attention_heads":4,"vocab_size":10,"intermediate_size":8}`))
	if err == nil {
		t.Fatal("accepted")
	}
	if n := strings.Count(err.Error(), "num_hidden_layers"); n != 1 {
		t.Errorf("num_hidden_layers reported %d times: %v", n, err)
	}
}

func TestParseConfigSizeLimit(t *testing.T) {
	big := make([]byte, MaxConfigBytes+1)
	if _, _, err := ParseConfig(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("err = %v, want a size-limit error", err)
	}
}

func TestParseQuantizationSpellings(t *testing.T) {
	for in, want := range map[string]Quantization{
		"bf16": QuantBF16, "BFloat16": QuantBF16, "fp16": QuantFP16, "half": QuantFP16,
		"fp8": QuantFP8, "FP8_E4M3": QuantFP8, "fbgemm_fp8": QuantFP8,
		"int8": QuantInt8, "w8a8": QuantInt8,
		"awq": QuantInt4AWQ, "AWQ_Marlin": QuantInt4AWQ, "int4-awq": QuantInt4AWQ,
		"gptq": QuantInt4GPTQ, "w4a16": QuantInt4GPTQ, " int4-gptq ": QuantInt4GPTQ,
	} {
		got, err := ParseQuantization(in)
		if err != nil || got != want {
			t.Errorf("ParseQuantization(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseQuantization("int3"); err == nil || !strings.Contains(err.Error(), "int4-awq") {
		t.Errorf("ParseQuantization(int3) err = %v, want the valid list", err)
	}
	for _, q := range Quantizations() {
		if got, err := ParseQuantization(string(q)); err != nil || got != q || !q.Valid() {
			t.Errorf("canonical %q does not round-trip", q)
		}
	}
}

func TestKVElemBytes(t *testing.T) {
	for in, want := range map[string]int{"": 2, "auto": 2, "AUTO": 2, "fp8": 1, "fp8_e5m2": 1} {
		if got, err := KVElemBytes(in); err != nil || got != want {
			t.Errorf("KVElemBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := KVElemBytes("int4"); err == nil {
		t.Error("KVElemBytes(int4) accepted")
	}
}
