package k8s

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/migparted"
	"gpupool.dev/gpupool/internal/render"
)

// The MIG gate on a node whose GPUs a DRA driver publishes (a GPUPool with
// policy.kubernetesDeviceAPI dra). The node advertises no nvidia.com/ allocatable: NVIDIA's DRA
// driver (k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin) publishes the node's devices in
// ResourceSlices, and a pod holds a device through an allocated ResourceClaim. With static MIG
// (the driver's default; its DynamicMIG gate is alpha and off) a MIG-enabled GPU publishes only
// its MIG devices (attributes type=mig, profile, uuid, parentUUID; device name
// gpu-<minor>-mig-<profile>-<profileID>-<start>) and a GPU with MIG off publishes itself (type=gpu,
// uuid; device name gpu-<minor>). No attribute carries the GPU's index as mig-parted counts it
// (NVML's index, which need not equal the device minor in the name).

// driverDevice is one device a DRA driver publishes on a node.
type driverDevice struct {
	Pool, Name string
	// Key is render.DRADeviceKey of the device: "gpu", "mig-<profile>".
	Key string
	// GPU identifies the physical GPU: the uuid of a whole GPU, the parentUUID of a MIG device;
	// empty when the device carries neither.
	GPU string
	// MIG is set for a MIG device (type mig); Profile is its profile.
	MIG     bool
	Profile string
	// Product is the GPU's productName attribute ("NVIDIA H100 80GB HBM3").
	Product string
}

func (d driverDevice) ref() string { return d.Pool + "/" + d.Name }

func strAttr(d resourcev1.Device, name string) string {
	if v := d.Attributes[resourcev1.QualifiedName(name)].StringValue; v != nil {
		return *v
	}
	return ""
}

// nodeDriverDevices lists the devices driver publishes for node, from each of its pools' newest
// generation of ResourceSlices. incomplete, when not empty, says why the list is not whole yet (a
// pool whose newest generation has fewer slices than it announces: the driver is republishing).
func nodeDriverDevices(ctx context.Context, c client.Client, node, driver string) (devs []driverDevice, incomplete string, err error) {
	var l resourcev1.ResourceSliceList
	if err := c.List(ctx, &l, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, "", fmt.Errorf("gate node %s: list ResourceSlices: %w", node, err)
	}
	byNode, partial := driverDevices(l.Items, driver)
	return byNode[node], strings.Join(partial[node], ", "), nil
}

// driverDevices lists, per node, the devices driver publishes in rss, from each of the node's
// pools' newest generation; partial names, per node, the pools whose newest generation has fewer
// slices than it announces. A device without a type attribute is left out.
func driverDevices(rss []resourcev1.ResourceSlice, driver string) (byNode map[string][]driverDevice, partial map[string][]string) {
	type poolKey struct{ node, pool string }
	newest := map[poolKey]int64{}
	for _, rs := range rss {
		if rs.Spec.Driver == driver && rs.Spec.NodeName != nil {
			k := poolKey{*rs.Spec.NodeName, rs.Spec.Pool.Name}
			newest[k] = max(newest[k], rs.Spec.Pool.Generation)
		}
	}
	seen, want := map[poolKey]int64{}, map[poolKey]int64{}
	byNode = map[string][]driverDevice{}
	for _, rs := range rss {
		if rs.Spec.Driver != driver || rs.Spec.NodeName == nil {
			continue
		}
		p := rs.Spec.Pool
		k := poolKey{*rs.Spec.NodeName, p.Name}
		if p.Generation != newest[k] {
			continue
		}
		seen[k]++
		want[k] = p.ResourceSliceCount
		for _, d := range rs.Spec.Devices {
			typ := strAttr(d, "type")
			if typ == "" {
				continue
			}
			dd := driverDevice{Pool: p.Name, Name: d.Name, Key: render.DRADeviceKey(typ, strAttr(d, "profile")), GPU: strAttr(d, "uuid"), Product: strAttr(d, "productName")}
			if typ == "mig" {
				dd.MIG, dd.Profile, dd.GPU = true, strAttr(d, "profile"), strAttr(d, "parentUUID")
			}
			byNode[k.node] = append(byNode[k.node], dd)
		}
	}
	partial = map[string][]string{}
	for _, k := range slices.SortedFunc(maps.Keys(seen), func(a, b poolKey) int {
		return strings.Compare(a.node+"\x00"+a.pool, b.node+"\x00"+b.pool)
	}) {
		if seen[k] < want[k] {
			partial[k.node] = append(partial[k.node], fmt.Sprintf("pool %s has %d of %d ResourceSlices of generation %d", k.pool, seen[k], want[k], newest[k]))
		}
	}
	return byNode, partial
}

// devicesMismatch says how the devices the DRA driver publishes on n differ from the expectation:
// every expected key at its count and no other key of type gpu or mig above zero (devices of other
// types, such as the driver's passthrough devices, are not compared).
func (g *MIGGate) devicesMismatch(ctx context.Context, n *corev1.Node, exp *DeviceExpectation) (string, error) {
	devs, incomplete, err := nodeDriverDevices(ctx, g.C, n.Name, exp.Driver)
	if err != nil {
		return "", err
	}
	if incomplete != "" {
		return incomplete, nil
	}
	got := map[string]int64{}
	for _, d := range devs {
		if d.Key == "gpu" || d.MIG {
			got[d.Key]++
		}
	}
	return countsMismatch(got, exp.Devices), nil
}

// countsMismatch lists, in name order, the keys of want whose count in got differs and the keys
// of got above zero that want lacks.
func countsMismatch(got, want map[string]int64) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s=%d want %d", k, got[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok && got[k] > 0 {
			diffs = append(diffs, fmt.Sprintf("%s=%d want 0", k, got[k]))
		}
	}
	return strings.Join(diffs, ", ")
}

// podClaimDevices lists the devices of driver that p holds through its allocated ResourceClaims,
// as "<pool>/<device>". unknown names a claim of p that could not be found (the pod may hold
// anything through it). A claim not allocated yet holds nothing.
func podClaimDevices(ctx context.Context, c client.Client, p *corev1.Pod, driver string) (devs []string, unknown string, err error) {
	for _, pc := range p.Spec.ResourceClaims {
		var name string
		switch {
		case pc.ResourceClaimName != nil:
			name = *pc.ResourceClaimName
		default: // from a template: the claim made for the pod is in its status
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == pc.Name && st.ResourceClaimName != nil {
					name = *st.ResourceClaimName
				}
			}
			if name == "" {
				continue // no claim made yet (or none needed): the pod holds no device through it
			}
		}
		rc := &resourcev1.ResourceClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, rc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, name, nil
			}
			return nil, "", fmt.Errorf("pod %s/%s: ResourceClaim %s: %w", p.Namespace, p.Name, name, err)
		}
		if rc.Status.Allocation == nil {
			continue
		}
		for _, r := range rc.Status.Allocation.Devices.Results {
			if r.Driver == driver {
				devs = append(devs, r.Pool+"/"+r.Device)
			}
		}
	}
	return devs, "", nil
}

// draScope is the drain scope's part on a node whose GPUs a DRA driver publishes.
type draScope struct {
	Driver string `json:"driver"`
	// Keep lists the devices ("<pool>/<device>") on GPUs whose MIG devices do not change: a pod
	// whose claims hold only these (and that asks for no nvidia.com/ resource) stays. Empty: every
	// pod holding a device of Driver is drained.
	Keep []string `json:"keep,omitempty"`
}

// entryLayout is what an entry makes of a GPU: "off" (MIG disabled) or its MIG devices.
func entryLayout(e migparted.Entry) string {
	if !e.MigEnabled {
		return "off"
	}
	return "mig " + gpu.MultisetKey(e.MigDevices)
}

// applying keeps the entries of es whose device filter selects a GPU of board b. uncertain: an
// entry has a filter and the board is not known, so whether it applies is not known.
func applying(es []migparted.Entry, b *gpu.Board) (out []migparted.Entry, uncertain bool) {
	for _, e := range es {
		switch {
		case e.DeviceFilter == nil:
			out = append(out, e)
		case b == nil:
			out, uncertain = append(out, e), true
		case slices.ContainsFunc(e.DeviceFilter, func(id string) bool { return slices.Contains(gpu.ByPCIDeviceID(id), b) }):
			out = append(out, e)
		}
	}
	return out, uncertain
}

// planDRADrainScope decides, on a node whose GPUs driver publishes as devs, which devices' pods
// may stay while the node goes from config old to new, GPU by GPU. mig-parted leaves a GPU alone
// when its MIG devices already equal what the new config asks of it, and resets every GPU when
// one's MIG mode changes. The driver publishes no GPU index, so a published GPU (its uuid, with the
// MIG devices whose parentUUID it is) is matched to the configs by what it publishes: its
// candidates are the GPU indices (classes) where the old config gives it exactly those devices
// (or leaves it alone). It keeps its devices when every candidate's new entries give it the same
// devices again. Where unsure (a device without uuid or parentUUID, a GPU publishing itself and MIG
// devices at once, a device filter that cannot be matched to its board, no candidate) its
// devices are not kept. after is the expectation; the smoke Jobs test the kinds of which more
// are expected than the kept GPUs publish.
func planDRADrainScope(old, new *migparted.NamedConfig, devs []driverDevice, after map[string]int64, driver string) drainScope {
	keys := positive(slices.Sorted(maps.Keys(after)), after)
	every := func(why string) drainScope {
		return drainScope{Smoke: keys, Why: why, DRA: &draScope{Driver: driver}}
	}
	if old == nil || new == nil {
		return every(unknownConfigs)
	}
	classes, changedCls, reset := classChanges(old, new)
	if reset != "" {
		return every(reset)
	}
	type published struct {
		product string
		whole   int
		mig     map[string]int
		devs    []driverDevice
	}
	gpus := map[string]*published{}
	orphans := 0
	for _, d := range devs {
		if d.GPU == "" {
			orphans++
			continue
		}
		p := gpus[d.GPU]
		if p == nil {
			p = &published{product: d.Product, mig: map[string]int{}}
			gpus[d.GPU] = p
		}
		p.devs = append(p.devs, d)
		switch {
		case d.MIG:
			p.mig[d.Profile]++
		case d.Key == "gpu":
			p.whole++
		}
	}
	var keep, keptGPUs []string
	keptKeys := map[string]int64{}
	for _, id := range slices.Sorted(maps.Keys(gpus)) {
		p := gpus[id]
		var layout string
		switch {
		case p.whole == 1 && len(p.mig) == 0:
			layout = "off"
		case p.whole == 0 && len(p.mig) > 0:
			layout = "mig " + gpu.MultisetKey(p.mig)
		default:
			continue // a whole GPU beside MIG devices (dynamic MIG), or more than one: not understood
		}
		b, _ := gpu.Lookup(p.product) // nil when the catalog does not know the board
		candidates, stays := 0, true
		for _, c := range classes {
			o, uo := applying(covering(old, c), b)
			if !uo && len(o) > 0 && !slices.ContainsFunc(o, func(e migparted.Entry) bool { return entryLayout(e) == layout }) {
				continue // under the old config this GPU would not publish what it does
			}
			candidates++
			n, un := applying(covering(new, c), b)
			if un || slices.ContainsFunc(n, func(e migparted.Entry) bool { return entryLayout(e) != layout }) {
				stays = false
			}
		}
		if candidates == 0 || !stays {
			continue
		}
		keptGPUs = append(keptGPUs, id)
		for _, d := range p.devs {
			keep = append(keep, d.ref())
			keptKeys[d.Key]++
		}
	}
	slices.Sort(keep)
	var smoke []string
	for _, k := range keys {
		if after[k] > keptKeys[k] {
			smoke = append(smoke, k)
		}
	}
	why := "no GPU index's entries change"
	if len(changedCls) > 0 {
		names := make([]string, len(changedCls))
		for i, c := range changedCls {
			names[i] = className(c)
		}
		why = fmt.Sprintf("entries change for %s only", strings.Join(names, ", "))
	}
	why += fmt.Sprintf("; %d of %d GPUs the driver publishes keep their devices (matched to the configs by the devices they publish, the driver publishing no GPU index)", len(keptGPUs), len(gpus))
	if len(keptGPUs) > 0 {
		why += ": " + joinShort(keptGPUs, 8)
	}
	if orphans > 0 {
		why += fmt.Sprintf("; %d devices name no GPU uuid and are not kept", orphans)
	}
	return drainScope{Smoke: smoke, Why: why, DRA: &draScope{Driver: driver, Keep: keep}}
}

// draDrained says whether p must be drained on a DRA node: it holds, through its claims, a device
// of the scope's driver that the scope does not keep, or a claim of it cannot be found.
func (g *MIGGate) draDrained(ctx context.Context, p *corev1.Pod, s *draScope) (bool, error) {
	if len(p.Spec.ResourceClaims) == 0 {
		return false, nil
	}
	devs, unknown, err := podClaimDevices(ctx, g.C, p, s.Driver)
	if err != nil || unknown != "" {
		return unknown != "", err
	}
	return slices.ContainsFunc(devs, func(d string) bool { _, ok := slices.BinarySearch(s.Keep, d); return !ok }), nil
}

// draSmokeJob builds the Job testing the devices of kind key ("gpu", "mig-<profile>") on a DRA
// node, and creates the ResourceClaimTemplate its pod takes them from: as many devices of the kind
// as the node publishes and no allocated claim holds (at least one), from the DeviceClass of
// NVIDIA's chart for the type (gpu.nvidia.com, or mig.nvidia.com with a CEL selector on the
// profile). A claim must be allocated by the scheduler, so the pod is not bound with nodeName: it
// is placed on the node by node affinity on the node's name (metadata.name, as the DaemonSet
// controller does) and tolerates the cordon. The template, like the Job, is owned by the
// Reconfiguration; the claim made from it goes with the pod.
func (g *MIGGate) draSmokeJob(ctx context.Context, n *corev1.Node, exp *DeviceExpectation, record, name, key string) (*batchv1.Job, error) {
	req := resourcev1.ExactDeviceRequest{DeviceClassName: render.DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount}
	if prof, ok := strings.CutPrefix(key, "mig-"); ok {
		req.DeviceClassName = render.DeviceClassMIG
		req.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes['%s'].profile == '%s'", exp.Driver, prof)}}}
	} else if key != "gpu" {
		return nil, fmt.Errorf("%w: no device class for devices of kind %q", errSmokeRefused, key)
	}
	free, err := g.freeDevices(ctx, n, exp.Driver, key)
	if err != nil {
		return nil, err
	}
	req.Count = free
	r := &Reconfiguration{}
	if err := g.C.Get(ctx, client.ObjectKey{Name: record}, r); err != nil {
		return nil, fmt.Errorf("gate node %s: reconfiguration %s: %w", n.Name, record, err)
	}
	labels := map[string]string{LabelNode: n.Name, LabelReconfiguration: record}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Smoke.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: GroupVersion.String(), Kind: "Reconfiguration", Name: r.Name, UID: r.UID}}},
		Spec: resourcev1.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: render.DRARequest, Exactly: &req}}}}},
	}
	g.hook("before:smoke-template")
	if err := g.C.Create(ctx, tmpl); err != nil && !apierrors.IsAlreadyExists(err) {
		if refused(err) {
			return nil, fmt.Errorf("%w: ResourceClaimTemplate: %v", errSmokeRefused, err)
		}
		return nil, fmt.Errorf("gate node %s: create ResourceClaimTemplate %s/%s: %w", n.Name, g.Smoke.Namespace, name, err)
	}
	g.hook("after:smoke-template")
	pod := g.smokePod(n, record)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}}}}}}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: render.DRARequest, ResourceClaimTemplateName: &tmpl.Name}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: render.DRARequest}}
	return g.smokeJobOf(r, name, n.Name, pod), nil
}

// freeDevices counts the devices of kind key that driver publishes on n and no allocated
// ResourceClaim holds (claims of smoke pods aside), at least 1: the smoke pod takes every free
// device of the kind, so it cannot be given only devices on GPUs that did not change.
func (g *MIGGate) freeDevices(ctx context.Context, n *corev1.Node, driver, key string) (int64, error) {
	devs, _, err := nodeDriverDevices(ctx, g.C, n.Name, driver)
	if err != nil {
		return 0, err
	}
	free := map[string]bool{}
	for _, d := range devs {
		if d.Key == key {
			free[d.ref()] = true
		}
	}
	var claims resourcev1.ResourceClaimList
	if err := g.C.List(ctx, &claims); err != nil {
		return 0, fmt.Errorf("gate node %s: list ResourceClaims: %w", n.Name, err)
	}
	for _, rc := range claims.Items {
		if rc.Status.Allocation == nil || rc.Labels[LabelReconfiguration] != "" {
			continue
		}
		for _, r := range rc.Status.Allocation.Devices.Results {
			if r.Driver == driver {
				delete(free, r.Pool+"/"+r.Device)
			}
		}
	}
	return max(int64(len(free)), 1), nil
}
