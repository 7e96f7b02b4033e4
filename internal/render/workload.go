package render

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// What every vLLM container gets besides its slice (see the package documentation, Kubernetes).
const (
	// HFTokenSecret is the Secret whose key HFTokenKey, when the Secret exists in the tenant's
	// namespace, becomes HF_TOKEN: gated Hugging Face models need it, others start without it.
	HFTokenSecret = "gpupool-hf-token"
	HFTokenKey    = "token"
	// HealthPath is vLLM's OpenAI server health endpoint: 200 once the engine serves.
	HealthPath = "/health"
	// Requests: vLLM's API server, tokenizer and scheduler processes need a few cores and host
	// memory beside the GPU (the model is loaded through host memory).
	cpuRequest    = "2"
	memoryRequest = "16Gi"
	// shmSize is /dev/shm for PyTorch's inter-process tensors (vLLM asks for --ipc=host or a
	// larger --shm-size than a container's default 64 MiB).
	shmSize = "2Gi"
	// A model load can take many minutes: the startup probe allows 30 min (180 × 10 s) before the
	// liveness probe starts counting.
	startupPeriodSeconds    = 10
	startupFailureThreshold = 180
)

// servesLLM reports whether vLLM can serve t: a checkpoint directory or a model the LLM catalog
// knows. A tenant with only a measured profile for a model outside the catalog (ParvaGPU's bert,
// resnet50) is not an LLM vLLM serves, so it gets no vLLM launch file and no Deployment.
func servesLLM(t v1.Tenant) bool {
	if t.Model.Dir != "" {
		return true
	}
	_, err := llm.Lookup(t.Model.Name)
	return err == nil
}

// noteNonLLM adds a README note for every placed tenant vLLM cannot serve.
func (m *model) noteNonLLM(names []string) {
	for _, name := range names {
		t := m.tenants[name]
		if !servesLLM(t) {
			m.notes = append(m.notes, fmt.Sprintf("tenant %s serves %q from a measured profile, not an LLM the catalog knows: "+
				"no vLLM launch file or Deployment is rendered for it; run its server on the slices the plan gives it", name, t.Model.Name))
		}
	}
}

// vllmContainerDefaults adds probes, CPU and memory requests, the optional Hugging Face token
// and a memory-backed /dev/shm to a vLLM container, and the /dev/shm volume to spec.
func vllmContainerDefaults(c *corev1.Container, spec *corev1.PodSpec) {
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpuRequest)
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse(memoryRequest)
	health := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: HealthPath, Port: intstr.FromString("http")}}
	c.StartupProbe = &corev1.Probe{ProbeHandler: health, PeriodSeconds: startupPeriodSeconds, FailureThreshold: startupFailureThreshold, TimeoutSeconds: 5}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: health, PeriodSeconds: 5, FailureThreshold: 3, TimeoutSeconds: 5}
	c.LivenessProbe = &corev1.Probe{ProbeHandler: health, PeriodSeconds: 10, FailureThreshold: 6, TimeoutSeconds: 5}
	optional := true
	c.Env = append(c.Env, corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: HFTokenSecret}, Key: HFTokenKey, Optional: &optional}}})
	sort.SliceStable(c.Env, func(i, j int) bool { return c.Env[i].Name < c.Env[j].Name })
	shm := resource.MustParse(shmSize)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "dshm", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &shm}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "dshm", MountPath: "/dev/shm"})
}
