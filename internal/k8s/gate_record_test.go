package k8s

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeRecords lists the Reconfigurations of node.
func nodeRecords(t *testing.T, c client.Client, node string) []Reconfiguration {
	t.Helper()
	var l ReconfigurationList
	if err := c.List(context.Background(), &l, client.MatchingLabels{LabelNode: node}); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// checkRecord asserts node has exactly one Reconfiguration, closed (every step ended, the node's
// pointer to it gone), from old to new, whose outcome agrees with the node's label: Succeeded at
// new, RolledBack at old.
func checkRecord(t *testing.T, c client.Client, node, old, new string) Reconfiguration {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	rs := nodeRecords(t, c, node)
	if len(rs) != 1 {
		t.Fatalf("node %s: %d Reconfigurations, want 1", node, len(rs))
	}
	r := rs[0]
	if r.Spec.Node != node || r.Spec.FromConfig != old || r.Spec.ToConfig != new {
		t.Errorf("node %s: record spec %+v, want %s → %s", node, r.Spec, old, new)
	}
	if a := n.Annotations[AnnotGateRecord]; a != "" {
		t.Errorf("node %s: record %s still open", node, a)
	}
	want := map[string]string{new: OutcomeSucceeded, old: OutcomeRolledBack}[n.Labels[LabelMIGConfig]]
	if r.Status.Outcome != want || r.Status.Phase != want || r.Status.CompletionTime == nil {
		t.Errorf("node %s at %q: record outcome %q phase %q completion %v, want %s", node, n.Labels[LabelMIGConfig], r.Status.Outcome, r.Status.Phase, r.Status.CompletionTime, want)
	}
	for i, s := range r.Status.Steps {
		if s.State == StepStateRunning || s.End == nil || s.End.Before(&s.Start) {
			t.Errorf("node %s: step %d %+v not closed", node, i, s)
		}
	}
	return r
}

func stepNames(r Reconfiguration) (names, states []string) {
	for _, s := range r.Status.Steps {
		names = append(names, s.Name)
		states = append(states, s.State)
	}
	return names, states
}

func smokeGate(c client.Client, ns string) *MIGGate {
	g := fastGate(c)
	g.Smoke = SmokeTest{Image: "registry.example/cuda:12.4-base", Namespace: ns}
	return g
}

// TestGateReconfigurationAndSmoke: a gate that succeeds records Draining, Applying, Verifying and
// SmokeTesting, each Succeeded, and outcome Succeeded; its smoke Job was pinned to the node,
// tolerates the cordon and asks for every free instance of the new kind. When the smoke Job
// fails the gate restores the previous label and the record says RolledBack, with the Job named.
func TestGateReconfigurationAndSmoke(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	t.Run("success", func(t *testing.T) {
		ns := newNamespace(t, c, "rec")
		node := nextNode("rec")
		newGPUNode(t, c, node, "all-1g.10gb", ns)
		d := &nodeDouble{c: c, node: node, configs: gateConfigs}
		startDouble(t, d)
		g := smokeGate(c, ns)
		if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
			t.Fatal(err)
		}
		if err := runGate(t, g, node); err != nil {
			t.Fatal(err)
		}
		checkSettled(t, c, node, "", "all-3g.40gb")
		r := checkRecord(t, c, node, "all-1g.10gb", "all-3g.40gb")
		names, states := stepNames(r)
		if want := []string{"Draining", "Applying", "Verifying", "SmokeTesting"}; !slices.Equal(names, want) || slices.ContainsFunc(states, func(s string) bool { return s != StepStateSucceeded }) {
			t.Errorf("steps %v states %v, want %v all Succeeded", names, states, want)
		}
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{LabelNode: node}); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 1 || d.smokeRuns.Load() != 1 {
			t.Fatalf("%d smoke Jobs, %d run; want 1", len(jobs.Items), d.smokeRuns.Load())
		}
		ps := jobs.Items[0].Spec.Template.Spec
		q := ps.Containers[0].Resources.Limits["nvidia.com/mig-3g.40gb"]
		if ps.NodeName != node || q.Value() != 16 || !slices.ContainsFunc(ps.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == corev1.TaintNodeUnschedulable }) {
			t.Errorf("smoke pod nodeName %q, 3g.40gb %s (want all 16 free), tolerations %v", ps.NodeName, q.String(), ps.Tolerations)
		}
		if o := jobs.Items[0].OwnerReferences; len(o) != 1 || o[0].Kind != "Reconfiguration" || o[0].Name != r.Name {
			t.Errorf("smoke Job owners %v, want the Reconfiguration %s", o, r.Name)
		}
	})
	t.Run("smoke fails", func(t *testing.T) {
		ns := newNamespace(t, c, "recf")
		node := nextNode("recf")
		newGPUNode(t, c, node, "all-1g.10gb", ns)
		startDouble(t, &nodeDouble{c: c, node: node, configs: gateConfigs, smokeFail: map[string]bool{"all-3g.40gb": true}})
		g := smokeGate(c, ns)
		if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
			t.Fatal(err)
		}
		if err := runGate(t, g, node); err != nil {
			t.Fatal(err)
		}
		n := checkSettled(t, c, node, "all-1g.10gb", "")
		if res := n.Annotations[AnnotGateResult]; !strings.HasPrefix(res, "rolled-back all-3g.40gb: smoke Job") {
			t.Errorf("result %q, want a rollback naming the smoke Job", res)
		}
		r := checkRecord(t, c, node, "all-1g.10gb", "all-3g.40gb")
		names, states := stepNames(r)
		if want := []string{"Draining", "Applying", "Verifying", "SmokeTesting", "Restoring"}; !slices.Equal(names, want) ||
			!slices.Equal(states, []string{StepStateSucceeded, StepStateSucceeded, StepStateSucceeded, StepStateFailed, StepStateSucceeded}) {
			t.Errorf("steps %v states %v", names, states)
		}
		if m := r.Status.Steps[3].Message; !strings.Contains(m, "failed") {
			t.Errorf("smoke step message %q does not say it failed", m)
		}
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace("default"), client.MatchingFields{"involvedObject.name": node}); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
			return e.Reason == "GateRollingBack" && strings.Contains(e.Message, "smoke Job")
		}) {
			t.Errorf("no GateRollingBack Event naming the smoke Job")
		}
	})
	for _, tc := range []struct {
		name, why string
		edit      func(*MIGGate, *nodeDouble, string)
	}{
		{"smoke Job never finishes", "did not succeed within 1s", func(g *MIGGate, d *nodeDouble, _ string) { d.smokeHang = true; g.Smoke.Timeout = time.Second }},
		{"smoke Job refused", "could not create smoke Job", func(g *MIGGate, _ *nodeDouble, ns string) { g.Smoke.Namespace = ns + "-missing" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, c, "rect")
			node := nextNode("rect")
			newGPUNode(t, c, node, "all-1g.10gb", ns)
			d := &nodeDouble{c: c, node: node, configs: gateConfigs}
			g := smokeGate(c, ns)
			tc.edit(g, d, ns)
			startDouble(t, d)
			if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			n := checkSettled(t, c, node, "all-1g.10gb", "")
			if res := n.Annotations[AnnotGateResult]; !strings.Contains(res, tc.why) {
				t.Errorf("result %q, want it to say %q", res, tc.why)
			}
			checkRecord(t, c, node, "all-1g.10gb", "all-3g.40gb")
		})
	}
}

// TestGateKeepsNewestRecords: with KeepRecords 2, three gates on one node leave its two newest
// Reconfigurations.
func TestGateKeepsNewestRecords(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "keep")
	node := nextNode("keep")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	startDouble(t, &nodeDouble{c: c, node: node, configs: gateConfigs})
	var names []string
	for _, to := range []string{"all-3g.40gb", "all-1g.10gb", "all-3g.40gb"} {
		g := fastGate(c)
		g.KeepRecords = 2
		if err := g.Request(ctx, node, to, gateConfigs[to]); err != nil {
			t.Fatal(err)
		}
		if err := runGate(t, g, node); err != nil {
			t.Fatal(err)
		}
		n := checkSettled(t, c, node, to, to)
		if res := n.Annotations[AnnotGateResult]; res != "success "+to {
			t.Fatalf("gate to %s: %q", to, res)
		}
		rs := nodeRecords(t, c, node)
		slices.SortFunc(rs, func(a, b Reconfiguration) int { return strings.Compare(a.Name, b.Name) })
		names = append(names, rs[len(rs)-1].Name)
	}
	var left []string
	for _, r := range nodeRecords(t, c, node) {
		if r.DeletionTimestamp == nil {
			left = append(left, r.Name)
		}
	}
	slices.Sort(left)
	if want := names[1:]; !slices.Equal(left, want) {
		t.Errorf("records left %v, want the newest two %v", left, want)
	}
}

// TestGateWaitsWhenItCannotRecord: a controller whose RBAC lacks Reconfigurations does not begin a
// gate (the node is not cordoned, nothing is evicted) and says why.
func TestGateWaitsWhenItCannotRecord(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "norec")
	node := nextNode("norec")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	user := "gate-without-records"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"get", "list", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction", "events"}, Verbs: []string{"create"}},
		{APIGroups: []string{"gpupool.dev"}, Resources: []string{"reconfigurations"}, Verbs: []string{"get"}}}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	for _, o := range []client.Object{role, bind} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(testCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	g := fastGate(clientFor(t, cfg))
	if err := (&MIGGate{C: c}).Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
		t.Fatal(err)
	}
	_, err := g.Step(ctx, node)
	if err == nil || !strings.Contains(err.Error(), "cannot record the gate") || !apierrors.IsForbidden(errors.Unwrap(err)) {
		t.Fatalf("step returned %v, want a forbidden Reconfiguration", err)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || n.Annotations[AnnotGateStep] != "" || len(podNames(t, c, node)) != 4 {
		t.Errorf("node began a gate it cannot record: unschedulable %v step %q pods %v", n.Spec.Unschedulable, n.Annotations[AnnotGateStep], podNames(t, c, node))
	}
}
