// +groupName=gpupool.dev
// +versionName=v1
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
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=gp
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Nodes,type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name=GPUs,type=integer,JSONPath=`.status.gpus`
// +kubebuilder:printcolumn:name=Replicas,type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type GPUPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GPUPoolSpec   `json:"spec"`
	Status            GPUPoolStatus `json:"status,omitempty"`
}

// GPUPoolSpec is the Pool document's fleet selector and policy.
type GPUPoolSpec struct {
	// NodeSelector is the label selector (equality) picking the pool's nodes; at least one label.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="label values are at most 63 characters"
	NodeSelector map[string]string `json:"nodeSelector"`
	// Policy is the Pool document's policy (api/v1 Policy), with the same defaults.
	// +optional
	Policy v1.Policy `json:"policy,omitzero"`
}

// GPUPoolStatus is the plan summary and conditions.
type GPUPoolStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Nodes, GPUs and Replicas count what the current plan covers.
	// +kubebuilder:validation:Minimum=0
	Nodes int `json:"nodes,omitempty"`
	// +kubebuilder:validation:Minimum=0
	GPUs int `json:"gpus,omitempty"`
	// +kubebuilder:validation:Minimum=0
	Replicas int `json:"replicas,omitempty"`
	// PlanDigest names the plan the status describes.
	PlanDigest string `json:"planDigest,omitempty"`
	// CurrentPlan is the plan in force: the last plan whose artifacts were all applied, as gzip
	// of its JSON document, base64. The next re-plan starts from it (plan.Options.Current), so a
	// restarted controller keeps the placements.
	CurrentPlan string `json:"currentPlan,omitempty"`
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GPUPoolList is a list of GPUPools.
//
// +kubebuilder:object:root=true
type GPUPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GPUPool `json:"items"`
}

// InferenceTenant is one tenant of a pool, namespaced with the tenant's workloads. Its name is the
// tenant's name, a DNS-1123 label.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced,shortName=it
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Pool,type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name=Planned,type=integer,JSONPath=`.status.replicasPlanned`
// +kubebuilder:printcolumn:name=Admitted,type=integer,JSONPath=`.status.replicasAdmitted`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1123 label (at most 63 lower-case letters, digits and '-')"
// +kubebuilder:validation:XValidation:rule=`!has(self.spec.tenant.name) || self.spec.tenant.name == "" || self.spec.tenant.name == self.metadata.name`,message="spec.tenant.name, when set, must equal metadata.name"
type InferenceTenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InferenceTenantSpec   `json:"spec"`
	Status            InferenceTenantStatus `json:"status,omitempty"`
}

// InferenceTenantSpec names the pool and carries the Pool document's tenant (api/v1 Tenant).
// The tenant's name is the object's name; spec.tenant.name, when set, must equal it.
type InferenceTenantSpec struct {
	// Pool is the name of the tenant's GPUPool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool"`
	// Tenant is the Pool document's tenant.
	Tenant v1.Tenant `json:"tenant"`
}

// InferenceTenantStatus is what the planner placed, what the allocator admitted, and why.
type InferenceTenantStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ReplicasPlanned is the replicas the pool's plan gives the tenant (the PoolReconciler writes it).
	// +kubebuilder:validation:Minimum=0
	ReplicasPlanned int `json:"replicasPlanned,omitempty"`
	// ReplicasAdmitted is the fair allocator's grant: how many of the tenant's pods admission lets
	// past the scheduling gate now (GrantAdmission writes it).
	// +kubebuilder:validation:Minimum=0
	ReplicasAdmitted int `json:"replicasAdmitted,omitempty"`
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InferenceTenantList is a list of InferenceTenants.
//
// +kubebuilder:object:root=true
type InferenceTenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceTenant `json:"items"`
}

// ControlState holds one control-plane store: every record and the revision. It is the
// persistence of CRDStore and not meant to be edited by hand. The revision and the records change
// together in one update guarded by the object's resourceVersion.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name=Revision,type=integer,JSONPath=`.revision`
type ControlState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Revision counts commits; each commit adds exactly one.
	// +kubebuilder:validation:Minimum=0
	Revision uint64 `json:"revision"`
	// Records maps "kind/key" to the value, base64 in JSON.
	Records map[string][]byte `json:"records,omitempty"`
}

// ControlStateList is a list of ControlStates.
//
// +kubebuilder:object:root=true
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
