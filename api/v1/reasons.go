package v1

import (
	"fmt"
	"slices"
)

// Reason explains one decision: which rule drove it and whether retrying later can change it.
type Reason struct {
	// Code is one of the ReasonCode constants.
	Code ReasonCode `json:"code"`
	// Message says it in words, with the numbers and names involved.
	Message string `json:"message,omitzero"`
	// Retryable is true when the same request may succeed later without any change to it
	// (capacity frees up, a cooldown ends).
	Retryable bool `json:"retryable,omitzero"`
}

// NewReason returns a Reason with the code's usual Retryable value and a formatted message.
func NewReason(code ReasonCode, format string, args ...any) Reason {
	return Reason{Code: code, Message: fmt.Sprintf(format, args...), Retryable: code.Retryable()}
}

// ReasonCode is a closed set of decision codes. To add one: declare the constant below with a
// doc comment and add a row to reasonTable.
type ReasonCode string

// Decision codes. The first group explains a slice choice (the four steps: memory, compute,
// SLO shape, fairness); the second why something was not done.
const (
	// ReasonMemoryBound: the slice was chosen by memory (weights + peak KV cache + workspace), not compute.
	ReasonMemoryBound ReasonCode = "MemoryBound"
	// ReasonComputeBound: the slice was chosen by compute (tokens/s to carry the traffic within the SLO).
	ReasonComputeBound ReasonCode = "ComputeBound"
	// ReasonSLOShapeUniform: the tenants on this GPU have similar SLO shapes, so equal slices serve them.
	ReasonSLOShapeUniform ReasonCode = "SLOShapeUniform"
	// ReasonSLOShapeMixed: tight-TTFT and loose-TPOT tenants were given differently shaped slices.
	ReasonSLOShapeMixed ReasonCode = "SLOShapeMixed"
	// ReasonLowFrequency: a rarely called tenant was time-sliced instead of given a dedicated slice.
	ReasonLowFrequency ReasonCode = "LowFrequency"
	// ReasonIsolationHard: the tenant's hard isolation allows only exclusive GPUs or unshared MIG instances.
	ReasonIsolationHard ReasonCode = "IsolationHard"
	// ReasonTrustGroup: MPS sharing was limited to tenants of the same trust group (same path).
	ReasonTrustGroup ReasonCode = "TrustGroup"
	// ReasonEnergyClass: the choice follows the tenant's energy class (clocks, or fewer larger slices).
	ReasonEnergyClass ReasonCode = "EnergyClass"
	// ReasonCanary: the GPU is a canary GPU from the policy and kept out of the pool.
	ReasonCanary ReasonCode = "Canary"
	// ReasonBurstPool: the GPU or capacity is held back for the burst pool.
	ReasonBurstPool ReasonCode = "BurstPool"
	// ReasonRedundancy: an extra replica on another GPU, asked for by the tenant.
	ReasonRedundancy ReasonCode = "Redundancy"
	// ReasonFixedReplicas: the replica count comes from the tenant's `replicas`, not from its traffic.
	ReasonFixedReplicas ReasonCode = "FixedReplicas"
	// ReasonReplicaBounds: the tenant's minReplicas or maxReplicas set the replica count.
	ReasonReplicaBounds ReasonCode = "ReplicaBounds"
	// ReasonMeasuredProfile: predictions come from the tenant's measured performance table.
	ReasonMeasuredProfile ReasonCode = "MeasuredProfile"
	// ReasonIdle: the GPU is not needed by this plan.
	ReasonIdle ReasonCode = "Idle"
	// ReasonLoRAEngine: the adapter tenant is served by a shared LoRA engine of its base model,
	// or the GPU runs one.
	ReasonLoRAEngine ReasonCode = "LoRAEngine"
	// ReasonEstimatedFigures: the tenant runs on a board whose compute figures (SM count, BF16
	// or FP8 TFLOPS) are the catalog's estimates, not NVIDIA table values, so its predictions
	// rest on them; the message names the board and the figures.
	ReasonEstimatedFigures ReasonCode = "EstimatedFigures"

	// ReasonNoFit: the model does not fit in any slice the fleet and policy allow (memory).
	ReasonNoFit ReasonCode = "NoFit"
	// ReasonSLOUnmet: no allowed slice meets the tenant's SLO at its traffic.
	ReasonSLOUnmet ReasonCode = "SLOUnmet"
	// ReasonOverCap: granting more would exceed the tenant's cap.
	ReasonOverCap ReasonCode = "OverCap"
	// ReasonNoCapacity: the pool has no free capacity for the demand right now.
	ReasonNoCapacity ReasonCode = "NoCapacity"
	// ReasonNoLegalPlacement: free memory slices exist but no legal MIG placement uses them.
	ReasonNoLegalPlacement ReasonCode = "NoLegalPlacement"
	// ReasonModeNotAllowed: the slice would need a GPU mode that policy.allowedModes excludes.
	ReasonModeNotAllowed ReasonCode = "ModeNotAllowed"
	// ReasonGateCooldown: the GPU was re-partitioned less than policy.reconfigCooldown ago.
	ReasonGateCooldown ReasonCode = "GateCooldown"
	// ReasonMaxUnavailable: taking the GPU out now would exceed policy.maxUnavailable.
	ReasonMaxUnavailable ReasonCode = "MaxUnavailable"
	// ReasonPreempted: the grant was reclaimed for a tenant below its fair share or reservation.
	ReasonPreempted ReasonCode = "Preempted"
	// ReasonMoveBudget: re-planning kept the plan in force for the tenants it still serves, or
	// re-packed only part of the pool, because re-packing all of it would move more replicas
	// than the move budget allows, or would save no GPU.
	ReasonMoveBudget ReasonCode = "MoveBudget"
	// ReasonSimulated: the planner simulated the plan and the replica count is what the
	// simulation confirmed (kept, raised or lowered from the queueing model's count).
	ReasonSimulated ReasonCode = "Simulated"
)

// reasonTable holds each code's usual Retryable value; a code is known iff it is listed here.
var reasonTable = map[ReasonCode]bool{
	ReasonMemoryBound:      false,
	ReasonMoveBudget:       false,
	ReasonSimulated:        false,
	ReasonComputeBound:     false,
	ReasonSLOShapeUniform:  false,
	ReasonSLOShapeMixed:    false,
	ReasonLowFrequency:     false,
	ReasonIsolationHard:    false,
	ReasonTrustGroup:       false,
	ReasonEnergyClass:      false,
	ReasonCanary:           false,
	ReasonBurstPool:        false,
	ReasonRedundancy:       false,
	ReasonFixedReplicas:    false,
	ReasonReplicaBounds:    false,
	ReasonMeasuredProfile:  false,
	ReasonIdle:             false,
	ReasonLoRAEngine:       false,
	ReasonEstimatedFigures: false,
	ReasonNoFit:            false,
	ReasonSLOUnmet:         false,
	ReasonOverCap:          false,
	ReasonNoCapacity:       true,
	ReasonNoLegalPlacement: true,
	ReasonModeNotAllowed:   false,
	ReasonGateCooldown:     true,
	ReasonMaxUnavailable:   true,
	ReasonPreempted:        true,
}

// ReasonCodes returns every known code, sorted.
func ReasonCodes() []ReasonCode {
	out := make([]ReasonCode, 0, len(reasonTable))
	for c := range reasonTable {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Known reports whether c is in the closed set.
func (c ReasonCode) Known() bool {
	_, ok := reasonTable[c]
	return ok
}

// Retryable reports whether a decision with this code usually changes on retry without any
// change to the request.
func (c ReasonCode) Retryable() bool { return reasonTable[c] }
