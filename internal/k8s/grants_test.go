package k8s

import (
	"context"
	"fmt"
	"os"
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
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"gpupool.dev/test-pool": poolName}}}
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
// start of Sync to the last binding and fails above 10 s (GPUPOOL_ADMISSION_BUDGET overrides).
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
	budget := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("GPUPOOL_ADMISSION_BUDGET")); err == nil {
		budget = d
	}
	if elapsed > budget {
		t.Errorf("admission to binding took %v, over the %v budget", elapsed, budget)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
}
