package k8s

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestGateMaxUnavailable runs the controller with MaxUnavailable 1 and asks three nodes for a new
// config at once: an observer polling the nodes never sees two in a gate, and all three end at
// the new config.
func TestGateMaxUnavailable(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "maxun")
	var nodes []string
	for range 3 {
		n := nextNode("maxun")
		nodes = append(nodes, n)
		newGPUNode(t, c, n, "all-1g.10gb", ns)
		startDouble(t, &nodeDouble{c: c, node: n, configs: gateConfigs, every: 50 * time.Millisecond})
	}
	m, err := NewController(testCfg, ControllerOptions{Namespace: ns, Gate: MIGGate{Poll: 20 * time.Millisecond, MaxUnavailable: 1},
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, m)
	for _, n := range nodes {
		if err := (&MIGGate{C: c}).Request(ctx, n, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
			t.Fatal(err)
		}
	}
	var most, waited atomic.Int32
	deadline := time.Now().Add(time.Minute)
	for {
		busy, done := 0, 0
		for _, name := range nodes {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				t.Fatal(err)
			}
			if n.Annotations[AnnotGateStep] != "" {
				busy++
			}
			if strings.HasPrefix(n.Annotations[AnnotGateWaiting], "1 nodes in a gate") {
				waited.Add(1)
			}
			if n.Annotations[AnnotGateResult] == "success all-3g.40gb" && n.Annotations[AnnotGateStep] == "" {
				done++
			}
		}
		if int32(busy) > most.Load() {
			most.Store(int32(busy))
		}
		if done == len(nodes) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d gates done after a minute", done, len(nodes))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if most.Load() != 1 {
		t.Errorf("at most %d nodes in a gate at once, want exactly 1", most.Load())
	}
	if waited.Load() == 0 {
		t.Error("no node was seen waiting for a free place")
	}
	for _, n := range nodes {
		checkSettled(t, c, n, "", "all-3g.40gb")
	}
}

// TestGateCooldownAndNotReady steps one node's gate by hand with a test clock: a request on a node
// that is not Ready waits (nothing cordoned or evicted) until it is Ready; a second request right
// after a gate waits out the cooldown; a node that goes NotReady while mig-manager applies (and so
// never answers) is rolled back by the apply timeout, stays cordoned at Stuck while nothing
// answers, and is uncordoned once it is back and mig-manager has restored the previous config.
func TestGateCooldownAndNotReady(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "cool")
	node := nextNode("cool")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	d := &nodeDouble{c: c, node: node, configs: gateConfigs}
	startDouble(t, d)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	g := &MIGGate{C: c, Now: now, Cooldown: time.Hour, ApplyTimeout: time.Minute, VerifyTimeout: time.Minute, DrainTimeout: time.Minute, Poll: 20 * time.Millisecond}
	setReady := func(ready bool) {
		st := corev1.ConditionTrue
		if !ready {
			st = corev1.ConditionFalse
		}
		// the gate writes the node too (labels, cordon): read it again on a conflict
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				return err
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
			return c.Status().Update(ctx, n)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func() *corev1.Node {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	step := func() {
		if _, err := g.Step(ctx, node); err != nil && !strings.Contains(err.Error(), "conflict") && !strings.Contains(err.Error(), ErrGateStuck.Error()) {
			t.Fatal(err)
		}
	}
	// 1. Not Ready: the request waits.
	setReady(false)
	if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		step()
	}
	if n := get(); n.Spec.Unschedulable || n.Annotations[AnnotGateStep] != "" || n.Annotations[AnnotGateWaiting] != "node not Ready" {
		t.Fatalf("not Ready: cordoned %v, step %q, waiting %q", n.Spec.Unschedulable, n.Annotations[AnnotGateStep], n.Annotations[AnnotGateWaiting])
	}
	if len(podNames(t, c, node)) != 4 {
		t.Fatalf("pods evicted from a node that is not Ready: %v", podNames(t, c, node))
	}
	setReady(true)
	runTo := func(what string, cond func(*corev1.Node) bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(get()); {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: annotations %v", what, get().Annotations)
			}
			step()
			time.Sleep(20 * time.Millisecond)
		}
	}
	runTo("the first gate to succeed", func(n *corev1.Node) bool {
		return n.Annotations[AnnotGateStep] == "" && n.Annotations[AnnotGateResult] == "success all-3g.40gb"
	})
	// 2. Cooldown: a new request waits an hour after the last gate.
	if err := g.Request(ctx, node, "all-1g.10gb", gateConfigs["all-1g.10gb"]); err != nil {
		t.Fatal(err)
	}
	advance(59 * time.Minute)
	step()
	if n := get(); n.Spec.Unschedulable || !strings.HasPrefix(n.Annotations[AnnotGateWaiting], "cooldown") {
		t.Fatalf("inside the cooldown: cordoned %v, waiting %q", n.Spec.Unschedulable, n.Annotations[AnnotGateWaiting])
	}
	advance(2 * time.Minute)
	runTo("the second gate to set the label", func(n *corev1.Node) bool {
		return n.Annotations[AnnotGateStep] == string(StepApplying)
	})
	// 3. NotReady mid-gate: mig-manager is silent, the apply timeout rolls back, restoring is not
	// answered either, so the node stays cordoned at Stuck.
	d.mute.Store(true)
	setReady(false)
	advance(2 * time.Minute)
	runTo("the stuck rollback", func(n *corev1.Node) bool {
		if n.Annotations[AnnotGateStep] == string(StepRestoring) {
			advance(2 * time.Minute)
		}
		return n.Annotations[AnnotGateStep] == string(StepStuck)
	})
	if n := get(); !n.Spec.Unschedulable || n.Labels[LabelMIGConfig] != "all-3g.40gb" {
		t.Fatalf("stuck: cordoned %v, label %q; want cordoned at the previous config", n.Spec.Unschedulable, n.Labels[LabelMIGConfig])
	}
	// The node comes back and mig-manager restores the previous config: the gate finishes the
	// rollback and uncordons.
	setReady(true)
	d.mute.Store(false)
	runTo("the late rollback", func(n *corev1.Node) bool { return n.Annotations[AnnotGateStep] == "" })
	n := checkSettled(t, c, node, "all-3g.40gb", "all-1g.10gb")
	if n.Labels[LabelMIGConfig] != "all-3g.40gb" || !strings.HasPrefix(n.Annotations[AnnotGateResult], "rolled-back all-1g.10gb") {
		t.Errorf("after the node came back: label %q, result %q", n.Labels[LabelMIGConfig], n.Annotations[AnnotGateResult])
	}
}
