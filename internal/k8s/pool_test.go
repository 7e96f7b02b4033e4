package k8s

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/render"
)

// migPartedFile is the part of a mig-parted config file (version v1) the node double reads.
type migPartedFile struct {
	MigConfigs map[string][]struct {
		Devices    any            `json:"devices"`
		MigEnabled bool           `json:"mig-enabled"`
		MigDevices map[string]int `json:"mig-devices"`
	} `json:"mig-configs"`
}

// configMapAlloc plays mig-manager and the device plugin from the ConfigMaps the controller
// applied, as those components read them: mig-manager looks the node's nvidia.com/mig.config up
// in the mig-parted ConfigMap (unknown: failed) and the plugin advertises each whole GPU as
// nvidia.com/gpu and each MIG device as nvidia.com/mig-<profile>, then applies the sharing of the
// node's key in the device-plugin ConfigMap (renameByDefault: <name>.shared, replicas each).
func configMapAlloc(c client.Client, ns string) func(context.Context, *corev1.Node) (map[string]int64, bool) {
	return func(ctx context.Context, n *corev1.Node) (map[string]int64, bool) {
		var mp corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpupool-mig-parted-config"}, &mp); err != nil {
			return nil, false
		}
		var f migPartedFile
		if err := yaml.Unmarshal([]byte(mp.Data["config.yaml"]), &f); err != nil {
			return nil, false
		}
		entries, ok := f.MigConfigs[n.Labels[LabelMIGConfig]]
		if !ok {
			return nil, false
		}
		gpus, _ := strconv.Atoi(n.Labels[LabelGPUCount])
		res := map[string]int64{}
		for _, e := range entries {
			k := 0
			switch d := e.Devices.(type) {
			case string: // "all"
				k = gpus
			case []any:
				k = len(d)
			}
			for range k {
				if !e.MigEnabled {
					res["nvidia.com/gpu"]++
					continue
				}
				for p, q := range e.MigDevices {
					res["nvidia.com/mig-"+p] += int64(q)
				}
			}
		}
		var dp corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: render.DevicePluginConfigMap}, &dp); err == nil {
			var cfg render.DevicePluginConfig
			if err := yaml.Unmarshal([]byte(dp.Data[n.Labels[LabelDevicePluginConfig]]), &cfg); err == nil && cfg.Sharing != nil {
				for _, rr := range []*render.ReplicatedResources{cfg.Sharing.TimeSlicing, cfg.Sharing.MPS} {
					if rr == nil {
						continue
					}
					for _, r := range rr.Resources {
						q := res[r.Name]
						delete(res, r.Name)
						name := r.Name
						if rr.RenameByDefault {
							name += ".shared"
						}
						res[name] += q * int64(r.Replicas)
					}
				}
			}
		}
		return res, true
	}
}

// newPlanNode creates a ready one-GPU node of the given GPU Feature Discovery product, selected by
// the test pool pool, at all-disabled, and runs its mig-manager and device-plugin double playing
// the ConfigMaps of opNS.
func newPlanNode(t *testing.T, c client.Client, name, pool, product, opNS string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"gpupool.dev/test-pool": pool, LabelGPUProduct: product, LabelGPUCount: "1",
		LabelMIGConfig: "all-disabled", LabelMIGConfigState: MIGStateSuccess}}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	setAllocatable(n, map[string]int64{"nvidia.com/gpu": 1})
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	startDouble(t, &nodeDouble{c: c, node: name, allocOf: configMapAlloc(c, opNS)})
}

// TestPoolReconciler runs the controller with the pool reconciler on the real API server: a
// GPUPool of two one-H100 nodes (found by GPU Feature Discovery's labels) and two InferenceTenants
// are planned; the controller applies the mig-parted and device-plugin ConfigMaps, labels the
// nodes, takes both nodes through the MIG gate (mig-manager and the device plugin played from
// those ConfigMaps), applies the tenants' Deployments owned by their InferenceTenants and writes
// the statuses.
func TestPoolReconciler(t *testing.T) {
	c := needAPI(t)
	poolScenario(t, c, testCfg, newNamespace(t, c, "gpu-operator"), newNamespace(t, c, "planner"))
}

// TestDeployRBACAllows runs the pool and the admission scenarios with the controller
// impersonating the manifests' ServiceAccount (deploy/kubernetes/rbac.yaml applied for real):
// planning, server-side apply of the ConfigMaps, labels and Deployments, the MIG gate, statuses,
// Events, the Lease, removing scheduling gates and evicting all pass its RBAC.
func TestDeployRBACAllows(t *testing.T) {
	c := needAPI(t)
	cfg := applyRBAC(t, c)
	poolScenario(t, c, cfg, "gpu-operator", "gpupool-system")
	grantScenario(t, c, clientFor(t, cfg))
}

// poolScenario is TestPoolReconciler with the controller connecting with cfg, applying the
// ConfigMaps in opNS and holding its Lease in leaseNS; c (an administrator) plays everything else.
func poolScenario(t *testing.T, c client.Client, cfg *rest.Config, opNS, leaseNS string) {
	ctx := context.Background()
	tenNS := newNamespace(t, c, "tenants")
	poolName := "pool-" + strconv.Itoa(int(nsSeq.Add(1)))
	var nodes []string
	for range 2 {
		name := nextNode("plan")
		nodes = append(nodes, name)
		newPlanNode(t, c, name, poolName, "NVIDIA-H100-80GB-HBM3", opNS)
	}
	tenants := exampleTenants(t)
	for _, tn := range tenants {
		it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: tenNS}, Spec: InferenceTenantSpec{Pool: poolName, Tenant: tn}}
		if err := c.Create(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	gp := createPool(t, c, poolName, v1.Policy{AllowedModes: []v1.Mode{v1.ModeMIG}, BurstPoolPercent: ptrTo(0)})
	// the gate's smoke Jobs run in leaseNS (the controller's namespace)
	m, err := NewController(cfg, ControllerOptions{Namespace: leaseNS, OperatorNamespace: opNS, Gate: MIGGate{Poll: 20 * time.Millisecond, Smoke: SmokeTest{Image: "registry.example/cuda:12.4-base"}},
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, m)
	// The pool's policy.maxUnavailable defaults to one GPU: the two one-GPU nodes must go through
	// the gate one at a time.
	var most atomic.Int32
	octx, stopObserver := context.WithCancel(ctx)
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for octx.Err() == nil {
			busy := int32(0)
			for _, name := range nodes {
				n := &corev1.Node{}
				if err := c.Get(octx, client.ObjectKey{Name: name}, n); err == nil && n.Annotations[AnnotGateStep] != "" {
					busy++
				}
			}
			if busy > most.Load() {
				most.Store(busy)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: poolName}, gp); err != nil {
			return false, nil
		}
		return apimeta.IsStatusConditionTrue(gp.Status.Conditions, CondApplied), nil
	})
	if err != nil {
		t.Fatalf("pool not applied: %v (status %+v)", err, gp.Status)
	}
	stopObserver()
	<-observed
	if most.Load() != 1 {
		t.Errorf("at most %d nodes in a gate at once, want 1 (the pool's maxUnavailable)", most.Load())
	}
	if !apimeta.IsStatusConditionTrue(gp.Status.Conditions, CondPlanned) || gp.Status.Nodes != 2 || gp.Status.GPUs != 2 || gp.Status.PlanDigest == "" {
		t.Errorf("pool status %+v", gp.Status)
	}
	// Every node went through the gate to a config the mig-parted ConfigMap defines, with the
	// device-plugin config key that ConfigMap holds, and is schedulable.
	var mp, dp corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: "gpupool-mig-parted-config"}, &mp); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: render.DevicePluginConfigMap}, &dp); err != nil {
		t.Fatal(err)
	}
	var f migPartedFile
	if err := yaml.Unmarshal([]byte(mp.Data["config.yaml"]), &f); err != nil {
		t.Fatal(err)
	}
	for _, name := range nodes {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		cfg := n.Labels[LabelMIGConfig]
		checkSettled(t, c, name, "all-disabled", cfg)
		if _, ok := f.MigConfigs[cfg]; !ok || !strings.HasPrefix(cfg, "gpupool-") {
			t.Errorf("node %s: %s=%q, not a gpupool config of the ConfigMap", name, LabelMIGConfig, cfg)
		}
		if res := n.Annotations[AnnotGateResult]; res != "success "+cfg {
			t.Errorf("node %s: gate result %q", name, res)
		}
		// the gate recorded itself, smoke-tested the new devices (when the plan gives the node
		// any), and closed the record
		waitFor(t, "the node's Reconfiguration to be closed", func(n *corev1.Node) bool { return n.Annotations[AnnotGateRecord] == "" }, c, name)
		devices := false
		for r, q := range n.Status.Allocatable {
			devices = devices || strings.HasPrefix(string(r), "nvidia.com/") && !q.IsZero()
		}
		r := checkRecord(t, c, name, "all-disabled", cfg)
		if smoked := slices.ContainsFunc(r.Status.Steps, func(s ReconfigurationStep) bool { return s.Name == string(StepSmoke) }); smoked != devices {
			t.Errorf("node %s: smoke step %v, want %v (allocatable %v)", name, smoked, devices, n.Status.Allocatable)
		}
		if _, ok := dp.Data[n.Labels[LabelDevicePluginConfig]]; !ok {
			t.Errorf("node %s: %s=%q has no key in %s", name, LabelDevicePluginConfig, n.Labels[LabelDevicePluginConfig], render.DevicePluginConfigMap)
		}
		if n.Labels[LabelPool] == "" {
			t.Errorf("node %s: no %s label", name, LabelPool)
		}
	}
	// The Deployments run what the tenants' statuses say was granted, and belong to them.
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(tenNS)); err != nil {
		t.Fatal(err)
	}
	replicas := map[string]int{}
	for _, d := range deps.Items {
		tn := d.Labels[render.LabelTenant]
		replicas[tn] += int(*d.Spec.Replicas)
		if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].Kind != "InferenceTenant" || d.OwnerReferences[0].Name != tn {
			t.Errorf("deployment %s: owners %v", d.Name, d.OwnerReferences)
		}
	}
	for _, tn := range tenants {
		it := &InferenceTenant{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenNS, Name: tn.Name}, it); err != nil {
			t.Fatal(err)
		}
		if it.Status.ReplicasPlanned < 1 || it.Status.ReplicasPlanned != replicas[tn.Name] || !apimeta.IsStatusConditionTrue(it.Status.Conditions, CondGranted) {
			t.Errorf("tenant %s: status %+v, deployments run %d replicas", tn.Name, it.Status, replicas[tn.Name])
		}
	}
	// Deleting the GPUPool: the controller runs its finalizer, which removes the Deployments.
	if err := c.Delete(ctx, gp); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: poolName}, &GPUPool{})), nil
	})
	if err != nil {
		t.Fatalf("GPUPool %s not finalized: %v", poolName, err)
	}
	if err := c.List(ctx, &deps, client.InNamespace(tenNS)); err != nil || len(deps.Items) != 0 {
		t.Errorf("after deleting the pool: %d Deployments left (%v)", len(deps.Items), err)
	}
}

// TestPoolBudget: the reconciler requests no gate for a node inside the pool's reconfigCooldown
// (from the end of its last gate) nor beyond the pool's maxUnavailable GPUs, and requests it once
// the cooldown has passed and GPUs are free.
func TestPoolBudget(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "budget")
	node := nextNode("budget")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	setAnnot(n, AnnotGateDone, now.Add(-30*time.Minute).Format(time.RFC3339Nano))
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	r := &PoolReconciler{C: c, Gate: &MIGGate{C: c}, Now: func() time.Time { return now }}
	requested := func() bool {
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			t.Fatal(err)
		}
		return n.Annotations[AnnotGateTarget] == "all-3g.40gb"
	}
	b := &gateBudget{gpus: map[string]int{node: 8}, free: 8, cooldown: time.Hour}
	if _, err := r.requestMIG(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"], false, b); err != nil || requested() {
		t.Fatalf("30 min after the last gate with a 1 h cooldown: requested %v, err %v", requested(), err)
	}
	b = &gateBudget{gpus: map[string]int{node: 8, "other": 8}, free: 0, busy: true}
	if _, err := r.requestMIG(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"], false, b); err != nil || requested() {
		t.Fatalf("no GPUs left in the budget: requested %v, err %v", requested(), err)
	}
	b = &gateBudget{gpus: map[string]int{node: 8}, free: 1, cooldown: 20 * time.Minute}
	if _, err := r.requestMIG(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"], false, b); err != nil || !requested() {
		t.Fatalf("cooldown passed, nothing else in a gate (a node larger than the budget goes alone): requested %v, err %v", requested(), err)
	}
	if b.free != -7 || !b.busy {
		t.Errorf("budget after the request: %+v", b)
	}
}
