// Package llm owns what a model needs from a GPU: model architectures (a catalog and Hugging Face
// config.json), safetensors checkpoint headers, the memory estimate of a vLLM instance, and the
// fit of a model on a board's slices with the vLLM arguments that make it true.
//
// It does no IO. Model directories are read through an fs.FS the caller passes; safetensors
// headers through an io.ReaderAt and a size. Only the first 8 + N bytes of a safetensors file are
// ever read, never the tensor data.
//
// A model directory is untrusted input. LoadDir checks every file with fs.Stat before opening
// it: only regular files are read (a FIFO would block, a device never end), each within its size
// limit (config.json 4 MiB, the index 64 MiB, a safetensors header 100 MB). Shard files
// (model-00001-of-00004.safetensors) without their index are an error, not a model sized at a
// fraction. Byte and weight totals are added with overflow checks. JSON syntax errors name a byte
// offset, never the offending text, so an error cannot quote a file's content. The caller passes
// an fs.FS that cannot leave the directory (the CLI uses os.Root's), so symbolic links out of it
// are refused there.
//
// # Architecture and parameters
//
// An Arch is a decoder-only transformer as config.json describes it. Its weights (Params) are:
//
//	embed_tokens                 vocab × hidden
//	per layer, attention (GQA)   q: heads·hd × hidden, k and v: kv_heads·hd × hidden, o: hidden × heads·hd
//	                             (+ q/k/v biases for Qwen2: heads·hd + 2·kv_heads·hd)
//	per layer, attention (MLA)   q_a: q_lora × hidden, q_a_norm, q_b: heads·(nope+rope) × q_lora
//	                             (or q: heads·(nope+rope) × hidden without q_lora),
//	                             kv_a: (kv_lora+rope) × hidden, kv_a_norm, kv_b: heads·(nope+v) × kv_lora,
//	                             o: hidden × heads·v
//	per dense layer, MLP         gate and up: inter × hidden, down: hidden × inter
//	per MoE layer                experts × (gate, up, down of moe_inter), shared experts alike,
//	                             router: experts × hidden
//	norms                        2·hidden per layer + hidden
//	lm_head                      vocab × hidden, unless tie_word_embeddings
//
// where hd = head_dim (explicit, else hidden / heads). MoE layers are all but the first
// first_k_dense_replace. Active parameters count ExpertsPerToken routed experts instead of all
// (embeddings count as active). Recomputed totals match the published ones: Llama-3.1-8B 8.03 B,
// 70B 70.55 B, Qwen2.5-7B 7.62 B, 14B 14.77 B, 72B 72.71 B, Mistral-7B 7.24 B, Mixtral-8x7B
// 46.70 B (12.88 B active), DeepSeek-V3 671.0 B (37.6 B active; DeepSeek's "37 B" and the
// 685 B that includes the multi-token-prediction module are both quoted). DeepSeek-V3's
// e_score_correction_bias (256 per MoE layer) is not counted.
//
// # Weights
//
// WeightBytes(q): decoder-layer projections take q's width (bf16/fp16 2 bytes, fp8/int8 1 byte,
// int4 half a byte); embeddings, lm_head, MoE routers, norms and biases stay at 16 bits, as vLLM
// keeps them (its fp8/AWQ/GPTQ methods quantize Linear layers only, and AutoAWQ leaves the MoE
// gate unquantized). Scale overheads per quantized matrix of rows × cols (out × in):
//
//	fp8        one fp32 per-tensor scale (vLLM --quantization fp8, dynamic per-tensor)
//	int8       one fp32 scale per output channel (W8A8, compressed-tensors)
//	int4-awq   group_size 128 along the input: one fp16 scale + one packed int4 zero point per
//	           group and output = 2.5 bytes per 128 weights (≈ 4.16 bits per weight)
//	int4-gptq  as AWQ, plus g_idx: one int32 per input row
//
// When a checkpoint is loaded (LoadDir), weight bytes are the sum of its tensors' byte lengths
// from the safetensors headers, not the formula; float32 tensors of an unquantized checkpoint are
// halved because vLLM runs them in 16 bits.
//
// # KV cache
//
// KVBytesPerToken(e) = 2 (K and V) × layers × kv_heads × head_dim × e, and for MLA the
// compressed latent layers × (kv_lora_rank + qk_rope_head_dim) × e, with e = 2 for bf16/fp16
// and 1 for --kv-cache-dtype fp8. Worked values (bf16): Llama-3.1-8B 131,072; Qwen2.5-7B 57,344;
// Llama-3.1-70B 327,680; Qwen2.5-14B 196,608; DeepSeek-V3 61 × 576 × 2 = 70,272.
// The KV term is bytes/token × peak tokens, where peak tokens is Context × Concurrency or an
// explicit TokenBudget, each sequence rounded up to vLLM's 16-token blocks. A sliding-window
// model (Mistral-7B-v0.1, window 4096) keeps at most window + one block per sequence.
//
// # vLLM memory accounting
//
// vLLM (v1 worker) requires ceil(total × gpu_memory_utilization) to be free at start, then gives
// the KV cache what is left of that budget after weights, the peak activation of a profiling
// forward pass, non-torch memory and (newer versions) the CUDA-graph estimate. "total" is the
// device's memory: a MIG instance's own memory under MIG, the whole GPU under MPS or
// time-slicing, where co-tenants' fractions add up and each must fit in what is free when it
// starts. On a whole GPU CUDA's total is nvidia-smi's total less driver-reserved memory
// (VisibleBytes: 616 of 143,771 MiB on an H200 with driver 580.159 — cudaMemGetInfo reported
// 150,109,880,320 bytes — and the same share assumed on other boards); inside a MIG instance it
// is taken to be the profile's memory as `nvidia-smi mig -lgip` lists it [unverified]. The
// estimate's terms:
//
//	Weights      formula or checkpoint (above)
//	KVCache      bytes/token × peak tokens (above)
//	Activations  T × 2 bytes × (4·hidden + attention width + MLP width)
//	             + S × vocab × 4 bytes × 2
//	             T = --max-num-batched-tokens (vLLM's default: 8192 on devices of 70 GiB or
//	             more but A100s, 2048 otherwise), S = min(--max-num-seqs, T) sequences whose
//	             fp32 logits and probabilities the sampler holds. Attention width = heads·hd + 2·kv_heads·hd
//	             (MLA: 2·heads·(nope+rope) + heads·v, the decompressed prefill K/V); MLP width =
//	             3·intermediate (gate+up output and the activation), for MoE
//	             top_k × (3·moe_intermediate + hidden) (vLLM fused-MoE intermediate caches).
//	             A planning formula [derived]: for Llama-3.1-8B at T = 8192 it gives 1.24 GiB,
//	             the size of the "activation peak" vLLM logs for 8B models.
//	NonTorch     256 MiB: cuBLAS workspaces and kernel modules that vLLM measures outside torch
//	             on one GPU (cuBLAS alone: 68 MiB measured on H200; attention and Triton kernels
//	             add more; NCCL for tensor parallelism, not modelled here, adds far more).
//	CUDAGraphs   256 MiB + 8 MiB per layer for the captured decode graphs (vLLM logs 0.3–1.5 GiB
//	             for 1–70 B models); 0 with --enforce-eager. A planning allowance [unverified].
//	CUDAContext  528 MiB: the CUDA context, created before vLLM measures free memory, so it must
//	             fit outside the budget (in the 1 − utilization share). Measured: a bare
//	             cudaFree(0) and torch's CUDA init both leave 552,402,944 bytes (527 MiB) used on
//	             an H200, driver 580.159, CUDA 13.0 (initialising cuBLAS adds 68 MiB, which is
//	             NonTorch's share).
//	Headroom     the rest of the slice vLLM leaves unused at that utilization.
//
// Total = max(ceil(Budget / utilization), Budget + CUDAContext), the smallest device the request
// starts on; Budget = Weights + KVCache + Activations + NonTorch + CUDAGraphs. The defaults
// follow vLLM's EngineArgs: gpu_memory_utilization 0.9, block_size 16, max_num_seqs and
// max_num_batched_tokens per device (VLLMBatchDefaults: 1024 and 8192 on devices of 70 GiB or
// more but A100s, 256 and 2048 elsewhere; get_batch_defaults in vllm/engine/arg_utils.py) (a
// later vLLM defaults to 0.92: pin the version). Worked fit (reference data, [derived]):
// Llama-3.1-8B bf16 on H100 1g.20gb (19.62 GiB) at 0.9: budget 17.66 GiB, weights 14.96 GiB,
// about 1.2 GiB of workspace, ≈ 12k tokens of KV — it fits, barely; on 3g.40gb ≈ 158k tokens.
//
// # Fit
//
// FitSlice and FitBoard try, per slice, the requested arguments; then, when no utilization was
// given, the highest utilization (≤ 0.95) that leaves the CUDA context room; then each of those
// with --enforce-eager (CUDA graphs speed up decode, so dropping them comes last). On a slice so
// small that 10% of it cannot hold the CUDA context (A100 1g.5gb), the default 0.9 is lowered to
// that highest utilization, because vLLM would refuse to start at 0.9. A fit reports the KV capacity (MaxTokens, whole blocks), the sequences of the context
// length it holds (MaxConcurrency) and the vLLM arguments; a miss says which limit binds
// (weights over the slice or the budget, no room left for KV, fewer tokens than one sequence or
// than asked) and what would help (fp8 KV, quantized weights, a shorter --max-model-len).
// Shared slices (an MPS pinned-memory cap or a time-slice budget) get the utilization
// (cap − CUDA context) / GPU memory, rounded down to 0.001.
//
// # config.json
//
// ParseConfig reads num_hidden_layers, hidden_size, num_attention_heads, vocab_size (required),
// num_key_value_heads (default: heads), head_dim (default hidden / heads), intermediate_size
// (required unless every layer is MoE), tie_word_embeddings, max_position_embeddings,
// sliding_window (ignored when use_sliding_window is false, as in Qwen2), attention_bias (Qwen2:
// biases by default), torch_dtype or dtype, the MoE fields num_local_experts / n_routed_experts /
// num_experts, num_experts_per_tok, n_shared_experts (or Qwen's shared_expert_intermediate_size),
// moe_intermediate_size, first_k_dense_replace, the MLA fields kv_lora_rank, q_lora_rank,
// qk_nope_head_dim, qk_rope_head_dim, v_head_dim, and quantization_config (quant_method awq,
// gptq, fp8, fbgemm_fp8, compressed-tensors; bits; group_size). A vision-language config whose
// language model sits under text_config is read from there. Problems are all reported at once,
// each naming its field.
//
// # safetensors
//
// Layout (huggingface/safetensors): an 8-byte little-endian u64 N, N bytes of UTF-8 JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}}, then the
// data; offsets are relative to the byte after the header. ReadHeader rejects what the reference
// implementation rejects: N over 100 MB or past the file, a header not starting with '{', invalid
// UTF-8 or JSON, unknown dtypes, negative or overflowing shapes, end < begin, offsets past the
// file, byte lengths other than elements × dtype width, and tensors that overlap, leave holes or
// leave bytes after the last one. LoadDir reads model.safetensors, or the shards that
// model.safetensors.index.json's weight_map names, says when the index's metadata.total_size
// disagrees with the headers, and counts parameters per dtype (packed int4 I32 tensors — AWQ/GPTQ
// qweight — hold 32/bits weights each; scales, zero points and g_idx are not weights).
//
// # LoRA adapters
//
// LoadAdapterDir reads a Hugging Face PEFT folder as LoadDir reads a model folder (regular files
// only, adapter_config.json within 1 MiB, the safetensors header within its limit, never tensor
// data): ParseAdapterConfig takes r, lora_alpha, target_modules (names or a regular expression),
// rank_pattern (its largest rank is what --max-lora-rank must cover) and refuses what vLLM refuses
// (modules_to_save, use_dora; vllm/lora/peft_helper.py), every problem under its field. The header
// must agree: LoRA tensor names, 2-D shapes, ranks within the config's, modules among its targets.
// LoRASlotBytes is one slot of vLLM's preallocated adapter weights (vllm/lora/layers/base_linear.py:
// lora_a_stacked (max_loras, 1, max_lora_rank, in) and lora_b_stacked (max_loras, 1, out,
// max_lora_rank) per slice of qkv_proj, o_proj, gate_up_proj and down_proj, in the model's dtype,
// sharded under tensor parallelism); Options.LoRA puts max_loras of them into the estimate before
// the KV cache, and VLLMArgs gains --enable-lora and its limits. Dense GQA models only.
package llm
