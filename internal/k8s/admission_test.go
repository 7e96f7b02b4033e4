package k8s

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/render"
)

// createGatedPods creates perTenant gated pods for each of tenants tenants in ns, 16 at a time,
// each asking for one nvidia.com/gpu.
func createGatedPods(t *testing.T, c client.Client, ns string, tenants, perTenant int) {
	t.Helper()
	ctx := context.Background()
	work := make(chan *corev1.Pod)
	errs := make(chan error, tenants*perTenant)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for p := range work {
				if err := c.Create(ctx, p); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range perTenant {
		for tn := range tenants {
			work <- &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%02d-%02d", tn, i), Namespace: ns, Labels: map[string]string{render.LabelTenant: fmt.Sprintf("t%02d", tn)}},
				Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: SchedulingGate}},
					Containers: []corev1.Container{{Name: "vllm", Image: render.Image, Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
			}
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// countPods counts ns's pods per tenant, gated and admitted.
func countPods(t *testing.T, c client.Client, ns string) (gated, admitted map[string]int) {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	gated, admitted = map[string]int{}, map[string]int{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if hasGate(p) {
			gated[p.Labels[render.LabelTenant]]++
		} else {
			admitted[p.Labels[render.LabelTenant]]++
		}
	}
	return gated, admitted
}

// TestAdmission: 1,000 gated pods of 50 tenants (20 each) with grants of 1–10 replicas. One Admit
// ungates exactly each tenant's grant on the real API server, choosing in fair order (the first 50
// admissions are one per tenant); a lowered grant then evicts the tenant's newest pods.
func TestAdmission(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "admit")
	// No namespace controller runs here to empty a deleted namespace; remove the pods, or a later
	// test's kube-scheduler would place the ones admitted here on its nodes.
	t.Cleanup(func() {
		if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
			t.Error(err)
		}
	})
	const tenants, perTenant = 50, 20
	createGatedPods(t, c, ns, tenants, perTenant)
	grants := map[string]int{}
	total := 0
	for tn := range tenants {
		grants[fmt.Sprintf("t%02d", tn)] = 1 + tn%10
		total += 1 + tn%10
	}
	a := &Admitter{C: c, Namespace: ns}
	start := time.Now()
	res, err := a.Admit(ctx, grants)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("admitted %d of %d gated pods across %d tenants in %v", len(res.Admitted), tenants*perTenant, tenants, time.Since(start))
	if len(res.Admitted) != total {
		t.Fatalf("admitted %d pods, want %d (the sum of the grants)", len(res.Admitted), total)
	}
	first := map[string]bool{}
	for _, k := range res.Admitted[:tenants] {
		first[k.Name[:3]] = true
	}
	if len(first) != tenants {
		t.Errorf("the first %d admissions reach %d tenants, want every tenant once", tenants, len(first))
	}
	gated, admitted := countPods(t, c, ns)
	for tn, g := range grants {
		if admitted[tn] != g || gated[tn] != perTenant-g {
			t.Errorf("tenant %s: %d admitted, %d gated; want %d and %d", tn, admitted[tn], gated[tn], g, perTenant-g)
		}
	}

	// Preemption: t09 (grant 10) drops to 4; its 6 newest admitted pods are evicted, nothing else moves.
	grants["t09"] = 4
	res, err = a.Admit(ctx, grants)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evicted) != 6 || len(res.Admitted) != 0 {
		t.Fatalf("after lowering t09's grant: evicted %v admitted %v; want 6 evictions of t09 and no admission", res.Evicted, res.Admitted)
	}
	for _, k := range res.Evicted {
		if k.Name[:3] != "t09" {
			t.Errorf("evicted %s, not a t09 pod", k)
		}
	}
	if _, admitted := countPods(t, c, ns); admitted["t09"] != 4 {
		t.Errorf("t09 has %d admitted pods, want 4", admitted["t09"])
	}
}
