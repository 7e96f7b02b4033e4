package k8s

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Group is the API group of gpupool's custom resources.
const Group = "gpupool.dev"

// GroupVersion is gpupool.dev/v1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// AddToScheme registers the gpupool.dev/v1 types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&GPUPool{}, &GPUPoolList{},
		&InferenceTenant{}, &InferenceTenantList{},
		&ControlState{}, &ControlStateList{},
		&Reconfiguration{}, &ReconfigurationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// GPUPool is a pool of GPU nodes: which nodes belong to it and the policy the planner follows.
// It is cluster-scoped, like the nodes it selects.
type GPUPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GPUPoolSpec   `json:"spec"`
	Status            GPUPoolStatus `json:"status,omitempty"`
}

// GPUPoolSpec is the Pool document's fleet selector and policy.
type GPUPoolSpec struct {
	// NodeSelector picks the pool's nodes by label; it must not be empty.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Policy is the Pool document's policy (api/v1 Policy), with the same defaults.
	Policy v1.Policy `json:"policy,omitzero"`
}

// GPUPoolStatus is the plan summary and conditions.
type GPUPoolStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Nodes, GPUs and Replicas count what the current plan covers.
	Nodes    int `json:"nodes,omitempty"`
	GPUs     int `json:"gpus,omitempty"`
	Replicas int `json:"replicas,omitempty"`
	// PlanDigest names the plan the status describes.
	PlanDigest string `json:"planDigest,omitempty"`
	// CurrentPlan is the plan in force: the last plan whose artifacts were all applied, as gzip
	// of its JSON document, base64. The next re-plan starts from it (plan.Options.Current), so a
	// restarted controller keeps the placements.
	CurrentPlan string             `json:"currentPlan,omitempty"`
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
}

// GPUPoolList is a list of GPUPools.
type GPUPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GPUPool `json:"items"`
}

// InferenceTenant is one tenant of a pool, namespaced with the tenant's workloads.
type InferenceTenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InferenceTenantSpec   `json:"spec"`
	Status            InferenceTenantStatus `json:"status,omitempty"`
}

// InferenceTenantSpec names the pool and carries the Pool document's tenant (api/v1 Tenant).
// The tenant's name is the object's name; spec.tenant.name, when set, must equal it.
type InferenceTenantSpec struct {
	Pool   string    `json:"pool"`
	Tenant v1.Tenant `json:"tenant"`
}

// InferenceTenantStatus is what the planner placed, what the allocator admitted, and why.
type InferenceTenantStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ReplicasPlanned is the replicas the pool's plan gives the tenant (the PoolReconciler writes it).
	ReplicasPlanned int `json:"replicasPlanned,omitempty"`
	// ReplicasAdmitted is the fair allocator's grant: how many of the tenant's pods admission lets
	// past the scheduling gate now (GrantAdmission writes it).
	ReplicasAdmitted int                `json:"replicasAdmitted,omitempty"`
	Conditions       []metav1.Condition `json:"conditions,omitempty"`
}

// InferenceTenantList is a list of InferenceTenants.
type InferenceTenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceTenant `json:"items"`
}

// ControlState holds one control-plane store: every record and the revision. It is the
// persistence of CRDStore and not meant to be edited by hand.
type ControlState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Revision counts commits; each commit adds exactly one.
	Revision uint64 `json:"revision"`
	// Records maps "kind/key" to the value, base64 in JSON.
	Records map[string][]byte `json:"records,omitempty"`
}

// ControlStateList is a list of ControlStates.
type ControlStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControlState `json:"items"`
}

// The types are plain data, so a JSON round trip is a faithful deep copy; it keeps hand-written
// copy code (which drifts from the fields) out of the package.
func jsonCopy[T any](in *T) *T {
	if in == nil {
		return nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("deep copy %T: %v", in, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("deep copy %T: %v", in, err))
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *GPUPool) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *GPUPoolList) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *InferenceTenant) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *InferenceTenantList) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ControlState) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ControlStateList) DeepCopyObject() runtime.Object { return jsonCopy(in) }
