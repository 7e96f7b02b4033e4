package k8s

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deploymentDouble plays, for one Deployment, what kube-controller-manager would (the tests run
// none): the ReplicaSet controller keeps spec.replicas live pods, starting new ones on node
// elsewhere and removing not-Ready then newest pods first on a scale-down; the kubelet of that
// node makes them Ready (unless neverReady); the Deployment controller writes the ready count;
// the disruption controller writes the budget's status (minAvailable) when there is one.
type deploymentDouble struct {
	c                 client.Client
	ns, name, rs      string
	rsUID             string
	elsewhere         string
	res               corev1.ResourceName
	neverReady        bool
	pdb               string
	minAvailable      int32
	maxReplicas       atomic.Int32 // the most replicas the Deployment asked for
	readyAtFirstEvict atomic.Int32 // Ready replicas on the other node when a pod was first seen evicted (-1 before)
	seq               int
}

func (d *deploymentDouble) tick(ctx context.Context) {
	dep := &appsv1.Deployment{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: d.name}, dep); err != nil {
		return
	}
	want := *dep.Spec.Replicas
	if want > d.maxReplicas.Load() {
		d.maxReplicas.Store(want)
	}
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(d.ns), client.MatchingLabels{"app": d.name}); err != nil {
		return
	}
	var live []corev1.Pod
	ready, readyElsewhere := int32(0), int32(0)
	evicted := false
	for _, p := range pods.Items {
		if podIsReady(&p) && p.Spec.NodeName == d.elsewhere {
			readyElsewhere++
		}
		if p.DeletionTimestamp != nil {
			evicted = true
			continue
		}
		live = append(live, p)
		if podIsReady(&p) {
			ready++
		}
	}
	if evicted && d.readyAtFirstEvict.Load() < 0 {
		d.readyAtFirstEvict.Store(readyElsewhere)
	}
	for i := int32(len(live)); i < want; i++ {
		d.seq++
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-new-%d", d.name, d.seq), Namespace: d.ns, Labels: map[string]string{"app": d.name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.rs, UID: types.UID(d.rsUID), Controller: ptr(true)}}},
			Spec: corev1.PodSpec{NodeName: d.elsewhere, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{d.res: resource.MustParse("1")}}}}}}
		if err := d.c.Create(ctx, p); err != nil {
			return
		}
		if !d.neverReady {
			markReady(ctx, d.c, p)
		}
	}
	if extra := len(live) - int(want); extra > 0 {
		slices.SortFunc(live, func(a, b corev1.Pod) int {
			if ra, rb := podIsReady(&a), podIsReady(&b); ra != rb {
				if ra {
					return 1
				}
				return -1
			}
			return -a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		})
		for i := range extra {
			_ = d.c.Delete(ctx, &live[i], client.GracePeriodSeconds(0))
		}
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: int32(len(live)), ReadyReplicas: ready, AvailableReplicas: ready, UpdatedReplicas: int32(len(live))}
	_ = d.c.Status().Update(ctx, dep)
	if d.pdb != "" {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: d.pdb}, pdb); err == nil {
			pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: ready, DesiredHealthy: d.minAvailable,
				DisruptionsAllowed: max(0, ready-d.minAvailable), ExpectedPods: int32(len(live))}
			_ = d.c.Status().Update(ctx, pdb)
		}
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func markReady(ctx context.Context, c client.Client, p *corev1.Pod) {
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_ = c.Status().Update(ctx, p)
}

var surgeSeq int

// surgeScene makes a node at config surge-a with two Ready pods of Deployment llm (through its
// ReplicaSet) asking for a resource no other test uses, another node with room of it, a budget of
// minAvailable 2 when pdb, the pods pinned to their node by required node affinity when pinned
// (as the plan's Deployments pin theirs to the plan's hosts), and runs the node's double and the Deployment's double until the test ends.
func surgeScene(t *testing.T, c client.Client, room int64, pdb, neverReady, pinned bool) (string, *appsv1.Deployment, *deploymentDouble, map[string]map[string]int64) {
	t.Helper()
	ctx := context.Background()
	surgeSeq++
	res := corev1.ResourceName(fmt.Sprintf("nvidia.com/mig-1g.12gb-surge%d", surgeSeq))
	cfgs := map[string]map[string]int64{"surge-a": {string(res): 4}, "surge-b": {"nvidia.com/mig-3g.40gb": 2}}
	ns := newNamespace(t, c, "surge")
	node, other := nextNode("surge"), nextNode("room")
	for _, nd := range []struct {
		name  string
		cfg   string
		alloc map[string]int64
	}{{node, "surge-a", cfgs["surge-a"]}, {other, "", map[string]int64{string(res): room}}} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nd.name, Labels: map[string]string{LabelMIGConfig: nd.cfg, LabelMIGConfigState: MIGStateSuccess}}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		setAllocatable(n, nd.alloc)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "llm"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "llm-1", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(2)), Selector: dep.Spec.Selector, Template: dep.Spec.Template}}
	if err := c.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("llm-old-%d", k), Namespace: ns, Labels: map[string]string{"app": "llm"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{res: resource.MustParse("1")}}}}}}
		if pinned {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		markReady(ctx, c, p)
	}
	dd := &deploymentDouble{c: c, ns: ns, name: "llm", rs: rs.Name, rsUID: string(rs.UID), elsewhere: other, res: res, neverReady: neverReady, minAvailable: 2}
	dd.readyAtFirstEvict.Store(-1)
	if pdb {
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(2)), Selector: dep.Spec.Selector}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		dd.pdb = b.Name
	}
	dctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for dctx.Err() == nil {
			dd.tick(dctx)
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
	startDouble(t, &nodeDouble{c: c, node: node, configs: cfgs})
	return node, dep, dd, cfgs
}

// TestGateStartsReplacementsFirst: a Deployment of two replicas on the node, guarded by a budget
// that lets none of them go (minAvailable 2). With room on another node the gate raises the
// Deployment to four, waits until the two replacements are Ready, evicts (the budget now allows
// it) and puts the Deployment back to two; without the surge the budget would stop the drain.
// With no room elsewhere the gate does not raise it and says why; when the replacements never
// become Ready it evicts after the surge timeout and says so in an Event.
func TestGateStartsReplacementsFirst(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		room       int64
		pdb        bool
		neverReady bool
		wantMax    int32
		wantEvent  string
		off        bool // replacements first turned off: the budget must stop the drain
		pinned     bool // the pods may run on this node only
	}{
		{"replacements ready first", 4, true, false, 4, "GateReplacementsReady", false, false},
		{"no room elsewhere", 0, false, false, 2, "not surged (no room elsewhere)", false, false},
		{"room only where the pods may not run", 4, false, false, 2, "room for 0 of its 2 pods", false, true},
		{"replacements never ready", 4, false, true, 4, "GateReplacementsNotReady", false, false},
		{"turned off, the budget stops the drain", 4, true, false, 2, "drain timed out", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, dep, dd, cfgs := surgeScene(t, c, tc.room, tc.pdb, tc.neverReady, tc.pinned)
			g := fastGate(c)
			g.SurgeTimeout, g.DrainTimeout = 30*time.Second, 60*time.Second // generous: a loaded machine makes the replacements slow to be Ready
			if tc.neverReady {
				g.SurgeTimeout = time.Second
			}
			if tc.off {
				g.SurgeTimeout, g.DrainTimeout = -1, 2*time.Second
			}
			if err := g.Request(ctx, node, "surge-b", cfgs["surge-b"]); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			want, final := "success surge-b", "surge-b"
			if tc.off {
				want, final = "rolled-back surge-b: drain timed out", "surge-a"
			}
			n := checkSettled(t, c, node, final, final)
			if r := n.Annotations[AnnotGateResult]; !strings.HasPrefix(r, want) {
				t.Errorf("result %q, want %q", r, want)
			}
			if got := dd.maxReplicas.Load(); got != tc.wantMax {
				t.Errorf("the Deployment went up to %d replicas, want %d", got, tc.wantMax)
			}
			if tc.pdb {
				if got := dd.readyAtFirstEvict.Load(); got >= 0 && got < 2 {
					t.Errorf("%d replacements Ready on the other node when the first pod was evicted, want 2", got)
				}
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
				t.Fatal(err)
			}
			if *dep.Spec.Replicas != 2 || dep.Annotations[AnnotSurgeFrom] != "" {
				t.Errorf("Deployment left at %d replicas, annotations %v; want 2 and no %s", *dep.Spec.Replicas, dep.Annotations, AnnotSurgeFrom)
			}
			var evs corev1.EventList
			if err := c.List(ctx, &evs, client.InNamespace("default"), client.MatchingFields{"involvedObject.name": node}); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
				return e.Reason == tc.wantEvent || strings.Contains(e.Message, tc.wantEvent)
			}) {
				var got []string
				for _, e := range evs.Items {
					got = append(got, e.Reason+": "+e.Message)
				}
				t.Errorf("no Event %q among %v", tc.wantEvent, got)
			}
		})
	}
}

// TestGateSurgeKilledAtEveryStep stops the gate before and after every write of a gate that starts
// replacements first (the surge plan, raising the Deployment, the replacements Ready, lowering it
// back, and the label write that follows), then resumes it with a new gate: the Deployment is raised once
// (never above four), ends at two replicas without the gate's annotation, and the node at the new
// config with its record closed.
func TestGateSurgeKilledAtEveryStep(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	gate := func() *MIGGate {
		g := fastGate(c)
		g.SurgeTimeout, g.DrainTimeout = 30*time.Second, 60*time.Second // generous: a loaded machine makes the replacements slow to be Ready
		return g
	}
	var points []string
	node, _, _, cfgs := surgeScene(t, c, 4, true, false, false)
	g := gate()
	g.Hook = func(p string) {
		if !slices.Contains(points, p) {
			points = append(points, p)
		}
	}
	if err := g.Request(ctx, node, "surge-b", cfgs["surge-b"]); err != nil {
		t.Fatal(err)
	}
	if err := runGate(t, g, node); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"before:surge-planned", "after:surge-raise", "after:surge-ready", "after:surge-lower"} {
		if !slices.Contains(points, p) {
			t.Fatalf("kill points %v lack %s", points, p)
		}
	}
	// TestGateKilledAtEveryStep covers the rest of the gate; here the writes around the surge
	t.Logf("%d kill points: %v", len(points), points)
	for _, kill := range points {
		if !strings.Contains(kill, "surge") && !strings.HasSuffix(kill, ":Applying") {
			continue
		}
		node, dep, dd, cfgs := surgeScene(t, c, 4, true, false, false)
		g := gate()
		if err := g.Request(ctx, node, "surge-b", cfgs["surge-b"]); err != nil {
			t.Fatal(err)
		}
		if killed, _ := runKilledAt(ctx, g, node, kill); !killed {
			t.Fatalf("kill point %s not reached", kill)
		}
		if err := runGate(t, gate(), node); err != nil {
			t.Fatalf("resume after kill at %s: %v", kill, err)
		}
		checkSettled(t, c, node, "surge-b", "surge-b")
		checkRecord(t, c, node, "surge-a", "surge-b")
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			t.Fatal(err)
		}
		if *dep.Spec.Replicas != 2 || dep.Annotations[AnnotSurgeFrom] != "" || dd.maxReplicas.Load() != 4 {
			t.Errorf("kill at %s: Deployment at %d replicas (most %d), annotations %v; want 2 (most 4) and no %s",
				kill, *dep.Spec.Replicas, dd.maxReplicas.Load(), dep.Annotations, AnnotSurgeFrom)
		}
	}
}

// TestSurgeSkipsClaimPods: the Deployment that the gate raises when its pods ask for nvidia.com/
// devices (there is room for them elsewhere) is not raised when its pods take their devices
// through ResourceClaims (a DRA node), whose room elsewhere the gate does not count; the plan says
// why.
func TestSurgeSkipsClaimPods(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	node, dep, _, _ := surgeScene(t, c, 4, false, false, false)
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(dep.Namespace)); err != nil || len(pods.Items) != 2 {
		t.Fatalf("%d pods: %v", len(pods.Items), err)
	}
	d := dep.Namespace + "/" + dep.Name
	g := fastGate(c)
	plan, err := g.planSurge(ctx, n, pods.Items)
	if err != nil || plan.Deployments[d].To != 4 {
		t.Fatalf("pods asking for nvidia.com/ devices: plan %+v (%v), want %s raised to 4", plan, err, d)
	}
	claim := "gpu"
	for i := range pods.Items {
		p := &pods.Items[i]
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	}
	plan, err = g.planSurge(ctx, n, pods.Items)
	if err != nil || len(plan.Deployments) != 0 || len(plan.Skipped) != 1 || !strings.Contains(plan.Skipped[0], "ResourceClaims") {
		t.Errorf("pods with claims: plan %+v (%v), want %s skipped for its claims", plan, err, d)
	}
}
