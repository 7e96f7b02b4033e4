package llm

// Arch is a transformer's shape, as a Hugging Face config.json describes it.
type Arch struct {
	Name           string `json:"name"`           // catalog slug or directory name
	Family         string `json:"family"`         // model_type: llama, qwen2, mistral, mixtral, deepseek_v3
	HFID           string `json:"hfId,omitempty"` // Hugging Face repository the shape comes from
	Layers         int    `json:"layers"`
	Hidden         int    `json:"hidden"`
	Heads          int    `json:"heads"`
	KVHeads        int    `json:"kvHeads"`
	HeadDim        int    `json:"headDim"`
	Intermediate   int    `json:"intermediate"`
	Vocab          int    `json:"vocab"`
	MaxPositions   int    `json:"maxPositions"`
	TiedEmbeddings bool   `json:"tiedEmbeddings,omitempty"`
	QKVBias        bool   `json:"qkvBias,omitempty"`
	SlidingWindow  int    `json:"slidingWindow,omitempty"` // 0: full attention

	// Mixture of experts (0 when dense).
	Experts          int `json:"experts,omitempty"`         // routed experts per MoE layer
	ExpertsPerToken  int `json:"expertsPerToken,omitempty"` // top-k
	SharedExperts    int `json:"sharedExperts,omitempty"`
	MoEIntermediate  int `json:"moeIntermediate,omitempty"`  // per-expert width when it differs from Intermediate
	FirstDenseLayers int `json:"firstDenseLayers,omitempty"` // leading dense layers (DeepSeek first_k_dense_replace)

	// Multi-head latent attention (DeepSeek-V2/V3); KVLoraRank > 0 turns it on.
	KVLoraRank    int `json:"kvLoraRank,omitempty"`
	QLoraRank     int `json:"qLoraRank,omitempty"`
	QKNopeHeadDim int `json:"qkNopeHeadDim,omitempty"`
	QKRopeHeadDim int `json:"qkRopeHeadDim,omitempty"`
	VHeadDim      int `json:"vHeadDim,omitempty"`

	TorchDtype string `json:"torchDtype,omitempty"` // bfloat16, float16, float32
	// Quantization is the checkpoint's own quantization_config method, "" when none.
	Quantization string `json:"quantization,omitempty"`
}
