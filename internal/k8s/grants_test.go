package k8s

import (
	"context"
	"fmt"
	"os"
	"testing"

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
	if err := c.Create(ctx, &GPUPool{ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: GPUPoolSpec{NodeSelector: map[string]string{"gpupool.dev/test-pool": poolName}}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../examples/h100-7b-sharing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := v1.DecodePool(data)
	if err != nil {
		t.Fatal(err)
	}
	tenant := func(name string, weight float64) {
		tn := ex.Tenants[0]
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
