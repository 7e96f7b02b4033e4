package render

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// A hot adapter spread over two engines is in both engines' --lora-modules under its adapter
// name; each Deployment's pods carry the label its InferencePool selects.
func TestLoRAEngineDeployments(t *testing.T) {
	p := plan.LoRAPlan{Group: "g", Engines: []plan.LoRAEngine{
		{Name: "m-0", MaxLoRAs: 2, MaxRank: 16, MaxCPULoRAs: 2, Adapters: []string{"hot", "a"}},
		{Name: "m-1", MaxLoRAs: 1, MaxRank: 16, MaxCPULoRAs: 1, Adapters: []string{"hot"}},
	}}
	names := map[string]string{"hot": "Hot.v2", "a": "a-lora"}
	paths := map[string]string{"hot": "acme/hot", "a": "/adapters/a"}
	base := v1.Tenant{Name: "hot", Path: "acme/x", Model: v1.Model{Name: "llama-3.1-8b"}}
	arts, err := LoRAEngineDeployments(LoRAEnginesInput{Namespace: "ml", Base: base, Plan: p, AdapterName: names, AdapterPath: paths})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"m-0": "--model meta-llama/Llama-3.1-8B --enable-lora --max-loras 2 --max-lora-rank 16 --max-cpu-loras 2 --lora-modules Hot.v2=acme/hot a-lora=/adapters/a",
		"m-1": "--model meta-llama/Llama-3.1-8B --enable-lora --max-loras 1 --max-lora-rank 16 --max-cpu-loras 1 --lora-modules Hot.v2=acme/hot",
	}
	if len(arts) != 2 {
		t.Fatalf("%d artifacts", len(arts))
	}
	for i, a := range arts {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(a.Data, &d); err != nil {
			t.Fatal(err)
		}
		e := p.Engines[i]
		pool := inferencePool("ml", e.Name)["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]string)
		for k, v := range pool {
			if d.Spec.Template.Labels[k] != v || d.Spec.Selector.MatchLabels[k] != v {
				t.Errorf("%s: pool selects %s=%s; pod labels %v, selector %v", e.Name, k, v, d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)
			}
		}
		c := d.Spec.Template.Spec.Containers[0]
		if got := strings.Join(c.Args, " "); got != want[e.Name] {
			t.Errorf("%s: args\n%s\nwant\n%s", e.Name, got, want[e.Name])
		}
		if c.Image != Image || c.ReadinessProbe == nil || len(c.Env) != 1 || c.Env[0].Name != "HF_TOKEN" || len(d.Spec.Template.Spec.Volumes) != 1 {
			t.Errorf("%s: container defaults missing: %+v", e.Name, c)
		}
	}
	// With a given by an absolute dir, its folder is mounted read-only and served from the mount;
	// a relative dir is passed as written.
	for dir, want := range map[string]string{"/srv/peft/a": "a-lora=/adapters/a-lora", "peft/a": "a-lora=peft/a"} {
		paths := map[string]string{"hot": "acme/hot", "a": dir}
		arts, err := LoRAEngineDeployments(LoRAEnginesInput{Namespace: "ml", Base: base, Plan: p, AdapterName: names, AdapterPath: paths,
			AdapterDir: map[string]string{"a": dir}})
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(arts[0].Data, &d); err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		if args := strings.Join(spec.Containers[0].Args, " "); !strings.Contains(args, want) {
			t.Errorf("dir %s: args %s, want %s", dir, args, want)
		}
		mounted := len(spec.Volumes) == 2 && spec.Volumes[0].HostPath != nil && spec.Volumes[0].HostPath.Path == dir &&
			spec.Containers[0].VolumeMounts[0].ReadOnly && spec.Containers[0].VolumeMounts[0].MountPath == "/adapters/a-lora"
		if mounted != strings.HasPrefix(dir, "/") {
			t.Errorf("dir %s: volumes %+v, mounts %+v", dir, spec.Volumes, spec.Containers[0].VolumeMounts)
		}
	}
	for _, bad := range []map[string]string{
		{"hot": "x=y", "a": "a"}, // not writable as name=path
		{"hot": "same", "a": "same"},
		{"hot": "h"}, // a has no name
	} {
		if _, err := LoRAEngineDeployments(LoRAEnginesInput{Namespace: "ml", Base: base, Plan: p, AdapterName: bad, AdapterPath: paths}); err == nil {
			t.Errorf("names %v: no error", bad)
		}
	}
}

// planWithEngine is a plan of one node with a time-sliced whole GPU and a shared LoRA engine on
// another GPU of the same node, or of another node when apart.
func planWithEngine(t *testing.T, apart bool) (*v1.Plan, *v1.Pool) {
	pool := newPool(t, h100, []int{2, 2}, tenantSpec{"a", "org/x", v1.IsolationShared}, tenantSpec{"b", "org/x", v1.IsolationShared})
	for _, n := range []string{"ad-1", "ad-2"} {
		pool.Tenants = append(pool.Tenants, v1.Tenant{Name: n, Path: "acme/x", Isolation: v1.IsolationSoft,
			Model: v1.Model{Name: "llama-3.1-8b", Adapter: &v1.Adapter{Name: n + "-lora", Dir: "/srv/adapters/" + n}}})
	}
	v1.Default(pool)
	pl := newPlan(pool, h100)
	whole(pl, "n0", 0, v1.ModeTimeSlice, rep("a", v1.Limits{}), rep("b", v1.Limits{}))
	pl = finish(pl, pool)
	node := "n0"
	if apart {
		node = "n1"
	}
	g := at(pl, node, 1)
	g.Role, g.LoRAEngine = v1.RolePool, "base-lora-0"
	pl.Summary.GPUsUsed++
	pl.LoRAEngines = []v1.PlanLoRAEngine{{Name: "base-lora-0", Group: "g", GPU: g.Ref(), Model: "llama-3.1-8b", MaxLoRAs: 2, MaxLoRARank: 16, MaxCPULoRAs: 2,
		Adapters: []v1.PlanLoRAAdapter{{Tenant: "ad-1", Adapter: "ad-1-lora", RPS: 1}, {Tenant: "ad-2", Adapter: "ad-2-lora", RPS: 1}}}}
	for i := range pl.Tenants {
		if strings.HasPrefix(pl.Tenants[i].Name, "ad-") {
			pl.Tenants[i].LoRAEngines = []string{"base-lora-0"}
		}
	}
	return pl, pool
}

// The plan's engines are rendered pinned to their node with their adapters' folders mounted;
// the engine's GPU is an unshared nvidia.com/gpu for the device plugin, so a node that also
// time-slices whole GPUs cannot serve both and says so, while an engine on another node renders
// clean.
func TestPlanLoRAEngineArtifacts(t *testing.T) {
	pl, pool := planWithEngine(t, true)
	arts, err := Artifacts(pl, pool)
	if err != nil {
		t.Fatal(err)
	}
	files := artifactMap(arts)
	deps := decodeDeployments(t, files["k8s/base-lora-0.yaml"])
	if len(deps) != 1 {
		t.Fatalf("%d Deployments", len(deps))
	}
	spec := deps[0].Spec.Template.Spec
	if v := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values; len(v) != 1 || v[0] != "n1" {
		t.Errorf("pinned to %v, want n1", v)
	}
	args := strings.Join(spec.Containers[0].Args, " ")
	if !containsAll(args, "--enable-lora", "--max-loras 2", "ad-1-lora=/adapters/ad-1-lora", "ad-2-lora=/adapters/ad-2-lora") {
		t.Errorf("args %s", args)
	}
	mounts := 0
	for _, v := range spec.Volumes {
		if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, "/srv/adapters/") {
			mounts++
		}
	}
	ro := 0
	for _, m := range spec.Containers[0].VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/adapters/") && m.ReadOnly {
			ro++
		}
	}
	if mounts != 2 || ro != 2 {
		t.Errorf("%d hostPath volumes, %d read-only mounts, want 2 and 2", mounts, ro)
	}
	if svg := string(files["pool-map.svg"]); !strings.Contains(svg, "shared LoRA engine base-lora-0") {
		t.Error("the pool map does not show the engine")
	}
	if dp := decodeDP(t, files["device-plugin/n1.yaml"]); dp.Sharing != nil {
		t.Errorf("n1 shares its GPUs: %+v", dp.Sharing)
	}

	pl, pool = planWithEngine(t, false)
	_, err = Artifacts(pl, pool)
	if ps := problemStrings(err); len(ps) != 1 || !strings.Contains(ps[0], "node n0: nvidia.com/gpu") {
		t.Errorf("problems %q, want the engine's unshared GPU beside time-sliced ones on n0", ps)
	}
}
