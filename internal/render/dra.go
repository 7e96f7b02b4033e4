package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// NVIDIA's DRA driver for GPUs (k8s-dra-driver-gpu): its driver name, the DeviceClasses its chart
// installs, its opaque-config API version and kinds, sharing strategies and time-slice intervals.
const (
	DRADriver           = "gpu.nvidia.com"
	DeviceClassGPU      = "gpu.nvidia.com" // device.attributes['gpu.nvidia.com'].type == 'gpu'
	DeviceClassMIG      = "mig.nvidia.com" // device.attributes['gpu.nvidia.com'].type == 'mig'
	DRAConfigAPIVersion = "resource.nvidia.com/v1beta1"
	DRAKindGpuConfig    = "GpuConfig"
	DRAKindMigConfig    = "MigDeviceConfig"
	DRAStrategyTS       = "TimeSlicing"
	DRAStrategyMPS      = "MPS"
	DRAIntervalDefault  = "Default"
	// DRARequest is the name of the one request in every claim gpupool renders.
	DRARequest = "gpu"
	// AnnotationDevice names, on a shared claim, the device the plan placed its replicas on.
	AnnotationDevice = "gpupool.dev/device"
	// DRAMemorySlice prefixes the capacity the driver publishes per memory slice a MIG device
	// occupies (memorySlice0 … memorySlice7).
	DRAMemorySlice = "memorySlice"
)

// DRADeviceConfig is the driver's opaque device config (GpuConfig or MigDeviceConfig), with the
// fields gpupool sets. The driver decodes it strictly: MigDeviceConfig's sharing has no
// timeSlicingConfig.
type DRADeviceConfig struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Sharing    *DRASharing `json:"sharing,omitempty"`
}

// DRASharing is the config's sharing section.
type DRASharing struct {
	Strategy          string          `json:"strategy"`
	TimeSlicingConfig *DRATimeSlicing `json:"timeSlicingConfig,omitempty"`
	MpsConfig         *DRAMpsConfig   `json:"mpsConfig,omitempty"`
}

// DRATimeSlicing is GpuConfig's time-slicing settings. gpupool always sets the interval: the
// driver dereferences it when validating a timeSlicingConfig.
type DRATimeSlicing struct {
	Interval string `json:"interval"`
}

// DRAMpsConfig is the MPS daemon's defaults for every client of the device.
type DRAMpsConfig struct {
	DefaultActiveThreadPercentage  *int               `json:"defaultActiveThreadPercentage,omitempty"`
	DefaultPinnedDeviceMemoryLimit *resource.Quantity `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
}

// draClaimName names the claim of one shared device: <node>-gpu<i>[-<profile>-<start>]-<ts|mps>.
func draClaimName(d *device) string {
	s := fmt.Sprintf("%s-gpu%d", d.node, d.gpu)
	if d.instance != nil {
		s += fmt.Sprintf("-%s-%d", strings.NewReplacer(".", "-", "+", "-").Replace(d.instance.Profile), d.instance.Start)
	}
	switch d.kind {
	case v1.SliceMPS, v1.SliceMIGMPS:
		s += "-mps"
	default:
		s += "-ts"
	}
	return shorten(strings.ToLower(s))
}

// draRequest is the exact request for count devices like those of devs (one shared device, or
// the unshared devices of one Deployment group): the GPU class for a whole GPU, the MIG class
// with the profile for an instance and, where the GPU's placement is forced (forced), a selector
// on the instance's memory slices.
//
// What the selectors can pin is what NVIDIA's DRA driver publishes. Read in
// NVIDIA/k8s-dra-driver-gpu at commit 22407113785e78c7763b4637689a201eb39c6199,
// cmd/gpu-kubelet-plugin/deviceinfo.go (GpuInfo.Attributes, MigDeviceInfo.GetDevice) and
// cmd/gpu-kubelet-plugin/mig.go (CommonAttributesMig, CommonCapacitiesMig):
//   - a whole GPU publishes type, uuid, productName, brand, architecture, cudaComputeCapability,
//     driverVersion, cudaDriverVersion (and resource.kubernetes.io/pciBusID, pcieRoot where
//     known), but no index or minor: the driver dropped both in v25.8.0 ("Remove GPU index for
//     CDI spec generation / attribute advertisement", "Remove minor number from advertised GPU
//     attributes"). Nothing the plan knows names one GPU of a node, so whole-GPU requests carry
//     no selector; the pods' node affinity picks the node, and with static MIG a MIG-enabled GPU
//     publishes only its instances, so a whole-GPU claim lands on one of the GPUs the plan runs
//     with MIG off.
//   - a MIG device publishes its parent's uuid (parentUUID) and pciBusID, no parent index, and
//     one capacity memorySlice<i> (value 1) per memory slice it occupies, from the placement
//     start NVML reports. Profile plus every slice of the span pins the placement on a GPU; the
//     parent GPU cannot be pinned before the node's GPU UUIDs are known.
//
// mig-parted creates instances by count and the GPU driver chooses their starts, so the plan's
// starts are pinned only where every legal layout of the GPU's counts has them (forcedStarts);
// elsewhere a pinned claim could match no instance, and the request keeps the profile alone.
// Capacities are tested with has(): the driver publishes only the occupied slices, and a CEL
// reference to an absent field aborts the allocation.
func draRequest(devs []*device, count int, forced func(*device) bool, board string) resourcev1.DeviceRequest {
	d := devs[0]
	ex := &resourcev1.ExactDeviceRequest{DeviceClassName: DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(count)}
	if d.instance != nil {
		ex.DeviceClassName = DeviceClassMIG
		expr := fmt.Sprintf("device.attributes['%s'].profile == '%s'", DRADriver, d.instance.Profile)
		ex.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
		if pin, ok := draPlacementSelector(devs, forced); ok {
			ex.Selectors = append(ex.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: pin}})
		}
	}
	if board != "" {
		ex.Selectors = append(ex.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: board}})
	}
	return resourcev1.DeviceRequest{Name: DRARequest, Exactly: ex}
}

// draBoardSelector is the CEL expression that holds for a device of any board of devs, by the
// productName the driver publishes, when one of devs is on a node with GPUs of more than one
// board; "" elsewhere (the node affinity already fixes the board). The driver publishes the GPU's
// NVML name (nvmlDeviceGetName: "NVIDIA H100 80GB HBM3") as productName on a whole GPU and, its
// parent's, on a MIG device (cmd/gpu-kubelet-plugin/nvlib.go, deviceinfo.go GpuInfo.Attributes,
// mig.go CommonAttributesMig), so the selector lists the catalog's NVML names of the boards. A
// board whose NVML names the catalog lacks cannot be selected: its name is returned in unknown and
// the request is left without the selector.
func (m *model) draBoardSelector(devs []*device) (expr string, unknown []string) {
	mixed := false
	var names []string
	for _, d := range devs {
		mixed = mixed || m.mixedNode(d.node)
		if len(d.board.NVMLNames) == 0 {
			unknown = append(unknown, d.board.Name)
		}
		names = append(names, d.board.NVMLNames...)
	}
	if !mixed {
		return "", nil
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return "", slices.Compact(unknown)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	attr := fmt.Sprintf("device.attributes['%s'].productName", DRADriver)
	if len(names) == 1 {
		return fmt.Sprintf("%s == %s", attr, celString(names[0])), nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = celString(n)
	}
	return fmt.Sprintf("%s in [%s]", attr, strings.Join(quoted, ", ")), nil
}

// celString quotes s as a CEL string literal in single quotes.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// mixedNode tells whether the plan's node has GPUs of more than one board.
func (m *model) mixedNode(name string) bool {
	for _, n := range m.nodes {
		if n.name == name {
			return slices.ContainsFunc(n.gpus, func(g *gpuModel) bool { return g.board != n.gpus[0].board })
		}
	}
	return false
}

// anyMixedNode tells whether a node of the plan has GPUs of more than one board.
func (m *model) anyMixedNode() bool {
	return slices.ContainsFunc(m.nodes, func(n *node) bool { return m.mixedNode(n.name) })
}

// draRequestFor is draRequest with the board selector of devs, recording a problem, on a pool of
// the DRA path, where the board cannot be selected.
func (m *model) draRequestFor(what string, devs []*device, count int, forced func(*device) bool) resourcev1.DeviceRequest {
	board, unknown := m.draBoardSelector(devs)
	if len(unknown) > 0 && m.dra() {
		m.problem(devs[0].node, "", "%s: the node has GPUs of more than one board and the catalog knows no NVML name "+
			"(the productName NVIDIA's DRA driver publishes) of %s, so the claim cannot select the board and may "+
			"be given a device of another board of the node", what, strings.Join(unknown, ", "))
	}
	return draRequest(devs, count, forced, board)
}

// draPlacementSelector is the CEL expression that holds for a MIG device at any of the
// placements of devs (MIG instances of one profile): every memorySlice<i> capacity of the span,
// one span per distinct placement, or-ed. It reports false when one of them is not forced.
func draPlacementSelector(devs []*device, forced func(*device) bool) (string, bool) {
	var spans []string
	for _, d := range devs {
		if d.instance == nil || d.board == nil || !forced(d) {
			return "", false
		}
		p, err := d.board.Profile(d.instance.Profile)
		if err != nil || p.MemorySlices <= 0 {
			return "", false
		}
		terms := make([]string, p.MemorySlices)
		for i := range terms {
			terms[i] = fmt.Sprintf("has(device.capacity['%s'].%s%d)", DRADriver, DRAMemorySlice, d.instance.Start+i)
		}
		spans = append(spans, strings.Join(terms, " && "))
	}
	slices.Sort(spans)
	spans = slices.Compact(spans)
	if len(spans) == 1 {
		return spans[0], true
	}
	for i, s := range spans {
		spans[i] = "(" + s + ")"
	}
	return strings.Join(spans, " || "), true
}

// forcedStarts tells, per profile of counts, whether every legal layout of b with exactly those
// counts puts the profile's instances at the same starts: then mig-parted, whatever starts the
// driver picks, creates them there.
func forcedStarts(b *gpu.Board, counts map[string]int) map[string]bool {
	names := make([]string, 0, len(counts))
	for n, c := range counts {
		if c > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	seen := map[string]map[string]bool{}
	var cur gpu.Layout
	var walk func(pi, k, from int)
	walk = func(pi, k, from int) {
		if pi == len(names) {
			by := map[string][]string{}
			for _, in := range cur {
				by[in.Profile] = append(by[in.Profile], fmt.Sprint(in.Start))
			}
			for _, n := range names {
				if seen[n] == nil {
					seen[n] = map[string]bool{}
				}
				seen[n][strings.Join(by[n], ",")] = true
			}
			return
		}
		if k == counts[names[pi]] {
			walk(pi+1, 0, 0)
			return
		}
		starts, err := b.FreeStarts(cur, names[pi])
		if err != nil {
			return
		}
		for _, s := range starts {
			if s < from {
				continue
			}
			cur = append(cur, gpu.Instance{Profile: names[pi], Start: s})
			walk(pi, k+1, s+1)
			cur = cur[:len(cur)-1]
		}
	}
	walk(0, 0, 0)
	out := map[string]bool{}
	for _, n := range names {
		out[n] = len(seen[n]) == 1
	}
	return out
}

// draForced returns forced for the model's GPUs: whether a MIG device's start is the only one
// its GPU's counts allow.
func (m *model) draForced() func(*device) bool {
	type key struct {
		node string
		gpu  int
	}
	byGPU := map[key]map[string]bool{}
	for _, n := range m.nodes {
		for _, g := range n.gpus {
			if g.plan.Mode != v1.ModeMIG || g.board == nil || len(g.plan.Instances) == 0 {
				continue
			}
			byGPU[key{n.name, g.plan.Index}] = forcedStarts(g.board, planLayout(g.plan).Counts())
		}
	}
	return func(d *device) bool {
		return d.instance != nil && byGPU[key{d.node, d.gpu}][d.instance.Profile]
	}
}

// draConfig is the opaque config of a shared device: time-slicing, or MPS with the largest SM
// percentage and pinned-memory limit of its replicas as the daemon's defaults (the MPS client of
// each replica can lower its own); the second value says whether the replicas' limits differ.
func draConfig(d *device) (DRADeviceConfig, bool) {
	c := DRADeviceConfig{APIVersion: DRAConfigAPIVersion, Kind: DRAKindGpuConfig}
	if d.instance != nil {
		c.Kind = DRAKindMigConfig
	}
	switch d.kind {
	case v1.SliceTimeSlice:
		c.Sharing = &DRASharing{Strategy: DRAStrategyTS, TimeSlicingConfig: &DRATimeSlicing{Interval: DRAIntervalDefault}}
	case v1.SliceMIGTimeSlice:
		c.Sharing = &DRASharing{Strategy: DRAStrategyTS}
	case v1.SliceMPS, v1.SliceMIGMPS:
		sm, mem, differ := 0, v1.Bytes(0), false
		for i, r := range d.replicas {
			if i > 0 && (r.Limits.SMPercent != sm || r.Limits.Memory != mem) {
				differ = true
			}
			sm, mem = max(sm, r.Limits.SMPercent), max(mem, r.Limits.Memory)
		}
		mps := &DRAMpsConfig{}
		if sm > 0 {
			mps.DefaultActiveThreadPercentage = &sm
		}
		if mem > 0 {
			q := resource.NewQuantity(int64(mem), resource.BinarySI)
			mps.DefaultPinnedDeviceMemoryLimit = q
		}
		c.Sharing = &DRASharing{Strategy: DRAStrategyMPS, MpsConfig: mps}
		return c, differ
	}
	return c, false
}

func opaque(c DRADeviceConfig) ([]resourcev1.DeviceClaimConfiguration, error) {
	if c.Sharing == nil {
		return nil, nil
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return []resourcev1.DeviceClaimConfiguration{{Requests: []string{DRARequest}, DeviceConfiguration: resourcev1.DeviceConfiguration{
		Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: DRADriver, Parameters: runtime.RawExtension{Raw: raw}}}}}, nil
}

// draArtifacts renders the claims for NVIDIA's DRA driver (resource.k8s.io/v1), the second device
// path beside the device plugin: dra/<tenant>.yaml holds a ResourceClaimTemplate per Deployment
// group of unshared devices (each pod its own whole GPU or MIG instance of the profile), and
// dra/shared.yaml one named ResourceClaim per shared device (time-slicing or MPS, whole GPU or MIG
// instance), which every pod the plan places on that device references, so the replicas the plan
// puts together land on one device (draRequest says what pins which device). MPS on MIG instances needs no hostPath or hostIPC there: the
// driver runs the MPS daemon for the claim.
func draArtifacts(m *model) ([]Artifact, error) {
	by, names := m.replicasByTenant()
	forced := m.draForced()
	var out []Artifact
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: managedLabels()}
	}
	for _, name := range names {
		if !servesLLM(m.tenants[name]) {
			continue
		}
		var docs []string
		for _, g := range m.groups(name, by[name]) {
			d := g.replicas[0].d
			if d.shared() {
				continue
			}
			devs := make([]*device, len(g.replicas))
			for i, r := range g.replicas {
				devs[i] = r.d
			}
			t := resourcev1.ResourceClaimTemplate{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
				ObjectMeta: meta(g.name),
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{m.draRequestFor("ResourceClaimTemplate "+g.name, devs, g.count, forced)}}}}}
			t.Labels[LabelTenant] = name
			b, err := yaml.Marshal(t)
			if err != nil {
				return nil, fmt.Errorf("render dra: tenant %s: %w", name, err)
			}
			docs = append(docs, string(b))
		}
		if len(docs) > 0 {
			out = append(out, Artifact{Path: "dra/" + name + ".yaml", Data: []byte(strings.Join(docs, "---\n"))})
		}
	}
	var shared []string
	for _, d := range m.devices() {
		if !d.shared() || len(d.replicas) == 0 {
			continue
		}
		cfg, differ := draConfig(d)
		conf, err := opaque(cfg)
		if err != nil {
			return nil, fmt.Errorf("render dra: %s: %w", d.where(), err)
		}
		if differ {
			m.notes = append(m.notes, fmt.Sprintf("DRA claim %s: its replicas' MPS limits differ; the claim's MPS defaults are the largest of them, and a replica held to less must set CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in its own container.", draClaimName(d)))
		}
		c := resourcev1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
			ObjectMeta: meta(draClaimName(d)),
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{m.draRequestFor("ResourceClaim "+draClaimName(d), []*device{d}, 1, forced)}, Config: conf}}}
		var users []string
		for _, r := range d.replicas {
			users = append(users, fmt.Sprintf("%s#%d", r.Tenant, r.Index))
		}
		c.Annotations = map[string]string{AnnotationDevice: d.where(), AnnotationSlots: strings.Join(users, ", ")}
		b, err := yaml.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("render dra: %s: %w", d.where(), err)
		}
		shared = append(shared, string(b))
	}
	if len(shared) > 0 {
		head := "# One ResourceClaim per shared device, for NVIDIA's DRA driver. Every pod the plan places on the\n" +
			"# device references it (resourceClaims: [{name: gpu, resourceClaimName: NAME}]); claims are\n" +
			"# namespaced, so the tenants sharing a device must run in the claim's namespace.\n"
		out = append(out, Artifact{Path: "dra/shared.yaml", Data: []byte(head + strings.Join(shared, "---\n"))})
	}
	return out, nil
}
