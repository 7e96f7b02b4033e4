package k8s

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/render"
)

// TestGrantAdmission: admission follows the fair allocator's grants on the real API server. One
// node of a GPUPool offers four MIG devices; two tenants of weight 1 with four gated pods each get
// two admitted each. A third tenant of weight 2 with four pods arrives: the grants become 1, 1
// and 2, and one admitted pod of each of the first two tenants is evicted (preemption). The node
// going NotReady takes its devices out of the pool.
func TestGrantAdmission(t *testing.T) {
	c := needAPI(t)
	grantScenario(t, c, c)
}

// grantScenario is TestGrantAdmission with GrantAdmission talking through gc; c (an
// administrator) plays the rest.
func grantScenario(t *testing.T, c, gc client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c, "grants")
	poolName := fmt.Sprintf("grants-%d", nsSeq.Add(1))
	node := nextNode("grant")
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"gpupool.dev/test-pool": poolName, LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	setAllocatable(n, map[string]int64{"nvidia.com/mig-1g.10gb": 4})
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	createPool(t, c, poolName, v1.Policy{})
	ex := exampleTenants(t)
	tenant := func(name string, weight float64) {
		tn := ex[0]
		tn.Name, tn.Weight = name, &weight
		if err := c.Create(ctx, &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns, Labels: map[string]string{render.LabelTenant: name}},
				Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: SchedulingGate}},
					Containers: []corev1.Container{{Name: "vllm", Image: render.Image, Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}}}}}}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	ga := &GrantAdmission{C: gc, Admitter: &Admitter{C: gc, Namespace: ns}}
	check := func(step string, wantGrants, wantAdmitted map[string]int, wantEvicted int) {
		t.Helper()
		grants, res, err := ga.Sync(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		for k, w := range wantGrants {
			if grants[k] != w {
				t.Errorf("%s: grants %v, want %v", step, grants, wantGrants)
				break
			}
		}
		for k, w := range wantGrants {
			it := &InferenceTenant{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: k}, it); err != nil {
				t.Fatal(err)
			}
			if it.Status.ReplicasAdmitted != w {
				t.Errorf("%s: tenant %s status.replicasAdmitted %d, want its grant %d", step, k, it.Status.ReplicasAdmitted, w)
			}
		}
		if len(res.Evicted) != wantEvicted {
			t.Errorf("%s: evicted %v, want %d pods", step, res.Evicted, wantEvicted)
		}
		_, admitted := countPods(t, c, ns)
		for k, w := range wantAdmitted {
			if admitted[k] != w {
				t.Errorf("%s: admitted %v, want %v", step, admitted, wantAdmitted)
				break
			}
		}
	}
	tenant("ta", 1)
	tenant("tb", 1)
	check("two tenants", map[string]int{"ta": 2, "tb": 2}, map[string]int{"ta": 2, "tb": 2}, 0)
	tenant("tc", 2)
	check("a heavier third tenant", map[string]int{"ta": 1, "tb": 1, "tc": 2}, map[string]int{"ta": 1, "tb": 1, "tc": 2}, 2)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	check("node NotReady", map[string]int{"ta": 0, "tb": 0, "tc": 0}, map[string]int{"ta": 0, "tb": 0, "tc": 0}, 4)
	// The node's pool has nothing left for anyone: delete the test's pods so no later test's
	// scheduler places them.
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
}

// TestGrantAdmissionWithScheduler is the admission bar through the fair allocator: 50
// InferenceTenants of equal weight create 20 pods each without a scheduling gate (the webhook adds
// it), a GPUPool of 10 nodes offers 600 nvidia.com/gpu, GrantAdmission grants each tenant 12 and
// admits them, and the real kube-scheduler binds every admitted pod. It reports the time from the
// start of Sync to the last binding and fails above 10 s, 30 s under the race detector
// (GPUPOOL_ADMISSION_BUDGET overrides).
func TestGrantAdmissionWithScheduler(t *testing.T) {
	c := needAPI(t)
	startScheduler(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "gsched")
	poolName := fmt.Sprintf("gsched-%d", nsSeq.Add(1))
	for i := range 10 {
		name := fmt.Sprintf("gsched-node-%d-%s", i, poolName)
		newSchedulableNode(t, c, name, 110, 60)
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		n.Labels["gpupool.dev/test-pool"] = poolName
		n.Labels[LabelGPUProduct] = "NVIDIA-H100-80GB-HBM3"
		if err := c.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	createPool(t, c, poolName, v1.Policy{})
	ex := exampleTenants(t)
	const tenants, perTenant, grant = 50, 20, 12
	for tn := range tenants {
		spec := ex[0]
		spec.Name = fmt.Sprintf("t%02d", tn)
		if err := c.Create(ctx, &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: ns}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: spec}}); err != nil {
			t.Fatal(err)
		}
	}
	work := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	var createErr atomic.Value
	for range 16 {
		wg.Go(func() {
			for p := range work {
				if err := c.Create(ctx, p); err != nil {
					createErr.Store(err)
				}
				if !hasGate(p) {
					createErr.Store(fmt.Errorf("pod %s created without the admission gate: the webhook did not add it", p.Name))
				}
			}
		})
	}
	for i := range perTenant {
		for tn := range tenants {
			work <- &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%02d-%02d", tn, i), Namespace: ns, Labels: map[string]string{render.LabelTenant: fmt.Sprintf("t%02d", tn)}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: render.Image, Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
		}
	}
	close(work)
	wg.Wait()
	if err, _ := createErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	ga := &GrantAdmission{C: c, Admitter: &Admitter{C: c, Namespace: ns}}
	start := time.Now()
	grants, res, err := ga.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	synced := time.Since(start)
	for tn := range tenants {
		if g := grants[fmt.Sprintf("t%02d", tn)]; g != grant {
			t.Fatalf("grants %v, want %d each", grants, grant)
		}
	}
	if len(res.Admitted) != tenants*grant {
		t.Fatalf("admitted %d, want %d", len(res.Admitted), tenants*grant)
	}
	bound, err := waitBound(c, ns, tenants*grant, 2*time.Minute)
	elapsed := time.Since(start)
	t.Logf("1000 pods of 50 tenants, 600 GPUs: grants (12 each) decided and gates removed in %v, %d pods bound by kube-scheduler after %v", synced, bound, elapsed)
	if err != nil {
		t.Fatalf("%d of %d admitted pods bound after %v", bound, tenants*grant, elapsed)
	}
	_, admitted := countPods(t, c, ns)
	for tn, k := range admitted {
		if k != grant {
			t.Errorf("tenant %s: %d admitted, want %d", tn, k, grant)
		}
	}
	checkAdmissionBudget(t, elapsed)
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
}

// TestGrantAdmissionChecksProduct: admission counts a node's devices only when its GPU product
// label maps to a catalog board (an NVML product name, with GFD's "-SHARED" taken off); a node
// with an unknown product, or none, offers nothing, with a Warning Event (GPUProductUnknown) on
// the node that names the label and its value, once. Before, the label was taken as the board
// unchecked, and an unknown product's devices were granted like any others.
func TestGrantAdmissionChecksProduct(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "product")
	poolName := fmt.Sprintf("product-%d", nsSeq.Add(1))
	mk := func(product string, gpus int64) *corev1.Node {
		labels := map[string]string{"gpupool.dev/test-pool": poolName}
		if product != "" {
			labels[LabelGPUProduct] = product
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nextNode("product"), Labels: labels}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		setAllocatable(n, map[string]int64{"nvidia.com/gpu": gpus})
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	known, unknown, _ := mk("NVIDIA-H100-80GB-HBM3", 2), mk("NVIDIA-H999-SXM9", 4), mk("", 1)
	createPool(t, c, poolName, v1.Policy{})
	tn := exampleTenants(t)[0]
	tn.Name = "solo"
	if err := c.Create(ctx, &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: ns}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("solo-%d", i), Namespace: ns, Labels: map[string]string{render.LabelTenant: "solo"}},
			Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: SchedulingGate}},
				Containers: []corev1.Container{{Name: "vllm", Image: render.Image, Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)) })
	ga := &GrantAdmission{C: c, Admitter: &Admitter{C: c, Namespace: ns}}
	sync := func(step string, want int) {
		t.Helper()
		grants, _, err := ga.Sync(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if grants["solo"] != want {
			t.Fatalf("%s: grants %v, want solo %d", step, grants, want)
		}
	}
	sync("one known node of three", 2)
	sync("again", 2)
	warnings := func(n *corev1.Node) []corev1.Event {
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name == n.Name && ev.Reason == ReasonGPUProductUnknown {
				out = append(out, ev)
			}
		}
		return out
	}
	if evs := warnings(unknown); len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning ||
		!strings.Contains(evs[0].Message, `nvidia.com/gpu.product="NVIDIA-H999-SXM9"`) || !strings.Contains(evs[0].Message, "4 GPU devices are not counted") {
		t.Fatalf("events on the node of an unknown product: %+v, want one warning naming the label and its value", evs)
	}
	if evs := warnings(known); len(evs) != 0 {
		t.Fatalf("events on the node of a known product: %+v", evs)
	}
	// GFD renames a shared GPU's product with "-SHARED"; the board is the same.
	unknown.Labels[LabelGPUProduct] = "NVIDIA-H100-80GB-HBM3-SHARED"
	if err := c.Update(ctx, unknown); err != nil {
		t.Fatal(err)
	}
	sync("the unknown node relabelled with a known product", 6)
}

func TestProductBoard(t *testing.T) {
	for _, c := range []struct{ product, want string }{
		{"NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"},
		{"NVIDIA-H100-80GB-HBM3-SHARED", "H100-SXM5-80GB"},
		{"NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-SXM5-80GB"},
		{"H100-SXM5-80GB", "H100-SXM5-80GB"},
	} {
		if got, err := productBoard(c.product); err != nil || got != c.want {
			t.Errorf("productBoard(%q) = %q, %v; want %q", c.product, got, err, c.want)
		}
	}
	for _, p := range []string{"", "NVIDIA-H999-SXM9"} {
		if _, err := productBoard(p); err == nil || !strings.Contains(err.Error(), LabelGPUProduct) {
			t.Errorf("productBoard(%q): %v, want an error naming the label", p, err)
		}
	}
}
