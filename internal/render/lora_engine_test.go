package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	// a on a volume is mounted read-only from its claim at its subPath and served from the mount;
	// given by a dir alone, absolute or relative, it is passed as written, mounts nothing and is a
	// problem naming its field.
	vol := v1.AdapterVolume{ClaimName: "lora-adapters", SubPath: "acme/a"}
	for _, c := range []struct {
		dir     string
		vol     bool
		want    string
		problem string
	}{
		{"", true, "a-lora=/adapters/a-lora", ""},
		{"/srv/peft/a", true, "a-lora=/adapters/a-lora", ""},
		{"/srv/peft/a", false, "a-lora=/srv/peft/a", "tenants[3].model.adapter.dir: adapter a-lora: \"/srv/peft/a\" is a folder on the node, which needs a hostPath volume, and the Pod Security baseline forbids those"},
		{"peft/a", false, "a-lora=peft/a", "tenants[3].model.adapter.dir: adapter a-lora: \"peft/a\" is relative to the Pool file"},
	} {
		in := LoRAEnginesInput{Namespace: "ml", Base: base, Plan: p, AdapterName: names,
			AdapterPath:  map[string]string{"hot": "acme/hot", "a": c.dir},
			AdapterDir:   map[string]string{},
			AdapterField: map[string]string{"a": "tenants[3].model.adapter"}}
		if c.dir != "" {
			in.AdapterDir["a"] = c.dir
		}
		if c.vol {
			in.AdapterPath["a"] = AdapterMountPath("a-lora")
			in.AdapterVolume = map[string]v1.AdapterVolume{"a": vol}
		}
		arts, err := LoRAEngineDeployments(in)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			t.Fatal(err)
		}
		if got := problemStrings(err); c.problem == "" && len(got) != 0 || c.problem != "" && (len(got) != 1 || !strings.HasPrefix(got[0], "m-0: "+c.problem)) {
			t.Errorf("dir %q, volume %v: problems %q, want %q", c.dir, c.vol, got, c.problem)
		}
		if len(arts) != 2 {
			t.Fatalf("dir %q, volume %v: %d artifacts (the files are written with the problems)", c.dir, c.vol, len(arts))
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(arts[0].Data, &d); err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		if args := strings.Join(spec.Containers[0].Args, " "); !strings.Contains(args, c.want) {
			t.Errorf("dir %q, volume %v: args %s, want %s", c.dir, c.vol, args, c.want)
		}
		var claims, hostPaths int
		for _, v := range spec.Volumes {
			if pvc := v.PersistentVolumeClaim; pvc != nil && pvc.ClaimName == "lora-adapters" && pvc.ReadOnly {
				claims++
			}
			if v.HostPath != nil {
				hostPaths++
			}
		}
		mounted := slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.ReadOnly && m.MountPath == "/adapters/a-lora" && m.SubPath == "acme/a"
		})
		if hostPaths != 0 || mounted != c.vol || (claims == 1) != c.vol {
			t.Errorf("dir %q, volume %v: volumes %+v, mounts %+v", c.dir, c.vol, spec.Volumes, spec.Containers[0].VolumeMounts)
		}
		if why := baseline(t, &spec); why != "" {
			t.Errorf("dir %q, volume %v: not baseline: %s", c.dir, c.vol, why)
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
	// ad-1's adapter is on a claim only; ad-2's is read from a folder and mounted from the claim.
	vol := &v1.AdapterVolume{ClaimName: "lora-adapters", SubPath: "acme/ad-1"}
	pool.Tenants = append(pool.Tenants,
		v1.Tenant{Name: "ad-1", Path: "acme/x", Isolation: v1.IsolationSoft,
			Model: v1.Model{Name: "llama-3.1-8b", Adapter: &v1.Adapter{Name: "ad-1-lora", Volume: vol, Rank: 16}}},
		v1.Tenant{Name: "ad-2", Path: "acme/x", Isolation: v1.IsolationSoft,
			Model: v1.Model{Name: "llama-3.1-8b", Adapter: &v1.Adapter{Name: "ad-2-lora", Dir: "/srv/adapters/ad-2",
				Volume: &v1.AdapterVolume{ClaimName: "lora-adapters", SubPath: "acme/ad-2"}}}})
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

// The plan's engines are rendered pinned to their node with their adapters mounted from their
// claim; the engine's GPU is an unshared nvidia.com/gpu for the device plugin, so a node that also
// time-slices whole GPUs cannot serve both and says so, while an engine on another node renders
// clean. An adapter given by an absolute dir alone is not mounted from the node (hostPath) but
// reported with its field, and the files are still rendered.
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
	claims := 0
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("hostPath volume %+v", v)
		}
		if c := v.PersistentVolumeClaim; c != nil && c.ClaimName == "lora-adapters" && c.ReadOnly {
			claims++
		}
	}
	subPaths := map[string]string{}
	for _, m := range spec.Containers[0].VolumeMounts {
		if strings.HasPrefix(m.MountPath, "/adapters/") && m.ReadOnly {
			subPaths[m.MountPath] = m.SubPath
		}
	}
	if claims != 1 || len(subPaths) != 2 || subPaths["/adapters/ad-1-lora"] != "acme/ad-1" || subPaths["/adapters/ad-2-lora"] != "acme/ad-2" {
		t.Errorf("%d read-only claim volumes, read-only mounts %v; want 1, and each adapter at its subPath", claims, subPaths)
	}
	if why := baseline(t, &spec); why != "" {
		t.Errorf("engine pod not baseline: %s", why)
	}
	if svg := string(files["pool-map.svg"]); !strings.Contains(svg, "shared LoRA engine base-lora-0") {
		t.Error("the pool map does not show the engine")
	}
	if dp := decodeDP(t, files["device-plugin/n1.yaml"]); dp.Sharing != nil {
		t.Errorf("n1 shares its GPUs: %+v", dp.Sharing)
	}

	// ad-2 by its absolute dir alone: a problem with its field, the engine still written, unmounted.
	for i := range pool.Tenants {
		if pool.Tenants[i].Name != "ad-2" {
			continue
		}
		pool.Tenants[i].Model.Adapter.Volume = nil
		arts, err := Artifacts(pl, pool)
		want := fmt.Sprintf(`node n1: base-lora-0: tenants[%d].model.adapter.dir: adapter ad-2-lora: "/srv/adapters/ad-2" is a folder on the node, which needs a hostPath volume, and the Pod Security baseline forbids those: give a volume`, i)
		if ps := problemStrings(err); len(ps) != 1 || !strings.HasPrefix(ps[0], want) {
			t.Errorf("problems %q, want %q…", ps, want)
		}
		deps := decodeDeployments(t, artifactMap(arts)["k8s/base-lora-0.yaml"])
		if len(deps) != 1 {
			t.Fatalf("with the problem: %d Deployments", len(deps))
		}
		spec := deps[0].Spec.Template.Spec
		if args := strings.Join(spec.Containers[0].Args, " "); !strings.Contains(args, "ad-2-lora=/srv/adapters/ad-2") || len(spec.Containers[0].VolumeMounts) != 2 {
			t.Errorf("with the problem: args %s, mounts %+v; want ad-2 as written, ad-1 and /dev/shm mounted", args, spec.Containers[0].VolumeMounts)
		}
		if why := baseline(t, &spec); why != "" {
			t.Errorf("with the problem: engine pod not baseline: %s", why)
		}
		pool.Tenants[i].Model.Adapter.Volume = &v1.AdapterVolume{ClaimName: "lora-adapters", SubPath: "acme/ad-2"}
	}

	pl, pool = planWithEngine(t, false)
	_, err = Artifacts(pl, pool)
	if ps := problemStrings(err); len(ps) != 1 || !strings.Contains(ps[0], "node n0: nvidia.com/gpu") {
		t.Errorf("problems %q, want the engine's unshared GPU beside time-sliced ones on n0", ps)
	}
}
