package render

import (
	"encoding/json"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
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

// draRequest is the exact request for count devices like d: the GPU class for a whole GPU, the
// MIG class with the profile for an instance. It does not pin the instance's start (the driver
// advertises a memorySlice<i> capacity per slice an instance occupies): mig-parted creates
// instances by count and the GPU driver chooses their starts, so a pinned claim could match no
// instance. The pods' node affinity picks the node, and one claim per device keeps the replicas
// the plan puts together on one instance.
func draRequest(d *device, count int) resourcev1.DeviceRequest {
	ex := &resourcev1.ExactDeviceRequest{DeviceClassName: DeviceClassGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(count)}
	if d.instance != nil {
		ex.DeviceClassName = DeviceClassMIG
		expr := fmt.Sprintf("device.attributes['%s'].profile == '%s'", DRADriver, d.instance.Profile)
		ex.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	return resourcev1.DeviceRequest{Name: DRARequest, Exactly: ex}
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
// instance), which every pod the plan places on that device references, so tenants land on
// exactly the device the plan chose. MPS on MIG instances needs no hostPath or hostIPC there: the
// driver runs the MPS daemon for the claim.
func draArtifacts(m *model) ([]Artifact, error) {
	by, names := m.replicasByTenant()
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
			t := resourcev1.ResourceClaimTemplate{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
				ObjectMeta: meta(g.name),
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{draRequest(d, g.count)}}}}}
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
				Requests: []resourcev1.DeviceRequest{draRequest(d, 1)}, Config: conf}}}
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
