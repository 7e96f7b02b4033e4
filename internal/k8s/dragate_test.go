package k8s

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/migparted"
	"gpupool.dev/gpupool/internal/render"
)

// h100Filter is the device filter gpupool's mig-parted configs carry on an H100's MIG entries.
func h100Filter(t *testing.T) []string {
	t.Helper()
	b, err := gpu.Lookup("NVIDIA H100 80GB HBM3")
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(b.PCIDeviceIDs)
}

func filtered(e migparted.Entry, f []string) migparted.Entry {
	e.DeviceFilter = f
	return e
}

func rep(s string, k int) []string { return slices.Repeat([]string{s}, k) }

// draSplit is a two-GPU H100 node's configs as gpupool renders them (device filters on the MIG
// entries), what NVIDIA's DRA driver publishes under each, and the expectation of each.
type draSplit struct {
	file    *migparted.Config
	devices map[string][]resourcev1.Device
	expect  map[string]map[string]int64
}

// configMap creates the split's mig-parted file as ConfigMap ns/name, as the gate reads it.
func (s draSplit) configMap(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	data, err := migparted.Encode(s.file)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{MigConfigKey: string(data)}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func newDRASplit(t *testing.T, node string) draSplit {
	f := h100Filter(t)
	layouts := map[string][][]string{
		"split-a": {rep("3g.40gb", 2), rep("1g.10gb", 7)},
		"split-b": {rep("3g.40gb", 2), rep("2g.20gb", 3)},
		"split-c": {rep("3g.40gb", 2), nil},
	}
	s := draSplit{
		file: &migparted.Config{Configs: []migparted.NamedConfig{
			*named("split-a", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"1g.10gb": 7}), f)),
			*named("split-b", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"2g.20gb": 3}), f)),
			*named("split-c", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), migparted.Entry{Devices: migparted.Devices{Indices: []int{1}}}),
		}},
		devices: map[string][]resourcev1.Device{},
		expect: map[string]map[string]int64{
			"split-a": {"mig-3g.40gb": 2, "mig-1g.10gb": 7},
			"split-b": {"mig-3g.40gb": 2, "mig-2g.20gb": 3},
			"split-c": {"mig-3g.40gb": 2, "gpu": 1},
		},
	}
	for cfg, l := range layouts {
		s.devices[cfg] = draGPUs(node, l...)
	}
	return s
}

// newDRAGateNode creates a Ready node at config cfg (state success) that advertises no
// nvidia.com/ allocatable, and publishes devs as NVIDIA's DRA driver would.
func newDRAGateNode(t *testing.T, c client.Client, name, cfg string, devs []resourcev1.Device) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		LabelMIGConfig: cfg, LabelMIGConfigState: MIGStateSuccess, "kubernetes.io/hostname": name}}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	setAllocatable(n, nil)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	publishDevices(ctx, c, name, devs)
}

// claimPod creates a running pod on node holding, through one ResourceClaim allocated as the
// scheduler would, the given devices ("driver/device", all in the node's pool). fromTemplate makes
// the claim one generated from a template (named in the pod's status); ds makes the pod a
// DaemonSet's; no devices gives a pod without claims.
func claimPod(t *testing.T, c client.Client, ns, node, name string, fromTemplate, ds bool, devices ...string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if ds {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "dcgm", UID: types.UID("ds-" + node)}}
	}
	claim := name + "-gpu"
	if len(devices) > 0 {
		rc := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns}, Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: render.DeviceClassMIG, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(len(devices))}}}}}}
		if err := c.Create(ctx, rc); err != nil {
			t.Fatal(err)
		}
		var results []resourcev1.DeviceRequestAllocationResult
		for _, d := range devices {
			driver, dev, _ := strings.Cut(d, "/")
			results = append(results, resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: node, Device: dev})
		}
		rc.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
		if err := c.Status().Update(ctx, rc); err != nil {
			t.Fatal(err)
		}
		pc := corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: &claim}
		if fromTemplate {
			tmpl := name + "-template"
			pc = corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: &tmpl}
		}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{pc}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if fromTemplate && len(devices) > 0 {
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
	}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// TestGateDRAVerifiesDevices: on a node whose GPUs NVIDIA's DRA driver publishes (no nvidia.com/
// allocatable), a gate requested with the devices the plan expects succeeds once the driver
// publishes them, and rolls back when it publishes other devices, naming the difference.
func TestGateDRAVerifiesDevices(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		wrong bool
	}{{"planned devices", false}, {"other devices", true}} {
		t.Run(tc.name, func(t *testing.T) {
			node := nextNode("draverify")
			s := newDRASplit(t, node)
			newDRAGateNode(t, c, node, "split-a", s.devices["split-a"])
			d := &nodeDouble{c: c, node: node, draDevices: s.devices}
			if tc.wrong {
				d.wrongAlloc = map[string]bool{"split-b": true}
			}
			startDouble(t, d)
			g := fastGate(c)
			g.VerifyTimeout = 2 * g.Poll * 50 // a second
			if err := g.RequestDRA(ctx, node, "split-b", DeviceExpectation{Driver: render.DRADriver, Devices: s.expect["split-b"]}); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			n := checkSettled(t, c, node, "split-a", "split-b")
			res := n.Annotations[AnnotGateResult]
			if !tc.wrong {
				if res != "success split-b" || n.Labels[LabelMIGConfig] != "split-b" {
					t.Errorf("label %q result %q, want split-b and success", n.Labels[LabelMIGConfig], res)
				}
				return
			}
			want := "rolled-back split-b: the devices gpu.nvidia.com publishes do not match the plan: mig-2g.20gb=0 want 3, mig-3g.40gb=0 want 2, gpu=1 want 0"
			if res != want || n.Labels[LabelMIGConfig] != "split-a" {
				t.Errorf("label %q result %q, want split-a and %q", n.Labels[LabelMIGConfig], res, want)
			}
			if _, ok := n.Annotations[AnnotGateExpectDevices]; ok {
				t.Errorf("the finished gate left %s", AnnotGateExpectDevices)
			}
		})
	}
}

// TestGateDRADrainsPodsOnChangedGPUs: a two-GPU H100 node goes from split-a (GPU 0: two 3g.40gb,
// GPU 1: seven 1g.10gb) to split-b, where only GPU 1 changes. The pods whose claims hold a device
// of GPU 1 (alone, from a template, or beside a GPU 0 device) are evicted; the pod holding a GPU 0
// device, the pod holding another driver's device, the pod without claims and the DaemonSet pod
// stay. To split-c GPU 1's MIG mode changes, mig-parted resets every GPU, and every pod holding a
// device of the driver is evicted. The smoke Jobs test the new device kinds, each taking as many
// devices as are free from a ResourceClaimTemplate, on a pod placed on the node by node affinity.
func TestGateDRADrainsPodsOnChangedGPUs(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	for _, tc := range []struct {
		to    string
		left  []string
		why   string
		smoke map[string]int64
	}{
		// GPU 1's three new 2g.20gb devices, all free
		{"split-b", []string{"cpu", "ds", "keep", "nic"}, "other than the 2 on GPUs that keep their devices", map[string]int64{"mig-2g.20gb": 3}},
		// every kind; both 3g.40gb devices are still allocated to the evicted pods' named claims
		// here (no claim controller deallocates them), so the 3g.40gb Job asks for the least, one
		{"split-c", []string{"cpu", "ds", "nic"}, "evicting every pod holding a device of gpu.nvidia.com (or an nvidia.com/ resource): the MIG mode of GPU 1 changes",
			map[string]int64{"gpu": 1, "mig-3g.40gb": 1}},
	} {
		t.Run(tc.to, func(t *testing.T) {
			ns := newNamespace(t, c, "drascope")
			node := nextNode("drascope")
			s := newDRASplit(t, node)
			cm := s.configMap(t, c, ns, "mig-parted")
			newDRAGateNode(t, c, node, "split-a", s.devices["split-a"])
			gpu0, gpu1 := render.DRADriver+"/gpu-0-mig-3g40gb-0-0", render.DRADriver+"/gpu-1-mig-1g10gb-2-2"
			claimPod(t, c, ns, node, "keep", false, false, gpu0)
			claimPod(t, c, ns, node, "small", true, false, gpu1)
			claimPod(t, c, ns, node, "both", false, false, render.DRADriver+"/gpu-0-mig-3g40gb-1-4", render.DRADriver+"/gpu-1-mig-1g10gb-0-0")
			claimPod(t, c, ns, node, "nic", false, false, "nic.example.com/eth-0")
			claimPod(t, c, ns, node, "cpu", false, false)
			claimPod(t, c, ns, node, "ds", false, true, render.DRADriver+"/gpu-1-mig-1g10gb-1-1")
			d := &nodeDouble{c: c, node: node, draDevices: s.devices}
			startDouble(t, d)
			g := smokeGate(c, ns)
			g.MigConfigMap = client.ObjectKeyFromObject(cm)
			if err := g.RequestDRA(ctx, node, tc.to, DeviceExpectation{Driver: render.DRADriver, Devices: s.expect[tc.to]}); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			n := checkSettled(t, c, node, "", tc.to)
			if res := n.Annotations[AnnotGateResult]; res != "success "+tc.to {
				t.Errorf("result %q", res)
			}
			if got := podNames(t, c, node); !slices.Equal(got, tc.left) {
				t.Errorf("pods left %v, want %v", got, tc.left)
			}
			r := checkRecord(t, c, node, "split-a", tc.to)
			if m := r.Status.Steps[0].Message; !strings.Contains(m, tc.why) {
				t.Errorf("draining step says %q, want it to contain %q", m, tc.why)
			}
			// one smoke Job per new device kind, its devices from a claim template
			var jobs batchv1.JobList
			if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{LabelNode: node}); err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, j := range jobs.Items {
				ps := j.Spec.Template.Spec
				if ps.NodeName != "" || !placedOn(ps, node) || len(ps.ResourceClaims) != 1 || ps.ResourceClaims[0].ResourceClaimTemplateName == nil ||
					len(ps.Containers[0].Resources.Limits) != 0 || !slices.ContainsFunc(ps.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == corev1.TaintNodeUnschedulable }) {
					t.Errorf("smoke Job %s: pod %+v, want it placed on %s by affinity, its devices from a claim template, tolerating the cordon", j.Name, ps, node)
					continue
				}
				tmpl := &resourcev1.ResourceClaimTemplate{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *ps.ResourceClaims[0].ResourceClaimTemplateName}, tmpl); err != nil {
					t.Fatal(err)
				}
				if o := tmpl.OwnerReferences; len(o) != 1 || o[0].Kind != "Reconfiguration" || o[0].Name != r.Name {
					t.Errorf("template %s owners %v, want the Reconfiguration %s", tmpl.Name, o, r.Name)
				}
				ex := tmpl.Spec.Spec.Devices.Requests[0].Exactly
				key := "gpu"
				if ex.DeviceClassName == render.DeviceClassMIG {
					key = "mig-" + strings.TrimSuffix(strings.TrimPrefix(ex.Selectors[0].CEL.Expression, "device.attributes['gpu.nvidia.com'].profile == '"), "'")
				}
				got[key] = ex.Count
			}
			if !maps.Equal(got, tc.smoke) || d.smokeRuns.Load() != int32(len(tc.smoke)) {
				t.Errorf("smoke Jobs ask for %v (%d run), want %v", got, d.smokeRuns.Load(), tc.smoke)
			}
		})
	}
}

// TestGateDRAResumesWithItsScope: the drain scope is decided when the gate begins and kept in
// the node's annotations, so a gate resumed by a new MIGGate after the driver stopped publishing
// (its ResourceSlice gone) drains the pods the first decision named, and no others; then it
// verifies the republished devices and runs its smoke Job. Both gates run as the controller's
// ServiceAccount with the deployed RBAC, the smoke Jobs in its namespace.
func TestGateDRAResumesWithItsScope(t *testing.T) {
	c := needAPI(t)
	sa := clientFor(t, applyRBAC(t, c))
	ctx := context.Background()
	ns := newNamespace(t, c, "draresume")
	node := nextNode("draresume")
	s := newDRASplit(t, node)
	cm := s.configMap(t, c, "gpu-operator", "mig-parted-"+node)
	newDRAGateNode(t, c, node, "split-a", s.devices["split-a"])
	claimPod(t, c, ns, node, "keep", false, false, render.DRADriver+"/gpu-0-mig-3g40gb-0-0")
	claimPod(t, c, ns, node, "small", false, false, render.DRADriver+"/gpu-1-mig-1g10gb-2-2")
	first := fastGate(sa)
	first.Smoke = SmokeTest{Image: "registry.example/cuda:12.4-base", Namespace: "gpupool-system"}
	first.MigConfigMap = client.ObjectKeyFromObject(cm)
	if err := first.RequestDRA(ctx, node, "split-b", DeviceExpectation{Driver: render.DRADriver, Devices: s.expect["split-b"]}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the record, then begin: the node is cordoned with its scope
		if _, err := first.Step(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if n.Annotations[AnnotGateStep] != string(StepDraining) {
		t.Fatalf("gate at %q, want %s", n.Annotations[AnnotGateStep], StepDraining)
	}
	if err := c.Delete(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + render.DRADriver}}); err != nil {
		t.Fatal(err)
	}
	d := &nodeDouble{c: c, node: node, draDevices: s.devices}
	startDouble(t, d)
	second := fastGate(sa)
	second.Smoke, second.MigConfigMap = first.Smoke, first.MigConfigMap
	if err := runGate(t, second, node); err != nil {
		t.Fatal(err)
	}
	n = checkSettled(t, c, node, "", "split-b")
	if res := n.Annotations[AnnotGateResult]; res != "success split-b" || d.smokeRuns.Load() != 1 {
		t.Errorf("result %q after %d smoke Jobs, want success after one", res, d.smokeRuns.Load())
	}
	if got, want := podNames(t, c, node), []string{"keep"}; !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
}

// TestPlanDRADrainScope checks the device-by-device rule on what the driver publishes: a GPU
// keeps its devices only when every GPU index whose old entries give it the devices it publishes
// gets the same devices again.
func TestPlanDRADrainScope(t *testing.T) {
	f := h100Filter(t)
	a100 := []string{"0x20B010DE"}
	devs := func(node string, layouts ...[]string) []driverDevice {
		var out []driverDevice
		for _, d := range draGPUs(node, layouts...) {
			typ := *d.Attributes["type"].StringValue
			dd := driverDevice{Pool: node, Name: d.Name, GPU: *d.Attributes["uuid"].StringValue, Product: *d.Attributes["productName"].StringValue, Key: typ}
			if typ == "mig" {
				dd.MIG, dd.Profile, dd.GPU = true, *d.Attributes["profile"].StringValue, *d.Attributes["parentUUID"].StringValue
				dd.Key = "mig-" + dd.Profile
			}
			out = append(out, dd)
		}
		return out
	}
	refs := func(ds []driverDevice, gpuIdx ...int) []string {
		var out []string
		for _, d := range ds {
			for _, i := range gpuIdx {
				if strings.HasSuffix(d.GPU, "-"+string(rune('0'+i))) {
					out = append(out, d.ref())
				}
			}
		}
		slices.Sort(out)
		return out
	}
	three := devs("n", rep("3g.40gb", 2), rep("1g.10gb", 7), rep("3g.40gb", 2))
	oldCfg := named("a", filtered(mig([]int{0, 2}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"1g.10gb": 7}), f))
	type scopeCase struct {
		name     string
		old, new *migparted.NamedConfig
		devs     []driverDevice
		after    map[string]int64
		keep     []string
		smoke    []string
		why      string
	}
	cases := []scopeCase{
		{
			name: "GPU 1 changes: GPUs 0 and 2 keep their devices",
			old:  oldCfg, new: named("b", filtered(mig([]int{0, 2}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"2g.20gb": 3}), f)),
			devs: three, after: map[string]int64{"mig-3g.40gb": 4, "mig-2g.20gb": 3},
			keep: refs(three, 0, 2), smoke: []string{"mig-2g.20gb"}, why: "2 of 3 GPUs",
		},
		{
			name: "GPU 2 changes and publishes what GPU 0 does: neither keeps",
			old:  oldCfg, new: named("b", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"1g.10gb": 7}), f), filtered(mig([]int{2}, map[string]int{"7g.80gb": 1}), f)),
			devs: three, after: map[string]int64{"mig-3g.40gb": 2, "mig-1g.10gb": 7, "mig-7g.80gb": 1},
			keep: refs(three, 1), smoke: []string{"mig-3g.40gb", "mig-7g.80gb"}, why: "1 of 3 GPUs",
		},
		{
			name: "the same devices under one entry instead of one per index: kept",
			old:  named("a", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"3g.40gb": 2}), f)),
			new:  named("b", filtered(mig([]int{0, 1}, map[string]int{"3g.40gb": 2}), f)),
			devs: devs("n", rep("3g.40gb", 2), rep("3g.40gb", 2)), after: map[string]int64{"mig-3g.40gb": 4},
			keep: refs(devs("n", rep("3g.40gb", 2), rep("3g.40gb", 2)), 0, 1), why: "2 of 2 GPUs",
		},
		{
			name: "an entry filtered to another board leaves the GPU alone",
			old:  named("a", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"7g.80gb": 1}), a100)),
			new:  named("b", filtered(mig([]int{0}, map[string]int{"3g.40gb": 2}), f), filtered(mig([]int{1}, map[string]int{"1g.10gb": 7}), a100)),
			devs: devs("n", rep("3g.40gb", 2), rep("2g.20gb", 3)), after: map[string]int64{"mig-3g.40gb": 2, "mig-2g.20gb": 3},
			keep: refs(devs("n", rep("3g.40gb", 2), rep("2g.20gb", 3)), 0, 1), why: "2 of 2 GPUs",
		},
		{
			name: "a MIG mode change resets every GPU",
			old:  oldCfg, new: named("b", filtered(mig([]int{0, 2}, map[string]int{"3g.40gb": 2}), f), migparted.Entry{Devices: migparted.Devices{Indices: []int{1}}}),
			devs: three, after: map[string]int64{"mig-3g.40gb": 4, "gpu": 1},
			smoke: []string{"gpu", "mig-3g.40gb"}, why: "the MIG mode of GPU 1 changes",
		},
		{
			name: "the old config unknown",
			new:  oldCfg, devs: three, after: map[string]int64{"mig-3g.40gb": 4, "mig-1g.10gb": 7},
			smoke: []string{"mig-1g.10gb", "mig-3g.40gb"}, why: "not known",
		},
	}
	// a board the catalog does not know: its filtered entries may or may not apply
	unknown := devs("n", rep("3g.40gb", 2), rep("1g.10gb", 7), rep("3g.40gb", 2))
	for i := range unknown {
		unknown[i].Product = "NVIDIA Mystery"
	}
	cases = append(cases, scopeCase{name: "an unknown board under filtered entries keeps nothing", old: oldCfg, new: cases[0].new, devs: unknown,
		after: cases[0].after, smoke: []string{"mig-2g.20gb", "mig-3g.40gb"}, why: "0 of 3 GPUs"})
	orphan := slices.Clone(three)
	orphan[0].GPU = ""
	cases = append(cases, scopeCase{name: "a device without parentUUID is not kept", old: oldCfg, new: cases[0].new, devs: orphan,
		after: cases[0].after, keep: slices.DeleteFunc(refs(three, 0, 2), func(r string) bool { return r == orphan[0].ref() }),
		smoke: []string{"mig-2g.20gb", "mig-3g.40gb"}, why: "1 devices name no GPU uuid"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := planDRADrainScope(tc.old, tc.new, tc.devs, tc.after, render.DRADriver)
			if d.DRA == nil || d.DRA.Driver != render.DRADriver {
				t.Fatalf("scope %+v has no DRA part", d)
			}
			if !slices.Equal(d.DRA.Keep, tc.keep) {
				t.Errorf("keep %v, want %v", d.DRA.Keep, tc.keep)
			}
			if !slices.Equal(d.Smoke, tc.smoke) {
				t.Errorf("smoke %v, want %v", d.Smoke, tc.smoke)
			}
			if !strings.Contains(d.Why, tc.why) {
				t.Errorf("why %q, want it to contain %q", d.Why, tc.why)
			}
			if len(d.Keep) != 0 {
				t.Errorf("keeps nvidia.com/ resources %v on a DRA node", d.Keep)
			}
		})
	}
}

// TestGateDRASmokeJobSchedules: the smoke Jobs of a DRA node can run. The node goes from split-a
// to split-c (every GPU resets; a DaemonSet pod keeps holding one of GPU 0's two 3g.40gb devices)
// with the gate cordoning it; the pods of its two smoke Jobs (made here from the Jobs' templates,
// with their claims from the ResourceClaimTemplates, as the Job and resource-claim controllers
// would) are bound to the cordoned node by the real kube-scheduler, which allocates the whole GPU
// to one and the one free 3g.40gb device to the other. When the Jobs complete the gate succeeds.
func TestGateDRASmokeJobSchedules(t *testing.T) {
	c := needAPI(t)
	startScheduler(t)
	createDeviceClasses(t, c)
	ctx := context.Background()
	ns := newNamespace(t, c, "drasmoke")
	node := nextNode("drasmoke")
	s := newDRASplit(t, node)
	cm := s.configMap(t, c, ns, "mig-parted")
	newSchedulableNode(t, c, node, 110, 0)
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	n.Labels[LabelMIGConfig], n.Labels[LabelMIGConfigState] = "split-a", MIGStateSuccess
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	publishDevices(ctx, c, node, s.devices["split-a"])
	held := "gpu-0-mig-3g40gb-0-0"
	claimPod(t, c, ns, node, "ds", false, true, render.DRADriver+"/"+held)
	d := &nodeDouble{c: c, node: node, draDevices: s.devices, smokeHang: true}
	startDouble(t, d)
	g := smokeGate(c, ns)
	g.MigConfigMap = client.ObjectKeyFromObject(cm)
	if err := g.RequestDRA(ctx, node, "split-c", DeviceExpectation{Driver: render.DRADriver, Devices: s.expect["split-c"]}); err != nil {
		t.Fatal(err)
	}
	gctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Run(gctx, node) }()
	var jobs batchv1.JobList
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{LabelNode: node}) == nil && len(jobs.Items) == 2, nil
	})
	if err != nil {
		t.Fatalf("%d smoke Jobs, want 2: %v", len(jobs.Items), err)
	}
	claims := map[string]string{} // claim → Job
	for _, j := range jobs.Items {
		tmpl := &resourcev1.ResourceClaimTemplate{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *j.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName}, tmpl); err != nil {
			t.Fatal(err)
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-pod", Namespace: ns, Labels: j.Spec.Template.Labels}, Spec: j.Spec.Template.Spec}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		// the claim the resource-claim controller makes from the template, owned by the pod
		claim := j.Name + "-pod-gpu"
		rc := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns, Labels: tmpl.Spec.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
			Spec: tmpl.Spec.Spec}
		if err := c.Create(ctx, rc); err != nil {
			t.Fatal(err)
		}
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: p.Spec.ResourceClaims[0].Name, ResourceClaimName: &claim}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		claims[claim] = j.Name
	}
	allocated := map[string][]string{}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for claim := range claims {
			rc := &resourcev1.ResourceClaim{}
			p := &corev1.Pod{}
			if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, rc) != nil || rc.Status.Allocation == nil ||
				c.Get(ctx, client.ObjectKey{Namespace: ns, Name: strings.TrimSuffix(claim, "-gpu")}, p) != nil || p.Spec.NodeName != node {
				return false, nil
			}
			allocated[claim] = nil
			for _, r := range rc.Status.Allocation.Devices.Results {
				allocated[claim] = append(allocated[claim], r.Device)
			}
		}
		return true, nil
	})
	if err != nil {
		var pods corev1.PodList
		_ = c.List(ctx, &pods, client.InNamespace(ns))
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q, conditions %+v", p.Name, p.Spec.NodeName, p.Status.Conditions)
		}
		t.Fatalf("the smoke pods were not bound to the cordoned node %s with their claims allocated (so far %v): %v", node, allocated, err)
	}
	var devs []string
	for _, ds := range allocated {
		devs = append(devs, ds...)
	}
	slices.Sort(devs)
	if want := []string{"gpu-0-mig-3g40gb-1-4", "gpu-1"}; !slices.Equal(devs, want) {
		t.Errorf("smoke claims allocated %v, want %v (the whole GPU and the 3g.40gb device %s does not hold)", devs, want, held)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		now := metav1.Now()
		j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "CompletionsReached"},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now, Reason: "CompletionsReached"}}
		if err := c.Status().Update(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n = checkSettled(t, c, node, "", "split-c")
	if res := n.Annotations[AnnotGateResult]; res != "success split-c" {
		t.Errorf("result %q", res)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
}
