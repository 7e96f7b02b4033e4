package k8s

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/render"
)

// TestPoolDRA plans pools whose policy.kubernetesDeviceAPI is dra on the real API server, with
// the reconciler connecting as the manifests' ServiceAccount: two pools of one one-H100 node
// each, one where two shared tenants share the GPU through MPS and one with a hard tenant. The
// reconciler applies the DRA claims (the shared device's named ResourceClaim, owned by the GPUPool, and the hard tenant's ResourceClaimTemplate, owned by its
// InferenceTenant) in the tenants' namespace, and Deployments that reference them and request no
// nvidia.com resource. A driver double publishes each node's GPU in a ResourceSlice as NVIDIA's
// DRA driver does; the pods of the Deployments on the named claim (created here from the
// Deployments' pod templates, as the ReplicaSet controller would) are admitted by GrantAdmission
// over the plans' slots on the published devices (a pod beyond them stays gated), bound by the
// real kube-scheduler to the node the plan chose, and the claim is allocated that node's GPU. Pods
// from a ResourceClaimTemplate need kube-controller-manager's resource-claim controller to
// instantiate their claims, which this test environment does not run: for them the template's
// existence and acceptance are checked.
func TestPoolDRA(t *testing.T) {
	c := needAPI(t)
	startScheduler(t)
	createDeviceClasses(t, c)
	ctx := context.Background()
	sa := clientFor(t, applyRBAC(t, c))
	opNS, tenNS := "gpu-operator", newNamespace(t, c, "tenants")
	// Two pools: an MPS one where the shared tenants share one GPU (a named claim) and
	// an exclusive one for the hard tenant (a template).
	shared := exampleTenants(t) // chat-a, chat-b: shared
	solo := shared[0]
	solo.Name, solo.Path, solo.Isolation = "solo", "batch/solo", v1.IsolationHard
	var pools []*GPUPool
	for _, p := range []struct {
		mode    v1.Mode
		tenants []v1.Tenant
	}{{v1.ModeMPS, shared}, {v1.ModeExclusive, []v1.Tenant{solo}}} {
		poolName := "pool-" + strconv.Itoa(int(nsSeq.Add(1)))
		newDRANode(t, c, nextNode("dra-plan"), poolName)
		for _, tn := range p.tenants {
			it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: tenNS}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}
			if err := c.Create(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		gp := createPool(t, c, poolName, v1.Policy{AllowedModes: []v1.Mode{p.mode}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA})
		deletePoolAtEnd(t, c, gp)
		r := &PoolReconciler{C: sa, OperatorNamespace: opNS, Gate: &MIGGate{C: sa}}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: poolName}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: poolName}, gp); err != nil {
			t.Fatal(err)
		}
		if !apimeta.IsStatusConditionTrue(gp.Status.Conditions, CondPlanned) {
			t.Fatalf("pool %s not planned: %+v", poolName, gp.Status.Conditions)
		}
		pools = append(pools, gp)
	}
	gp := pools[0]
	var claims resourcev1.ResourceClaimList
	var templates resourcev1.ResourceClaimTemplateList
	var deps appsv1.DeploymentList
	for _, l := range []client.ObjectList{&claims, &templates, &deps} {
		if err := c.List(ctx, l, client.InNamespace(tenNS)); err != nil {
			t.Fatal(err)
		}
	}
	claimed := map[string]*resourcev1.ResourceClaim{}
	for i, rc := range claims.Items {
		claimed[rc.Name] = &claims.Items[i]
		if len(rc.OwnerReferences) != 1 || rc.OwnerReferences[0].Kind != "GPUPool" || rc.OwnerReferences[0].UID != gp.UID {
			t.Errorf("claim %s: owners %v, want the GPUPool", rc.Name, rc.OwnerReferences)
		}
	}
	templated := map[string]bool{}
	for _, rt := range templates.Items {
		templated[rt.Name] = true
		if len(rt.OwnerReferences) != 1 || rt.OwnerReferences[0].Kind != "InferenceTenant" || rt.OwnerReferences[0].Name != rt.Labels[render.LabelTenant] {
			t.Errorf("template %s: owners %v, want its InferenceTenant", rt.Name, rt.OwnerReferences)
		}
	}
	if len(claims.Items) == 0 || len(templates.Items) == 0 || len(deps.Items) < 3 {
		t.Fatalf("applied %d claims, %d templates, %d Deployments: want a shared claim, a template and a Deployment per tenant", len(claims.Items), len(templates.Items), len(deps.Items))
	}
	// The pods of each Deployment on a named claim, as its ReplicaSet would create them.
	want := map[string]string{} // pod -> claim
	for _, d := range deps.Items {
		spec := d.Spec.Template.Spec
		for r := range spec.Containers[0].Resources.Limits {
			if len(r) > 11 && r[:11] == "nvidia.com/" {
				t.Errorf("deployment %s requests %s with the DRA device API", d.Name, r)
			}
		}
		if len(spec.ResourceClaims) != 1 {
			t.Fatalf("deployment %s: resourceClaims %+v, want one", d.Name, spec.ResourceClaims)
		}
		pc := spec.ResourceClaims[0]
		switch {
		case pc.ResourceClaimTemplateName != nil:
			if !templated[*pc.ResourceClaimTemplateName] {
				t.Errorf("deployment %s: template %s not applied", d.Name, *pc.ResourceClaimTemplateName)
			}
		case pc.ResourceClaimName != nil:
			if claimed[*pc.ResourceClaimName] == nil {
				t.Fatalf("deployment %s: claim %s not applied", d.Name, *pc.ResourceClaimName)
			}
			for i := range int(*d.Spec.Replicas) {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", d.Name, i), Namespace: tenNS, Labels: d.Spec.Template.Labels},
					Spec: *spec.DeepCopy()}
				if err := c.Create(ctx, p); err != nil {
					t.Fatal(err)
				}
				// The webhook gated the tenant pod; the fair allocator admits it below.
				if len(p.Spec.SchedulingGates) != 1 || p.Spec.SchedulingGates[0].Name != SchedulingGate {
					t.Fatalf("pod %s: gates %v, want the webhook's", p.Name, p.Spec.SchedulingGates)
				}
				want[p.Name] = *pc.ResourceClaimName
			}
		}
	}
	if len(want) < 2 {
		t.Fatalf("%d pods on named claims, want the two shared tenants' replicas", len(want))
	}
	// solo's pod (its claim would come from a template: a plain pod stands in), then one pod more
	// than the plan gives chat-a. The DRA nodes advertise no nvidia.com allocatable, so the
	// allocator's capacity is the plans' slots on the devices the driver publishes: two on the
	// shared GPU, one on solo's; the three tenants get one each and the extra pod stays gated.
	soloPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo-0", Namespace: tenNS, Labels: map[string]string{render.LabelTenant: solo.Name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: render.Image}}}}
	if err := c.Create(ctx, soloPod); err != nil {
		t.Fatal(err)
	}
	ga := &GrantAdmission{C: sa, Admitter: &Admitter{C: sa, Namespace: tenNS}}
	grants, res, err := ga.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if grants[shared[0].Name] != 1 || grants[shared[1].Name] != 1 || grants[solo.Name] != 1 || len(res.Admitted) != len(want)+1 {
		t.Fatalf("grants %v, admitted %v: want one replica each for %s, %s and %s, their %d pods admitted", grants, res.Admitted, shared[0].Name, shared[1].Name, solo.Name, len(want)+1)
	}
	extra := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "chat-a-extra", Namespace: tenNS, Labels: map[string]string{render.LabelTenant: shared[0].Name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: render.Image}}}}
	if err := c.Create(ctx, extra); err != nil {
		t.Fatal(err)
	}
	if grants, res, err = ga.Sync(ctx); err != nil || grants[shared[0].Name] != 1 || len(res.Admitted)+len(res.Evicted) != 0 {
		t.Fatalf("with a pod beyond the plan: grants %v, admitted %v, evicted %v, err %v; want chat-a still at one and nothing changed", grants, res.Admitted, res.Evicted, err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(extra), extra); err != nil || !hasGate(extra) {
		t.Errorf("the pod beyond the plan's slots was admitted (gates %v, err %v)", extra.Spec.SchedulingGates, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for name := range want {
			p := &corev1.Pod{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: tenNS, Name: name}, p); err != nil || p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var pods corev1.PodList
		_ = c.List(ctx, &pods, client.InNamespace(tenNS))
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q gates %v conditions %+v", p.Name, p.Spec.NodeName, p.Spec.SchedulingGates, p.Status.Conditions)
		}
		t.Fatalf("pods on the named claims not all bound: %v", err)
	}
	for name, claim := range want {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenNS, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		rc := &resourcev1.ResourceClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenNS, Name: claim}, rc); err != nil {
			t.Fatal(err)
		}
		// the plan's node: the claim names its device "<node>/<gpu>"
		planned := rc.Annotations[render.AnnotationDevice]
		if rc.Status.Allocation == nil || len(rc.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("claim %s not allocated", claim)
		}
		res := rc.Status.Allocation.Devices.Results[0]
		if planned != p.Spec.NodeName+"/0" || res.Pool != p.Spec.NodeName || res.Device != "gpu-0" {
			t.Errorf("pod %s on %s, claim %s allocated %s/%s, plan says %s", name, p.Spec.NodeName, claim, res.Pool, res.Device, planned)
		}
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(tenNS)); err != nil {
		t.Fatal(err)
	}
}

// newDRANode is a schedulable one-H100 node of the pool labelled gpupool.dev/test-pool=pool, with
// GPU Feature Discovery's labels, and a driver double's ResourceSlice publishing its GPU as NVIDIA's
// DRA driver does.
func newDRANode(t *testing.T, c client.Client, name, pool string) {
	t.Helper()
	ctx := context.Background()
	newSchedulableNode(t, c, name, 110, 0)
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	n.Labels["gpupool.dev/test-pool"] = pool
	n.Labels[LabelGPUProduct], n.Labels[LabelGPUCount] = "NVIDIA-H100-80GB-HBM3", "1"
	n.Labels[LabelMIGConfig], n.Labels[LabelMIGConfigState] = "all-disabled", MIGStateSuccess
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu.nvidia.com"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: render.DRADriver, NodeName: &name, Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("gpu"), "uuid": str("GPU-" + name), "productName": str("NVIDIA H100 80GB HBM3")}}}}}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
}

// TestPoolDRASharedNamespaces: a shared device's claim is namespaced, so tenants sharing it from
// different namespaces cannot both reference it; the reconciler says so, naming the claim and the
// namespaces, and applies no claim.
func TestPoolDRASharedNamespaces(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	poolName := "pool-" + strconv.Itoa(int(nsSeq.Add(1)))
	newDRANode(t, c, nextNode("dra-ns"), poolName)
	var nss []string
	for _, tn := range exampleTenants(t) {
		ns := newNamespace(t, c, "tenants")
		nss = append(nss, ns)
		it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: ns}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}
		if err := c.Create(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	deletePoolAtEnd(t, c, createPool(t, c, poolName, v1.Policy{AllowedModes: []v1.Mode{v1.ModeMPS}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA}))
	r := &PoolReconciler{C: c, OperatorNamespace: newNamespace(t, c, "gpu-operator"), Gate: &MIGGate{C: c}}
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: poolName}})
	if err == nil || !strings.Contains(err.Error(), "dra/shared.yaml: ResourceClaim ") || !strings.Contains(err.Error(), "different namespaces") ||
		!strings.Contains(err.Error(), nss[0]) || !strings.Contains(err.Error(), nss[1]) {
		t.Fatalf("tenants sharing a device from two namespaces: %v", err)
	}
	for _, ns := range nss {
		var claims resourcev1.ResourceClaimList
		if err := c.List(ctx, &claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 0 {
			t.Errorf("namespace %s: claims %d, err %v; want none", ns, len(claims.Items), err)
		}
	}
}

// deletePoolAtEnd deletes gp when the test ends: the controllers of later tests reconcile every
// GPUPool, and the pools of a cluster share the GPU Operator's mig-parted ConfigMap. Its
// finalizer is dropped without the cleanup it stands for (TestPoolFinalizer tests that), so the
// pool is gone at once.
func deletePoolAtEnd(t *testing.T, c client.Client, gp *GPUPool) {
	t.Cleanup(func() {
		ctx := context.Background()
		if err := c.Delete(ctx, gp); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete GPUPool %s: %v", gp.Name, err)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &GPUPool{}
			if err := c.Get(ctx, client.ObjectKey{Name: gp.Name}, cur); err != nil {
				return client.IgnoreNotFound(err)
			}
			cur.Finalizers = nil
			return client.IgnoreNotFound(c.Update(ctx, cur))
		})
		if err != nil {
			t.Errorf("drop the finalizer of GPUPool %s: %v", gp.Name, err)
		}
	})
}

// TestPoolDRARequestsDeviceGate: a MIG plan on a pool of the DRA path asks the gate to verify the
// devices NVIDIA's DRA driver will publish, not the node's allocatable: the node's request
// carries a DeviceExpectation of driver gpu.nvidia.com whose MIG devices are those the pool's
// mig-parted config gives the node's one H100 under the requested config, and no allocatable
// expectation.
func TestPoolDRARequestsDeviceGate(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	poolName := "pool-" + strconv.Itoa(int(nsSeq.Add(1)))
	node := nextNode("dra-mig")
	newDRANode(t, c, node, poolName)
	ns := newNamespace(t, c, "tenants")
	for _, tn := range exampleTenants(t) {
		it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: ns}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}
		if err := c.Create(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	deletePoolAtEnd(t, c, createPool(t, c, poolName, v1.Policy{AllowedModes: []v1.Mode{v1.ModeMIG}, BurstPoolPercent: ptrTo(0), KubernetesDeviceAPI: v1.DeviceAPIDRA}))
	opNS := newNamespace(t, c, "gpu-operator")
	r := &PoolReconciler{C: c, OperatorNamespace: opNS, Gate: &MIGGate{C: c}}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: poolName}}); err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	target := n.Annotations[AnnotGateTarget]
	if target == "" || target == "all-disabled" {
		t.Fatalf("no MIG config requested (annotations %v)", n.Annotations)
	}
	if _, ok := n.Annotations[AnnotGateExpect]; ok {
		t.Errorf("a DRA node's request carries an allocatable expectation %s", n.Annotations[AnnotGateExpect])
	}
	exp, err := deviceExpectation(n)
	if err != nil || exp == nil {
		t.Fatalf("device expectation %+v: %v", exp, err)
	}
	var mp corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: "gpupool-mig-parted-config"}, &mp); err != nil {
		t.Fatal(err)
	}
	var f migPartedFile
	if err := yaml.Unmarshal([]byte(mp.Data[MigConfigKey]), &f); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, e := range f.MigConfigs[target] {
		if !e.MigEnabled {
			want["gpu"]++
		}
		for p, k := range e.MigDevices {
			want["mig-"+p] += int64(k)
		}
	}
	if exp.Driver != render.DRADriver || len(want) == 0 || !maps.Equal(exp.Devices, want) {
		t.Errorf("expectation %+v, want driver %s and the devices of config %s: %v", exp, render.DRADriver, target, want)
	}
}
