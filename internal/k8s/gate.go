package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels NVIDIA's mig-manager reads and writes (GPU Operator).
const (
	LabelMIGConfig      = "nvidia.com/mig.config"
	LabelMIGConfigState = "nvidia.com/mig.config.state"
	MIGStateSuccess     = "success"
	MIGStateFailed      = "failed"
)

// Node annotations holding the gate's progress. Everything the gate needs to resume lives here,
// written in the same update as the change it describes, so a restarted controller continues
// from the last step that reached the API server.
const (
	AnnotGateTarget   = "gpupool.dev/gate-target"   // requested nvidia.com/mig.config value
	AnnotGateExpect   = "gpupool.dev/gate-expect"   // JSON resource name → quantity the node must offer after
	AnnotGateStep     = "gpupool.dev/gate-step"     // current step (GateStep)
	AnnotGatePrevious = "gpupool.dev/gate-previous" // the label before the gate began ("" = absent)
	AnnotGateCordoned = "gpupool.dev/gate-cordoned" // "true" when the gate cordoned the node
	AnnotGateSince    = "gpupool.dev/gate-since"    // RFC 3339 start of the current step
	AnnotGateReason   = "gpupool.dev/gate-reason"   // why a rollback began
	AnnotGateResult   = "gpupool.dev/gate-result"   // outcome of the last gate: "success <cfg>", "rolled-back <cfg>: reason", "stuck …"
	AnnotGateDone     = "gpupool.dev/gate-done"     // RFC 3339 end of the last gate (the cooldown's start)
	AnnotGateWaiting  = "gpupool.dev/gate-waiting"  // why a requested gate has not begun yet
	AnnotGateRecord   = "gpupool.dev/gate-record"   // the gate's Reconfiguration, until it holds the outcome
	AnnotGateScope    = "gpupool.dev/gate-scope"    // JSON drainScope: which pods may stay, which resources the smoke Jobs test
)

// AnnotGateExpectDevices replaces AnnotGateExpect on a node whose GPUs a DRA driver publishes:
// JSON DeviceExpectation, the devices the driver must publish on the node after.
const AnnotGateExpectDevices = "gpupool.dev/gate-expect-devices"

// GateStep is one step of the per-node gate.
type GateStep string

// The steps, in order; rollback steps follow a failure in Draining, Applying, Verifying or
// SmokeTesting.
const (
	StepDraining  GateStep = "Draining"     // node cordoned; evicting GPU pods through the Eviction API
	StepApplying  GateStep = "Applying"     // label set; waiting for mig.config.state=success
	StepVerifying GateStep = "Verifying"    // waiting for allocatable (or the DRA driver's devices) to equal the expectation
	StepSmoke     GateStep = "SmokeTesting" // a Job per new resource kind on the node must succeed
	StepRestoring GateStep = "Restoring"    // previous label restored; waiting for success
	StepStuck     GateStep = "Stuck"        // restoring failed: node left cordoned for an operator
	stepNone      GateStep = ""
	stepFinished  GateStep = "Finished" // the write that uncordons and clears the gate
)

// MIGGate runs the reconfiguration gate around mig-manager for one node at a time. Each Step call
// makes at most one change on the API server and records it in the node's annotations, so the
// gate can be stopped between any two calls (or inside one) and resumed by a new MIGGate.
type MIGGate struct {
	C client.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// DrainTimeout, ApplyTimeout and VerifyTimeout bound the waiting steps; past one, the gate
	// restores the previous label. Zero means 10 min, 15 min and 5 min.
	DrainTimeout, ApplyTimeout, VerifyTimeout time.Duration
	// Poll is the pause between Step calls in Run (default 200 ms).
	Poll time.Duration
	// Hook, when set, is called before ("before:STEP") and after ("after:STEP") every write the
	// gate makes; tests use it to stop the controller at each step.
	Hook func(point string)
	// MaxUnavailable, when positive, is how many nodes may be in a gate at once (cordoned by it);
	// a requested gate waits for a free place. It needs Slots, which serialises the decision
	// among the goroutines of one controller (NewController sets it).
	MaxUnavailable int
	Slots          *sync.Mutex
	// Cooldown is the least time between the end of a node's gate and the start of its next one
	// (mig-manager applies a config to the whole node, so the cooldown covers the node's GPUs).
	Cooldown time.Duration
	// MigConfigMap, when set, is the mig-parted ConfigMap mig-manager reads (key config.yaml):
	// the gate compares the old and the new config GPU by GPU and drains only the pods that may
	// hold a GPU that changes (see drainscope.go). Unset, every GPU pod of the node is drained.
	MigConfigMap client.ObjectKey
	// KeepRecords is how many Reconfigurations of a node are kept (default 10; negative keeps
	// all); older ones are deleted when a gate's record closes.
	KeepRecords int
	// SurgeTimeout bounds the wait for replacement replicas started before an eviction (default
	// 5 min; it runs within DrainTimeout); negative turns starting replacements first off.
	SurgeTimeout time.Duration
	// Smoke, when its Image is set, runs a Job per new resource kind on the node after
	// verification; a failed or late Job rolls the node back.
	Smoke SmokeTest
}

// Request asks for node's MIG config to become target, with expect the node's allocatable GPU
// resources afterwards (NVIDIA's device plugin). It refuses while a gate is in progress on the node.
func (g *MIGGate) Request(ctx context.Context, node, target string, expect map[string]int64) error {
	b, err := json.Marshal(expect)
	if err != nil {
		return err
	}
	return g.request(ctx, node, target, AnnotGateExpect, string(b))
}

// DeviceExpectation is what a DRA driver must publish on a node after its gate: the devices of the
// driver in the node's ResourceSlices, counted by render.DRADeviceKey ("gpu", "mig-<profile>").
type DeviceExpectation struct {
	Driver  string           `json:"driver"`
	Devices map[string]int64 `json:"devices"`
}

// RequestDRA asks for node's MIG config to become target on a node whose GPUs a DRA driver
// publishes: the gate verifies the driver's ResourceSlices against expect instead of the node's
// allocatable, and drains the pods by the devices their ResourceClaims hold. It refuses while a
// gate is in progress on the node.
func (g *MIGGate) RequestDRA(ctx context.Context, node, target string, expect DeviceExpectation) error {
	if expect.Driver == "" {
		return fmt.Errorf("request mig config %s on node %s: the device expectation names no driver", target, node)
	}
	b, err := json.Marshal(expect)
	if err != nil {
		return err
	}
	return g.request(ctx, node, target, AnnotGateExpectDevices, string(b))
}

// request records the target and the expectation in annot (removing the other kind of
// expectation) in one write.
func (g *MIGGate) request(ctx context.Context, node, target, annot, expect string) error {
	n := &corev1.Node{}
	if err := g.C.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("request mig config %s on node %s: %w", target, node, err)
	}
	if s := n.Annotations[AnnotGateStep]; s != "" {
		return fmt.Errorf("request mig config %s on node %s: gate in progress at step %s", target, node, s)
	}
	setAnnot(n, AnnotGateTarget, target)
	delete(n.Annotations, AnnotGateExpect)
	delete(n.Annotations, AnnotGateExpectDevices)
	setAnnot(n, annot, expect)
	if err := g.C.Update(ctx, n); err != nil {
		return fmt.Errorf("request mig config %s on node %s: %w", target, node, err)
	}
	return nil
}

// deviceExpectation reads the node's DRA expectation; nil when the gate verifies allocatable.
func deviceExpectation(n *corev1.Node) (*DeviceExpectation, error) {
	s, ok := n.Annotations[AnnotGateExpectDevices]
	if !ok {
		return nil, nil
	}
	var e DeviceExpectation
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("gate node %s: annotation %s: %w", n.Name, AnnotGateExpectDevices, err)
	}
	if e.Driver == "" {
		return nil, fmt.Errorf("gate node %s: annotation %s: no driver", n.Name, AnnotGateExpectDevices)
	}
	return &e, nil
}

func setAnnot(n *corev1.Node, k, v string) {
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[k] = v
}

func (g *MIGGate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Run calls Step until the node's gate is finished (nil), stuck (an error) or ctx ends.
func (g *MIGGate) Run(ctx context.Context, node string) error {
	poll := orDefault(g.Poll, 200*time.Millisecond)
	for {
		done, err := g.Step(ctx, node)
		if err != nil && !apierrors.IsConflict(err) {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// ErrGateStuck is returned when restoring the previous config failed; the node stays cordoned.
var ErrGateStuck = errors.New("mig gate stuck: restoring the previous config failed")

// Step advances node's gate by at most one write of the node (besides bringing its
// Reconfiguration up to date and creating smoke Jobs). It returns done when no gate is in progress.
func (g *MIGGate) Step(ctx context.Context, node string) (done bool, err error) {
	n := &corev1.Node{}
	if err := g.C.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return false, fmt.Errorf("gate node %s: %w", node, err)
	}
	// The Reconfiguration follows the annotations before the gate writes anything else, so every
	// step reaches it even when the controller is killed right after a step's write.
	closed, err := g.syncRecord(ctx, n)
	if err != nil {
		return false, err
	}
	a := n.Annotations
	step := GateStep(a[AnnotGateStep])
	switch step {
	case stepNone:
		if !closed {
			return false, nil
		}
		target, ok := a[AnnotGateTarget]
		if !ok || target == n.Labels[LabelMIGConfig] {
			return true, nil
		}
		if g.Slots != nil {
			g.Slots.Lock()
			defer g.Slots.Unlock()
		}
		if why, err := g.mustWait(ctx, n); err != nil || why != "" {
			if err == nil && a[AnnotGateWaiting] != why {
				setAnnot(n, AnnotGateWaiting, why)
				err = g.C.Update(ctx, n)
			}
			return false, err
		}
		return false, g.begin(ctx, n, target)
	case StepDraining:
		return false, g.drain(ctx, n)
	case StepApplying:
		return false, g.waitApplied(ctx, n)
	case StepVerifying:
		return false, g.verify(ctx, n)
	case StepSmoke:
		return false, g.smoke(ctx, n)
	case StepRestoring:
		return false, g.waitRestored(ctx, n)
	case StepStuck:
		// mig-manager may still bring the previous config back (late, or after an operator fixed
		// the node): then the gate finishes the rollback and uncordons.
		if n.Labels[LabelMIGConfigState] == MIGStateSuccess && n.Labels[LabelMIGConfig] == a[AnnotGatePrevious] {
			return false, g.finish(ctx, n, fmt.Sprintf("rolled-back %s: %s (previous config restored late)", a[AnnotGateTarget], a[AnnotGateReason]))
		}
		return true, fmt.Errorf("gate node %s: %w (%s)", node, ErrGateStuck, a[AnnotGateResult])
	default:
		return false, fmt.Errorf("gate node %s: unknown step %q in annotation %s", node, step, AnnotGateStep)
	}
}

// write updates n (guarded by its resourceVersion) around the hook calls.
func (g *MIGGate) write(ctx context.Context, n *corev1.Node, to GateStep) error {
	if g.Hook != nil {
		g.Hook("before:" + string(to))
	}
	if err := g.C.Update(ctx, n); err != nil {
		return fmt.Errorf("gate node %s: write step %s: %w", n.Name, to, err)
	}
	g.event(ctx, n, to)
	if g.Hook != nil {
		g.Hook("after:" + string(to))
	}
	return nil
}

func (g *MIGGate) since(n *corev1.Node) time.Time {
	t, err := time.Parse(time.RFC3339Nano, n.Annotations[AnnotGateSince])
	if err != nil {
		return g.now() // a missing stamp restarts the step's clock rather than failing at once
	}
	return t
}

func (g *MIGGate) enter(n *corev1.Node, s GateStep) {
	setAnnot(n, AnnotGateStep, string(s))
	setAnnot(n, AnnotGateSince, g.now().UTC().Format(time.RFC3339Nano))
}

// mustWait says why a requested gate may not begin now: the node is not Ready (its kubelet would
// not finish the evicted pods, nor mig-manager apply anything), its cooldown has not passed, or
// MaxUnavailable nodes are in a gate already.
func (g *MIGGate) mustWait(ctx context.Context, n *corev1.Node) (string, error) {
	if !nodeReady(n) {
		return "node not Ready", nil
	}
	if t, err := time.Parse(time.RFC3339Nano, n.Annotations[AnnotGateDone]); err == nil && g.Cooldown > 0 {
		if left := t.Add(g.Cooldown).Sub(g.now()); left > 0 {
			return fmt.Sprintf("cooldown: the last gate ended at %s", t.UTC().Format(time.RFC3339)), nil
		}
	}
	if g.MaxUnavailable > 0 {
		var nodes corev1.NodeList
		if err := g.C.List(ctx, &nodes); err != nil {
			return "", fmt.Errorf("gate node %s: list nodes: %w", n.Name, err)
		}
		busy := 0
		for _, o := range nodes.Items {
			if o.Annotations[AnnotGateStep] != "" {
				busy++
			}
		}
		if busy >= g.MaxUnavailable {
			return fmt.Sprintf("%d nodes in a gate (max unavailable %d)", busy, g.MaxUnavailable), nil
		}
	}
	return "", nil
}

// begin records the previous label, the drain scope and the Reconfiguration's name and cordons
// the node, in one write.
func (g *MIGGate) begin(ctx context.Context, n *corev1.Node, target string) error {
	prev := n.Labels[LabelMIGConfig]
	scope, err := g.drainScope(ctx, n, prev, target)
	if err != nil {
		return err
	}
	setAnnot(n, AnnotGateScope, scope.encode())
	setAnnot(n, AnnotGateRecord, reconfigurationName(n.Name, g.now()))
	setAnnot(n, AnnotGatePrevious, prev)
	// A gate that could not record itself would stop after the cordon: find out before it.
	if err := g.C.Create(ctx, newRecord(n), client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("gate node %s: cannot record the gate in a Reconfiguration, so not beginning it: %w", n.Name, err)
	}
	setAnnot(n, AnnotGateCordoned, fmt.Sprint(!n.Spec.Unschedulable))
	delete(n.Annotations, AnnotGateReason)
	delete(n.Annotations, AnnotGateWaiting)
	n.Spec.Unschedulable = true
	g.enter(n, StepDraining)
	return g.write(ctx, n, StepDraining)
}

// gpuPods lists the pods on n that hold NVIDIA resources and are not DaemonSet pods (the GPU
// Operator's own daemons stay; mig-manager pauses them itself), less those the drain scope keeps:
// pods asking only for resources whose instances are all on GPUs that do not change. On a DRA
// node it adds the pods whose ResourceClaims hold a device of the driver the scope does not keep.
func (g *MIGGate) gpuPods(ctx context.Context, n *corev1.Node) ([]corev1.Pod, error) {
	scope := decodeScope(n.Annotations[AnnotGateScope])
	keep := scope.Keep
	if scope.DRA == nil {
		// a scope without its DRA part on a DRA node (unreadable): every pod holding a device goes
		exp, err := deviceExpectation(n)
		if err != nil {
			return nil, err
		}
		if exp != nil {
			scope.DRA = &draScope{Driver: exp.Driver}
		}
	}
	var pods corev1.PodList
	if err := g.C.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return nil, fmt.Errorf("gate node %s: list pods: %w", n.Name, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || ownedByDaemonSet(p) {
			continue
		}
		if usesNVIDIA(p) && !onlyKept(p, keep) {
			out = append(out, p)
			continue
		}
		if scope.DRA != nil {
			drained, err := g.draDrained(ctx, &p, scope.DRA)
			if err != nil {
				return nil, fmt.Errorf("gate node %s: %w", n.Name, err)
			}
			if drained {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func ownedByDaemonSet(p corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func usesNVIDIA(p corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for r := range c.Resources.Limits {
				if strings.HasPrefix(string(r), "nvidia.com/") {
					return true
				}
			}
		}
	}
	return false
}

// drain evicts the node's GPU pods; PodDisruptionBudgets are enforced by the API server, which
// answers 429 while a budget forbids the eviction. When none is left it sets the label.
func (g *MIGGate) drain(ctx context.Context, n *corev1.Node) error {
	pods, err := g.gpuPods(ctx, n)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		if err := g.lower(ctx, n); err != nil {
			return err
		}
		delete(n.Annotations, AnnotGateSurge)
		return g.setLabel(ctx, n, n.Annotations[AnnotGateTarget], StepApplying)
	}
	if g.now().Sub(g.since(n)) > orDefault(g.DrainTimeout, 10*time.Minute) {
		if err := g.lower(ctx, n); err != nil {
			return err
		}
		// the label was never changed, so there is nothing to restore: uncordon and drop the request
		return g.finish(ctx, n, fmt.Sprintf("rolled-back %s: drain timed out with %d GPU pods left (first %s/%s)",
			n.Annotations[AnnotGateTarget], len(pods), pods[0].Namespace, pods[0].Name))
	}
	// replacements first: raise the pods' Deployments and wait for the new replicas to be Ready
	if proceed, err := g.surge(ctx, n, pods); err != nil || !proceed {
		return err
	}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue // evicted; waiting for the kubelet to finish it
		}
		if _, err := evict(ctx, g.C, p); err != nil {
			return fmt.Errorf("gate node %s: evict pod %s/%s: %w", n.Name, p.Namespace, p.Name, err)
		}
	}
	return nil
}

// setLabel writes the MIG config label and removes mig-manager's state label in the same write,
// so a later state=success can only come from mig-manager acting on this label.
func (g *MIGGate) setLabel(ctx context.Context, n *corev1.Node, cfg string, to GateStep) error {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if cfg == "" {
		delete(n.Labels, LabelMIGConfig)
	} else {
		n.Labels[LabelMIGConfig] = cfg
	}
	delete(n.Labels, LabelMIGConfigState)
	g.enter(n, to)
	return g.write(ctx, n, to)
}

func (g *MIGGate) waitApplied(ctx context.Context, n *corev1.Node) error {
	switch st := n.Labels[LabelMIGConfigState]; {
	case st == MIGStateSuccess:
		g.enter(n, StepVerifying)
		return g.write(ctx, n, StepVerifying)
	case st == MIGStateFailed:
		return g.rollback(ctx, n, "mig-manager reported state failed for "+n.Annotations[AnnotGateTarget])
	case g.now().Sub(g.since(n)) > orDefault(g.ApplyTimeout, 15*time.Minute):
		return g.rollback(ctx, n, fmt.Sprintf("mig-manager did not report success within the apply timeout (state %q)", st))
	}
	return nil
}

// allocatableMismatch says how n's allocatable differs from the expectation: every expected
// resource at its quantity and no other nvidia.com/ resource above zero.
func allocatableMismatch(n *corev1.Node) (string, error) {
	want := map[string]int64{}
	if s := n.Annotations[AnnotGateExpect]; s != "" {
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			return "", fmt.Errorf("gate node %s: annotation %s: %w", n.Name, AnnotGateExpect, err)
		}
	}
	var diffs []string
	for r, q := range want {
		got := n.Status.Allocatable[corev1.ResourceName(r)]
		if got.Cmp(*resource.NewQuantity(q, resource.DecimalSI)) != 0 {
			diffs = append(diffs, fmt.Sprintf("%s=%s want %d", r, got.String(), q))
		}
	}
	for r, q := range n.Status.Allocatable {
		if _, ok := want[string(r)]; !ok && strings.HasPrefix(string(r), "nvidia.com/") && !q.IsZero() {
			diffs = append(diffs, fmt.Sprintf("%s=%s want 0", r, q.String()))
		}
	}
	return strings.Join(diffs, ", "), nil
}

func (g *MIGGate) verify(ctx context.Context, n *corev1.Node) error {
	exp, err := deviceExpectation(n)
	if err != nil {
		return err
	}
	what := "allocatable does not match the plan: "
	var diff string
	if exp != nil {
		what = fmt.Sprintf("the devices %s publishes do not match the plan: ", exp.Driver)
		diff, err = g.devicesMismatch(ctx, n, exp)
	} else {
		diff, err = allocatableMismatch(n)
	}
	if err != nil {
		return err
	}
	if diff == "" {
		if g.Smoke.Image != "" && len(decodeScope(n.Annotations[AnnotGateScope]).Smoke) > 0 {
			g.enter(n, StepSmoke)
			return g.write(ctx, n, StepSmoke)
		}
		return g.finish(ctx, n, "success "+n.Annotations[AnnotGateTarget])
	}
	if g.now().Sub(g.since(n)) > orDefault(g.VerifyTimeout, 5*time.Minute) {
		return g.rollback(ctx, n, what+diff)
	}
	return nil
}

// rollback restores the previous label (the node stays cordoned until it is back).
func (g *MIGGate) rollback(ctx context.Context, n *corev1.Node, reason string) error {
	setAnnot(n, AnnotGateReason, reason)
	return g.setLabel(ctx, n, n.Annotations[AnnotGatePrevious], StepRestoring)
}

func (g *MIGGate) waitRestored(ctx context.Context, n *corev1.Node) error {
	reason := n.Annotations[AnnotGateReason]
	prev := n.Annotations[AnnotGatePrevious]
	st := n.Labels[LabelMIGConfigState]
	switch {
	case st == MIGStateSuccess || prev == "":
		// with no previous config there is nothing for mig-manager to restore
		return g.finish(ctx, n, fmt.Sprintf("rolled-back %s: %s", n.Annotations[AnnotGateTarget], reason))
	case st == MIGStateFailed || g.now().Sub(g.since(n)) > orDefault(g.ApplyTimeout, 15*time.Minute):
		setAnnot(n, AnnotGateResult, fmt.Sprintf("stuck restoring %s (state %q) after: %s", prev, st, reason))
		g.enter(n, StepStuck)
		return g.write(ctx, n, StepStuck)
	}
	return nil
}

// finish uncordons the node (when the gate cordoned it) and clears the gate's annotations, in one
// write. After a rollback the request is dropped too, so the gate does not retry at once.
func (g *MIGGate) finish(ctx context.Context, n *corev1.Node, result string) error {
	if n.Annotations[AnnotGateCordoned] == "true" {
		n.Spec.Unschedulable = false
	}
	for _, k := range []string{AnnotGateStep, AnnotGatePrevious, AnnotGateCordoned, AnnotGateSince, AnnotGateExpect, AnnotGateExpectDevices, AnnotGateScope, AnnotGateSurge} {
		delete(n.Annotations, k)
	}
	if !strings.HasPrefix(result, "success") {
		delete(n.Annotations, AnnotGateTarget)
	}
	setAnnot(n, AnnotGateResult, result)
	setAnnot(n, AnnotGateDone, g.now().UTC().Format(time.RFC3339Nano))
	return g.write(ctx, n, stepFinished)
}
