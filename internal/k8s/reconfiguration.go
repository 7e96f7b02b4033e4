package k8s

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reconfiguration is one gate operation on one node: the MIG config it changes from and to, each
// step the gate went through and the outcome. It is cluster-scoped, like the node. The gate writes
// it from the node's gate annotations (its journal), never from memory alone, so a controller
// killed at any step leaves a record its successor completes.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=rcfg
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Node,type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name=From,type=string,JSONPath=`.spec.fromConfig`
// +kubebuilder:printcolumn:name=To,type=string,JSONPath=`.spec.toConfig`
// +kubebuilder:printcolumn:name=Phase,type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type Reconfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ReconfigurationSpec   `json:"spec"`
	Status            ReconfigurationStatus `json:"status,omitempty"`
}

// ReconfigurationSpec is what the gate was asked to do. It is immutable: one object per gate
// operation.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable (one object per gate operation)"
type ReconfigurationSpec struct {
	// Node is the node the gate reconfigures.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Pool is the GPUPool the node belongs to (its gpupool.dev/pool label), when it has one.
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool,omitempty"`
	// FromConfig is the node's nvidia.com/mig.config before the gate ("" when absent); a rollback
	// restores it.
	// +kubebuilder:validation:MaxLength=253
	FromConfig string `json:"fromConfig,omitempty"`
	// ToConfig is the requested nvidia.com/mig.config.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ToConfig string `json:"toConfig"`
}

// Reconfiguration outcomes.
const (
	OutcomeSucceeded  = "Succeeded"  // the node runs ToConfig and passed verification and the smoke test
	OutcomeRolledBack = "RolledBack" // the node is back at FromConfig (or the label was never changed)
	OutcomeFailed     = "Failed"     // restoring FromConfig failed too: the node is left cordoned
)

// Step states.
const (
	StepStateRunning   = "Running"
	StepStateSucceeded = "Succeeded"
	StepStateFailed    = "Failed"
)

// ReconfigurationStatus is the gate's progress.
type ReconfigurationStatus struct {
	// Phase is the step in progress, or the outcome once the gate has finished.
	// +kubebuilder:validation:MaxLength=64
	Phase string `json:"phase,omitempty"`
	// Steps are the gate's steps in order.
	// +kubebuilder:validation:MaxItems=32
	Steps []ReconfigurationStep `json:"steps,omitempty"`
	// Outcome is Succeeded, RolledBack or Failed; empty while the gate runs.
	// +kubebuilder:validation:Enum="";Succeeded;RolledBack;Failed
	Outcome string `json:"outcome,omitempty"`
	// Message says why the gate ended as it did.
	// +kubebuilder:validation:MaxLength=8192
	Message string `json:"message,omitempty"`
	// CompletionTime is when the gate finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// ReconfigurationStep is one step of the gate.
type ReconfigurationStep struct {
	// Name is the step: Draining, Applying, Verifying, SmokeTesting, Restoring or Stuck.
	// +kubebuilder:validation:Enum=Draining;Applying;Verifying;SmokeTesting;Restoring;Stuck
	Name string `json:"name"`
	// State is Running, Succeeded or Failed.
	// +kubebuilder:validation:Enum=Running;Succeeded;Failed
	State string `json:"state"`
	// Start is when the step began.
	Start metav1.Time `json:"start"`
	// End is when the step closed.
	// +optional
	End *metav1.Time `json:"end,omitempty"`
	// Message says what happened in the step.
	// +kubebuilder:validation:MaxLength=8192
	Message string `json:"message,omitempty"`
}

// ReconfigurationList is a list of Reconfigurations.
//
// +kubebuilder:object:root=true
type ReconfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Reconfiguration `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (in *Reconfiguration) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// DeepCopyObject implements runtime.Object.
func (in *ReconfigurationList) DeepCopyObject() runtime.Object { return jsonCopy(in) }

// LabelNode on a Reconfiguration (and a smoke Job) names its node, so a node's records can be listed.
const LabelNode = "gpupool.dev/node"

// reconfigurationName is the record's name for a gate that begins at t on node: unique per gate
// (a node's gates are at least a cooldown apart) and fixed in the node's annotations at begin.
func reconfigurationName(node string, t time.Time) string {
	return fmt.Sprintf("%s-%d", shortName(node, 253-21), t.UTC().UnixMilli())
}

func parseStamp(s string) metav1.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return metav1.Time{}
	}
	return metav1.NewTime(t)
}

// journalStatus is st brought up to the node's gate annotations: the step the node is at is the
// last step (the one before it closed, Failed when the gate went to Restoring or Stuck from it);
// with no step left the gate has finished and its result is the outcome.
func journalStatus(st ReconfigurationStatus, n *corev1.Node) ReconfigurationStatus {
	a := n.Annotations
	out := *jsonCopy(&st)
	var last *ReconfigurationStep
	if k := len(out.Steps); k > 0 {
		last = &out.Steps[k-1]
	}
	closeLast := func(at metav1.Time, state, msg string) {
		if last == nil || last.State != StepStateRunning {
			return
		}
		last.End = &at
		last.State = state
		if msg != "" {
			last.Message = clip(strings.TrimPrefix(last.Message+"; "+msg, "; "))
		}
	}
	cur := GateStep(a[AnnotGateStep])
	if cur != stepNone {
		since := parseStamp(a[AnnotGateSince])
		if last == nil || last.Name != string(cur) {
			switch cur {
			case StepRestoring:
				closeLast(since, StepStateFailed, a[AnnotGateReason])
			case StepStuck:
				closeLast(since, StepStateFailed, "")
			default:
				closeLast(since, StepStateSucceeded, "")
			}
			out.Steps = append(out.Steps, ReconfigurationStep{Name: string(cur), State: StepStateRunning, Start: since, Message: clip(stepMessage(cur, n))})
		}
		out.Phase = string(cur)
		if cur == StepStuck {
			out.Outcome, out.Message = OutcomeFailed, clip(a[AnnotGateResult])
		}
		return out
	}
	res := a[AnnotGateResult]
	done := parseStamp(a[AnnotGateDone])
	switch {
	case strings.HasPrefix(res, "success"):
		closeLast(done, StepStateSucceeded, "")
		out.Outcome = OutcomeSucceeded
	case strings.HasPrefix(res, "rolled-back"):
		if last != nil && (last.Name == string(StepRestoring) || last.Name == string(StepStuck)) {
			closeLast(done, StepStateSucceeded, "")
		} else {
			closeLast(done, StepStateFailed, res) // a drain that timed out: the label never changed
		}
		out.Outcome = OutcomeRolledBack
	default:
		return out // not finished yet as far as the journal says
	}
	out.Phase, out.Message, out.CompletionTime = out.Outcome, clip(res), &done
	return out
}

// clip keeps a message within the schema's 8192 characters.
func clip(s string) string {
	if len(s) <= 8000 {
		return s
	}
	return s[:8000] + " …"
}

// stepMessage describes a step as it begins, from the node's annotations.
func stepMessage(s GateStep, n *corev1.Node) string {
	a := n.Annotations
	switch s {
	case StepDraining:
		return drainMessage(a[AnnotGateScope])
	case StepApplying:
		return fmt.Sprintf("%s=%s; waiting for mig-manager", LabelMIGConfig, n.Labels[LabelMIGConfig])
	case StepVerifying:
		if _, dra := a[AnnotGateExpectDevices]; dra {
			return "mig-manager reported success; waiting for the devices the DRA driver publishes to equal the plan"
		}
		return "mig-manager reported success; waiting for allocatable to equal the plan"
	case StepSmoke:
		return "smoke Jobs on " + strings.Join(decodeScope(a[AnnotGateScope]).Smoke, ", ")
	case StepRestoring:
		return fmt.Sprintf("restoring %s=%q", LabelMIGConfig, a[AnnotGatePrevious])
	case StepStuck:
		return a[AnnotGateResult]
	}
	return ""
}

// newRecord is the Reconfiguration the node's gate annotations name, without status.
func newRecord(n *corev1.Node) *Reconfiguration {
	r := &Reconfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: n.Annotations[AnnotGateRecord], Labels: map[string]string{LabelNode: n.Name}},
		Spec: ReconfigurationSpec{Node: n.Name, Pool: n.Labels[LabelPool],
			FromConfig: n.Annotations[AnnotGatePrevious], ToConfig: n.Annotations[AnnotGateTarget]},
	}
	if r.Spec.ToConfig == "" {
		// Not reached by the gate (the record is made on the first Step after begin, before any
		// other write), but a rollback drops the target: take it from the result.
		r.Spec.ToConfig, _, _ = strings.Cut(strings.TrimPrefix(n.Annotations[AnnotGateResult], "rolled-back "), ":")
	}
	return r
}

// syncRecord brings the node's Reconfiguration up to its gate annotations: it creates the record
// when the gate has begun and none exists, updates its status where it lags, and once the gate has
// finished and the record holds the outcome, removes the node's pointer to it (one node write).
// closed says the node has no open record.
func (g *MIGGate) syncRecord(ctx context.Context, n *corev1.Node) (closed bool, err error) {
	name := n.Annotations[AnnotGateRecord]
	if name == "" {
		return true, nil
	}
	r := &Reconfiguration{}
	err = g.C.Get(ctx, client.ObjectKey{Name: name}, r)
	if apierrors.IsNotFound(err) {
		r = newRecord(n)
		g.hook("before:record-create")
		if err := g.C.Create(ctx, r); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("gate node %s: create reconfiguration %s: %w", n.Name, name, err)
		}
		g.hook("after:record-create")
		if err := g.C.Get(ctx, client.ObjectKey{Name: name}, r); err != nil {
			return false, fmt.Errorf("gate node %s: reconfiguration %s: %w", n.Name, name, err)
		}
	} else if err != nil {
		return false, fmt.Errorf("gate node %s: reconfiguration %s: %w", n.Name, name, err)
	}
	want := journalStatus(r.Status, n)
	if !reflect.DeepEqual(want, r.Status) {
		r.Status = want
		g.hook("before:record-" + want.Phase)
		if err := g.C.Status().Update(ctx, r); err != nil {
			return false, fmt.Errorf("gate node %s: update reconfiguration %s: %w", n.Name, name, err)
		}
		g.hook("after:record-" + want.Phase)
	}
	if n.Annotations[AnnotGateStep] != "" || r.Status.Outcome == "" {
		return false, nil
	}
	delete(n.Annotations, AnnotGateRecord)
	g.hook("before:record-closed")
	if err := g.C.Update(ctx, n); err != nil {
		return false, fmt.Errorf("gate node %s: close reconfiguration %s: %w", n.Name, name, err)
	}
	g.hook("after:record-closed")
	g.pruneRecords(ctx, n.Name)
	return true, nil
}

// pruneRecords deletes node's Reconfigurations beyond the newest KeepRecords (their smoke Jobs go
// with them, by owner reference). It is best-effort: a record left over is deleted next time.
func (g *MIGGate) pruneRecords(ctx context.Context, node string) {
	keep := g.KeepRecords
	if keep == 0 {
		keep = 10
	}
	if keep < 0 {
		return
	}
	var l ReconfigurationList
	if err := g.C.List(ctx, &l, client.MatchingLabels{LabelNode: node}); err != nil || len(l.Items) <= keep {
		return
	}
	slices.SortFunc(l.Items, func(a, b Reconfiguration) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name) // names end in the gate's start in ms
	})
	for i := range l.Items[:len(l.Items)-keep] {
		_ = g.C.Delete(ctx, &l.Items[i], client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
}

func (g *MIGGate) hook(p string) {
	if g.Hook != nil {
		g.Hook(p)
	}
}
