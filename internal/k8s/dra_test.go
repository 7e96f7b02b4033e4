package k8s

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/render"
)

// TestDRAClaimsAccepted creates NVIDIA's DRA DeviceClasses (as the driver's chart defines them)
// and every ResourceClaim and ResourceClaimTemplate the renderer's golden outputs hold (the
// render package's golden test keeps them equal to what it renders) on the real API server:
// resource.k8s.io/v1 validation, CEL selector compilation and the opaque config's size and
// driver name are checked there.
func TestDRAClaimsAccepted(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	createDeviceClasses(t, c)
	files, err := filepath.Glob("../render/testdata/golden/*/dra/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rendered DRA files: %v", err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		ns := newNamespace(t, c, "dra")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := DecodeObjects(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, u := range objs {
			u.SetNamespace(ns)
			if err := c.Create(ctx, u); err != nil {
				t.Errorf("%s: %s %s: %v", f, u.GetKind(), u.GetName(), err)
				continue
			}
			kinds[u.GetKind()]++
		}
	}
	if kinds["ResourceClaim"] == 0 || kinds["ResourceClaimTemplate"] == 0 {
		t.Errorf("created %v, want both kinds", kinds)
	}
	// The API server does check: a selector that does not compile is refused.
	bad := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: newNamespace(t, c, "dra")},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: render.DeviceClassMIG, Selectors: []resourcev1.DeviceSelector{{
				CEL: &resourcev1.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].profile =="}}}}}}}}}
	if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) {
		t.Errorf("a claim with a broken selector: %v, want invalid", err)
	}
	t.Logf("created %v from %d files", kinds, len(files))
}

// createDeviceClasses creates NVIDIA's DRA DeviceClasses as the driver's chart defines them.
func createDeviceClasses(t *testing.T, c client.Client) {
	t.Helper()
	for name, typ := range map[string]string{render.DeviceClassGPU: "gpu", render.DeviceClassMIG: "mig"} {
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '" + typ + "'"}}}}}
		if err := c.Create(context.Background(), dc); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// renderedClaim reads one ResourceClaim by name from the all-modes golden dra/shared.yaml.
func renderedClaim(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("../render/testdata/golden/all-modes/dra/shared.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetName() == name {
			return u
		}
	}
	t.Fatalf("claim %s not rendered", name)
	return nil
}

// TestDRAClaimsScheduled: a driver double publishes, as NVIDIA's DRA driver does, a ResourceSlice
// for one node with a whole GPU and three MIG devices (attributes type, profile, uuid, parentUUID;
// memorySlice capacities), and the real kube-scheduler allocates the rendered shared claims: the
// two pods sharing the time-sliced 1g.10gb claim get the 1g.10gb device and one node, the MPS
// 3g.40gb claim, whose placement the plan's counts force to start 4, gets the 3g.40gb device at
// start 4 and not the one at start 0 listed before it, and a claim for a profile the node lacks
// stays unallocated with its pod unscheduled.
func TestDRAClaimsScheduled(t *testing.T) {
	c := needAPI(t)
	startScheduler(t)
	ctx := context.Background()
	createDeviceClasses(t, c)
	node := nextNode("dra")
	newSchedulableNode(t, c, node, 110, 0)
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	one := resourcev1.DeviceCapacity{Value: resource.MustParse("1")}
	mig := func(name, profile string, start, size int) resourcev1.Device {
		d := resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("mig"), "profile": str(profile), "uuid": str("MIG-" + name), "parentUUID": str("GPU-" + strings.Split(name, "-")[1]), "productName": str("NVIDIA H100 80GB HBM3")},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}}
		for i := start; i < start+size; i++ {
			d.Capacity[resourcev1.QualifiedName(fmt.Sprintf("memorySlice%d", i))] = one
		}
		return d
	}
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: render.DRADriver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{
			{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"type": str("gpu"), "uuid": str("GPU-0"), "productName": str("NVIDIA H100 80GB HBM3")}},
			mig("gpu-1-mig-1g10gb-0", "1g.10gb", 0, 1),
			mig("gpu-2-mig-3g40gb-0", "3g.40gb", 0, 4), // not the plan's placement; listed first
			mig("gpu-1-mig-3g40gb-4", "3g.40gb", 4, 4),
		}}}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, c, "drasched")
	for _, name := range []string{"n3-gpu0-1g-10gb-0-ts", "n3-gpu0-3g-40gb-4-mps"} {
		u := renderedClaim(t, name)
		u.SetNamespace(ns)
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// a claim for a profile the node does not have: the rendered 1g.10gb claim with another profile
	missing := renderedClaim(t, "n3-gpu0-1g-10gb-0-ts")
	missing.SetName("missing-2g")
	missing.SetNamespace(ns)
	reqs, _, _ := unstructured.NestedSlice(missing.Object, "spec", "devices", "requests")
	ex := reqs[0].(map[string]any)["exactly"].(map[string]any)
	ex["selectors"] = []any{map[string]any{"cel": map[string]any{"expression": "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}}
	if err := unstructured.SetNestedSlice(missing.Object, reqs, "spec", "devices", "requests"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	pod := func(name, claim string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}},
				Containers: []corev1.Container{{Name: "vllm", Image: render.Image, Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pod("rare-a-3", "n3-gpu0-1g-10gb-0-ts")
	pod("rare-b-2", "n3-gpu0-1g-10gb-0-ts")
	pod("embed-1", "n3-gpu0-3g-40gb-4-mps")
	pod("nowhere", "missing-2g")
	allocated := func(claim string) string {
		var rc resourcev1.ResourceClaim
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &rc); err != nil || rc.Status.Allocation == nil || len(rc.Status.Allocation.Devices.Results) != 1 {
			return ""
		}
		return rc.Status.Allocation.Devices.Results[0].Device
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				bound++
			}
		}
		return bound == 3, nil
	})
	if err != nil {
		t.Fatalf("the three pods with satisfiable claims were not bound to %s: %v", node, err)
	}
	if d := allocated("n3-gpu0-1g-10gb-0-ts"); d != "gpu-1-mig-1g10gb-0" {
		t.Errorf("time-sliced 1g.10gb claim allocated %q, want gpu-1-mig-1g10gb-0", d)
	}
	if d := allocated("n3-gpu0-3g-40gb-4-mps"); d != "gpu-1-mig-3g40gb-4" {
		t.Errorf("MPS 3g.40gb claim allocated %q, want gpu-1-mig-3g40gb-4", d)
	}
	var rc resourcev1.ResourceClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "n3-gpu0-1g-10gb-0-ts"}, &rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.Status.ReservedFor) != 2 {
		t.Errorf("shared claim reserved for %v, want both pods", rc.Status.ReservedFor)
	}
	time.Sleep(time.Second) // the scheduler has had its chance at the last pod too
	if d := allocated("missing-2g"); d != "" {
		t.Errorf("a claim for a profile the node lacks was allocated %q", d)
	}
	p := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nowhere"}, p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("pod with an unsatisfiable claim bound to %s", p.Spec.NodeName)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
}

// renderedTemplateClaim is a ResourceClaim with the spec of one ResourceClaimTemplate of a golden
// dra/<tenant>.yaml, named after it: what the resource-claim controller creates for a pod of the
// template (that controller runs in kube-controller-manager, which these tests do not start).
func renderedTemplateClaim(t *testing.T, file, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() != "ResourceClaimTemplate" || u.GetName() != name {
			continue
		}
		spec, ok, err := unstructured.NestedMap(u.Object, "spec", "spec")
		if err != nil || !ok {
			t.Fatalf("%s %s: no spec.spec: %v", file, name, err)
		}
		c := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "spec": spec}}
		c.SetName(name)
		return c
	}
	t.Fatalf("template %s not rendered in %s", name, file)
	return nil
}

// TestDRAClaimsSelectBoardScheduled: a driver double publishes, as NVIDIA's DRA driver does, a
// node with an A30 and an H100 (whole GPUs with type, uuid and productName, the NVML name; the
// A30 listed first), and the real kube-scheduler allocates the claims of the mixed-board golden
// plan's templates: big (Llama 70B-sized, planned on the H100) gets the H100 and small the A30,
// in either order of creation; without the productName selector big's claim takes the A30.
func TestDRAClaimsSelectBoardScheduled(t *testing.T) {
	c := needAPI(t)
	startScheduler(t)
	ctx := context.Background()
	createDeviceClasses(t, c)
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }
	gpu := func(name, product string) resourcev1.Device {
		return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("gpu"), "uuid": str("GPU-" + name), "productName": str(product), "brand": str("Nvidia")}}
	}
	const dir = "../render/testdata/golden/mixed-board-dra/dra/"
	allocated := func(ns, claim string) string {
		var rc resourcev1.ResourceClaim
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &rc); err != nil || rc.Status.Allocation == nil || len(rc.Status.Allocation.Devices.Results) != 1 {
			return ""
		}
		return rc.Status.Allocation.Devices.Results[0].Device
	}
	// run creates a node with its ResourceSlice, then the claims of the named templates
	// (tenant/template) and a pod on the node for each, one at a time in that order, and returns
	// the device each claim was allocated.
	run := func(strip bool, order ...string) map[string]string {
		node := nextNode("mixed")
		newSchedulableNode(t, c, node, 110, 0)
		slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu.nvidia.com"}, Spec: resourcev1.ResourceSliceSpec{
			Driver: render.DRADriver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{gpu("gpu-0", "NVIDIA A30"), gpu("gpu-1", "NVIDIA H100 80GB HBM3")}}}
		if err := c.Create(ctx, slice); err != nil {
			t.Fatal(err)
		}
		ns := newNamespace(t, c, "draboard")
		got := map[string]string{}
		for _, tt := range order {
			tenant, tmpl, _ := strings.Cut(tt, "/")
			u := renderedTemplateClaim(t, dir+tenant+".yaml", tmpl)
			if strip {
				reqs, _, _ := unstructured.NestedSlice(u.Object, "spec", "devices", "requests")
				delete(reqs[0].(map[string]any)["exactly"].(map[string]any), "selectors")
				if err := unstructured.SetNestedSlice(u.Object, reqs, "spec", "devices", "requests"); err != nil {
					t.Fatal(err)
				}
			}
			u.SetNamespace(ns)
			if err := c.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
			claim := tmpl
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tenant, Namespace: ns},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": node}, ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}},
					Containers: []corev1.Container{{Name: "vllm", Image: render.Image, Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}}}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				return allocated(ns, tmpl) != "", nil
			}); err != nil {
				t.Fatalf("claim %s (selectors stripped: %v) not allocated: %v", tmpl, strip, err)
			}
			got[tenant] = allocated(ns, tmpl)
		}
		if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[string]string{"big": "gpu-1", "small": "gpu-0"}
	for _, order := range [][]string{{"big/big-gpu", "small/small-gpu"}, {"small/small-gpu", "big/big-gpu"}} {
		if got := run(false, order...); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("created in order %v: allocated %v, want %v", order, got, want)
		}
	}
	if got := run(true, "big/big-gpu", "small/small-gpu"); got["big"] != "gpu-0" {
		t.Errorf("without selectors big's claim got %v; the test no longer shows what the selector prevents", got)
	}
}
