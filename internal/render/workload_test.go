package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDeploymentWorkloadDefaults: every rendered vLLM container runs a pinned image, requests CPU
// and memory, has startup, readiness and liveness probes on vLLM's health endpoint (the startup
// probe allowing 30 min for the model load), takes HF_TOKEN from an optional Secret, and has a
// memory-backed /dev/shm.
func TestDeploymentWorkloadDefaults(t *testing.T) {
	plan, pool := loadFixture(t)
	arts, _ := Artifacts(plan, pool)
	n := 0
	for path, data := range artifactMap(arts) {
		if !strings.HasPrefix(path, "k8s/") {
			continue
		}
		for _, d := range decodeDeployments(t, data) {
			n++
			spec := d.Spec.Template.Spec
			c := spec.Containers[0]
			if strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, ":v") {
				t.Errorf("%s: image %q is not pinned to a release tag", d.Name, c.Image)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: requests %v lack cpu or memory", d.Name, c.Resources.Requests)
			}
			for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != HealthPath || p.HTTPGet.Port.StrVal != "http" {
					t.Errorf("%s: %s probe %+v, want GET %s on port http", d.Name, name, p, HealthPath)
				}
			}
			// 180 × 10 s = 30 min before liveness may restart a loading server.
			if p := c.StartupProbe; p != nil && p.PeriodSeconds*p.FailureThreshold < 1800 {
				t.Errorf("%s: startup probe allows %d s, want ≥ 1800", d.Name, p.PeriodSeconds*p.FailureThreshold)
			}
			var token *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == "HF_TOKEN" {
					token = &c.Env[i]
				}
			}
			if token == nil || token.ValueFrom == nil || token.ValueFrom.SecretKeyRef == nil ||
				token.ValueFrom.SecretKeyRef.Name != HFTokenSecret || token.ValueFrom.SecretKeyRef.Optional == nil || !*token.ValueFrom.SecretKeyRef.Optional {
				t.Errorf("%s: HF_TOKEN %+v, want an optional reference to Secret %s", d.Name, token, HFTokenSecret)
			}
			shm := false
			for _, m := range c.VolumeMounts {
				shm = shm || m.MountPath == "/dev/shm"
			}
			if !shm {
				t.Errorf("%s: no /dev/shm mount", d.Name)
			}
		}
	}
	if n == 0 {
		t.Fatal("no deployments rendered")
	}
}

// TestNoVLLMForMeasuredNonLLM: a tenant whose model is a measured profile outside the LLM catalog
// (ParvaGPU's bert) gets no vLLM launch file and no Deployment, and the README says why.
func TestNoVLLMForMeasuredNonLLM(t *testing.T) {
	plan, pool := loadFixture(t)
	for i := range pool.Tenants {
		if pool.Tenants[i].Name == "code-complete" {
			pool.Tenants[i].Model.Name = "bert"
			pool.Tenants[i].Profile = "bert.csv"
		}
	}
	arts, _ := Artifacts(plan, pool)
	files := artifactMap(arts)
	for _, p := range []string{"k8s/code-complete.yaml", "vllm/code-complete.yaml"} {
		if _, ok := files[p]; ok {
			t.Errorf("%s rendered for a non-LLM tenant", p)
		}
	}
	if _, ok := files["k8s/chat.yaml"]; !ok {
		t.Error("k8s/chat.yaml missing: LLM tenants must still get Deployments")
	}
	if !strings.Contains(string(files["README.md"]), "tenant code-complete serves \"bert\" from a measured profile") {
		t.Errorf("README does not explain the missing Deployment:\n%s", files["README.md"])
	}
}
