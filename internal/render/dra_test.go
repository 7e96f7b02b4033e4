package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

// The DRA driver's opaque config as its decoder sees it (api/nvidia.com/resource/v1beta1 of
// NVIDIA/k8s-dra-driver-gpu: gpuconfig.go, migconfig.go, sharing.go), decoded strictly.
type driverGpuConfig struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Sharing    *driverGpuSharing `json:"sharing,omitempty"`
}

type driverGpuSharing struct {
	Strategy          string `json:"strategy"`
	TimeSlicingConfig *struct {
		Interval *string `json:"interval,omitempty"`
	} `json:"timeSlicingConfig,omitempty"`
	MpsConfig *driverMpsConfig `json:"mpsConfig,omitempty"`
}

type driverMigConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Sharing    *struct {
		Strategy  string           `json:"strategy"`
		MpsConfig *driverMpsConfig `json:"mpsConfig,omitempty"`
	} `json:"sharing,omitempty"`
}

type driverMpsConfig struct {
	DefaultActiveThreadPercentage     *int                         `json:"defaultActiveThreadPercentage,omitempty"`
	DefaultPinnedDeviceMemoryLimit    *resource.Quantity           `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
	DefaultPerDevicePinnedMemoryLimit map[string]resource.Quantity `json:"defaultPerDevicePinnedMemoryLimit,omitempty"`
}

// driverGates are the driver's feature gates that matter here (both Alpha, off by default).
type driverGates struct{ TimeSlicingSettings, MPSSupport bool }

// checkDriverConfig applies the rules of the driver's decoder and validate.go (with the gates),
// plus what its Normalize and MPS daemon setup refuse: a pinned limit below 1 MiB.
func checkDriverConfig(raw []byte, gates driverGates) error {
	strict := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		return d.Decode(v)
	}
	var head struct{ APIVersion, Kind string }
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	if head.APIVersion != DRAConfigAPIVersion {
		return fmt.Errorf("apiVersion %q", head.APIVersion)
	}
	strategy := func(s string) error {
		switch s {
		case DRAStrategyTS:
			if !gates.TimeSlicingSettings {
				return fmt.Errorf("%q is selected as the GPU sharing strategy, but the %q feature gate is not enabled", s, "TimeSlicingSettings")
			}
		case DRAStrategyMPS:
			if !gates.MPSSupport {
				return fmt.Errorf("%q is selected as the GPU sharing strategy, but the %q feature gate is not enabled", s, "MPSSupport")
			}
		default:
			return fmt.Errorf("unknown GPU sharing strategy: %v", s)
		}
		return nil
	}
	mps := func(m *driverMpsConfig) error {
		if m == nil {
			return nil
		}
		if p := m.DefaultActiveThreadPercentage; p != nil && (*p < 0 || *p > 100) {
			return fmt.Errorf("active thread percentage %d not in 0-100", *p)
		}
		if q := m.DefaultPinnedDeviceMemoryLimit; q != nil && q.Value()/1024/1024 <= 0 {
			return fmt.Errorf("invalid limit: default value set too low: %v", q)
		}
		return nil
	}
	switch head.Kind {
	case DRAKindGpuConfig:
		var c driverGpuConfig
		if err := strict(&c); err != nil {
			return err
		}
		if c.Sharing == nil {
			return nil
		}
		if err := strategy(c.Sharing.Strategy); err != nil {
			return err
		}
		if c.Sharing.Strategy == DRAStrategyTS {
			if c.Sharing.MpsConfig != nil {
				return errors.New("cannot use MpsConfig with the 'TimeSlicing' strategy")
			}
			if tc := c.Sharing.TimeSlicingConfig; tc != nil {
				if tc.Interval == nil {
					return errors.New("timeSlicingConfig without interval (the driver dereferences it)")
				}
				switch *tc.Interval {
				case "Default", "Short", "Medium", "Long":
				default:
					return fmt.Errorf("unknown time-slice interval: %v", *tc.Interval)
				}
			}
			return nil
		}
		if c.Sharing.TimeSlicingConfig != nil {
			return errors.New("cannot use TimeSlicingConfig with the 'MPS' strategy")
		}
		return mps(c.Sharing.MpsConfig)
	case DRAKindMigConfig:
		var c driverMigConfig
		if err := strict(&c); err != nil {
			return err
		}
		if c.Sharing == nil {
			return nil
		}
		if err := strategy(c.Sharing.Strategy); err != nil {
			return err
		}
		return mps(c.Sharing.MpsConfig)
	}
	return fmt.Errorf("kind %q", head.Kind)
}

// renderedDRA returns the opaque configs and the device requests of every claim and template the
// all-modes plan renders.
func renderedDRA(t *testing.T) (configs [][]byte, requests []resourcev1.DeviceRequest, claims int) {
	t.Helper()
	plan, pool := allModesPlan(t)
	arts, err := Artifacts(plan, pool)
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatal(err)
	}
	for _, a := range arts {
		if !strings.HasPrefix(a.Path, "dra/") {
			continue
		}
		for _, doc := range strings.Split(string(a.Data), "\n---\n") {
			var kind struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
				t.Fatal(err)
			}
			var spec resourcev1.ResourceClaimSpec
			switch kind.Kind {
			case "ResourceClaim":
				var c resourcev1.ResourceClaim
				if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
					t.Fatalf("%s: %v", a.Path, err)
				}
				spec = c.Spec
			case "ResourceClaimTemplate":
				var c resourcev1.ResourceClaimTemplate
				if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
					t.Fatalf("%s: %v", a.Path, err)
				}
				spec = c.Spec.Spec
			default:
				t.Fatalf("%s: kind %q", a.Path, kind.Kind)
			}
			claims++
			requests = append(requests, spec.Devices.Requests...)
			for _, c := range spec.Devices.Config {
				if c.Opaque == nil || c.Opaque.Driver != DRADriver {
					t.Errorf("%s: config %+v is not the driver's opaque config", a.Path, c)
					continue
				}
				configs = append(configs, c.Opaque.Parameters.Raw)
			}
		}
	}
	return configs, requests, claims
}

// TestDRAConfigsPassDriverRules: every opaque config the all-modes plan renders (time-slicing and
// MPS, whole GPU and MIG instance) passes the DRA driver's decoder and validation with its
// TimeSlicingSettings and MPSSupport gates on, and fails with them off, with the driver's message
// (the docs say to turn them on).
func TestDRAConfigsPassDriverRules(t *testing.T) {
	configs, requests, claims := renderedDRA(t)
	kinds := map[string]int{}
	for _, raw := range configs {
		var h struct{ Kind string }
		_ = json.Unmarshal(raw, &h)
		var s struct {
			Sharing struct{ Strategy string }
		}
		_ = json.Unmarshal(raw, &s)
		kinds[h.Kind+"/"+s.Sharing.Strategy]++
		if err := checkDriverConfig(raw, driverGates{TimeSlicingSettings: true, MPSSupport: true}); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
		if err := checkDriverConfig(raw, driverGates{}); err == nil || !strings.Contains(err.Error(), "feature gate is not enabled") {
			t.Errorf("%s with the gates off: %v, want the feature-gate error", raw, err)
		}
	}
	for _, k := range []string{"GpuConfig/TimeSlicing", "GpuConfig/MPS", "MigDeviceConfig/TimeSlicing", "MigDeviceConfig/MPS"} {
		if kinds[k] == 0 {
			t.Errorf("no %s config rendered (got %v)", k, kinds)
		}
	}
	for _, r := range requests {
		if r.Exactly == nil || (r.Exactly.DeviceClassName != DeviceClassGPU && r.Exactly.DeviceClassName != DeviceClassMIG) || r.Exactly.Count < 1 {
			t.Errorf("request %+v: want exactly count ≥ 1 of %s or %s", r, DeviceClassGPU, DeviceClassMIG)
		}
	}
	t.Logf("%d claims and templates, %d opaque configs: %v", claims, len(configs), kinds)
}

// TestDriverRulesRefuse: the rules checkDriverConfig applies refuse what the driver refuses, so
// the test above is not passing on a checker that accepts everything.
func TestDriverRulesRefuse(t *testing.T) {
	on := driverGates{TimeSlicingSettings: true, MPSSupport: true}
	for _, tc := range []struct{ name, raw, want string }{
		{"interval", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Fast"}}}`, "unknown time-slice interval"},
		{"no interval", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{}}}`, "without interval"},
		{"mig time-slicing config", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Default"}}}`, "unknown field"},
		{"percentage", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":101}}}`, "not in 0-100"},
		{"pinned limit", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"1000Ki"}}}`, "too low"},
		{"mps with time-slicing", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","timeSlicingConfig":{"interval":"Default"}}}`, "cannot use TimeSlicingConfig"},
		{"time-slicing with mps", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","mpsConfig":{}}}`, "cannot use MpsConfig"},
		{"strategy", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"Exclusive"}}`, "unknown GPU sharing strategy"},
		{"version", `{"apiVersion":"resource.nvidia.com/v1","kind":"GpuConfig"}`, "apiVersion"},
	} {
		if err := checkDriverConfig([]byte(tc.raw), on); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestDRADeployments: with policy.kubernetesDeviceAPI dra, no Deployment requests an nvidia.com
// resource or mounts an MPS pipe; every pod references exactly one claim, which dra/ renders: the
// group's ResourceClaimTemplate (unshared devices) or the named claim of its shared device, and
// then every replica of the Deployment is one the claim lists (one Deployment per shared device).
func TestDRADeployments(t *testing.T) {
	plan, pool := allModesPlan(t)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, err := Artifacts(plan, pool)
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatal(err)
	}
	templates, claimUsers := map[string]bool{}, map[string]string{}
	var deps []appsv1.Deployment
	for _, a := range arts {
		for _, doc := range strings.Split(string(a.Data), "\n---\n") {
			var head struct {
				Kind     string
				Metadata struct {
					Name        string
					Annotations map[string]string
				}
			}
			if strings.HasSuffix(a.Path, ".yaml") && yaml.Unmarshal([]byte(doc), &head) != nil {
				continue
			}
			switch {
			case strings.HasPrefix(a.Path, "dra/") && head.Kind == "ResourceClaimTemplate":
				templates[head.Metadata.Name] = true
			case strings.HasPrefix(a.Path, "dra/") && head.Kind == "ResourceClaim":
				claimUsers[head.Metadata.Name] = head.Metadata.Annotations[AnnotationSlots]
			case strings.HasPrefix(a.Path, "k8s/") && head.Kind == "Deployment":
				var d appsv1.Deployment
				if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
					t.Fatalf("%s: %v", a.Path, err)
				}
				deps = append(deps, d)
			}
		}
	}
	if len(deps) == 0 || len(templates) == 0 || len(claimUsers) == 0 {
		t.Fatalf("%d Deployments, %d templates, %d claims: want all", len(deps), len(templates), len(claimUsers))
	}
	named := 0
	for _, d := range deps {
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		for r := range c.Resources.Limits {
			if strings.HasPrefix(string(r), "nvidia.com/") {
				t.Errorf("%s: requests %s with the DRA device API", d.Name, r)
			}
		}
		if spec.HostIPC || len(spec.Volumes) > 0 && spec.Volumes[0].HostPath != nil {
			t.Errorf("%s: mounts a host MPS pipe with the DRA device API", d.Name)
		}
		for _, e := range c.Env {
			if e.Name == "CUDA_MPS_PIPE_DIRECTORY" {
				t.Errorf("%s: sets %s; the driver hands the pipe to the pod", d.Name, e.Name)
			}
		}
		if len(spec.ResourceClaims) != 1 || len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != spec.ResourceClaims[0].Name {
			t.Errorf("%s: claims %+v, container %+v: want one claim the container uses", d.Name, spec.ResourceClaims, c.Resources.Claims)
			continue
		}
		pc := spec.ResourceClaims[0]
		switch {
		case pc.ResourceClaimTemplateName != nil:
			if !templates[*pc.ResourceClaimTemplateName] {
				t.Errorf("%s: template %s is not rendered", d.Name, *pc.ResourceClaimTemplateName)
			}
		case pc.ResourceClaimName != nil:
			users, ok := claimUsers[*pc.ResourceClaimName]
			if !ok {
				t.Errorf("%s: claim %s is not rendered", d.Name, *pc.ResourceClaimName)
				continue
			}
			named++
			tenant := d.Labels[LabelTenant]
			for _, slot := range strings.Split(d.Annotations[AnnotationSlots], ", ") {
				idx, _, _ := strings.Cut(slot, "@")
				if !slices.Contains(strings.Split(users, ", "), tenant+"#"+idx) {
					t.Errorf("%s: replica %s#%s is not on claim %s (%s)", d.Name, tenant, idx, *pc.ResourceClaimName, users)
				}
			}
		default:
			t.Errorf("%s: claim %+v names neither a claim nor a template", d.Name, pc)
		}
	}
	if named == 0 {
		t.Error("no Deployment uses a named shared claim")
	}
	// the device plugin (the default) keeps its resource requests and no claims
	pool.Policy.KubernetesDeviceAPI = ""
	arts, _ = Artifacts(plan, pool)
	for _, a := range arts {
		if strings.HasPrefix(a.Path, "k8s/") && strings.Contains(string(a.Data), "resourceClaims") {
			t.Errorf("%s: resourceClaims with the device plugin", a.Path)
		}
	}
}

// TestDRAReadmeApplySteps: on a pool of the DRA path README.md says to apply dra/ before k8s/
// and that pods take their devices by claims, and names the driver's feature gates the shared
// claims need; the device-plugin path keeps its steps.
func TestDRAReadmeApplySteps(t *testing.T) {
	plan, pool := allModesPlan(t)
	for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
		pool.Policy.KubernetesDeviceAPI = api
		arts, err := Artifacts(plan, pool)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			t.Fatal(err)
		}
		readme := string(artifactMap(arts)["README.md"])
		dra := []string{"kubectl apply -f dra/ -n <namespace>", "`MPSSupport`", "`TimeSlicingSettings`", "through a ResourceClaim"}
		dp := "Each Deployment asks for one device-plugin resource per pod"
		if api == v1.DeviceAPIDRA {
			if !containsAll(readme, dra...) || strings.Contains(readme, dp) {
				t.Errorf("dra: README.md's steps are not the DRA path's:\n%s", readme)
			}
		} else if !strings.Contains(readme, dp) || strings.Contains(readme, dra[0]) {
			t.Errorf("device plugin: README.md's steps are not the device plugin's:\n%s", readme)
		}
	}
}
