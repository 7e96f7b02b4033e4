package k8s

import (
	"context"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/render"
)

// TestPoolReplansAgainstPlanInForce: the reconciler keeps the plan in force in the GPUPool's
// status and re-plans against it. A pool of one one-H100 node (the second in name order) serves
// chat-a; then the first node joins the pool and a hard tenant is added. Planned from scratch,
// chat-a would go to the first node (checked here, so the test shows something); a new
// reconciler (the state is only in the API server, as after a controller restart) keeps chat-a
// where it was, puts the new tenant on the new node and applies Deployments saying so.
func TestPoolReplansAgainstPlanInForce(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	tenNS := newNamespace(t, c, "tenants")
	poolName := "pool-" + strconv.Itoa(int(nsSeq.Add(1)))
	first, second := "replan-a-"+poolName, "replan-b-"+poolName // name order: first < second
	newDRANode(t, c, second, poolName)
	newDRANode(t, c, first, "elsewhere-"+poolName)
	chat := exampleTenants(t)[0]
	solo := chat
	solo.Name, solo.Path, solo.Isolation = "solo", "batch/solo", v1.IsolationHard
	addTenant := func(tn v1.Tenant) {
		it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: tenNS}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}
		if err := c.Create(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	addTenant(chat)
	gp := createPool(t, c, poolName, v1.Policy{AllowedModes: []v1.Mode{v1.ModeExclusive}, BurstPoolPercent: ptrTo(0), MaxMoves: ptrTo(0)})
	deletePoolAtEnd(t, c, gp)
	reconcileOnce := func() *v1.Plan {
		t.Helper()
		r := &PoolReconciler{C: c, OperatorNamespace: newNamespace(t, c, "gpu-operator"), Gate: &MIGGate{C: c}}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: poolName}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: poolName}, gp); err != nil {
			t.Fatal(err)
		}
		if !apimeta.IsStatusConditionTrue(gp.Status.Conditions, CondPlanned) {
			t.Fatalf("pool not planned: %+v", gp.Status.Conditions)
		}
		pl, err := decodePlan(gp.Status.CurrentPlan)
		if err != nil {
			t.Fatalf("plan in force: %v", err)
		}
		return pl
	}
	where := func(pl *v1.Plan, tenant string) []string {
		var out []string
		for _, pt := range pl.Tenants {
			if pt.Name == tenant {
				for _, r := range pt.Replicas {
					out = append(out, r.GPU.String())
				}
			}
		}
		return out
	}
	before := where(reconcileOnce(), chat.Name)
	if len(before) != 1 || !strings.HasPrefix(before[0], second+"/") {
		t.Fatalf("chat-a placed on %v, want %s's GPU", before, second)
	}
	// the first node joins, a tenant is added
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: first}, n); err != nil {
		t.Fatal(err)
	}
	n.Labels["gpupool.dev/test-pool"] = poolName
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	addTenant(solo)
	// precondition: from scratch, chat-a would move
	in, problems, err := (&PoolReconciler{C: c}).inputs(ctx, gp)
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	scratch, err := plan.Build(ctx, in.pool, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := where(scratch, chat.Name); len(s) != 1 || strings.HasPrefix(s[0], second+"/") {
		t.Fatalf("from scratch chat-a goes to %v: the test needs a plan that would move it", s)
	}
	after := reconcileOnce()
	if got := where(after, chat.Name); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Errorf("chat-a moved from %v to %v on adding a tenant", before, got)
	}
	if got := where(after, solo.Name); len(got) != 1 || !strings.HasPrefix(got[0], first+"/") {
		t.Errorf("solo placed on %v, want the new node %s", got, first)
	}
	if cond := apimeta.FindStatusCondition(gp.Status.Conditions, CondPlanned); !strings.Contains(cond.Message, "re-planned against the plan in force") {
		t.Errorf("Planned condition %q does not say it re-planned against the plan in force", cond.Message)
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(tenNS), client.MatchingLabels{render.LabelTenant: chat.Name}); err != nil || len(deps.Items) != 1 {
		t.Fatalf("chat-a's Deployments: %d, %v", len(deps.Items), err)
	}
	if slots := deps.Items[0].Annotations[render.AnnotationSlots]; !strings.Contains(slots, "@"+second+"/") {
		t.Errorf("chat-a's Deployment places it at %q, want on %s", slots, second)
	}
}
