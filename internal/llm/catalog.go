package llm

import (
	"fmt"
	"sort"
	"strings"
)

// catalog holds the shapes of well-known models, copied from their Hugging Face config.json
// (the base model's; Instruct variants share the shape, though some Instruct configs advertise a
// shorter max_position_embeddings, e.g. Qwen2.5-7B-Instruct's 32768).
var catalog = []Arch{
	llama("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 32, 32, 0, 11008, 32000, 4096, false, "float16"),
	llama("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 40, 40, 0, 13824, 32000, 4096, false, "float16"),
	llama("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 64, 8, 0, 28672, 32000, 4096, false, "float16"),
	llama("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 0, 14336, 128256, 131072, false, "bfloat16"),
	llama("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 80, 8192, 64, 8, 0, 28672, 128256, 131072, false, "bfloat16"),
	llama("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 128, 8, 0, 53248, 128256, 131072, false, "bfloat16"),
	llama("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 131072, true, "bfloat16"),
	llama("llama-3.2-3b", "meta-llama/Llama-3.2-3B", 28, 3072, 24, 8, 128, 8192, 128256, 131072, true, "bfloat16"),
	qwen("qwen2.5-0.5b", 24, 896, 14, 2, 4864, 151936, 32768, true),
	qwen("qwen2.5-1.5b", 28, 1536, 12, 2, 8960, 151936, 32768, true),
	qwen("qwen2.5-3b", 36, 2048, 16, 2, 11008, 151936, 32768, true),
	qwen("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 131072, false),
	qwen("qwen2.5-14b", 48, 5120, 40, 8, 13824, 152064, 131072, false),
	qwen("qwen2.5-32b", 64, 5120, 40, 8, 27648, 152064, 131072, false),
	qwen("qwen2.5-72b", 80, 8192, 64, 8, 29568, 152064, 131072, false),
	mistral("mistral-7b-v0.1", "mistralai/Mistral-7B-v0.1", 32000, 4096),
	mistral("mistral-7b-v0.3", "mistralai/Mistral-7B-v0.3", 32768, 0),
	{
		Name: "mixtral-8x7b", Family: "mixtral", HFID: "mistralai/Mixtral-8x7B-v0.1",
		Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, Intermediate: 14336, Vocab: 32000,
		MaxPositions: 32768, Experts: 8, ExpertsPerToken: 2, TorchDtype: "bfloat16",
	},
	{
		// Released in FP8 (e4m3, 128×128 block scales); 61 layers, the MTP module (layer 61 in
		// the checkpoint, num_nextn_predict_layers 1) is not counted: vLLM skips it unless it
		// serves speculative decoding.
		Name: "deepseek-v3", Family: "deepseek_v3", HFID: "deepseek-ai/DeepSeek-V3",
		Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, Intermediate: 18432, Vocab: 129280,
		MaxPositions: 163840, Experts: 256, ExpertsPerToken: 8, SharedExperts: 1, MoEIntermediate: 2048,
		FirstDenseLayers: 3, KVLoraRank: 512, QLoraRank: 1536, QKNopeHeadDim: 128, QKRopeHeadDim: 64,
		VHeadDim: 128, TorchDtype: "bfloat16", Quantization: string(QuantFP8),
	},
}

func llama(slug, hf string, layers, hidden, heads, kv, headDim, inter, vocab, maxPos int, tied bool, dtype string) Arch {
	return Arch{Name: slug, Family: "llama", HFID: hf, Layers: layers, Hidden: hidden, Heads: heads, KVHeads: kv,
		HeadDim: headDim, Intermediate: inter, Vocab: vocab, MaxPositions: maxPos, TiedEmbeddings: tied, TorchDtype: dtype}
}

// qwen is a Qwen2.5 base model: q/k/v carry biases; the config's sliding_window is inert
// (use_sliding_window false).
func qwen(slug string, layers, hidden, heads, kv, inter, vocab, maxPos int, tied bool) Arch {
	hf := "Qwen/Qwen2.5-" + strings.ToUpper(strings.TrimPrefix(slug, "qwen2.5-"))
	return Arch{Name: slug, Family: "qwen2", HFID: hf, Layers: layers, Hidden: hidden, Heads: heads, KVHeads: kv,
		Intermediate: inter, Vocab: vocab, MaxPositions: maxPos, TiedEmbeddings: tied, QKVBias: true, TorchDtype: "bfloat16"}
}

// mistral is Mistral-7B: v0.1 attends within a 4096-token sliding window; v0.3 has full attention
// and a 32768-token vocabulary.
func mistral(slug, hf string, vocab, window int) Arch {
	return Arch{Name: slug, Family: "mistral", HFID: hf, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8,
		Intermediate: 14336, Vocab: vocab, MaxPositions: 32768, SlidingWindow: window, TorchDtype: "bfloat16"}
}

// catalogAliases maps other names (after normalisation) to slugs.
var catalogAliases = map[string]string{
	"mistral-7b":        "mistral-7b-v0.1",
	"mixtral-8x7b-v0.1": "mixtral-8x7b",
	"deepseek-v3-0324":  "deepseek-v3",
}

// Catalog returns every catalog architecture, sorted by slug.
func Catalog() []Arch {
	out := make([]Arch, len(catalog))
	copy(out, catalog)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds a catalog architecture by slug ("llama-3.1-8b"), case-insensitively. It also accepts
// Hugging Face ids and names: an "org/" prefix is dropped, a "meta-" prefix and the words
// instruct, chat, hf, base and it are removed, so "meta-llama/Llama-3.1-8B-Instruct",
// "Meta-Llama-3.1-8B" and "Llama-2-7b-chat-hf" all resolve. The error lists the valid slugs.
func Lookup(name string) (Arch, error) {
	key := normalizeModelName(name)
	if slug, ok := catalogAliases[key]; ok {
		key = slug
	}
	for _, a := range catalog {
		if a.Name == key {
			return a, nil
		}
	}
	slugs := make([]string, 0, len(catalog))
	for _, a := range Catalog() {
		slugs = append(slugs, a.Name)
	}
	return Arch{}, fmt.Errorf("look up model %q: not in the catalog (valid: %s)", name, strings.Join(slugs, ", "))
}

// normalizeModelName lower-cases name, drops an organisation prefix and variant words.
func normalizeModelName(name string) string {
	s := strings.ToLower(strings.TrimSpace(name))
	if i := strings.LastIndex(s, "/"); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimPrefix(s, "meta-")
	parts := strings.Split(s, "-")
	kept := parts[:0]
	for _, p := range parts {
		switch p {
		case "instruct", "chat", "hf", "base", "it":
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "-")
}
