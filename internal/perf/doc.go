// Package perf is gpupool's performance model: how fast an LLM inference engine (vLLM-like:
// continuous batching, chunked prefill, paged KV cache) runs a model on a slice of a GPU — a
// whole GPU, a MIG instance, an MPS client, a time-sliced context, or MPS or time-slicing inside
// a MIG instance — and how much traffic one replica takes within a latency SLO. It also reads
// measured profile tables, which win over the model where they exist.
//
// It does no IO: tables are parsed from an io.Reader the caller passes.
//
// # API
//
//	m, _ := perf.New(arch, quant, perf.DefaultOptions())       // per-token costs of a model
//	e, _ := m.Place(perf.Slice{Board: b, Profile: p, Mode: perf.MPS, SMPercent: 50})
//	e.StepTime(perf.Batch{PrefillTokens, PrefillSeqs, DecodeSeqs, KVTokens}, perf.Load{Active: 1})
//	e.Estimate(perf.Workload{InputTokens, OutputTokens, Concurrency}, load)   // closed loop, means
//	e.MaxRate(workload, perf.SLO{TTFT, TPOT}, load)                          // open loop, p99
//
// A Slice is static (board, MIG profile, sharing mode, MPS cap, replicas); a Load is the sharing
// situation at one moment (how many neighbours are busy). A simulator calls StepTime once per
// engine step with the batch it formed and the neighbours active at that moment; StepTime does
// not allocate and takes well under a microsecond.
//
// # Step time
//
// One step processes T = P + D tokens: P prompt tokens of prefill chunks and D decoding
// sequences that attend over K cached tokens in total. Its kernels run one after another, so its
// GPU time is the sum over kernel classes, each at its own roofline:
//
//	GEMMs        max(F_gemm / C, W / B)           F_gemm = 2·N_body·T + 2·V·h·(S_p + D)
//	prefill attn F_pairs / C                      F_pairs = 2·H·(d_qk + d_v)·L · pairs
//	decode attn  max(F_kv / C, kv·K / B_kv)       F_kv = 2·H·(d_qk + d_v)·L · K
//	KV writes    kv·T / B
//	activations  a·T / B                          a = 2 B · L · (30·h + 6·I)
//	all-reduce   2·L·(lat + 2(tp−1)/tp · T·h·2 B / link)      (tensor parallel only)
//	step         overhead + GPU time (+ time-slice wait)
//
// N_body is the active parameters minus the embeddings (the input embedding is a lookup; the
// output head runs once per logits row: S_p finishing prompts and D decodes). pairs counts the
// (query, key) pairs of the prefill chunks (causal: L(L+1)/2 for a fresh prompt of L). W is the
// weight bytes read: all weights, except that an MoE step reads only the routed experts some
// token picked, 1 − (1 − k/E)^T of them in expectation. kv is the KV-cache bytes per token and
// a the activation traffic per token outside the weights (norms, residuals, rotary, SiLU-and-
// mul, GEMM inputs and outputs: 30 hidden-sized and 6 intermediate-sized vectors per layer,
// counted from a LLaMA layer as vLLM runs it). Everything divides by tp under tensor parallelism.
//
// The rates come from the board table and the slice:
//
//	C    = peak · MFU · s · clock(busy)     peak: BF16, FP8 (fp8 weights), or 2×BF16 (int8 W8A8);
//	                                        weight-only int4 dequantizes into BF16 GEMMs
//	B    = BW · b · e_w  · g(s / b)          B_kv the same with e_kv
//	s    = SMs of the instance / SMs of the board × MPS cap     (1 for the whole GPU)
//	b    = memory slices of the instance / memory slices of the board (1 for the whole GPU)
//
// A MIG instance gets its profile's SMs (the board table's per-profile count, e.g. 42 of 108
// for A100 3g.40gb) and memorySlices/8 of the bandwidth (and of the L2, which the model does not
// use separately). g is bandwidth saturation: a client with fewer SMs than its bandwidth share
// cannot keep enough bytes in flight (Little's law: bandwidth = bytes in flight / latency, and
// latency rises as the memory system fills), so g(r) = min(1, r(1+a)/(r+a)) with a = 0.25.
// clock is the power-limited clock: dynamic power ∝ busy SMs × f³, so with a fraction busy of
// the board's SMs busy, clock = min(1, (1/(R·busy))^(1/3)) with R = 1.4: a full A100 under
// tensor load runs at 89 % of boost, a 30 % MPS client alone at boost. That is why prefill at
// 30 % SMs takes 2.7×, not 3.3×, the full-GPU time in MuxServe's measurements. Other MIG
// instances' activity enters through Load.BoardBusy: MIG isolates SMs and bandwidth, not power.
//
// # Sharing
//
// MPS. Each client has an SM cap. While nd = (active neighbours × their duty) other clients are
// busy, SMs are contended only when the caps add up to more than the instance (then each gets
// cap/Σcaps of it); bandwidth is contended when the clients' pulls g add up to more than 1, and
// each then gets its pull's share. Kernels of different clients overlap, so the resource idles
// only when every client idles: the aggregate efficiency of 1+nd busy clients is 1 − (1 − e)^(1+nd)
// (MPSOverlapGain). Duty is the fraction of time a neighbour keeps the GPU busy; 0 means
// "like this engine": its own GPU time over its step time.
//
// Time-slicing. One context holds the whole GPU (or instance) at a time. A step of GPU time g
// takes max(1, g/q) rounds of the quantum q; in each round every active neighbour (weighted by
// its duty) takes min(q, g) plus a context switch: wait = n · duty · max(1, g/q) · (min(q, g) + sw).
// Latency grows with the number of active contexts, not with idle ones.
//
// MIG + MPS and MIG + time-slicing are the same rules with the instance as the resource pool.
//
// # Closed loop (Estimate)
//
// Concurrency requests are kept in flight (at most MaxSeqs run; the KV cache may hold fewer;
// the rest queue). Each request spends k = ⌈I / (budget − D)⌉ steps in prefill chunks and O − 1
// steps decoding, so a mean step carries D = R(O−1)/(k+O−1) decodes and R·I/(k+O−1) prompt
// tokens. TPOT is the mean step; TTFT is half a step plus k steps carrying the request's own chunk;
// throughput is R / (TTFT + (O−1)·TPOT) requests per second (Little's law). Means, not tails.
//
// # Open loop and p99 (MaxRate) — an approximation, not a simulation
//
// Poisson arrivals at rate λ. The mean step time t solves t = step(λ·I·t prompt tokens, 1 + λ(O−1)t
// decodes) (Newton's method; no solution means the engine is saturated). The decode batch is
// Poisson around its mean, so TPOT p99 is the step at D99 = 1 + D + 2.326·√D. Prefill is an M/D/1
// queue whose server processes budget − D99 prompt tokens per full step: service S = I/(budget − D99)
// × step, ρ = λS, mean wait ρS/(2(1−ρ)), and the p99 wait from the exponential tail
// P(W > x) ≈ ρ·exp(−xρ/W̄): W99 = (W̄/ρ)·ln(100ρ). TTFT p99 = one step (arrival to the next step
// boundary) + W99 + the request's own chunks. MaxRate bisects λ for the largest rate at which the
// state is stable, D99 ≤ MaxSeqs, the KV cache holds D99·(I + O/2) tokens, and both p99 targets
// hold; Limit names what binds above it. The simulator is the check on this approximation.
//
// # Memory
//
// A single-GPU engine's KV capacity comes from llm's memory model (vLLM's accounting), so perf
// and the memory estimate agree; MPS and time-slice replicas without a memory cap split the
// memory evenly (Slice.Replicas). Tensor-parallel engines, which that model does not cover, use
// memory × 0.9 − weights/tp − 1.5 GiB. When the weights do not fit, Estimate still reports what
// the slice's compute and bandwidth would give, flagged LimitNoFit; MaxRate returns 0.
//
// # Measured profiles
//
// ParseParvaGPU reads ParvaGPU's (SC'24) profiling CSV: instance size in GPCs, batch size, MPS
// process count, throughput per process, batch latency; 0,0 rows were not runnable. At
// interpolates linearly in batch between measured rows and fails, naming what is missing, outside
// them. Engine.WithMeasured makes decode-only steps take the table's latency at the engine's
// instance size and 1 + active neighbours processes: measured data wins over the model.
//
// # Constants and their sources (Options; all overridable)
//
//	MFU 0.75, weight-stream efficiency 0.80, KV-read efficiency 0.65, bandwidth half-saturation
//	0.25, power demand ratio 1.4, step overhead 4 ms: one global grid-search fit to MuxServe's
//	A100-80GB single-GPU step times (Duan et al., ICML 2024; artifact examples/placement/llama.json:
//	LLaMA-7B/13B prefill and decode at 30/50/70/100 % SMs via MPS), within physically plausible
//	ranges (cuBLAS BF16 GEMMs reach 70-80 % of peak, weight streaming ~80 % of HBM peak, paged
//	attention less; 2023-era vLLM spent a few ms of host time per step). Not tuned per row: the
//	worst single-GPU row is within 13 % (TestMuxServeFidelity prints every row). The
//	tensor-parallel rows are modelled simply (all-reduce latency + ring bandwidth): LLaMA-30B
//	prefill on 2 GPUs is within 10 %, LLaMA-65B decode on 4 GPUs is 20-23 % too fast — host and
//	NCCL launch overheads of tensor parallelism are not modelled.
//	Activation passes 30 hidden + 6 intermediate per layer: counted from the LLaMA layer.
//	Time-slice quantum 2 ms and switch 100 µs: unverified; NVIDIA does not publish the CUDA
//	time-slice length, and a switch saves and restores every SM's registers and shared memory.
//	All-reduce 15 µs + 230 GB/s: NCCL on NVLink A100s (nccl-tests orders of magnitude).
//	MaxSeqs 256 and the batched-token budget (8192 on ≥ 70 GiB devices, 2048 below): vLLM's
//	defaults, as llm uses them.
//
// # What the reference data says, and where it disagrees with common belief
//
// MuxServe's table shows decode losing only 15-40 % at 30 % SMs while prefill slows ~2.7×: small
// MPS shares suit decode. The seed article's comparison (Qwen-7B on one H100: exclusive 12,800
// tokens/s, MPS ×2 11,200, time-slicing 8,900, MIG 2g 4,800, MIG 1g 2,100) is reproduced in
// ORDER by the model (TestSeedComparisonOrdering), not in magnitude: the model gives about a
// third of those totals. Its 1g.10gb row cannot run as stated — 15.2 GB of BF16 weights do not
// fit 9.75 GiB — and its p99 latencies (680-1,240 ms) contradict its own throughputs by Little's
// law (16 requests × 768 tokens / 12,800 tokens/s = 0.96 s mean end-to-end, above its 680 ms p99).
package perf
