// Package v1 is the gpupool.dev/v1 file and API schema: the Pool an operator writes and the Plan
// the planner produces, their strict decoding, defaults, validation and encoding; and the node
// wire types (node.go: NodeReport, NodeLayout and their parts) that a node agent and the control
// plane exchange over `/v1/nodes/{node}`.
//
// # Documents
//
// Every document starts with
//
//	apiVersion: gpupool.dev/v1
//	kind: Pool            # or Plan
//	metadata:
//	  name: inference-prod  # DNS-1123 subdomain
//
// and is read by Decode (or DecodePool, DecodePlan) from YAML or JSON. A document whose first
// non-blank byte is '{' is JSON; anything else is YAML (one document per file). Decoding is
// strict: unknown fields (field names are case-sensitive), duplicate keys, wrong types, malformed
// durations, sizes and references, and strings with control characters are errors. Decode
// reports all of them at once as FieldErrors, each with its field path:
//
//	tenants[0].isolaton: unknown field (did you mean "isolation"?)
//	tenants[0].slo.ttftP99: invalid duration "1 second": want a number with a unit, like "500ms", "1.5s" or "2m"
//
// YAML is read as YAML 1.1, so unquoted yes, no, on, off, y and n are booleans; a string field
// that gets one says so. Numbers written where a string belongs are taken as written
// (`name: 2024` is the name "2024").
//
// Default fills the defaults of a Pool; Validate checks it and ValidatePlan checks a Plan
// against its Pool, both returning every problem as FieldErrors sorted by path:
//
//	fleet.nodes[0].gpus[1].board: unknown board "H100X" (valid: A100-SXM4-40GB, …)
//	tenants[2].slo.ttftP99: must be > 0 (got "0s")
//	tenants[3].name: duplicate name "a" (first at tenants[0].name)
//
// LoadPool does all three for a Pool. EncodeYAML and EncodeJSON write a document back; the same
// value always gives the same bytes, and what they write decodes to an equal value.
//
// # Units
//
// Durations use Go syntax with a unit: "500ms", "1.5s", "2m", "1h30m" (units ns, us, ms, s, m,
// h). They are written back in canonical form ("90s" becomes "1m30s", "2m0s" becomes "2m").
//
// Sizes use Kubernetes quantity style: plain bytes ("1048576"), binary units Ki, Mi, Gi, Ti, Pi
// (also KiB…PiB) and decimal units K (or k), M, G, T, P (also KB…PB): "512Mi", "40Gi", "80GB".
// A fraction is allowed when the result is whole bytes ("1.5Gi"). They are written back in the
// shortest exact form ("42949672960" becomes "40Gi", "80G" becomes "80GB").
//
// A GPU is named "node/index", where index counts the node's GPUs from 0 across its gpus groups
// in order. A MIG instance is named "profile@start", like "3g.40gb@4".
//
// # Pool
//
//	fleet.nodes[]            the machines; at least one
//	  name                   node name (DNS-1123 subdomain), unique
//	  labels                 map of Kubernetes labels, optional
//	  gpus[]                 {board, count}: board is a catalog name, canonical ("H100-SXM5-80GB"),
//	                         alias ("H100") or NVML name; count 1–64; at most 64 GPUs per node
//	policy
//	  canaryGPUs             GPUs kept out of the pool, as "node/index"; default none
//	  burstPoolPercent       share of pool capacity held for burst leases, 0–50; default 10
//	  allowedModes           subset of exclusive, mig, mps, timeslice; default all four
//	  maxUnavailable         pool GPUs that may be out of service at once: integer ≥ 1 or
//	                         percentage "1%"–"100%" (rounded down, at least 1); default 1
//	  reconfigCooldown       least time between two MIG re-partitions of a GPU, ≥ 0; default 1h
//	  kubernetesDeviceAPI    deviceplugin | dra: how pods get slices on Kubernetes; unset: deviceplugin
//	  maxMoves               most replicas a controller re-plan may move, 0–1,000,000; unset: no limit
//	tenants[]
//	  name                   DNS-1123 label, unique in the pool
//	  path                   place in the hierarchy, slash-separated DNS-1123 labels ("org/team");
//	                         default: under the root. A tenant's path/name may not be a prefix of
//	                         another tenant's path.
//	  weight                 fair-share weight, > 0; default 1
//	  isolation              hard | soft | shared; default soft (see Isolation below)
//	  model.name | model.dir a model catalog name ("llama-3.1-8b") or a Hugging Face checkpoint
//	                         directory; exactly one
//	  model.quantization     bf16 | fp16 | fp8 | int8 | int4-awq | int4-gptq; default: as the
//	                         checkpoint stores its weights. The aliases llm.ParseQuantization
//	                         knows (awq, gptq, w4a16, w8a8, fp8_e4m3, bfloat16, …) are accepted
//	                         and stored under the canonical name by Decode and Default
//	  model.kvCacheDtype     auto | bf16 | fp16 | fp8 | fp8_e4m3 | fp8_e5m2; default auto (the
//	                         model's dtype)
//	  maxContext             longest sequence in tokens (prompt + output), ≥ 0: the replicas'
//	                         --max-model-len; 0 means min(8192, the model's max_position_embeddings),
//	                         raised to inputTokens + outputTokens when longer; a catalog model's
//	                         maximum may not be exceeded (vLLM refuses a longer max_model_len)
//	  concurrency            most requests in flight per replica, ≥ 0; 0 lets the planner derive it
//	  traffic.rps            mean requests per second, ≥ 0
//	  traffic.inputTokens    mean prompt tokens, ≥ 0
//	  traffic.outputTokens   mean output tokens, ≥ 0; inputTokens + outputTokens ≤ maxContext
//	  traffic.pattern        poisson | constant | bursty | diurnal; default poisson
//	  slo.ttftP99            99th-percentile time to first token, > 0 when set
//	  slo.tpotP99            99th-percentile time per output token, > 0 when set
//	  slo.e2eP99             99th-percentile request latency, > 0 when set, ≥ ttftP99
//	  reservation            guaranteed replicas, never preempted, ≥ 0; default 0
//	  cap                    most replicas, ≥ 1 and ≥ reservation; default no cap
//	  replicas               fixed replica count, ≥ 1, between reservation and cap; default: sized
//	                         from traffic and SLO
//	  redundancy             one replica beyond what the load needs (or beyond a fixed count), on
//	                         another GPU; default false
//	  energyClass            performance | balanced | efficiency; default balanced
//	  lowFrequency           the tenant is called rarely and may be time-sliced with other
//	                         low-frequency tenants; default false
//	  profile                path of a measured performance table for the model; default none
//
// # Isolation
//
// A hard tenant runs on whole GPUs or MIG instances that no other tenant shares (its own
// replicas may share an instance through MPS or time-slicing). A soft tenant may share a GPU or
// instance through MPS with tenants of its trust group, which is the set of tenants with the same
// non-empty path, and is never time-sliced with another tenant. A shared tenant may share any way.
// Validate checks that the allowed modes can serve every tier: hard needs exclusive or mig, soft
// needs exclusive, mig or mps.
//
// # Plan
//
//	pool                     metadata.name of the Pool
//	gpus[]                   every GPU of the fleet, each once
//	  node, index, board     the GPU; board is the canonical name the fleet has there
//	  role                   pool | canary | burst | idle; canary exactly for policy.canaryGPUs;
//	                         canary and idle GPUs run no replicas
//	  mode                   exclusive | mig | mps | timeslice; pool and burst GPUs use allowed
//	                         modes only
//	  instances[]            MIG layout (mode mig only): profile, start, sharing.mode (none | mps |
//	                         timeslice; default none), replicas. Profiles exist on the board,
//	                         starts are legal and the layout obeys the board's MIG rules.
//	  replicas[]             replicas on the whole GPU (modes other than mig)
//	  reasons[]              why
//	tenants[]                every tenant of the pool, each once
//	  name
//	  replicas[]             {index, gpu, instance, slice}: mirrors the replicas under gpus
//	  predicted              ttftP99, tpotP99, e2eP99 (durations ≥ 0), tokensPerSecond, maxRps (≥ 0)
//	  reasons[]              why; at least one when infeasible
//	  infeasible             the plan does not meet this tenant's demand or SLO
//	summary
//	  gpusUsed               GPUs that run at least one replica
//	  gpusTotal              GPUs listed (the fleet's GPUs)
//	  lowerBound             a proven lower bound on the GPUs needed; ≤ gpusUsed unless a tenant
//	                         is infeasible
//	  baselines[]            {name, gpus, confirmed}: other strategies' GPU counts; confirmed when
//	                         the plan's simulation passed every tenant's count in it
//	  objective              the planner's objective value
//
// A replica under gpus is {tenant, index, limits, vllmArgs}; (tenant, index) is unique in the
// plan. limits.smPercent (1–100) is the MPS active-thread percentage and only for MPS slices;
// limits.memory (a size) is the pinned device-memory limit and vLLM's budget, and the limits of
// one GPU or instance add up to at most its memory; limits.timeSliceReplicas is for time-sliced
// slices only. A whole-GPU exclusive slice and an unshared MIG instance hold one replica. The
// slice kind of a replica follows from the GPU mode and the instance's sharing mode: exclusive,
// mig, mig+mps, mig+timeslice, mps or timeslice. ValidatePlan also holds each tenant's placed
// replica count to the pool's cap, and, unless the tenant is infeasible, to its fixed replicas
// (plus one with redundancy) and its reservation.
//
// # Reasons
//
// Every decision carries a Reason: a code from the closed set in reasons.go, a message and
// whether retrying can help. Validation rejects unknown codes.
//
// # Semantic checks
//
// Board, profile and model names are checked against a Catalog. The zero Validator and the
// package functions use Builtin, backed by internal/gpu and internal/llm; MIG layouts are
// checked with (*gpu.Board).Validate.
//
// # FairScenario
//
// The scenario `gpupool fair` replays (fair_scenario.go) is read by DecodeFairScenario and checked
// field by field by ValidateFairScenario, both returning FieldErrors with paths. Its YAML is read
// by YAML 1.2 rules into typed fields, so names are kept as written; YAML is limited to 16 MiB and
// JSON, decoded straight into the document, to 64 MiB. Counts are at most 2^53 and every number
// must be finite.
package v1
