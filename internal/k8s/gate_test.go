package k8s

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/render"
)

var nodeSeq int

func nextNode(prefix string) string {
	nodeSeq++
	return prefix + "-" + strconv.Itoa(nodeSeq)
}

// startDouble runs a nodeDouble until the test ends.
func startDouble(t *testing.T, d *nodeDouble) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func fastGate(c client.Client) *MIGGate {
	return &MIGGate{C: c, Poll: 20 * time.Millisecond, DrainTimeout: 20 * time.Second, ApplyTimeout: 20 * time.Second, VerifyTimeout: 20 * time.Second}
}

func runGate(t *testing.T, g *MIGGate, node string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return g.Run(ctx, node)
}

// TestGateReconfigures takes a node from all-1g.10gb to all-3g.40gb: the GPU pods are evicted
// (through a PodDisruptionBudget that allows it), the CPU pod and the operator's DaemonSet pod
// stay, the label and allocatable are the new config's, and the node is schedulable again.
func TestGateReconfigures(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "gate")
	node := nextNode("ok")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}}}
	if err := c.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	// No disruption controller runs here; play it: the budget allows two disruptions.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 2, CurrentHealthy: 4, DesiredHealthy: 2, ExpectedPods: 4}
	if err := c.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	startDouble(t, &nodeDouble{c: c, node: node, configs: gateConfigs})
	g := fastGate(c)
	if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
		t.Fatal(err)
	}
	if err := runGate(t, g, node); err != nil {
		t.Fatal(err)
	}
	n := checkSettled(t, c, node, "", "all-3g.40gb")
	if got := n.Annotations[AnnotGateResult]; got != "success all-3g.40gb" {
		t.Errorf("result %q", got)
	}
	if q := n.Status.Allocatable["nvidia.com/mig-3g.40gb"]; q.Value() != 16 {
		t.Errorf("allocatable %v, want 16 nvidia.com/mig-3g.40gb", n.Status.Allocatable)
	}
	if q, ok := n.Status.Allocatable["nvidia.com/mig-1g.10gb"]; ok && !q.IsZero() {
		t.Errorf("allocatable still offers %v nvidia.com/mig-1g.10gb", q.String())
	}
	if got, want := podNames(t, c, node), fmtNames(node, "cpu", "ds"); !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
	// One Event per step (creation times have one-second resolution, so compared as a set).
	var evs corev1.EventList
	if err := c.List(ctx, &evs, client.InNamespace("default"), client.MatchingFields{"involvedObject.name": node}); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason)
	}
	want := []string{"GateCordoned", "GateLabeled", "GateApplied", "GateSucceeded"}
	slices.Sort(reasons)
	slices.Sort(want)
	if !slices.Equal(reasons, want) {
		t.Errorf("events %v, want %v", reasons, want)
	}
}

// TestGateRollsBack covers the failures: mig-manager reports failed, never answers, or the device
// plugin comes back with other resources; a budget that forbids eviction. Each ends with the
// previous label and the node schedulable, and says why.
func TestGateRollsBack(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	cases := []struct {
		name       string
		double     func(*nodeDouble)
		blockPDB   bool
		wantReason string
		wantPods   int
	}{
		{"mig-manager fails", func(d *nodeDouble) { d.fail = map[string]bool{"all-3g.40gb": true} }, false, "state failed", 2},
		{"mig-manager silent", func(d *nodeDouble) { d.silent = map[string]bool{"all-3g.40gb": true} }, false, "apply timeout", 2},
		{"wrong allocatable", func(d *nodeDouble) { d.wrongAlloc = map[string]bool{"all-3g.40gb": true} }, false, "allocatable does not match", 2},
		{"budget forbids eviction", func(*nodeDouble) {}, true, "drain timed out with 2 GPU pods left", 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, c, "rb")
			node := nextNode("rb")
			newGPUNode(t, c, node, "all-1g.10gb", ns)
			if tc.blockPDB {
				pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
					Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}}}}
				if err := c.Create(ctx, pdb); err != nil {
					t.Fatal(err)
				}
			}
			d := &nodeDouble{c: c, node: node, configs: gateConfigs}
			tc.double(d)
			startDouble(t, d)
			g := fastGate(c)
			g.ApplyTimeout, g.VerifyTimeout, g.DrainTimeout = 2*time.Second, 2*time.Second, 2*time.Second
			if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			n := checkSettled(t, c, node, "all-1g.10gb", "")
			if r := n.Annotations[AnnotGateResult]; !strings.HasPrefix(r, "rolled-back all-3g.40gb") || !strings.Contains(r, tc.wantReason) {
				t.Errorf("result %q, want a rollback naming %q", r, tc.wantReason)
			}
			if _, ok := n.Annotations[AnnotGateTarget]; ok {
				t.Errorf("request kept after rollback: %v", n.Annotations)
			}
			if got := len(podNames(t, c, node)); got != tc.wantPods {
				t.Errorf("%d pods left, want %d", got, tc.wantPods)
			}
		})
	}
}

// TestGateKeepsOperatorCordon: a node an operator cordoned before the gate stays cordoned after.
func TestGateKeepsOperatorCordon(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "cordon")
	node := nextNode("cordon")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	n := checkSettled(t, c, node, "all-1g.10gb", "")
	n.Spec.Unschedulable = true
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	startDouble(t, &nodeDouble{c: c, node: node, configs: gateConfigs})
	g := fastGate(c)
	if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
		t.Fatal(err)
	}
	if err := runGate(t, g, node); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Labels[LabelMIGConfig] != "all-3g.40gb" {
		t.Errorf("unschedulable %v label %q; want true and all-3g.40gb", n.Spec.Unschedulable, n.Labels[LabelMIGConfig])
	}
}

// killRuns is how many times TestGateKilledAtEveryStep goes through every kill point;
// GPUPOOL_GATE_KILL_RUNS raises it (the bar is 100).
func killRuns() int {
	if n, err := strconv.Atoi(os.Getenv("GPUPOOL_GATE_KILL_RUNS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// TestGateKilledAtEveryStep stops the controller before and after every write the gate makes
// (on the success path, the rollback path after mig-manager fails, the rollback path after the
// smoke Job fails and the success path on a node whose GPUs the DRA driver publishes; the node,
// its Reconfiguration, the smoke Job and its claim template), then starts a new controller
// that resumes. Between the two, and at the end, the node's label is the old or the new config; at
// the end no node is cordoned, no gate step is left, the outcome is the one an uninterrupted gate
// has, and the node's one Reconfiguration is closed with the outcome its label shows.
func TestGateKilledAtEveryStep(t *testing.T) {
	c := needAPI(t)
	for _, path := range []struct {
		name    string
		fail    map[string]bool // configs mig-manager fails
		smoke   map[string]bool // configs whose smoke Jobs fail
		final   string
		outcome string
		dra     bool // a node whose GPUs the DRA driver publishes
	}{
		{"success", nil, nil, "all-3g.40gb", "success all-3g.40gb", false},
		{"rollback", map[string]bool{"all-3g.40gb": true}, nil, "all-1g.10gb", "rolled-back all-3g.40gb", false},
		{"smoke-rollback", nil, map[string]bool{"all-3g.40gb": true}, "all-1g.10gb", "rolled-back all-3g.40gb: smoke Job", false},
		{"dra-success", nil, nil, "all-3g.40gb", "success all-3g.40gb", true},
	} {
		t.Run(path.name, func(t *testing.T) {
			double := func(node string) *nodeDouble {
				d := &nodeDouble{c: c, node: node, configs: gateConfigs, fail: path.fail, smokeFail: path.smoke}
				if path.dra {
					makeDRANode(t, c, node)
					d.draDevices, _ = draGateConfigs(node)
				}
				return d
			}
			// An uninterrupted run lists the kill points.
			var points []string
			ns := newNamespace(t, c, "kill")
			node := nextNode("kill")
			newGPUNode(t, c, node, "all-1g.10gb", ns)
			startDouble(t, double(node))
			g := smokeGate(c, ns)
			g.Hook = func(p string) {
				if !slices.Contains(points, p) { // a write retried after a conflict is one kill point
					points = append(points, p)
				}
			}
			if err := requestAllThree(g, node, path.dra); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			t.Logf("kill points: %v", points)
			runs := 0
			for range killRuns() {
				for _, kill := range points {
					killAndResume(t, c, double, kill, path.final, path.outcome)
					runs++
				}
			}
			t.Logf("%d killed-and-resumed runs", runs)
		})
	}
}

func killAndResume(t *testing.T, c client.Client, double func(string) *nodeDouble, kill, final, outcome string) {
	t.Helper()
	ctx := context.Background()
	ns := newNamespace(t, c, "kill")
	node := nextNode("kill")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	d := double(node)
	startDouble(t, d)
	g := smokeGate(c, ns)
	if err := requestAllThree(g, node, d.draDevices != nil); err != nil {
		t.Fatal(err)
	}
	killed, err := runKilledAt(ctx, g, node, kill)
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	// a kill after the last write (the record closed) finds nothing left to do
	lastWrite := kill == "after:record-closed" && err == nil
	if !killed || !lastWrite && !errors.Is(err, context.Canceled) && !strings.Contains(errString(err), "context canceled") {
		t.Fatalf("kill at %s: killed %v, run returned %v; node annotations %v labels %v", kill, killed, err, n.Annotations, n.Labels)
	}
	if l := n.Labels[LabelMIGConfig]; l != "all-1g.10gb" && l != "all-3g.40gb" {
		t.Fatalf("kill at %s: label %q is neither config", kill, l)
	}
	if err := runGate(t, smokeGate(c, ns), node); err != nil {
		t.Fatalf("resume after kill at %s: %v", kill, err)
	}
	got := checkSettled(t, c, node, final, final)
	if r := got.Annotations[AnnotGateResult]; !strings.HasPrefix(r, outcome) {
		t.Errorf("kill at %s: result %q, want %q", kill, r, outcome)
	}
	// the record agrees with the node whatever step the kill fell in
	checkRecord(t, c, node, "all-1g.10gb", "all-3g.40gb")
}

// runKilledAt runs g on node as a controller killed at hook point kill would: the run's context
// is cancelled when the gate reaches that point. It returns whether the point was reached and
// Run's error.
// requestAllThree requests all-3g.40gb on node, with the DRA driver's devices when dra.
func requestAllThree(g *MIGGate, node string, dra bool) error {
	if dra {
		_, expect := draGateConfigs(node)
		return g.RequestDRA(context.Background(), node, "all-3g.40gb", DeviceExpectation{Driver: render.DRADriver, Devices: expect["all-3g.40gb"]})
	}
	return g.Request(context.Background(), node, "all-3g.40gb", gateConfigs["all-3g.40gb"])
}

func runKilledAt(ctx context.Context, g *MIGGate, node, kill string) (bool, error) {
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	killed := false
	g.Hook = func(p string) {
		if p == kill {
			killed = true
			cancel()
		}
	}
	err := g.Run(runCtx, node)
	return killed, err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestGateStuckThenRestored: mig-manager answers neither the new config nor the restored one in
// time, so the gate stops at Stuck with the node cordoned (Run reports ErrGateStuck); once
// mig-manager reports the previous config applied, the gate finishes the rollback and uncordons.
func TestGateStuckThenRestored(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "stuck")
	node := nextNode("stuck")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	d := &nodeDouble{c: c, node: node, configs: gateConfigs}
	d.mute.Store(true)
	startDouble(t, d)
	g := fastGate(c)
	g.ApplyTimeout = time.Second
	if err := g.Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
		t.Fatal(err)
	}
	if err := runGate(t, g, node); !errors.Is(err, ErrGateStuck) {
		t.Fatalf("run returned %v, want ErrGateStuck", err)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Labels[LabelMIGConfig] != "all-1g.10gb" || n.Annotations[AnnotGateStep] != string(StepStuck) {
		t.Fatalf("stuck node: unschedulable %v label %q step %q; want true, all-1g.10gb, Stuck",
			n.Spec.Unschedulable, n.Labels[LabelMIGConfig], n.Annotations[AnnotGateStep])
	}
	d.mute.Store(false)
	waitFor(t, "mig-manager to restore the previous config", func(n *corev1.Node) bool {
		return n.Labels[LabelMIGConfigState] == MIGStateSuccess
	}, c, node)
	if err := runGate(t, g, node); err != nil {
		t.Fatal(err)
	}
	n = checkSettled(t, c, node, "all-1g.10gb", "")
	if r := n.Annotations[AnnotGateResult]; !strings.Contains(r, "restored late") {
		t.Errorf("result %q", r)
	}
}
