package v1

import "gpupool.dev/gpupool/internal/llm"

// APIVersion is the only apiVersion this package reads and writes.
const APIVersion = "gpupool.dev/v1"

// Kinds of document.
const (
	KindPool = "Pool"
	KindPlan = "Plan"
)

// Metadata names a document.
type Metadata struct {
	// Name is a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most 253 characters.
	Name string `json:"name"`
}

// Pool is what an operator writes: the fleet, the pool policy and the tenants.
type Pool struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Fleet      Fleet    `json:"fleet"`
	Policy     Policy   `json:"policy,omitzero"`
	Tenants    []Tenant `json:"tenants,omitzero"`
}

// Fleet is the hardware the pool is made of.
type Fleet struct {
	Nodes []Node `json:"nodes"`
}

// Node is one machine.
type Node struct {
	// Name is the node's name (a Kubernetes node name: a DNS-1123 subdomain), unique in the fleet.
	Name string `json:"name"`
	// Labels are copied onto the node's pool objects; Kubernetes label syntax.
	Labels map[string]string `json:"labels,omitzero"`
	// GPUs lists the node's GPUs as groups of one board; indices run across groups in order.
	GPUs []GPUGroup `json:"gpus"`
}

// GPUGroup is Count GPUs of one board.
type GPUGroup struct {
	// Board is a board name the catalog knows: canonical ("H100-SXM5-80GB"), alias or NVML name.
	Board string `json:"board"`
	// Count is the number of GPUs, 1–64.
	Count int `json:"count"`
}

// Mode is how a whole GPU is used.
// +kubebuilder:validation:Enum=exclusive;mig;mps;timeslice
type Mode string

// GPU modes.
const (
	ModeExclusive Mode = "exclusive" // one process owns the whole GPU
	ModeMIG       Mode = "mig"       // MIG instances, each possibly shared inside (see SharingMode)
	ModeMPS       Mode = "mps"       // CUDA MPS: SM-percentage and pinned-memory limits per client
	ModeTimeSlice Mode = "timeslice" // CUDA time-slicing: no memory or fault isolation
)

// allModes lists every GPU mode in a fixed order.
var allModes = []Mode{ModeExclusive, ModeMIG, ModeMPS, ModeTimeSlice}

// Policy is how the pool is run.
type Policy struct {
	// CanaryGPUs are GPUs kept out of the pool for trying new drivers, geometries and models
	// first, as "node/index" references.
	CanaryGPUs []GPURef `json:"canaryGPUs,omitzero"`
	// BurstPoolPercent is the share of pool capacity, 0–50, kept for burst leases. Default 10.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	BurstPoolPercent *int `json:"burstPoolPercent,omitzero"`
	// AllowedModes are the GPU modes the planner may use. Default: all four.
	AllowedModes []Mode `json:"allowedModes,omitzero"`
	// MaxUnavailable is how many pool GPUs may be out of service (draining or being
	// re-partitioned) at once: an integer ≥ 1 or a percentage of pool GPUs. Default 1.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="an integer >= 1 or a percentage 1%-100%"
	MaxUnavailable *IntOrPercent `json:"maxUnavailable,omitzero"`
	// ReconfigCooldown is the least time between two MIG re-partitions of one GPU. Default 1h.
	ReconfigCooldown *Duration `json:"reconfigCooldown,omitzero"`
	// KubernetesDeviceAPI is how the pool's pods get their slices on Kubernetes: "deviceplugin"
	// (resource requests for NVIDIA's device plugin) or "dra" (ResourceClaims for NVIDIA's DRA
	// driver). Unset means deviceplugin.
	KubernetesDeviceAPI KubernetesDeviceAPI `json:"kubernetesDeviceAPI,omitzero"`
	// MaxMoves is the most replicas one re-plan may move against the plan in force
	// (plan.Options.MaxMoves): the Kubernetes controller's, and `gpupool plan --current`'s unless
	// --max-moves overrides it. Unset: no limit.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	MaxMoves *int `json:"maxMoves,omitzero"`
	// Cost holds prices, energy and carbon factors for bills (docs/cost.md). Unset: no bill.
	Cost *CostPolicy `json:"cost,omitzero"`
}

// KubernetesDeviceAPI is the Kubernetes API through which pods get their GPUs or MIG instances.
// +kubebuilder:validation:Enum=deviceplugin;dra
type KubernetesDeviceAPI string

// Kubernetes device APIs.
const (
	// DeviceAPIDevicePlugin: pods request nvidia.com/* extended resources of the device plugin.
	DeviceAPIDevicePlugin KubernetesDeviceAPI = "deviceplugin"
	// DeviceAPIDRA: pods reference ResourceClaims (resource.k8s.io/v1) of NVIDIA's DRA driver.
	DeviceAPIDRA KubernetesDeviceAPI = "dra"
)

var deviceAPIs = []KubernetesDeviceAPI{DeviceAPIDevicePlugin, DeviceAPIDRA}

// DeviceAPI is the policy's Kubernetes device API, deviceplugin when unset.
func (p *Policy) DeviceAPI() KubernetesDeviceAPI {
	if p.KubernetesDeviceAPI == "" {
		return DeviceAPIDevicePlugin
	}
	return p.KubernetesDeviceAPI
}

// Isolation is a tenant's isolation tier.
// +kubebuilder:validation:Enum=hard;soft;shared
type Isolation string

// Isolation tiers.
const (
	// IsolationHard: the tenant's slices are whole GPUs or MIG instances that no other tenant
	// shares (its own replicas may share an instance through MPS or time-slicing).
	IsolationHard Isolation = "hard"
	// IsolationSoft: the tenant may share SMs through MPS with tenants of its trust group (the
	// same path), never time-slicing with other tenants.
	IsolationSoft Isolation = "soft"
	// IsolationShared: the tenant may be time-sliced or MPS-shared with any tenant.
	IsolationShared Isolation = "shared"
)

// EnergyClass is how a tenant trades energy for speed; the node agent locks clocks by it.
// +kubebuilder:validation:Enum=performance;balanced;efficiency
type EnergyClass string

// Energy classes.
const (
	EnergyPerformance EnergyClass = "performance" // highest clocks
	EnergyBalanced    EnergyClass = "balanced"    // default clocks
	EnergyEfficiency  EnergyClass = "efficiency"  // lower clocks, fewer joules per token
)

// Pattern is the shape of a tenant's request arrivals.
type Pattern string

// Arrival patterns.
const (
	PatternPoisson  Pattern = "poisson"  // independent arrivals at a steady mean rate
	PatternConstant Pattern = "constant" // evenly spaced arrivals
	PatternBursty   Pattern = "bursty"   // on/off bursts around the mean rate
	PatternDiurnal  Pattern = "diurnal"  // daily cycle; rps is the peak-hour mean
)

// Lengths is how a tenant's request token lengths vary around traffic.inputTokens and
// traffic.outputTokens, which are their means.
type Lengths string

// Length distributions.
const (
	LengthsFixed       Lengths = "fixed"       // every request has exactly the mean lengths
	LengthsUniform     Lengths = "uniform"     // uniform on [mean/2, 3·mean/2]
	LengthsExponential Lengths = "exponential" // geometric with the mean: many short, a few long
)

// Tenant is one unit of fairness and isolation.
//
// +kubebuilder:validation:XValidation:rule="!has(self.cap) || self.cap >= (has(self.reservation) ? self.reservation : 0) && self.cap >= 1",message="cap must be at least max(1, reservation)"
// +kubebuilder:validation:XValidation:rule="!(has(self.minReplicas) && has(self.maxReplicas)) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !(has(self.minReplicas) || has(self.maxReplicas))",message="replicas fixes the count; do not set minReplicas or maxReplicas with it"
type Tenant struct {
	// Name is a DNS-1123 label, unique in the pool. (An InferenceTenant takes it from its
	// metadata.name, so there it is optional.)
	// +optional
	Name string `json:"name"`
	// Path places the tenant in the hierarchy, "org/team"; each part is a DNS-1123 label.
	// Empty: directly under the root.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(/[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Path string `json:"path,omitzero"`
	// Weight is the tenant's fair-share weight, > 0. Default 1.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=true
	Weight *float64 `json:"weight,omitzero"`
	// Isolation is hard, soft or shared. Default soft.
	Isolation Isolation `json:"isolation,omitzero"`
	// Model is what the tenant serves.
	Model Model `json:"model"`
	// MaxContext is the longest sequence (prompt + output) in tokens, the replicas'
	// --max-model-len; 0 means min(8192, the model's max_position_embeddings), raised to
	// traffic.inputTokens + traffic.outputTokens when those are longer.
	// +kubebuilder:validation:Minimum=0
	MaxContext int `json:"maxContext,omitzero"`
	// Concurrency is the most requests a replica runs at once (vLLM --max-num-seqs; more wait
	// in its queue), fewer when its KV cache holds fewer; 0 leaves vLLM's default for the device.
	// +kubebuilder:validation:Minimum=0
	Concurrency int `json:"concurrency,omitzero"`
	// Traffic is the offered load.
	Traffic Traffic `json:"traffic,omitzero"`
	// SLO holds the latency objectives.
	SLO SLO `json:"slo,omitzero"`
	// Reservation is the guaranteed number of replicas, never preempted. Default 0.
	// +kubebuilder:validation:Minimum=0
	Reservation int `json:"reservation,omitzero"`
	// Cap is the most replicas the tenant may hold, ≥ max(1, Reservation). Unset: no cap.
	// +kubebuilder:validation:Minimum=0
	Cap *int `json:"cap,omitzero"`
	// Replicas fixes the replica count instead of sizing from traffic. Unset: planner decides.
	// +kubebuilder:validation:Minimum=0
	Replicas *int `json:"replicas,omitzero"`
	// MinReplicas and MaxReplicas bound the replica count the planner sizes from traffic (before
	// redundancy); each ≥ 1, MinReplicas ≤ MaxReplicas. Not with Replicas. Unset: no bound.
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int `json:"minReplicas,omitzero"`
	// +kubebuilder:validation:Minimum=1
	MaxReplicas *int `json:"maxReplicas,omitzero"`
	// Redundancy asks for one replica beyond what the load needs, on another GPU.
	Redundancy bool `json:"redundancy,omitzero"`
	// EnergyClass is performance, balanced or efficiency. Default balanced.
	EnergyClass EnergyClass `json:"energyClass,omitzero"`
	// LowFrequency marks a tenant that is called rarely: the planner may time-slice it with other
	// low-frequency tenants rather than keep a dedicated slice warm.
	LowFrequency bool `json:"lowFrequency,omitzero"`
	// Profile is the path (relative to the Pool file) of a measured performance table for this
	// tenant's model (ParvaGPU's CSV layout), used instead of the analytic performance model. A
	// tenant with a profile may name a model the LLM catalog does not know.
	Profile string `json:"profile,omitzero"`
}

// Model says which model a tenant serves and how it is stored.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.dir)",message="exactly one of model.name and model.dir must be set"
type Model struct {
	// Name is a model catalog slug, like "llama-3.1-8b". Exactly one of Name and Dir is set.
	Name string `json:"name,omitzero"`
	// Dir is a Hugging Face checkpoint directory (config.json plus safetensors files).
	Dir string `json:"dir,omitzero"`
	// Quantization is how weights are served: bf16, fp16, fp8, int8, int4-awq or int4-gptq.
	// Decode and Default rewrite known aliases (awq, gptq, w4a16, fp8_e4m3, …) to these names.
	// Empty: as the checkpoint stores them.
	Quantization llm.Quantization `json:"quantization,omitzero"`
	// KVCacheDtype is the KV-cache element type: auto (the model's dtype), bf16, fp16, fp8,
	// fp8_e4m3 or fp8_e5m2. Default auto.
	KVCacheDtype string `json:"kvCacheDtype,omitzero"`
	// Adapter, when set, makes the tenant a LoRA adapter on this base model: it may share one
	// engine (vLLM --enable-lora) with other adapters of the same base model and quantization.
	Adapter *Adapter `json:"adapter,omitzero"`
}

// Adapter is a LoRA adapter that a tenant serves on its base model.
type Adapter struct {
	// Name is what requests name (the OpenAI API's model field, vLLM's --lora-modules name=…):
	// 1-128 letters, digits, '-', '_' or '.', starting with a letter or digit; unique in the pool.
	Name string `json:"name"`
	// Dir is a Hugging Face PEFT folder (adapter_config.json and adapter_model.safetensors);
	// rank, target modules and size are read from it. At most one of Dir and Repo is set, and
	// one of Dir, Repo and Volume.
	Dir string `json:"dir,omitzero"`
	// Repo is the adapter's Hugging Face repository, "owner/name"; vLLM downloads it.
	Repo string `json:"repo,omitzero"`
	// Volume, when set, is where an engine's pods find the adapter: a PersistentVolumeClaim
	// mounted read-only. With Dir, Dir is a copy gpupool reads the adapter from; alone, Rank is
	// required. Not with Repo.
	Volume *AdapterVolume `json:"volume,omitzero"`
	// Rank is the adapter's LoRA rank r, 1-512: required with repo or a volume without dir; with
	// dir, when set, it must agree with adapter_config.json.
	Rank int `json:"rank,omitzero"`
}

// AdapterVolume is a PersistentVolumeClaim, in the engines' namespace, that holds an adapter's
// PEFT folder. Engines on different nodes mount the same claim, so it needs an access mode that
// allows that (ReadOnlyMany or ReadWriteMany).
type AdapterVolume struct {
	// ClaimName is the claim's name, a DNS-1123 subdomain.
	ClaimName string `json:"claimName"`
	// SubPath is the adapter's folder inside the claim, relative, without "..". Empty: the claim's
	// root.
	SubPath string `json:"subPath,omitzero"`
}

// Traffic is a tenant's offered load.
type Traffic struct {
	// RPS is the mean request rate, requests per second, ≥ 0.
	RPS float64 `json:"rps,omitzero"`
	// InputTokens is the mean prompt length in tokens.
	InputTokens int `json:"inputTokens,omitzero"`
	// OutputTokens is the mean generated length in tokens.
	OutputTokens int `json:"outputTokens,omitzero"`
	// Pattern is poisson, constant, bursty or diurnal. Default poisson.
	Pattern Pattern `json:"pattern,omitzero"`
	// Lengths is fixed, uniform or exponential: how the requests' token lengths vary around
	// the means. Empty means fixed (every request has the mean lengths), and is kept empty by
	// defaulting so that pools written before the field read back unchanged.
	Lengths Lengths `json:"lengths,omitzero"`
}

// SLO holds 99th-percentile latency objectives; each is optional and > 0 when set.
type SLO struct {
	// TTFTP99 bounds the time to first token.
	TTFTP99 *Duration `json:"ttftP99,omitzero"`
	// TPOTP99 bounds the time per output token after the first.
	TPOTP99 *Duration `json:"tpotP99,omitzero"`
	// E2EP99 bounds the whole request, first byte in to last token out.
	E2EP99 *Duration `json:"e2eP99,omitzero"`
}
