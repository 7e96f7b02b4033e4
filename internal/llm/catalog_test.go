package llm

import (
	"math"
	"sort"
	"strings"
	"testing"
)

func mustLookup(t testing.TB, name string) Arch {
	t.Helper()
	a, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// within reports whether got is within tol (a fraction) of want.
func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

func TestParamsMatchPublishedTotals(t *testing.T) {
	// Published totals: the model cards, and the domain table of HF configs recomputed.
	tests := []struct {
		slug          string
		total, active float64 // billions; active 0 = same as total
		tol           float64
	}{
		{"llama-3.1-8b", 8.03, 0, 0.005},
		{"llama-3.1-70b", 70.55, 0, 0.005},
		{"llama-3.1-405b", 405.85, 0, 0.005},
		{"llama-3.2-1b", 1.24, 0, 0.005},
		{"llama-3.2-3b", 3.21, 0, 0.005},
		{"llama-2-7b", 6.74, 0, 0.005},
		{"llama-2-13b", 13.02, 0, 0.005},
		{"llama-2-70b", 68.98, 0, 0.005},
		{"qwen2.5-0.5b", 0.494, 0, 0.005},
		{"qwen2.5-1.5b", 1.54, 0, 0.005},
		{"qwen2.5-3b", 3.09, 0, 0.005},
		{"qwen2.5-7b", 7.62, 0, 0.005},
		{"qwen2.5-14b", 14.77, 0, 0.005},
		{"qwen2.5-32b", 32.76, 0, 0.005},
		{"qwen2.5-72b", 72.71, 0, 0.005},
		{"mistral-7b-v0.1", 7.24, 0, 0.005},
		{"mistral-7b-v0.3", 7.25, 0, 0.005},
		{"mixtral-8x7b", 46.70, 12.88, 0.005},
		// DeepSeek quotes "37B activated"; the shapes give 37.55 B with embeddings counted.
		{"deepseek-v3", 671, 37, 0.02},
	}
	for _, tt := range tests {
		t.Run(tt.slug, func(t *testing.T) {
			total, active := mustLookup(t, tt.slug).Params()
			if !within(float64(total)/1e9, tt.total, 0.005) {
				t.Errorf("total = %.3f B, want %.3f B ± 0.5%%", float64(total)/1e9, tt.total)
			}
			wantActive := tt.active
			if wantActive == 0 {
				wantActive = tt.total
			}
			if !within(float64(active)/1e9, wantActive, tt.tol) {
				t.Errorf("active = %.3f B, want %.3f B ± %.1f%%", float64(active)/1e9, wantActive, tt.tol*100)
			}
		})
	}
}

func TestParamsExactLlama31_8B(t *testing.T) {
	// embed 128256·4096 = 525,336,576 (× 2 with the untied lm_head = 1,050,673,152)
	// per layer: q 4096² + k,v 2·4096·1024 + o 4096² = 41,943,040; MLP 3·4096·14336 = 176,160,768;
	// norms 8192 → 218,112,000 × 32 = 6,979,584,000; final norm 4096.
	// total = 1,050,673,152 + 6,979,584,000 + 4096 = 8,030,261,248.
	total, active := mustLookup(t, "llama-3.1-8b").Params()
	if total != 8_030_261_248 || active != total {
		t.Errorf("Params() = %d, %d; want 8,030,261,248 both", total, active)
	}
}

func TestKVBytesPerTokenWorkedNumbers(t *testing.T) {
	tests := []struct {
		slug string
		bf16 int64
	}{
		{"llama-3.1-8b", 131_072},    // 2 × 32 layers × 8 kv × 128 × 2
		{"qwen2.5-7b", 57_344},       // 2 × 28 × 4 × 128 × 2
		{"llama-3.1-70b", 327_680},   // 2 × 80 × 8 × 128 × 2
		{"qwen2.5-14b", 196_608},     // 2 × 48 × 8 × 128 × 2
		{"qwen2.5-72b", 327_680},     // 2 × 80 × 8 × 128 × 2
		{"mistral-7b-v0.1", 131_072}, // as Llama-3.1-8B
		{"mixtral-8x7b", 131_072},
		{"deepseek-v3", 70_272}, // MLA latent: 61 × (512 + 64) × 2
		{"llama-2-7b", 524_288}, // MHA: 2 × 32 × 32 × 128 × 2
	}
	for _, tt := range tests {
		a := mustLookup(t, tt.slug)
		if got := a.KVBytesPerToken(2); got != tt.bf16 {
			t.Errorf("%s: KVBytesPerToken(2) = %d, want %d", tt.slug, got, tt.bf16)
		}
		if got := a.KVBytesPerToken(1); got != tt.bf16/2 {
			t.Errorf("%s: KVBytesPerToken(1) = %d, want half of %d", tt.slug, got, tt.bf16)
		}
	}
}

func TestWeightBytesBF16MatchesTable(t *testing.T) {
	// GiB of bf16 weights from the domain table: params × 2 / 2^30.
	for slug, want := range map[string]float64{
		"llama-3.1-8b": 14.96, "llama-3.1-70b": 131.4, "qwen2.5-7b": 14.2, "qwen2.5-14b": 27.5,
		"qwen2.5-72b": 135.4, "mistral-7b-v0.1": 13.5, "mixtral-8x7b": 87.0,
	} {
		got := float64(mustLookup(t, slug).WeightBytes(QuantBF16)) / float64(GiB)
		if !within(got, want, 0.005) {
			t.Errorf("%s: bf16 weights %.2f GiB, want %.2f", slug, got, want)
		}
	}
}

func TestWeightBytesQuantizedArithmetic(t *testing.T) {
	// One layer, hidden 256, 2 heads (hd 128), 1 kv head, intermediate 512, vocab 1000, untied.
	a := Arch{Name: "t", Layers: 1, Hidden: 256, Heads: 2, KVHeads: 1, Intermediate: 512, Vocab: 1000}
	// 16-bit tensors: embed 256,000 + lm_head 256,000 + norms 3·256 = 768 → 512,768 elements.
	const sixteen = 512_768 * 2
	// linear: q 256×256 (65,536), k 128×256, v 128×256 (32,768 each), o 256×256 (65,536),
	// gate+up 2 × 512×256 (262,144), down 256×512 (131,072) → 589,824 elements in 6 matrices.
	const linear = 589_824
	// int4 groups of 128 inputs: q 256·2, k 128·2, v 128·2, o 256·2, gate/up 2·512·2, down 256·4
	// = 512 + 256 + 256 + 512 + 2048 + 1024 = 4608 groups × 2.5 bytes = 11,520.
	// GPTQ g_idx: inputs 256 ×5 matrices (q,k,v,o... gate, up) + 512 (down) → (256·6 + 512)·4 = 8192.
	// int8 scales: 4 bytes × output rows (256+128+128+256+512+512+256 = 2048) = 8192.
	tests := []struct {
		q    Quantization
		want int64
	}{
		{QuantBF16, sixteen + 2*linear},
		{QuantFP16, sixteen + 2*linear},
		{QuantFP8, sixteen + linear + 4*7}, // 7 matrices (gate and up separately) × one fp32 scale
		{QuantInt8, sixteen + linear + 8192},
		{QuantInt4AWQ, sixteen + linear/2 + 11_520},
		{QuantInt4GPTQ, sixteen + linear/2 + 11_520 + 8192},
	}
	for _, tt := range tests {
		if got := a.WeightBytes(tt.q); got != tt.want {
			t.Errorf("WeightBytes(%s) = %d, want %d", tt.q, got, tt.want)
		}
	}
}

func TestWeightBytesMoEKeepsRouterAt16Bits(t *testing.T) {
	a := mustLookup(t, "mixtral-8x7b")
	tot, _ := a.Params()
	if got, want := a.WeightBytes(QuantBF16), 2*tot; got != want {
		t.Errorf("bf16 = %d, want 2 × params = %d", got, want)
	}
	// fp8: everything except embed, lm_head, norms and router halves.
	keep := int64(2*32000*4096 + 65*4096 + 32*8*4096)
	linear := tot - keep
	if got, want := a.WeightBytes(QuantFP8), 2*keep+linear+4*(32*4+32*8*3); got != want {
		t.Errorf("fp8 = %d, want %d", got, want)
	}
}

func TestLookupAcceptsHFNames(t *testing.T) {
	for name, slug := range map[string]string{
		"llama-3.1-8b":                         "llama-3.1-8b",
		"LLAMA-3.1-8B":                         "llama-3.1-8b",
		"meta-llama/Llama-3.1-8B-Instruct":     "llama-3.1-8b",
		"meta-llama/Meta-Llama-3.1-70B":        "llama-3.1-70b",
		"meta-llama/Llama-2-7b-chat-hf":        "llama-2-7b",
		"Qwen/Qwen2.5-72B-Instruct":            "qwen2.5-72b",
		"mistralai/Mistral-7B-Instruct-v0.3":   "mistral-7b-v0.3",
		"mistral-7b":                           "mistral-7b-v0.1",
		"mistralai/Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
		"deepseek-ai/DeepSeek-V3-Base":         "deepseek-v3",
		" deepseek-v3 ":                        "deepseek-v3",
	} {
		a, err := Lookup(name)
		if err != nil || a.Name != slug {
			t.Errorf("Lookup(%q) = %q, %v; want %q", name, a.Name, err, slug)
		}
	}
}

func TestLookupUnknownListsSlugs(t *testing.T) {
	_, err := Lookup("gpt-5")
	if err == nil {
		t.Fatal("Lookup(gpt-5) succeeded")
	}
	for _, want := range []string{`"gpt-5"`, "llama-3.1-8b", "qwen2.5-72b", "deepseek-v3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestCatalogSortedValidAndCopied(t *testing.T) {
	c := Catalog()
	if len(c) < 19 {
		t.Fatalf("catalog has %d models, want at least 19", len(c))
	}
	if !sort.SliceIsSorted(c, func(i, j int) bool { return c[i].Name < c[j].Name }) {
		t.Error("Catalog() is not sorted by slug")
	}
	for _, a := range c {
		if err := a.Validate(); err != nil {
			t.Errorf("%s: %v", a.Name, err)
		}
		if a.HFID == "" || a.TorchDtype == "" || a.MaxPositions == 0 {
			t.Errorf("%s: missing HF id, dtype or max positions", a.Name)
		}
	}
	c[0].Layers = -1
	if Catalog()[0].Layers == -1 {
		t.Error("Catalog() returned the package's own slice")
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	a := Arch{Layers: 0, Hidden: 100, Heads: 3, KVHeads: 2, Vocab: 0, Experts: 4, ExpertsPerToken: 5}
	err := a.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken shape")
	}
	for _, f := range []string{"num_hidden_layers", "vocab_size", "head_dim", "num_key_value_heads", "num_experts_per_tok"} {
		if !strings.Contains(err.Error(), "field "+f) {
			t.Errorf("error lacks field %s: %v", f, err)
		}
	}
}
