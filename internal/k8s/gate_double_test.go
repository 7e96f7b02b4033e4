package k8s

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/render"
)

// nodeDouble plays, for one Node object on the real API server, what runs on a GPU node:
// mig-manager (answers a changed nvidia.com/mig.config with nvidia.com/mig.config.state), the
// device plugin (then publishes the config's resources as allocatable) and the kubelet (finishes
// pods that were evicted, which without a kubelet would stay Terminating).
type nodeDouble struct {
	c    client.Client
	node string
	// configs maps a MIG config name to the allocatable it yields.
	configs map[string]map[string]int64
	// fail lists configs mig-manager reports failed; silent lists configs it never answers.
	fail, silent map[string]bool
	// mute, while set, keeps mig-manager from answering any config (a stalled node).
	mute atomic.Bool
	// wrongAlloc lists configs whose allocatable differs from configs[] (a device plugin that
	// does not come back with the planned resources).
	wrongAlloc map[string]bool
	// every is the pause between two ticks (20 ms when zero); a longer one keeps each gate step
	// visible for longer.
	every time.Duration
	// allocOf, when set, says what the device plugin offers once the node's config is applied
	// (instead of configs); ok false makes mig-manager report failed (an unknown config).
	allocOf func(ctx context.Context, n *corev1.Node) (alloc map[string]int64, ok bool)
	// smokeFail lists configs under which the smoke Jobs' pods fail (a broken new slice); other
	// smoke Jobs pinned to the node succeed once mig-manager has applied the config.
	smokeFail map[string]bool
	// smokeHang leaves smoke Jobs running forever.
	smokeHang bool
	// smokeRuns counts the smoke Jobs the double ran.
	smokeRuns atomic.Int32
	// draDevices, when set, makes the node one whose GPUs NVIDIA's DRA driver publishes: once a
	// config is applied the double publishes draDevices[cfg] in the node's ResourceSlice (a new
	// pool generation each time they change) and no nvidia.com/ allocatable; wrongAlloc then
	// publishes one whole GPU instead.
	draDevices map[string][]resourcev1.Device
}

func (d *nodeDouble) run(ctx context.Context) {
	for ctx.Err() == nil {
		d.tick(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(orDefault(d.every, 20*time.Millisecond)):
		}
	}
}

func (d *nodeDouble) tick(ctx context.Context) {
	n := &corev1.Node{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: d.node}, n); err != nil {
		return
	}
	cfg, state := n.Labels[LabelMIGConfig], n.Labels[LabelMIGConfigState]
	switch {
	case cfg == "" || d.silent[cfg] || d.mute.Load():
	case state == "":
		n.Labels[LabelMIGConfigState] = "pending"
		_ = d.c.Update(ctx, n)
	case state == "pending" && d.allocOf != nil:
		if _, ok := d.allocOf(ctx, n); ok {
			n.Labels[LabelMIGConfigState] = MIGStateSuccess
		} else {
			n.Labels[LabelMIGConfigState] = MIGStateFailed
		}
		_ = d.c.Update(ctx, n)
	case state == "pending":
		if d.fail[cfg] {
			n.Labels[LabelMIGConfigState] = MIGStateFailed
		} else {
			n.Labels[LabelMIGConfigState] = MIGStateSuccess
		}
		_ = d.c.Update(ctx, n)
	case state == MIGStateSuccess && d.draDevices != nil:
		devs := d.draDevices[cfg]
		if d.wrongAlloc[cfg] {
			devs = draGPUs(d.node, nil)
		}
		publishDevices(ctx, d.c, d.node, devs)
	case state == MIGStateSuccess:
		alloc := d.configs[cfg]
		if d.allocOf != nil {
			alloc, _ = d.allocOf(ctx, n)
		}
		if d.wrongAlloc[cfg] {
			alloc = map[string]int64{"nvidia.com/gpu": 1}
		}
		if !allocEqual(n, alloc) {
			setAllocatable(n, alloc)
			_ = d.c.Status().Update(ctx, n)
		}
	}
	d.runSmokeJobs(ctx, cfg, state)
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.MatchingFields{"spec.nodeName": d.node}); err != nil {
		return
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			_ = d.c.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
		}
	}
}

func allocEqual(n *corev1.Node, want map[string]int64) bool {
	got := 0
	for r, q := range n.Status.Allocatable {
		if len(r) > 11 && r[:11] == "nvidia.com/" {
			if w, ok := want[string(r)]; !ok || q.Value() != w {
				return false
			}
			got++
		}
	}
	return got == len(want)
}

func setAllocatable(n *corev1.Node, res map[string]int64) {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for r, q := range res {
		alloc[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	n.Status.Allocatable, n.Status.Capacity = alloc, alloc.DeepCopy()
}

// Two mig-parted configs of an 8-GPU H100 node, with what the device plugin offers for each.
var gateConfigs = map[string]map[string]int64{
	"all-1g.10gb": {"nvidia.com/mig-1g.10gb": 56},
	"all-3g.40gb": {"nvidia.com/mig-3g.40gb": 16},
	"all-bad":     {"nvidia.com/mig-7g.80gb": 8},
}

// newGPUNode creates a Ready node at config cfg (state success, matching allocatable) with
// two GPU pods, one CPU pod and one DaemonSet GPU pod (the operator's own) in namespace ns.
func newGPUNode(t *testing.T, c client.Client, name, cfg, ns string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		LabelMIGConfig: cfg, LabelMIGConfigState: MIGStateSuccess}}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	setAllocatable(n, gateConfigs[cfg])
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	pod := func(pname string, gpu bool, ds bool) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pname, Namespace: ns, Labels: map[string]string{"app": "llm"}},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if gpu {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}
		}
		if ds {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "nvidia-device-plugin", UID: types.UID("ds-" + name)}}
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		// The kubelet's part: the pod runs and is ready. The Eviction API ignores budgets for
		// Pending pods, so this is what makes PodDisruptionBudgets count.
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pod(name+"-llm-0", true, false)
	pod(name+"-llm-1", true, false)
	pod(name+"-cpu", false, false)
	pod(name+"-ds", true, true)
}

// checkSettled asserts the invariants that must hold whenever the gate is not running: the node
// is schedulable, its label is old or new, and no gate step is recorded.
func checkSettled(t *testing.T, c client.Client, name, old, new string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Errorf("node %s left cordoned (annotations %v)", name, n.Annotations)
	}
	if l := n.Labels[LabelMIGConfig]; l != old && l != new {
		t.Errorf("node %s label %s=%q, want %q or %q", name, LabelMIGConfig, l, old, new)
	}
	if s := n.Annotations[AnnotGateStep]; s != "" {
		t.Errorf("node %s still at gate step %s", name, s)
	}
	return n
}

func podNames(t *testing.T, c client.Client, node string) []string {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out
}

func fmtNames(prefix string, suffixes ...string) []string {
	var out []string
	for _, s := range suffixes {
		out = append(out, fmt.Sprintf("%s-%s", prefix, s))
	}
	return out
}

// runSmokeJobs plays the Job controller and the kubelet for the gate's smoke Jobs pinned to the
// node (by nodeName, or on a DRA node by node affinity on its name): a Job whose pod asks for
// resources the node offers, or whose claim template asks for devices the node publishes,
// succeeds (fails when smokeFail names the node's config); one asking for what the node lacks
// fails, as its pod would be rejected or never scheduled.
func (d *nodeDouble) runSmokeJobs(ctx context.Context, cfg, state string) {
	var jobs batchv1.JobList
	if err := d.c.List(ctx, &jobs, client.MatchingLabels{LabelNode: d.node}); err != nil {
		return
	}
	n := &corev1.Node{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: d.node}, n); err != nil {
		return
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if d.smokeHang || !placedOn(j.Spec.Template.Spec, d.node) || jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil {
			continue
		}
		fits := state == MIGStateSuccess
		for r, q := range j.Spec.Template.Spec.Containers[0].Resources.Limits {
			if have := n.Status.Allocatable[r]; have.Cmp(q) < 0 {
				fits = false
			}
		}
		for _, pc := range j.Spec.Template.Spec.ResourceClaims {
			fits = fits && d.claimFits(ctx, j.Namespace, pc)
		}
		now := metav1.Now()
		j.Status.StartTime = &now
		if fits && !d.smokeFail[cfg] {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "CompletionsReached"},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "CompletionsReached"}}
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "BackoffLimitExceeded", Message: "the smoke pod exited 1"},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "BackoffLimitExceeded", Message: "the smoke pod exited 1"}}
		}
		if err := d.c.Status().Update(ctx, j); err == nil {
			d.smokeRuns.Add(1)
		}
	}
}

// draGPUs is what NVIDIA's DRA driver publishes for an H100 node with static MIG, one GPU per
// element of layouts: nil for a GPU with MIG off (device gpu-<i>, type gpu), else its MIG
// profiles (devices gpu-<i>-mig-<profile>-<k>-<start>, type mig, with parentUUID and one
// memorySlice capacity per occupied slice, placed one after another).
func draGPUs(node string, layouts ...[]string) []resourcev1.Device {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	const product = "NVIDIA H100 80GB HBM3"
	var out []resourcev1.Device
	for i, l := range layouts {
		uuid := fmt.Sprintf("GPU-%s-%d", node, i)
		if l == nil {
			out = append(out, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": str("gpu"), "uuid": str(uuid), "productName": str(product)}})
			continue
		}
		start := 0
		for k, prof := range l {
			size := map[string]int{"1g.10gb": 1, "2g.20gb": 2, "3g.40gb": 4, "7g.80gb": 8}[prof]
			dev := resourcev1.Device{Name: fmt.Sprintf("gpu-%d-mig-%s-%d-%d", i, strings.ReplaceAll(prof, ".", ""), k, start),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("mig"), "profile": str(prof),
					"uuid": str(fmt.Sprintf("MIG-%s-%d-%d", node, i, k)), "parentUUID": str(uuid), "productName": str(product)},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}}
			for j := start; j < start+size; j++ {
				dev.Capacity[resourcev1.QualifiedName(fmt.Sprintf("memorySlice%d", j))] = resourcev1.DeviceCapacity{Value: resource.MustParse("1")}
			}
			start += size
			out = append(out, dev)
		}
	}
	return out
}

// publishDevices plays the DRA driver's kubelet plugin: the node's one ResourceSlice of
// gpu.nvidia.com lists devs, in a new pool generation whenever they change.
func publishDevices(ctx context.Context, c client.Client, node string, devs []resourcev1.Device) {
	rs := &resourcev1.ResourceSlice{}
	name := node + "-" + render.DRADriver
	err := c.Get(ctx, client.ObjectKey{Name: name}, rs)
	if apierrors.IsNotFound(err) {
		rs = &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
			Driver: render.DRADriver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devs}}
		_ = c.Create(ctx, rs)
		return
	}
	if err != nil || deviceNames(rs.Spec.Devices) == deviceNames(devs) {
		return
	}
	rs.Spec.Devices = devs
	rs.Spec.Pool.Generation++
	_ = c.Update(ctx, rs)
}

func deviceNames(devs []resourcev1.Device) string {
	var b strings.Builder
	for _, d := range devs {
		b.WriteString(d.Name + ",")
	}
	return b.String()
}

// placedOn: the pod is bound to node, or required onto it by node affinity on metadata.name.
func placedOn(ps corev1.PodSpec, node string) bool {
	if ps.NodeName != "" || ps.Affinity == nil || ps.Affinity.NodeAffinity == nil || ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ps.NodeName == node
	}
	for _, term := range ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 && f.Values[0] == node {
				return true
			}
		}
	}
	return false
}

// claimFits plays the scheduler's allocation of a smoke pod's claim template: every request finds
// its count of devices the node publishes, of its class's type and, when it has a selector, of
// the profile the gate's selector names.
func (d *nodeDouble) claimFits(ctx context.Context, ns string, pc corev1.PodResourceClaim) bool {
	if pc.ResourceClaimTemplateName == nil {
		return false
	}
	tmpl := &resourcev1.ResourceClaimTemplate{}
	rs := &resourcev1.ResourceSlice{}
	if d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *pc.ResourceClaimTemplateName}, tmpl) != nil ||
		d.c.Get(ctx, client.ObjectKey{Name: d.node + "-" + render.DRADriver}, rs) != nil {
		return false
	}
	for _, r := range tmpl.Spec.Spec.Devices.Requests {
		if r.Exactly == nil {
			return false
		}
		typ := map[string]string{render.DeviceClassGPU: "gpu", render.DeviceClassMIG: "mig"}[r.Exactly.DeviceClassName]
		var have int64
		for _, dev := range rs.Spec.Devices {
			if strAttr(dev, "type") != typ {
				continue
			}
			ok := true
			for _, sel := range r.Exactly.Selectors {
				ok = ok && sel.CEL != nil && sel.CEL.Expression == fmt.Sprintf("device.attributes['%s'].profile == '%s'", render.DRADriver, strAttr(dev, "profile"))
			}
			if ok {
				have++
			}
		}
		if have < r.Exactly.Count {
			return false
		}
	}
	return true
}
