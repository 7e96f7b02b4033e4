// Package sim is gpupool's what-if simulator: it replays a Plan under traffic, replica by replica,
// on the performance model (internal/perf), and reports what every tenant and GPU would see before
// the plan touches a GPU.
//
// # API
//
//	plan, _ := sim.UniformPlan(pool, v1.ModeMPS)            // or a planner's / a user's Plan
//	s, err := sim.New(sim.Input{Pool: pool, Plan: plan}, sim.Config{Duration: time.Hour, Seed: 7})
//	res, _ := s.Run(ctx)                                    // res.Report; res.CDF, res.Timeline for plots
//	tr, err := sim.ReadTrace(r, sim.TraceOptions{...})     // Input.Trace replaces generated traffic
//
// New rejects, with every reason at once, a plan that v1.ValidatePlan rejects against its pool
// (unknown tenant, illegal MIG layout, isolation broken …) and a replica whose slice cannot hold
// its model's weights or one request of the tenant's mean length.
//
// # Engine
//
// A discrete-event simulation over a virtual clock in int64 nanoseconds. The event queue is a
// binary heap ordered by (time, scheduling sequence number), so simultaneous events run in the
// order they were scheduled and a run is a pure function of its input and seed: no goroutines,
// no wall clock, no global randomness. Each tenant has its own random stream, a PCG seeded with
// (Seed, tenant index). Two kinds of event exist: an arrival from a traffic source, and the end
// of a replica's step. Each source has at most one pending arrival and each replica at most one
// pending step, so the queue's size is bounded by the topology, and requests live in an arena
// with a free list: memory follows the requests in flight, not the duration. Events at or after
// Config.Duration are not run; requests in flight then are reported as unfinished, so every
// arrival is completed, dropped or unfinished.
//
// # Replicas
//
// Each replica is an inference engine like vLLM v1 with continuous batching and chunked prefill.
// Its limits come from perf: the per-step token budget (MaxBatchedTokens), max_num_seqs
// (Engine.MaxSeqs: vLLM's default for the device the replica sees, or the tenant's concurrency
// when set) and the KV-cache capacity in tokens. The capacity is that of the vLLM the plan
// starts: llm's memory fit (llm.FitSlice, the one the planner sizes each replica with) of the
// replica's slice (llm.ReplicaSlice: its whole GPU or MIG instance, inside its MPS pinned-memory
// cap or time-slice budget) at the tenant's quantization, KV-cache dtype and concurrency and the
// replica's own --max-model-len, --gpu-memory-utilization and --enforce-eager
// (llm.Options.WithVLLMArgs; the tenant's maxContext, else the model's default context, where
// the arguments name no length). A replica whose arguments leave no room for one sequence of
// its --max-model-len, on which vLLM would not start, is refused with the fit's reasons. A
// tensor-parallel replica's cache is perf's tensor-parallel engine's (as the planner sizes it),
// a measured tenant's its table's. A step is formed as vLLM's scheduler does:
//
//  1. running requests, oldest first: a decoding request takes one token of the budget, a request
//     still in prefill the rest of its prompt up to the budget (a chunk);
//  2. whenever the KV cache cannot hold the tokens being scheduled, the newest running request is
//     preempted by recompute: its cache is freed and it returns to the front of the queue, to
//     prefill its prompt and the tokens it already generated again (generated tokens are kept);
//  3. if nothing was preempted, waiting requests are admitted in arrival order while the budget
//     lasts, fewer than max_num_seqs run and the KV cache holds their first chunk.
//
// KV is counted in tokens, not 16-token blocks. The step that completes a prompt produces the
// first token; each later step produces one token per decoding request; a request leaves when it
// has its output tokens, freeing its cache. The step's length is perf's StepTime of the batch
// (prefill tokens, their attention pairs, decode sequences and the tokens they attend over) and
// the load at the step's start: Load.Active is the number of OTHER replicas of the same GPU (or
// MIG instance) inside a step at that moment with Duty 1 and their mean MPS cap, so idle
// neighbours cost nothing; Load.BoardBusy is the share of the board's SMs other MIG instances keep
// busy (power only). So a noisy tenant slows its MPS and time-slice neighbours and never its MIG
// neighbours. A replica with work starts its next step as soon as one ends.
//
// A tensor-parallel replica (the plan's tensorParallel group) is one engine, perf's
// tensor-parallel model over the group (all-reduce over the board's link, KV cache per GPU),
// placed on the group's first GPU; the group's other GPUs hold no engine, so their busy timeline
// stays empty while the first GPU's stands for the group (the engine's energy counts every GPU
// of the group).
//
// An arrival goes to its tenant's least-loaded replica (fewest requests running and waiting,
// ties to the first in plan order). It is dropped, and counted, when the tenant has no replica,
// when prompt + output tokens exceed the replica's --max-model-len (the last one in its vllmArgs,
// else the tenant's maxContext: vLLM answers such a request with an error, so a trace row longer
// than that is rejected, counted against the SLO attainment and named in a note), when prompt +
// output cannot fit the replica's KV cache, or when the replica already has Config.MaxQueue
// requests waiting.
//
// # Traffic
//
// Per tenant, from traffic.rps and traffic.pattern: poisson (exponential gaps), constant (even
// gaps, random phase), bursty (on/off: exponential periods of mean Config.BurstOn and BurstOff,
// default 10 s and 30 s, Poisson at rps·(on+off)/on while on, so the mean stays rps) and diurnal
// (a sinusoidal rate of period Config.DiurnalPeriod, default 24 h, from the peak rps at time 0
// down to Config.DiurnalTrough of it, default 0.15 — day traffic several times night traffic —
// drawn by thinning). Token lengths follow the tenant's traffic.lengths around its inputTokens and
// outputTokens means, unless Config.Lengths overrides every tenant's: exactly the means (fixed,
// the default), uniform on [mean/2, 3·mean/2], or geometric with the mean (exponential), capped
// by maxContext. ReadTrace reads a CSV trace instead (see its documentation for the layouts).
//
// # Report
//
// Per tenant: TTFT (arrival to first token), TPOT ((last − first token) / (output − 1)) and
// end-to-end latency p50/p95/p99 of completed requests, kept in HDR histograms (1 µs to ~28 h,
// two significant digits: fixed memory whatever the number of samples); SLO attainment (the
// fraction of completed and dropped requests whose TTFT, TPOT and end-to-end latency each meet
// the tenant's p99 objectives — a per-request check); goodput (requests and output tokens per
// second of those meeting them); output tokens per second; normalised throughput = output tokens
// generated / output tokens the arrivals asked for. Across tenants: Jain's fairness index
// (Σx)²/(n·Σx²) of normalised throughput over tenants with traffic (Jain, Chiu and Hawe, 1984).
//
// Per GPU: utilisation is the time-average fraction of the board's SMs inside a step (a MIG
// instance weighs its share of the SMs; an MPS or time-sliced GPU is busy while any replica is
// in a step). Energy is the GPU's idle power (Config.IdlePowerFraction × TDP, default 0.15:
// data-centre boards report roughly 60-100 W idle against 400-700 W TDP in nvidia-smi; an
// assumption, not a measurement) over the run, counted once per GPU, plus the dynamic energy of
// every step, from the performance model's power model (perf.Engine.StepTimeEnergy:
// compute-bound kernels draw up to TDP at the power-limited clock and with the clock cubed below
// it, memory-bound ones 0.7 of the dynamic range times the part of the bandwidth they pull; an
// MPS client's step costs the energy of its own work, however long busy neighbours stretch it).
// Power is accounted per physical GPU: a step draws its energy evenly over its length, and while
// the steps in flight on one GPU (MPS clients, time-sliced contexts, MIG instances) ask together
// for more than TDP − idle, the excess is taken off each in proportion to its power, so a GPU
// never averages above its TDP; one step alone is never cut (perf caps it at its slice's share),
// so an exclusive engine's energy is the sum of its steps'. A time-sliced context's step draws
// nothing while it waits for the others, so its power is the running context's. A note names a
// GPU whose steps were cut, with the mean watts cut. Steps in flight at the end count up to the
// end. A tenant's energy is its replicas' share of their GPUs' idle power plus its
// steps' dynamic energy; joules per output token divide either by the tokens generated. A
// tenant's energy class locks its GPU's clocks (perf.Options.ClockCap: efficiency at 70 % of
// boost), which slows compute-bound steps and lowers their power.
//
// Per replica: its slice, the GPU or instance it shares, its KV capacity and batch limits, the
// steps it ran and the preemptions it made. Notes say what the numbers assume, and how many
// trace rows fell after the end.
//
// # Limits
//
// A tenant sized from a measured profile (tenant.profile, Input.Profiles) may name any model,
// LLM or not: its replicas are perf.NewMeasuredEngine, a request is one batch item served in one
// step whose time is the table's batch latency at the step's batch and MPS process count, and a
// replica batches at most what ParvaGPU's rule chose (the highest-throughput batch within 0.45 ×
// slo.e2eP99). ParvaGPU's six example plans run this way (cmd/gpupool,
// TestSimulateParvaGPUScenarios). An active neighbour counts the same whatever its batch (the
// performance model's Load carries how many neighbours are busy, not how much work each step
// has). Requests are not cancelled by clients. Replicas start warm.
//
// # Shared LoRA engines
//
// SimulateLoRA is a separate loop for one engine serving many adapters of its base model: Poisson
// arrivals per adapter with optional bursts, a per-adapter gateway cap, vLLM's LoRA scheduling
// (running requests first, then waiting ones in order, skipping any whose adapter would exceed
// max_loras distinct adapters in the batch), LRU GPU slots and host cache with every adapter load
// charged to its step (perf.LoRACost.LoadTime), and the LoRA kernels' time on every step. The host
// cache starts with the engine's adapters, up to max_cpu_loras, as vLLM loads its --lora-modules
// at start-up. It
// reports per-adapter p99s, attainment and the tokens the engine computed for each adapter.
// LoRAFairCaps turns the planner's per-engine adapter shares into per-adapter concurrency caps
// with the fair allocator (fair.Split: the engine's slots as capacity, weighted DRF over its
// adapters); the control plane splits an applied plan's engines among their adapter tenants alike.
package sim
