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
