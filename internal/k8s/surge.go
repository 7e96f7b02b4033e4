package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Replacements first: before the gate evicts a Deployment's pods from the node it raises the
// Deployment's replicas by that many, when the other schedulable nodes have the free devices for
// them, and waits (at most SurgeTimeout) until the Deployment has that many more Ready replicas.
// Then it evicts, and before it sets the label (or gives up the drain) it puts the replica count
// back, so the ReplicaSet removes the extra pods (those it started for the evicted ones, which
// are the newest and not yet Ready, go first). The decision and its state are in the node's
// gpupool.dev/gate-surge annotation and the count to go back to in the Deployment's
// gpupool.dev/surge-from annotation, so a restarted gate neither raises twice nor forgets to lower.

// AnnotSurgeFrom on a Deployment is its replica count before the gate raised it, and the count it
// raised it to ("2→3").
const AnnotSurgeFrom = "gpupool.dev/surge-from"

// AnnotGateSurge on a node is the gate's surge plan (JSON surgePlan).
const AnnotGateSurge = "gpupool.dev/gate-surge"

// Surge states.
const (
	surgeWaiting = "waiting" // Deployments raised; waiting for the replacements to be Ready
	surgeReady   = "ready"   // every replacement Ready: evicting
	surgeTimeout = "timeout" // not all Ready within SurgeTimeout: evicting anyway
)

type surgeTarget struct {
	From int32 `json:"from"`
	To   int32 `json:"to"`
}

type surgePlan struct {
	// Deployments maps "namespace/name" to the replicas before and while surging.
	Deployments map[string]surgeTarget `json:"deployments,omitempty"`
	// Skipped says which Deployments were not surged, and why.
	Skipped []string `json:"skipped,omitempty"`
	State   string   `json:"state,omitempty"`
}

func decodeSurge(s string) (surgePlan, bool) {
	var p surgePlan
	if s == "" || json.Unmarshal([]byte(s), &p) != nil {
		return p, false
	}
	return p, true
}

// podDeployment names the Deployment that owns p through its ReplicaSet ("" when none).
func (g *MIGGate) podDeployment(ctx context.Context, p *corev1.Pod) (string, error) {
	for _, o := range p.OwnerReferences {
		if o.Kind != "ReplicaSet" || o.Controller == nil || !*o.Controller {
			continue
		}
		rs := &appsv1.ReplicaSet{}
		if err := g.C.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: o.Name}, rs); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", fmt.Errorf("pod %s/%s: ReplicaSet %s: %w", p.Namespace, p.Name, o.Name, err)
		}
		for _, ro := range rs.OwnerReferences {
			if ro.Kind == "Deployment" && ro.Controller != nil && *ro.Controller {
				return p.Namespace + "/" + ro.Name, nil
			}
		}
	}
	return "", nil
}

func podNVIDIA(p *corev1.Pod) map[string]int64 {
	out := map[string]int64{}
	for _, c := range p.Spec.Containers {
		for r, q := range c.Resources.Limits {
			if strings.HasPrefix(string(r), "nvidia.com/") {
				out[string(r)] += q.Value()
			}
		}
	}
	return out
}

// freeElsewhere is the free nvidia.com/ devices of each Ready, schedulable node other than n.
func (g *MIGGate) freeElsewhere(ctx context.Context, n *corev1.Node) ([]corev1.Node, map[string]map[string]int64, error) {
	var nodes corev1.NodeList
	if err := g.C.List(ctx, &nodes); err != nil {
		return nil, nil, fmt.Errorf("gate node %s: list nodes: %w", n.Name, err)
	}
	var out []corev1.Node
	free := map[string]map[string]int64{}
	for _, o := range nodes.Items {
		if o.Name == n.Name || o.Spec.Unschedulable || !nodeReady(&o) {
			continue
		}
		f := map[string]int64{}
		for r, q := range o.Status.Allocatable {
			if strings.HasPrefix(string(r), "nvidia.com/") {
				f[string(r)] += q.Value()
			}
		}
		if len(f) == 0 {
			continue
		}
		var pods corev1.PodList
		if err := g.C.List(ctx, &pods, client.MatchingFields{"spec.nodeName": o.Name}); err != nil {
			return nil, nil, fmt.Errorf("gate node %s: list pods of %s: %w", n.Name, o.Name, err)
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				for r, q := range podNVIDIA(p) {
					f[r] -= q
				}
			}
		}
		out = append(out, o)
		free[o.Name] = f
	}
	return out, free, nil
}

// podMayRunOn says whether p's nodeSelector and required node affinity admit node (the plan's
// tenant Deployments pin their pods to the plan's hosts that way). Taints other than the gate's
// cordon are not weighed.
func podMayRunOn(p *corev1.Pod, node *corev1.Node) bool {
	for k, v := range p.Spec.NodeSelector {
		if node.Labels[k] != v {
			return false
		}
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, node) {
			return true // terms are ORed
		}
	}
	return false
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions)+len(term.MatchFields) == 0 {
		return false // an empty term matches no node
	}
	for _, e := range term.MatchExpressions {
		r, err := labels.NewRequirement(e.Key, selectionOp(e.Operator), e.Values)
		if err != nil || !r.Matches(labels.Set(node.Labels)) {
			return false
		}
	}
	for _, f := range term.MatchFields {
		if f.Key != "metadata.name" {
			return false
		}
		r, err := labels.NewRequirement("name", selectionOp(f.Operator), f.Values)
		if err != nil || !r.Matches(labels.Set{"name": node.Name}) {
			return false
		}
	}
	return true
}

func selectionOp(o corev1.NodeSelectorOperator) selection.Operator {
	switch o {
	case corev1.NodeSelectorOpIn:
		return selection.In
	case corev1.NodeSelectorOpNotIn:
		return selection.NotIn
	case corev1.NodeSelectorOpExists:
		return selection.Exists
	case corev1.NodeSelectorOpDoesNotExist:
		return selection.DoesNotExist
	case corev1.NodeSelectorOpGt:
		return selection.GreaterThan
	case corev1.NodeSelectorOpLt:
		return selection.LessThan
	}
	return selection.Operator(o) // refused by NewRequirement: the term does not match
}

// planSurge decides, for the pods the gate will evict, which Deployments to raise and by how many:
// each by its pods on the node, when every one of those pods fits, by its node selector and
// affinity and the free devices, on another Ready, schedulable node (placed one pod after another,
// so two pods do not count the same free devices).
func (g *MIGGate) planSurge(ctx context.Context, n *corev1.Node, pods []corev1.Pod) (surgePlan, error) {
	plan := surgePlan{Deployments: map[string]surgeTarget{}, State: surgeWaiting}
	byDep := map[string][]*corev1.Pod{}
	for i := range pods {
		d, err := g.podDeployment(ctx, &pods[i])
		if err != nil {
			return plan, err
		}
		if d != "" {
			byDep[d] = append(byDep[d], &pods[i])
		}
	}
	if len(byDep) == 0 {
		plan.State = surgeReady
		return plan, nil
	}
	nodes, free, err := g.freeElsewhere(ctx, n)
	if err != nil {
		return plan, err
	}
	for _, d := range slices.Sorted(maps.Keys(byDep)) {
		trial := map[string]map[string]int64{}
		for k, v := range free {
			trial[k] = maps.Clone(v)
		}
		if slices.ContainsFunc(byDep[d], func(p *corev1.Pod) bool { return len(p.Spec.ResourceClaims) > 0 }) {
			// Devices held through ResourceClaims are not counted as free elsewhere: a replacement
			// could wait the whole SurgeTimeout for a device no node has.
			plan.Skipped = append(plan.Skipped, d+" (its pods take their devices through ResourceClaims, whose room elsewhere is not known)")
			continue
		}
		placed := 0
		for _, p := range byDep[d] {
			need := podNVIDIA(p)
			for i := range nodes {
				f := trial[nodes[i].Name]
				ok := podMayRunOn(p, &nodes[i])
				for r, q := range need {
					ok = ok && f[r] >= q
				}
				if ok {
					for r, q := range need {
						f[r] -= q
					}
					placed++
					break
				}
			}
		}
		if placed < len(byDep[d]) {
			plan.Skipped = append(plan.Skipped, fmt.Sprintf("%s (room for %d of its %d pods on other nodes its pods may use)", d, placed, len(byDep[d])))
			continue
		}
		ns, name, _ := strings.Cut(d, "/")
		dep := &appsv1.Deployment{}
		if err := g.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return plan, fmt.Errorf("gate node %s: Deployment %s: %w", n.Name, d, err)
		}
		from := int32(1)
		if dep.Spec.Replicas != nil {
			from = *dep.Spec.Replicas
		}
		free = trial
		plan.Deployments[d] = surgeTarget{From: from, To: from + int32(len(byDep[d]))}
	}
	if len(plan.Deployments) == 0 {
		plan.State = surgeReady
	}
	return plan, nil
}

// surge runs the surge before the drain evicts. It returns proceed once evicting may begin
// (every replacement Ready, the wait timed out, or nothing to surge); otherwise it made one write
// or is waiting.
func (g *MIGGate) surge(ctx context.Context, n *corev1.Node, pods []corev1.Pod) (proceed bool, err error) {
	if g.SurgeTimeout < 0 {
		return true, nil
	}
	plan, ok := decodeSurge(n.Annotations[AnnotGateSurge])
	if !ok {
		if plan, err = g.planSurge(ctx, n, pods); err != nil {
			return false, err
		}
		b, _ := json.Marshal(plan)
		setAnnot(n, AnnotGateSurge, string(b))
		return false, g.writeNote(ctx, n, "surge-planned", surgePlannedEvent(plan))
	}
	if plan.State != surgeWaiting {
		return true, nil
	}
	var notReady []string
	for _, d := range slices.Sorted(maps.Keys(plan.Deployments)) {
		ready, err := g.raise(ctx, d, plan.Deployments[d])
		if err != nil {
			return false, err
		}
		if !ready {
			notReady = append(notReady, d)
		}
	}
	timeout := orDefault(g.SurgeTimeout, 5*time.Minute)
	var ev *noteEvent
	switch {
	case len(notReady) == 0:
		plan.State = surgeReady
		ev = &noteEvent{"GateReplacementsReady", corev1.EventTypeNormal, "replacements Ready for " + strings.Join(slices.Sorted(maps.Keys(plan.Deployments)), ", ") + "; evicting"}
	case g.now().Sub(g.since(n)) > timeout:
		plan.State = surgeTimeout
		ev = &noteEvent{"GateReplacementsNotReady", corev1.EventTypeWarning,
			fmt.Sprintf("replacements for %s not Ready within %s; evicting anyway", strings.Join(notReady, ", "), timeout)}
	default:
		return false, nil
	}
	b, _ := json.Marshal(plan)
	setAnnot(n, AnnotGateSurge, string(b))
	return false, g.writeNote(ctx, n, "surge-"+plan.State, ev)
}

func surgePlannedEvent(p surgePlan) *noteEvent {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(p.Deployments)) {
		t := p.Deployments[d]
		parts = append(parts, fmt.Sprintf("%s %d→%d", d, t.From, t.To))
	}
	if len(parts)+len(p.Skipped) == 0 {
		return nil // no Deployment's pods to evict
	}
	msg := "starting replacements first: " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		msg = "no replacements started first"
	}
	if len(p.Skipped) > 0 {
		msg += "; not surged (no room elsewhere): " + strings.Join(p.Skipped, ", ")
	}
	return &noteEvent{"GateSurge", corev1.EventTypeNormal, msg}
}

// raise sets Deployment d to t.To replicas (once: the Deployment's annotation records it) and
// reports whether it has t.To Ready replicas.
func (g *MIGGate) raise(ctx context.Context, d string, t surgeTarget) (ready bool, err error) {
	ns, name, _ := strings.Cut(d, "/")
	dep := &appsv1.Deployment{}
	if err := g.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // gone: nothing to wait for
		}
		return false, fmt.Errorf("Deployment %s: %w", d, err)
	}
	if _, done := dep.Annotations[AnnotSurgeFrom]; !done {
		if dep.Annotations == nil {
			dep.Annotations = map[string]string{}
		}
		dep.Annotations[AnnotSurgeFrom] = fmt.Sprintf("%d→%d", t.From, t.To)
		dep.Spec.Replicas = &t.To
		g.hook("before:surge-raise")
		if err := g.C.Update(ctx, dep); err != nil {
			return false, fmt.Errorf("raise Deployment %s to %d replicas: %w", d, t.To, err)
		}
		g.hook("after:surge-raise")
		return false, nil
	}
	return dep.Status.ReadyReplicas >= t.To, nil
}

// lower puts every surged Deployment back to its replica count (when nobody changed it since).
func (g *MIGGate) lower(ctx context.Context, n *corev1.Node) error {
	plan, ok := decodeSurge(n.Annotations[AnnotGateSurge])
	if !ok {
		return nil
	}
	for _, d := range slices.Sorted(maps.Keys(plan.Deployments)) {
		t := plan.Deployments[d]
		ns, name, _ := strings.Cut(d, "/")
		dep := &appsv1.Deployment{}
		if err := g.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("gate node %s: Deployment %s: %w", n.Name, d, err)
		}
		if _, raised := dep.Annotations[AnnotSurgeFrom]; !raised {
			continue
		}
		delete(dep.Annotations, AnnotSurgeFrom)
		if dep.Spec.Replicas != nil && *dep.Spec.Replicas == t.To {
			dep.Spec.Replicas = &t.From
		}
		g.hook("before:surge-lower")
		if err := g.C.Update(ctx, dep); err != nil {
			return fmt.Errorf("gate node %s: lower Deployment %s to %d replicas: %w", n.Name, d, t.From, err)
		}
		g.hook("after:surge-lower")
	}
	return nil
}

// noteEvent is an Event the gate records with a node write that is not a step change.
type noteEvent struct{ reason, typ, msg string }

// writeNote updates n (within the current step) and records ev.
func (g *MIGGate) writeNote(ctx context.Context, n *corev1.Node, point string, ev *noteEvent) error {
	g.hook("before:" + point)
	if err := g.C.Update(ctx, n); err != nil {
		return fmt.Errorf("gate node %s: write %s: %w", n.Name, point, err)
	}
	if ev != nil {
		g.eventf(ctx, n, ev.reason, ev.typ, ev.msg)
	}
	g.hook("after:" + point)
	return nil
}
