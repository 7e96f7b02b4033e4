package k8s

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EventSource is the component name on the gate's Events.
const EventSource = "gpupool-gate"

// stepEvent says what a write to step to means, as an Event reason and type.
func stepEvent(n *corev1.Node, to GateStep) (reason, typ, msg string) {
	a := n.Annotations
	switch to {
	case StepDraining:
		return "GateCordoned", corev1.EventTypeNormal, fmt.Sprintf("cordoned for mig config %s (was %q); evicting GPU pods", a[AnnotGateTarget], a[AnnotGatePrevious])
	case StepApplying:
		return "GateLabeled", corev1.EventTypeNormal, fmt.Sprintf("set %s=%s; waiting for mig-manager", LabelMIGConfig, n.Labels[LabelMIGConfig])
	case StepVerifying:
		if _, dra := a[AnnotGateExpectDevices]; dra {
			return "GateApplied", corev1.EventTypeNormal, "mig-manager reported success; verifying the devices the DRA driver publishes"
		}
		return "GateApplied", corev1.EventTypeNormal, "mig-manager reported success; verifying allocatable"
	case StepSmoke:
		return "GateSmokeTesting", corev1.EventTypeNormal, "the devices match the plan; running smoke Jobs on " + strings.Join(decodeScope(a[AnnotGateScope]).Smoke, ", ")
	case StepRestoring:
		return "GateRollingBack", corev1.EventTypeWarning, fmt.Sprintf("restoring %s=%q: %s", LabelMIGConfig, a[AnnotGatePrevious], a[AnnotGateReason])
	case StepStuck:
		return "GateStuck", corev1.EventTypeWarning, a[AnnotGateResult]
	case stepFinished:
		if strings.HasPrefix(a[AnnotGateResult], "success") {
			return "GateSucceeded", corev1.EventTypeNormal, a[AnnotGateResult]
		}
		return "GateRolledBack", corev1.EventTypeWarning, a[AnnotGateResult]
	}
	return "GateStep", corev1.EventTypeNormal, string(to)
}

// event records a gate step as a core/v1 Event on the node (in namespace default, where node
// events live). Events are best-effort: a failure to record one does not stop the gate, whose
// state is in the node's annotations.
func (g *MIGGate) event(ctx context.Context, n *corev1.Node, to GateStep) {
	reason, typ, msg := stepEvent(n, to)
	g.eventf(ctx, n, reason, typ, msg)
}

// eventf records one Event on the node (best-effort, as event).
func (g *MIGGate) eventf(ctx context.Context, n *corev1.Node, reason, typ, msg string) {
	now := metav1.NewTime(g.now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: n.Name + ".gate.", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		Reason:         reason, Message: msg, Type: typ,
		Source:         corev1.EventSource{Component: EventSource},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	_ = g.C.Create(ctx, ev)
}
