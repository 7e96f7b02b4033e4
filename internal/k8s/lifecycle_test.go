package k8s

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/control"
	"gpupool.dev/gpupool/internal/render"
)

// lifecycleFixture is a DRA pool's world: tenants in one namespace, the reconciler connecting as
// the manifests' ServiceAccount, the GPU Operator's namespace.
type lifecycleFixture struct {
	t     *testing.T
	c     client.Client
	r     *PoolReconciler
	opNS  string
	tenNS string
}

func newLifecycleFixture(t *testing.T) *lifecycleFixture {
	c := needAPI(t)
	sa := clientFor(t, applyRBAC(t, c))
	createDeviceClasses(t, c)
	f := &lifecycleFixture{t: t, c: c, opNS: "gpu-operator", tenNS: newNamespace(t, c, "tenants")}
	f.r = &PoolReconciler{C: sa, OperatorNamespace: f.opNS, Gate: &MIGGate{C: sa}}
	return f
}

func (f *lifecycleFixture) addTenant(pool string, tn v1.Tenant) *InferenceTenant {
	f.t.Helper()
	it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: f.tenNS}, Spec: InferenceTenantSpec{Pool: pool, Tenant: tn}}
	if err := f.c.Create(context.Background(), it); err != nil {
		f.t.Fatal(err)
	}
	return it
}

// reconcile reconciles pool and, when the pool still exists, returns it after checking it is planned.
func (f *lifecycleFixture) reconcile(pool string) *GPUPool {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: pool}}); err != nil {
		f.t.Fatalf("reconcile %s: %v", pool, err)
	}
	gp := &GPUPool{}
	if err := f.c.Get(ctx, client.ObjectKey{Name: pool}, gp); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		f.t.Fatal(err)
	}
	if gp.DeletionTimestamp == nil && !apimeta.IsStatusConditionTrue(gp.Status.Conditions, CondPlanned) {
		f.t.Fatalf("pool %s not planned: %+v", pool, gp.Status.Conditions)
	}
	return gp
}

// owned lists the names of the objects of kind in the tenants' namespace labelled with pool.
func (f *lifecycleFixture) owned(l client.ObjectList, pool string) []string {
	f.t.Helper()
	if err := f.c.List(context.Background(), l, client.InNamespace(f.tenNS), client.MatchingLabels{LabelOwnerPool: ownerValue(pool)}); err != nil {
		f.t.Fatal(err)
	}
	var out []string
	items, err := apimeta.ExtractList(l)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, o := range items {
		if m := o.(metav1.Object); m.GetDeletionTimestamp() == nil {
			out = append(out, m.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func (f *lifecycleFixture) node(name string) *corev1.Node {
	f.t.Helper()
	n := &corev1.Node{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *lifecycleFixture) configMap(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.opNS, Name: name}, cm); err != nil {
		f.t.Fatal(err)
	}
	return cm
}

// TestPoolFinalizer deletes a GPUPool on the real API server, the reconciler connecting as the
// manifests' ServiceAccount. Pool A (two nodes, two tenants sharing a GPU through MPS: a named
// claim) and pool B (one node, a hard tenant: a template) are planned; a third pool C selects one
// of A's nodes; a user's Deployment carries A's label. Deleting A removes its Deployments and
// claim, its key in the mig-parted ConfigMap (config.yaml merged again without it) and its
// device-plugin keys, its labels on the node no other pool selects, and then the finalizer; B's
// objects, keys and labels, the node C selects and the user's Deployment are untouched.
func TestPoolFinalizer(t *testing.T) {
	f := newLifecycleFixture(t)
	c, ctx := f.c, context.Background()
	seq := strconv.Itoa(int(nsSeq.Add(1)))
	poolA, poolB, poolC := "final-a-"+seq, "final-b-"+seq, "final-c-"+seq
	a1, a2, b1 := nextNode("final-a"), nextNode("final-a"), nextNode("final-b")
	newDRANode(t, c, a1, poolA)
	newDRANode(t, c, a2, poolA)
	newDRANode(t, c, b1, poolB)
	shared := exampleTenants(t)
	solo := shared[0]
	solo.Name, solo.Path, solo.Isolation = "solo", "batch/solo", v1.IsolationHard
	for _, tn := range shared {
		f.addTenant(poolA, tn)
	}
	f.addTenant(poolB, solo)
	createPool(t, c, poolA, v1.Policy{AllowedModes: []v1.Mode{v1.ModeMPS}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA})
	gpB := createPool(t, c, poolB, v1.Policy{AllowedModes: []v1.Mode{v1.ModeExclusive}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA})
	deletePoolAtEnd(t, c, gpB)
	// pool C selects a1 by another label; it is never reconciled here
	n := f.node(a1)
	n.Labels["gpupool.dev/test-also"] = poolC
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	gpC := &GPUPool{ObjectMeta: metav1.ObjectMeta{Name: poolC}, Spec: GPUPoolSpec{NodeSelector: map[string]string{"gpupool.dev/test-also": poolC}}}
	if err := c.Create(ctx, gpC); err != nil {
		t.Fatal(err)
	}
	deletePoolAtEnd(t, c, gpC)
	// a user's Deployment with A's label, not applied by gpupool
	user := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "users-own", Namespace: f.tenNS, Labels: map[string]string{LabelOwnerPool: ownerValue(poolA)}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "users-own"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "users-own"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if err := c.Create(ctx, user); err != nil {
		t.Fatal(err)
	}

	gpA := f.reconcile(poolA)
	f.reconcile(poolB)
	if !controllerutil.ContainsFinalizer(gpA, PoolFinalizer) {
		t.Fatalf("pool %s: finalizers %v, want %s", poolA, gpA.Finalizers, PoolFinalizer)
	}
	depsA, claimsA := f.owned(&appsv1.DeploymentList{}, poolA), f.owned(&resourcev1.ResourceClaimList{}, poolA)
	depsB, templatesB := f.owned(&appsv1.DeploymentList{}, poolB), f.owned(&resourcev1.ResourceClaimTemplateList{}, poolB)
	if len(depsA) < 3 || len(claimsA) != 1 || len(depsB) != 1 || len(templatesB) != 1 {
		t.Fatalf("before: pool A Deployments %v (with the user's) claims %v, pool B Deployments %v templates %v", depsA, claimsA, depsB, templatesB)
	}
	dpKeys := map[string]string{} // node -> its device-plugin key
	for _, name := range []string{a1, a2, b1} {
		n := f.node(name)
		dpKeys[name] = n.Labels[LabelDevicePluginConfig]
		if n.Labels[LabelOwnerPool] == "" || dpKeys[name] == "" || n.Labels[LabelPool] == "" {
			t.Fatalf("before: node %s labels %v", name, n.Labels)
		}
	}
	dp := f.configMap(render.DevicePluginConfigMap)
	for node, k := range dpKeys {
		if _, ok := dp.Data[k]; !ok {
			t.Fatalf("before: node %s's device-plugin key %s missing", node, k)
		}
	}
	mp := f.configMap(render.MigPartedConfigMap)
	for _, p := range []string{poolA, poolB} {
		if mp.Data[poolConfigKey(p)] == "" {
			t.Fatalf("before: no mig-parted key for %s", p)
		}
	}

	if err := c.Delete(ctx, gpA); err != nil {
		t.Fatal(err)
	}
	if gp := f.reconcile(poolA); gp != nil {
		t.Fatalf("pool %s still there after its finalizer ran: finalizers %v", poolA, gp.Finalizers)
	}
	if got := f.owned(&appsv1.DeploymentList{}, poolA); !slices.Equal(got, []string{user.Name}) {
		t.Errorf("after: pool A's Deployments %v, want only the user's %s", got, user.Name)
	}
	if got := f.owned(&resourcev1.ResourceClaimList{}, poolA); len(got) != 0 {
		t.Errorf("after: pool A's claims %v", got)
	}
	if got := f.owned(&appsv1.DeploymentList{}, poolB); !slices.Equal(got, depsB) {
		t.Errorf("after: pool B's Deployments %v, want %v", got, depsB)
	}
	if got := f.owned(&resourcev1.ResourceClaimTemplateList{}, poolB); !slices.Equal(got, templatesB) {
		t.Errorf("after: pool B's templates %v, want %v", got, templatesB)
	}
	for _, k := range poolLabelKeys {
		if v, ok := f.node(a2).Labels[k]; ok {
			t.Errorf("after: node %s (pool A's only) keeps %s=%s", a2, k, v)
		}
		if _, ok := f.node(a1).Labels[k]; !ok {
			t.Errorf("after: node %s (selected by pool C) lost %s", a1, k)
		}
		if _, ok := f.node(b1).Labels[k]; !ok {
			t.Errorf("after: node %s (pool B's) lost %s", b1, k)
		}
	}
	if f.node(a2).Labels[LabelMIGConfig] == "" {
		t.Errorf("after: node %s lost its MIG config label (its layout stays)", a2)
	}
	dp = f.configMap(render.DevicePluginConfigMap)
	for _, node := range []string{a1, a2} {
		if _, ok := dp.Data[dpKeys[node]]; ok && dpKeys[node] != dpKeys[b1] {
			t.Errorf("after: device-plugin key %s of pool A's node %s remains", dpKeys[node], node)
		}
	}
	if _, ok := dp.Data[dpKeys[b1]]; !ok {
		t.Errorf("after: pool B's device-plugin key %s removed", dpKeys[b1])
	}
	mp = f.configMap(render.MigPartedConfigMap)
	if _, ok := mp.Data[poolConfigKey(poolA)]; ok {
		t.Errorf("after: mig-parted key %s remains", poolConfigKey(poolA))
	}
	var merged, ownB migPartedFile
	if err := yaml.Unmarshal([]byte(mp.Data[MigConfigKey]), &merged); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(mp.Data[poolConfigKey(poolB)]), &ownB); err != nil || len(ownB.MigConfigs) == 0 {
		t.Fatalf("after: pool B's key %v: %v", ownB, err)
	}
	for name := range ownB.MigConfigs {
		if _, ok := merged.MigConfigs[name]; !ok {
			t.Errorf("after: config.yaml lacks pool B's config %s", name)
		}
	}
	for _, node := range []string{a1, a2, b1} {
		if cfg := f.node(node).Labels[LabelMIGConfig]; merged.MigConfigs[cfg] == nil {
			t.Errorf("after: config.yaml lacks %s, which node %s names", cfg, node)
		}
	}
}

// TestPoolPrunes: after a plan is applied, what the pool applied earlier and the plan no longer
// wants goes: the Deployment of a removed tenant at once, its ResourceClaimTemplate once no pod
// references it, and the pool's labels on a node that left the pool. The remaining tenant's
// objects, another pool's Deployment in the same namespace and a user's are kept.
func TestPoolPrunes(t *testing.T) {
	f := newLifecycleFixture(t)
	c, ctx := f.c, context.Background()
	seq := strconv.Itoa(int(nsSeq.Add(1)))
	pool, other := "prune-"+seq, "prune-other-"+seq
	n1, n2, n3 := nextNode("prune"), nextNode("prune"), nextNode("prune-other")
	newDRANode(t, c, n1, pool)
	newDRANode(t, c, n2, pool)
	newDRANode(t, c, n3, other)
	chat := exampleTenants(t)[0]
	solo := chat
	solo.Name, solo.Path, solo.Isolation = "solo", "batch/solo", v1.IsolationHard
	other1 := chat
	other1.Name = "other-chat"
	f.addTenant(pool, chat)
	soloIT := f.addTenant(pool, solo)
	f.addTenant(other, other1)
	policy := v1.Policy{AllowedModes: []v1.Mode{v1.ModeExclusive}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA}
	deletePoolAtEnd(t, c, createPool(t, c, pool, policy))
	deletePoolAtEnd(t, c, createPool(t, c, other, policy))
	f.reconcile(pool)
	f.reconcile(other)
	deps, templates := f.owned(&appsv1.DeploymentList{}, pool), f.owned(&resourcev1.ResourceClaimTemplateList{}, pool)
	otherDeps := f.owned(&appsv1.DeploymentList{}, other)
	var soloTemplate string
	for _, name := range templates {
		if strings.HasPrefix(name, solo.Name+"-") {
			soloTemplate = name
		}
	}
	if len(deps) != 2 || len(templates) != 2 || soloTemplate == "" || len(otherDeps) != 1 {
		t.Fatalf("before: Deployments %v templates %v, other pool's Deployments %v", deps, templates, otherDeps)
	}
	// A pod of solo's still runs on its template (as one of its ReplicaSet's would).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo-running", Namespace: f.tenNS},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &soloTemplate}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// solo is removed; the node solo ran on leaves the pool
	if err := c.Delete(ctx, soloIT); err != nil {
		t.Fatal(err)
	}
	soloNode := ""
	for _, name := range []string{n1, n2} {
		if f.node(name).Labels[LabelOwnerPool] == "" {
			t.Fatalf("before: node %s not labelled with the pool", name)
		}
	}
	var soloDeps appsv1.DeploymentList
	if err := c.List(ctx, &soloDeps, client.InNamespace(f.tenNS), client.MatchingLabels{render.LabelTenant: solo.Name}); err != nil || len(soloDeps.Items) != 1 {
		t.Fatalf("solo's Deployments: %v", err)
	}
	for _, name := range []string{n1, n2} {
		if strings.Contains(soloDeps.Items[0].Annotations[render.AnnotationSlots], "@"+name+"/") {
			soloNode = name
		}
	}
	n := f.node(soloNode)
	n.Labels["gpupool.dev/test-pool"] = "nowhere"
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	gp := f.reconcile(pool)
	wantDeps := slices.DeleteFunc(slices.Clone(deps), func(s string) bool { return strings.HasPrefix(s, solo.Name) })
	if got := f.owned(&appsv1.DeploymentList{}, pool); !slices.Equal(got, wantDeps) {
		t.Errorf("after: Deployments %v, want %v", got, wantDeps)
	}
	if got := f.owned(&resourcev1.ResourceClaimTemplateList{}, pool); !slices.Equal(got, templates) {
		t.Errorf("while a pod uses it: templates %v, want %v (solo's kept)", got, templates)
	}
	if cond := apimeta.FindStatusCondition(gp.Status.Conditions, CondApplied); cond == nil || !strings.Contains(cond.Message, "kept while pods use them: ResourceClaimTemplate "+f.tenNS+"/"+soloTemplate) {
		t.Errorf("Applied condition %+v does not say solo's template is kept", cond)
	}
	if got := f.owned(&appsv1.DeploymentList{}, other); !slices.Equal(got, otherDeps) {
		t.Errorf("after: other pool's Deployments %v, want %v", got, otherDeps)
	}
	for _, k := range poolLabelKeys {
		if v, ok := f.node(soloNode).Labels[k]; ok {
			t.Errorf("after: node %s left the pool but keeps %s=%s", soloNode, k, v)
		}
	}
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.reconcile(pool)
	wantTemplates := slices.DeleteFunc(slices.Clone(templates), func(s string) bool { return s == soloTemplate })
	if got := f.owned(&resourcev1.ResourceClaimTemplateList{}, pool); !slices.Equal(got, wantTemplates) {
		t.Errorf("no pod uses it: templates %v, want %v", got, wantTemplates)
	}
}

// TestPoolDRAClaimReplaced: a ResourceClaim's spec is immutable, so when a new plan changes a
// shared device's claim the reconciler applies a new claim under a new content name, rolls the
// Deployments to it, keeps the old claim while a pod uses it and deletes it after.
func TestPoolDRAClaimReplaced(t *testing.T) {
	f := newLifecycleFixture(t)
	c, ctx := f.c, context.Background()
	pool := "replace-" + strconv.Itoa(int(nsSeq.Add(1)))
	newDRANode(t, c, nextNode("replace"), pool)
	var its []*InferenceTenant
	for _, tn := range exampleTenants(t) {
		its = append(its, f.addTenant(pool, tn))
	}
	deletePoolAtEnd(t, c, createPool(t, c, pool, v1.Policy{AllowedModes: []v1.Mode{v1.ModeMPS}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA}))
	f.reconcile(pool)
	claims := f.owned(&resourcev1.ResourceClaimList{}, pool)
	if len(claims) != 1 {
		t.Fatalf("claims %v, want the shared device's", claims)
	}
	old := claims[0]
	oldClaim := &resourcev1.ResourceClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.tenNS, Name: old}, oldClaim); err != nil {
		t.Fatal(err)
	}
	refs := func() map[string]string {
		var deps appsv1.DeploymentList
		if err := c.List(ctx, &deps, client.InNamespace(f.tenNS), client.MatchingLabels{LabelOwnerPool: ownerValue(pool)}); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range deps.Items {
			for _, pc := range d.Spec.Template.Spec.ResourceClaims {
				if pc.ResourceClaimName != nil {
					out[d.Name] = *pc.ResourceClaimName
				}
			}
		}
		return out
	}
	before := refs()
	if len(before) != 2 {
		t.Fatalf("Deployments on the claim: %v", before)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-old-claim", Namespace: f.tenNS},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &old}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// both tenants serve a longer context: the replicas' MPS limits, hence the claim's config, change
	for _, it := range its {
		if err := c.Get(ctx, client.ObjectKeyFromObject(it), it); err != nil {
			t.Fatal(err)
		}
		it.Spec.Tenant.MaxContext = 32768
		it.Spec.Tenant.Traffic.RPS = 8
		if err := c.Update(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	f.reconcile(pool)
	claims = f.owned(&resourcev1.ResourceClaimList{}, pool)
	if len(claims) != 2 || !slices.Contains(claims, old) {
		t.Fatalf("after the change: claims %v, want the old %s (a pod uses it) and a new one", claims, old)
	}
	fresh := claims[0]
	if fresh == old {
		fresh = claims[1]
	}
	newClaim := &resourcev1.ResourceClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.tenNS, Name: fresh}, newClaim); err != nil {
		t.Fatal(err)
	}
	if apiEqualJSON(t, oldClaim.Spec, newClaim.Spec) {
		t.Fatalf("the claims' specs are equal: the change did not change the claim, so the test shows nothing")
	}
	if newClaim.Annotations[render.AnnotationDevice] != oldClaim.Annotations[render.AnnotationDevice] {
		t.Errorf("the new claim is for %s, the old for %s: want the same device", newClaim.Annotations[render.AnnotationDevice], oldClaim.Annotations[render.AnnotationDevice])
	}
	for d, claim := range refs() {
		if claim != fresh {
			t.Errorf("Deployment %s references %s, want the new claim %s", d, claim, fresh)
		}
	}
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.reconcile(pool)
	if got := f.owned(&resourcev1.ResourceClaimList{}, pool); !slices.Equal(got, []string{fresh}) {
		t.Errorf("no pod uses the old claim: claims %v, want %s", got, fresh)
	}
}

// apiEqualJSON compares two values by their JSON.
func apiEqualJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

// TestDRAInventory: a DRA node's capacity is the plan in force's replica slots on the devices the
// driver publishes: a whole GPU's replicas (a tensor-parallel replica once, using a published GPU
// for each GPU of its group), a MIG instance's replicas per published instance of its profile (the
// first ones in plan order when fewer are published), nothing when not Ready or without a plan.
func TestDRAInventory(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	rep := func(tenant string, i int) v1.PlanReplica { return v1.PlanReplica{Tenant: tenant, Index: i} }
	tp := v1.PlanReplica{Tenant: "big", Index: 0, TensorParallel: v1.TensorParallel{Size: 2, GPUs: []int{2, 3}}}
	pl := &v1.Plan{GPUs: []v1.PlanGPU{
		{Node: "n", Index: 0, Mode: v1.ModeMPS, Replicas: []v1.PlanReplica{rep("a", 0), rep("b", 0), rep("c", 0)}},
		{Node: "n", Index: 1, Mode: v1.ModeMIG, Instances: []v1.PlanInstance{
			{Profile: "3g.40gb", Start: 0, Replicas: []v1.PlanReplica{rep("a", 1), rep("b", 1)}},
			{Profile: "1g.10gb", Start: 4, Replicas: []v1.PlanReplica{rep("c", 1)}},
			{Profile: "1g.10gb", Start: 5, Replicas: []v1.PlanReplica{rep("c", 2)}},
			{Profile: "1g.10gb", Start: 6}}},
		{Node: "n", Index: 2, Mode: v1.ModeExclusive, Replicas: []v1.PlanReplica{tp}},
		{Node: "n", Index: 3, Mode: v1.ModeExclusive, Replicas: []v1.PlanReplica{tp}},
		{Node: "other", Index: 0, Mode: v1.ModeExclusive, Replicas: []v1.PlanReplica{rep("d", 0)}},
	}}
	slots := func(inv control.Inventory) map[string]int {
		out := map[string]int{}
		for _, g := range inv.GPUs {
			for _, k := range g.Slices {
				out[k]++
			}
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		published map[string]int
		want      map[string]int
	}{
		{"all published", map[string]int{"gpu": 4, "mig-3g.40gb": 1, "mig-1g.10gb": 3}, map[string]int{"gpu": 4, "mig-3g.40gb": 2, "mig-1g.10gb": 2}},
		{"one 1g.10gb instance published", map[string]int{"gpu": 4, "mig-3g.40gb": 1, "mig-1g.10gb": 1}, map[string]int{"gpu": 4, "mig-3g.40gb": 2, "mig-1g.10gb": 1}},
		// GPU 0 takes one; the tensor-parallel group needs two and only one is left
		{"two GPUs published", map[string]int{"gpu": 2}, map[string]int{"gpu": 3}},
		{"nothing published", nil, map[string]int{}},
	} {
		if got := slots(draInventory(node, pl, tc.published)); !maps.Equal(got, tc.want) {
			t.Errorf("%s: slots %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := draInventory(node, nil, map[string]int{"gpu": 4}); len(got.GPUs) != 0 {
		t.Errorf("no plan in force: %v, want nothing", got)
	}
	notReady := node.DeepCopy()
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	if got := draInventory(notReady, pl, map[string]int{"gpu": 4}); len(got.GPUs) != 0 {
		t.Errorf("node not Ready: %v, want nothing", got)
	}
}
