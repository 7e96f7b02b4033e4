package render

import (
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

// deployWant is one expected Deployment.
type deployWant struct {
	name, resource, pool string
	replicas             int32
	args                 []string // must appear in order somewhere in the container args
	env                  map[string]string
}

// fixtureDeployments are the Deployments expected for the example plan, per tenant.
var fixtureDeployments = map[string][]deployWant{
	// chat: 3 exclusive H100s; replica 0's args apply to 1 and 2 (they list none); 76Gi / 81559 MiB = 0.954 → 0.95.
	"chat": {{name: "chat-gpu", resource: "nvidia.com/gpu", pool: PoolMIGShared, replicas: 3,
		args: []string{"--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "32768", "--gpu-memory-utilization", "0.95"}}},
	// code-complete: two 3g.40gb; --model from the catalog; 38Gi / 40448 MiB = 0.962 → 0.96.
	"code-complete": {{name: "code-complete-mig-3g-40gb", resource: "nvidia.com/mig-3g.40gb", pool: PoolMIGShared, replicas: 2,
		args: []string{"--model", "Qwen/Qwen2.5-14B", "--gpu-memory-utilization", "0.96"}}},
	// docs-qa: MPS inside 4g.40gb@0, 20Gi / 40448 MiB = 0.506 → 0.50. The device plugin runs no MPS
	// on MIG devices, so the pod shares the instance by time-slicing: no MPS environment at all.
	"docs-qa": {{name: "docs-qa-mig-4g-40gb-mps", resource: "nvidia.com/mig-4g.40gb.shared", pool: PoolMIGShared, replicas: 1,
		args: []string{"--model", "/models/Qwen2.5-7B-Instruct", "--gpu-memory-utilization", "0.50"}, env: map[string]string{}}},
}

// TestDeploymentsFixture decodes every Deployment of the example plan with the k8s.io/api types
// and checks names, replica counts, resources, selectors, node affinity and arguments.
func TestDeploymentsFixture(t *testing.T) {
	plan, pool := loadFixture(t)
	arts, _ := Artifacts(plan, pool)
	files := artifactMap(arts)
	for tenant, wants := range fixtureDeployments {
		ds := decodeDeployments(t, files["k8s/"+tenant+".yaml"])
		if len(ds) != len(wants) {
			t.Fatalf("%s: %d deployments, want %d", tenant, len(ds), len(wants))
		}
		for i, w := range wants {
			d := ds[i]
			if d.Name != w.name || *d.Spec.Replicas != w.replicas {
				t.Errorf("%s: deployment %s × %d, want %s × %d", tenant, d.Name, *d.Spec.Replicas, w.name, w.replicas)
			}
			sel := d.Spec.Selector.MatchLabels
			if sel[LabelDeployment] != d.Name || d.Spec.Template.Labels[LabelDeployment] != d.Name {
				t.Errorf("%s: selector %v does not select the template's labels %v", tenant, sel, d.Spec.Template.Labels)
			}
			if d.Labels[LabelTenant] != tenant || d.Annotations[AnnotationPath] == "" {
				t.Errorf("%s: labels %v annotations %v", tenant, d.Labels, d.Annotations)
			}
			spec := d.Spec.Template.Spec
			if spec.NodeSelector[LabelPool] != w.pool {
				t.Errorf("%s: nodeSelector %v, want %s=%s", tenant, spec.NodeSelector, LabelPool, w.pool)
			}
			req := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
			if req.Key != HostnameLabel || strings.Join(req.Values, ",") != "gpu-node-a" {
				t.Errorf("%s: node affinity %+v", tenant, req)
			}
			c := spec.Containers[0]
			if q := c.Resources.Limits[corev1.ResourceName(w.resource)]; q.Value() != 1 || len(c.Resources.Limits) != 1 {
				t.Errorf("%s: limits %v, want %s: 1", tenant, c.Resources.Limits, w.resource)
			}
			if !subsequence(c.Args, w.args) {
				t.Errorf("%s: args %q, want %q in order", tenant, c.Args, w.args)
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			for k, v := range w.env {
				if env[k] != v {
					t.Errorf("%s: env %s = %q, want %q", tenant, k, env[k], v)
				}
			}
			for k := range env {
				if _, ok := w.env[k]; w.env != nil && !ok && strings.HasPrefix(k, "CUDA_MPS_") {
					t.Errorf("%s: env %s = %q, want none", tenant, k, env[k])
				}
			}
		}
	}
}

func subsequence(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestDeploymentSplit: one tenant on two slice kinds gets two Deployments.
func TestDeploymentSplit(t *testing.T) {
	pool := newPool(t, h100, []int{4}, tenantSpec{"a", "org/x", v1.IsolationShared})
	plan := newPlan(pool, h100)
	whole(plan, "n0", 0, v1.ModeExclusive, rep("a", v1.Limits{}))
	mig(plan, "n0", 1, inst("1g.10gb", 0, "", rep("a", v1.Limits{})), inst("3g.40gb", 4, "", rep("a", v1.Limits{})))
	mig(plan, "n0", 2, inst("3g.40gb", 0, "", rep("a", v1.Limits{})))
	whole(plan, "n0", 3, v1.ModeExclusive, rep("a", v1.Limits{}))
	finish(plan, pool)
	arts, err := Artifacts(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	ds := decodeDeployments(t, artifactMap(arts)["k8s/a.yaml"])
	got := map[string]int32{}
	for _, d := range ds {
		got[d.Name] = *d.Spec.Replicas
	}
	// 2 whole GPUs, 2 × 3g.40gb, 1 × 1g.10gb.
	want := map[string]int32{"a-gpu": 2, "a-mig-3g-40gb": 2, "a-mig-1g-10gb": 1}
	if len(got) != len(want) {
		t.Fatalf("deployments %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("deployment %s × %d, want × %d", k, got[k], v)
		}
	}
}

// TestPoolMapSVG: the map is well-formed XML, has a row label for every GPU, and draws every
// replica in its tenant's colour.
func TestPoolMapSVG(t *testing.T) {
	plan, pool := loadFixture(t)
	arts, _ := Artifacts(plan, pool)
	data := artifactMap(arts)["pool-map.svg"]
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	var texts []string
	fills := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("pool map is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			for _, a := range el.Attr {
				if el.Name.Local == "rect" && a.Name.Local == "fill" {
					fills[a.Value]++
				}
			}
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	all := strings.Join(texts, "\n")
	for _, g := range plan.GPUs {
		if !strings.Contains(all, g.Ref().String()+" "+g.Board) {
			t.Errorf("no row for %s", g.Ref())
		}
	}
	// chat has 3 replicas, code-complete 2, the others 1 (each also has one legend swatch).
	counts := map[string]int{"chat": 3, "code-complete": 2, "summarizer": 1, "docs-qa": 1, "eval-batch": 1}
	var names []string
	for n := range counts {
		names = append(names, n)
	}
	colors := TenantColors(names)
	for tenant, n := range counts {
		if fills[colors[tenant]] != n+1 {
			t.Errorf("%s: %d shapes in %s, want %d replicas + 1 legend", tenant, fills[colors[tenant]], colors[tenant], n)
		}
	}
}

// TestMPSFile: on the DRA path the driver's daemon for an MPS-shared instance takes the largest
// client limits as its defaults; each client lowers them through its environment, and nothing
// names a pipe directory (the driver injects its own). On the device-plugin path no daemon serves
// the instance: no MPS file, and a problem naming the plan's field and the way out.
func TestMPSFile(t *testing.T) {
	plan, pool := loadFixture(t)
	arts, err := Artifacts(plan, pool)
	if _, ok := artifactMap(arts)["mps/gpu-node-a.yaml"]; ok {
		t.Errorf("device-plugin path: an MPS file for a MIG instance no daemon serves")
	}
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("device-plugin path: want a *ProblemsError, got %v", err)
	}
	i := slices.IndexFunc(pe.Problems, func(p Problem) bool { return p.Field != "" })
	if i < 0 {
		t.Fatalf("device-plugin path: no MIG+MPS problem in %v", pe.Problems)
	}
	p := pe.Problems[i]
	if p.Node != "gpu-node-a" || p.Resource != "nvidia.com/mig-4g.40gb" || !strings.Contains(p.Message, "policy.kubernetesDeviceAPI: dra") ||
		plan.GPUs[4].Index != 4 || p.Field != "gpus[4].instances[0].sharing" || plan.GPUs[4].Instances[0].Sharing.Mode != v1.SharingMPS {
		t.Errorf("device-plugin path: problem %+v", p)
	}

	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, _ = Artifacts(plan, pool)
	var f MPSNode
	if err := yaml.UnmarshalStrict(artifactMap(arts)["mps/gpu-node-a.yaml"], &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Daemons) != 1 {
		t.Fatalf("daemons = %+v", f.Daemons)
	}
	d := f.Daemons[0]
	// docs-qa 20Gi = 20480 MiB, eval-batch 18Gi = 18432 MiB: the default is the larger.
	wantCmds := []string{"set_default_active_thread_percentage 50", "set_default_device_pinned_mem_limit 0 20480M"}
	if d.ManagedBy != ManagedByDRADriver || d.Instance != "4g.40gb@0" || d.GPU != 4 || strings.Join(d.Commands, "|") != strings.Join(wantCmds, "|") {
		t.Errorf("daemon = %+v", d)
	}
	if len(d.Clients) != 2 || d.Clients[1].Env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] != "0=18432M" || d.Clients[1].Env["CUDA_MPS_PIPE_DIRECTORY"] != "" {
		t.Errorf("clients = %+v", d.Clients)
	}
}
