package v1

import "slices"

// Plan is what the planner produces for a pool: a role, a mode and a layout for every GPU of the
// fleet, where each tenant replica runs, what the performance model predicts, and why. The
// simulator and the control plane read it.
type Plan struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	// Pool is the metadata.name of the Pool the plan is for.
	Pool string `json:"pool"`
	// GPUs lists every GPU of the fleet exactly once (unused ones with role idle).
	GPUs []PlanGPU `json:"gpus,omitzero"`
	// Tenants lists every tenant of the pool exactly once.
	Tenants []PlanTenant `json:"tenants,omitzero"`
	// LoRAEngines are the shared engines that serve adapter tenants (model.adapter) of one base
	// model many to an engine, each on a whole GPU listed under GPUs (docs/lora.md).
	LoRAEngines []PlanLoRAEngine `json:"loraEngines,omitzero"`
	// Summary holds the totals.
	Summary Summary `json:"summary"`
}

// Role is what a GPU is for.
type Role string

// GPU roles.
const (
	RolePool   Role = "pool"   // runs tenant replicas under the plan
	RoleCanary Role = "canary" // kept out of the pool (Policy.CanaryGPUs); runs no tenant replicas
	RoleBurst  Role = "burst"  // held for burst leases; may run replicas leased from it
	RoleIdle   Role = "idle"   // not needed by this plan; runs no tenant replicas
)

// SharingMode is how one MIG instance is shared by the replicas on it.
type SharingMode string

// Sharing modes inside a MIG instance.
const (
	SharingNone      SharingMode = "none"      // one replica owns the instance
	SharingMPS       SharingMode = "mps"       // MPS inside the instance (one MPS daemon per instance)
	SharingTimeSlice SharingMode = "timeslice" // time-slicing of the instance
)

// SliceKind is what one tenant replica runs on.
type SliceKind string

// Slice kinds; each follows from the GPU's mode and, under MIG, the instance's sharing mode.
const (
	SliceExclusive    SliceKind = "exclusive"     // a whole GPU (mode exclusive)
	SliceMIG          SliceKind = "mig"           // a whole MIG instance (sharing none)
	SliceMIGMPS       SliceKind = "mig+mps"       // an MPS share of a MIG instance
	SliceMIGTimeSlice SliceKind = "mig+timeslice" // a time-slice of a MIG instance
	SliceMPS          SliceKind = "mps"           // an MPS share of a whole GPU
	SliceTimeSlice    SliceKind = "timeslice"     // a time-slice of a whole GPU
)

// PlanGPU is the plan for one GPU.
type PlanGPU struct {
	// Node and Index name the GPU as in GPURef.
	Node  string `json:"node"`
	Index int    `json:"index"`
	// Board is the canonical board name; it must be the board the fleet lists at Node/Index.
	Board string `json:"board"`
	// Role is pool, canary, burst or idle.
	Role Role `json:"role"`
	// Mode is exclusive, mig, mps or timeslice.
	Mode Mode `json:"mode"`
	// Instances is the MIG layout (mode mig only).
	Instances []PlanInstance `json:"instances,omitzero"`
	// Replicas run on the whole GPU (modes exclusive, mps and timeslice).
	Replicas []PlanReplica `json:"replicas,omitzero"`
	// LoRAEngine names the shared LoRA engine (Plan.LoRAEngines) that runs on the whole GPU:
	// mode exclusive, role pool and no Replicas then.
	LoRAEngine string `json:"loraEngine,omitzero"`
	// Reasons say why the GPU has this role, mode and layout.
	Reasons []Reason `json:"reasons,omitzero"`
}

// Ref returns the GPU's "node/index" reference.
func (g PlanGPU) Ref() GPURef { return GPURef{Node: g.Node, Index: g.Index} }

// TenantBoards returns, by tenant name, the sorted distinct board names of the GPUs that each
// tenant's replicas (PlanTenant.Replicas) and shared LoRA engines (PlanTenant.LoRAEngines) run
// on. A tenant without a placement has no entry; a reference to a GPU or engine the plan does not
// list gives the empty name.
func (p *Plan) TenantBoards() map[string][]string {
	boardOf := make(map[GPURef]string, len(p.GPUs))
	for _, g := range p.GPUs {
		boardOf[g.Ref()] = g.Board
	}
	engineBoard := make(map[string]string, len(p.LoRAEngines))
	for _, e := range p.LoRAEngines {
		engineBoard[e.Name] = boardOf[e.GPU]
	}
	out := map[string][]string{}
	for _, t := range p.Tenants {
		var names []string
		for _, r := range t.Replicas {
			names = append(names, boardOf[r.GPU])
		}
		for _, e := range t.LoRAEngines {
			names = append(names, engineBoard[e])
		}
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		out[t.Name] = slices.Compact(names)
	}
	return out
}

// ReplicaCount returns how many tenant replicas run on the GPU: on the whole GPU and on every MIG
// instance together, a shared LoRA engine counting as one. A GPU with none runs nothing and can
// be re-partitioned without a drain.
func (g PlanGPU) ReplicaCount() int {
	n := len(g.Replicas)
	if g.LoRAEngine != "" {
		n++
	}
	for _, in := range g.Instances {
		n += len(in.Replicas)
	}
	return n
}

// PlanInstance is one MIG instance.
type PlanInstance struct {
	// Profile is a MIG profile name of the board, like "3g.40gb".
	Profile string `json:"profile"`
	// Start is the first memory slice the instance occupies.
	Start int `json:"start"`
	// Sharing says how the replicas on the instance share it.
	Sharing Sharing `json:"sharing,omitzero"`
	// Replicas run on this instance.
	Replicas []PlanReplica `json:"replicas,omitzero"`
}

// Ref returns the instance's "profile@start" reference.
func (in PlanInstance) Ref() InstanceRef { return InstanceRef{Profile: in.Profile, Start: in.Start} }

// Sharing is how one MIG instance is shared.
type Sharing struct {
	// Mode is none, mps or timeslice. Empty means none.
	Mode SharingMode `json:"mode,omitzero"`
}

// PlanReplica is one tenant replica on a slice.
type PlanReplica struct {
	// Tenant is the tenant's name.
	Tenant string `json:"tenant"`
	// Index numbers the tenant's replicas from 0; (Tenant, Index) is unique in a plan.
	Index int `json:"index"`
	// Limits are the per-replica sharing limits.
	Limits Limits `json:"limits,omitzero"`
	// VLLMArgs are the vLLM command-line arguments for this replica, in order.
	VLLMArgs []string `json:"vllmArgs,omitzero"`
	// TensorParallel, when set, spreads the replica over several whole GPUs of its node: the
	// replica is listed, identically, under each of them.
	TensorParallel TensorParallel `json:"tensorParallel,omitzero"`
}

// TensorParallel is a tensor-parallel replica's GPU group: Size whole GPUs (mode exclusive) of
// one node, named by index in ascending order. The first is the replica's GPU in the tenant's
// replica list; vLLM runs with --tensor-parallel-size Size in one pod that requests Size GPUs.
type TensorParallel struct {
	// Size is the tensor-parallel degree: 2, 4 or 8.
	Size int `json:"size,omitzero"`
	// GPUs are the indices on the replica's node of the group's GPUs, ascending, Size of them.
	GPUs []int `json:"gpus,omitzero"`
}

// IsZero reports whether the replica runs on one GPU or instance.
func (t TensorParallel) IsZero() bool { return t.Size == 0 && len(t.GPUs) == 0 }

// TensorParallelSizes are the tensor-parallel degrees a plan may use.
var TensorParallelSizes = []int{2, 4, 8}

// Limits are what one replica may use of a shared slice. Zero fields are unset.
type Limits struct {
	// SMPercent is the MPS active-thread percentage, 1–100.
	SMPercent int `json:"smPercent,omitzero"`
	// Memory is the MPS pinned device-memory limit, and the budget vLLM is sized to.
	Memory Bytes `json:"memory,omitzero"`
	// TimeSliceReplicas is how many time-sliced references of the slice the replica takes.
	TimeSliceReplicas int `json:"timeSliceReplicas,omitzero"`
}

// PlanTenant is the plan's view of one tenant.
type PlanTenant struct {
	// Name is the tenant's name in the pool.
	Name string `json:"name"`
	// Replicas say where each replica runs; they mirror the replicas listed under GPUs.
	Replicas []ReplicaRef `json:"replicas,omitzero"`
	// Predicted is the performance model's prediction for this tenant under the plan.
	Predicted Prediction `json:"predicted,omitzero"`
	// Reasons say why the tenant got these slices, or none.
	Reasons []Reason `json:"reasons,omitzero"`
	// Infeasible is set when the plan does not meet the tenant's demand or SLO; Reasons say why.
	Infeasible bool `json:"infeasible,omitzero"`
	// LoRAEngines names the shared engines (Plan.LoRAEngines) that serve an adapter tenant;
	// such a tenant has no Replicas of its own.
	LoRAEngines []string `json:"loraEngines,omitzero"`
}

// Reason returns the tenant's first reason with code, if it has one.
func (t PlanTenant) Reason(code ReasonCode) (Reason, bool) {
	for _, r := range t.Reasons {
		if r.Code == code {
			return r, true
		}
	}
	return Reason{}, false
}

// PlanLoRAEngine is one shared LoRA engine: a vLLM server of one base model with --enable-lora on
// one whole GPU, serving many adapter tenants of one sharing group (docs/lora.md).
type PlanLoRAEngine struct {
	// Name is unique in the plan; the GPU that runs the engine names it in loraEngine.
	Name string `json:"name"`
	// Group names the adapters' sharing group: base model, quantization and trust group.
	Group string `json:"group,omitzero"`
	// GPU is the whole GPU the engine runs on (mode exclusive).
	GPU GPURef `json:"gpu"`
	// Model (a catalog name) or ModelDir (a checkpoint folder) is the base model, as the
	// adapter tenants give it; Quantization the base's quantization, when they name one.
	Model        string `json:"model,omitzero"`
	ModelDir     string `json:"modelDir,omitzero"`
	Quantization string `json:"quantization,omitzero"`
	// MaxLoRAs, MaxLoRARank and MaxCPULoRAs are vLLM's --max-loras, --max-lora-rank and
	// --max-cpu-loras.
	MaxLoRAs    int `json:"maxLoras"`
	MaxLoRARank int `json:"maxLoraRank"`
	MaxCPULoRAs int `json:"maxCpuLoras"`
	// ActiveP99 is the planner's 99th percentile of distinct adapters with a request in flight.
	ActiveP99 int `json:"activeP99,omitzero"`
	// Adapters are the adapter tenants it serves, in tenant-name order.
	Adapters []PlanLoRAAdapter `json:"adapters"`
}

// PlanLoRAAdapter is one adapter tenant on a shared engine.
type PlanLoRAAdapter struct {
	// Tenant is the adapter tenant; Adapter the name requests ask for (model.adapter.name).
	Tenant  string `json:"tenant"`
	Adapter string `json:"adapter"`
	// RPS is the part of the tenant's traffic this engine carries (all of it, or its share when
	// the tenant is spread over several engines).
	RPS float64 `json:"rps"`
}

// ReplicaRef locates one tenant replica.
type ReplicaRef struct {
	// Index is the replica's index, as in PlanReplica.Index.
	Index int `json:"index"`
	// GPU is the GPU the replica runs on.
	GPU GPURef `json:"gpu"`
	// Instance is the MIG instance, when the GPU's mode is mig.
	Instance InstanceRef `json:"instance,omitzero"`
	// Slice is the kind of slice.
	Slice SliceKind `json:"slice"`
}

// Prediction is what the performance model expects for one tenant.
type Prediction struct {
	TTFTP99 Duration `json:"ttftP99,omitzero"`
	TPOTP99 Duration `json:"tpotP99,omitzero"`
	E2EP99  Duration `json:"e2eP99,omitzero"`
	// TokensPerSecond is the output tokens per second all replicas sustain together.
	TokensPerSecond float64 `json:"tokensPerSecond,omitzero"`
	// MaxRPS is the highest request rate at which the SLOs still hold: an instantaneous rate,
	// to be read against BurstRPS where the traffic is bursty.
	MaxRPS float64 `json:"maxRps,omitzero"`
	// BurstRPS is, for bursty traffic, the rate during a burst that the replicas are sized
	// for (4 × traffic.rps); MaxRPS over it is the headroom. Zero for other patterns, where
	// MaxRPS is read against traffic.rps.
	BurstRPS float64 `json:"burstRps,omitzero"`
}

// Summary holds a plan's totals.
type Summary struct {
	// GPUsUsed counts the GPUs that run at least one tenant replica.
	GPUsUsed int `json:"gpusUsed"`
	// GPUsTotal counts the GPUs of the fleet (the length of Plan.GPUs).
	GPUsTotal int `json:"gpusTotal"`
	// LowerBound is a proven lower bound on the GPUs any plan needs for the same demand.
	LowerBound int `json:"lowerBound"`
	// Baselines are other strategies' GPU counts for the same demand, for comparison.
	Baselines []Baseline `json:"baselines,omitzero"`
	// Objective is the value of the planner's objective for this plan (lower is better).
	Objective float64 `json:"objective,omitzero"`
	// Cost is the plan's cost per hour by docs/cost.md's rule on the planned basis, with the
	// Pool's policy.cost; absent when the Pool has none.
	Cost *PlanCost `json:"cost,omitzero"`
}

// PlanCost is a plan's cost per hour (planned basis: a GPU at idle power plus each replica's
// power at its tenant's offered rate through the fitted step power model; docs/cost.md). A money
// figure is absent when the policy lacks a price it needs, a carbon figure when it lacks that
// intensity.
type PlanCost struct {
	// Basis is "planned".
	Basis string `json:"basis"`
	// Currency is the policy's currency, with any money figure.
	Currency string `json:"currency,omitzero"`
	// UsedHardwarePerHour is the hourly price of the GPUs that run a replica; FleetHardwarePerHour
	// of every GPU of the plan (the fleet, used or not).
	UsedHardwarePerHour  *float64 `json:"usedHardwarePerHour,omitzero"`
	FleetHardwarePerHour *float64 `json:"fleetHardwarePerHour,omitzero"`
	// EnergyPerHour is the fleet's energy cost per hour (facility energy when a PUE is given);
	// TotalPerHour is FleetHardwarePerHour + EnergyPerHour.
	EnergyPerHour *float64 `json:"energyPerHour,omitzero"`
	TotalPerHour  *float64 `json:"totalPerHour,omitzero"`
	// ITEnergyKWhPerHour is the fleet's IT energy in an hour, in kWh.
	ITEnergyKWhPerHour float64 `json:"itEnergyKWhPerHour"`
	// GCO2ePerHour* are the fleet's emissions in an hour, location- and market-based.
	GCO2ePerHourLocationBased *float64 `json:"gCO2ePerHourLocationBased,omitzero"`
	GCO2ePerHourMarketBased   *float64 `json:"gCO2ePerHourMarketBased,omitzero"`
	// Baselines price each of Summary.Baselines' GPU counts at the fleet's mean hourly price per
	// GPU (hardware only).
	Baselines []BaselineCost `json:"baselines,omitzero"`
}

// BaselineCost is one baseline's hardware per hour.
type BaselineCost struct {
	Name            string  `json:"name"`
	HardwarePerHour float64 `json:"hardwarePerHour"`
}

// Baseline is one comparison strategy's result.
type Baseline struct {
	// Name names the strategy, like "exclusive" or "all-balanced".
	Name string `json:"name"`
	// GPUs is how many GPUs it needs.
	GPUs int `json:"gpus"`
	// Confirmed is true when the plan's simulation confirmed every tenant's count in it: each
	// is a count the plan's runs judged on the same slice (whole GPUs, or one MIG profile, of
	// one board) and found within the SLO. False (absent) when some count is the queueing
	// model's alone, not simulated, or the plan was not simulated.
	Confirmed bool `json:"confirmed,omitzero"`
}
