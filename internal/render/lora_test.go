package render

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/plan"
)

// Three engines, 70 adapters on the first (more than one rule's 64 matches), one adapter spread
// over the second and third: every adapter is routed exactly once, to the pools of its engines,
// weighted by its traffic on each; every objective names a pool that exists.
func TestLoRAGateway(t *testing.T) {
	p := plan.LoRAPlan{Group: "g"}
	names := map[string]string{}
	e0 := plan.LoRAEngine{Name: "llama-0", Load: map[string]float64{}}
	for i := range 70 {
		tn := "t" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		e0.Adapters = append(e0.Adapters, tn)
		e0.Load[tn] = 0.1
		names[tn] = "Adapter_" + tn
	}
	names["hot"] = "hot-lora"
	e1 := plan.LoRAEngine{Name: "llama-1", Adapters: []string{"hot"}, Load: map[string]float64{"hot": 3}}
	e2 := plan.LoRAEngine{Name: "llama-2", Adapters: []string{"hot"}, Load: map[string]float64{"hot": 1}}
	p.Engines = []plan.LoRAEngine{e0, e1, e2}
	out, err := LoRAGateway(LoRAGatewayInput{Namespace: "ml", Gateway: "inference-gw", Plan: p, AdapterName: names})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	pools := map[string]bool{}
	routed := map[string]int{}
	var objectivePools []string
	var hotRefs []any
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var d map[string]any
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		kind := d["kind"].(string)
		kinds[kind+" "+d["apiVersion"].(string)]++
		spec := d["spec"].(map[string]any)
		switch kind {
		case "InferencePool":
			pools[d["metadata"].(map[string]any)["name"].(string)] = true
		case "InferenceObjective":
			objectivePools = append(objectivePools, spec["poolRef"].(map[string]any)["name"].(string))
		case "HTTPRoute":
			rules := spec["rules"].([]any)
			if len(rules) > 16 {
				t.Errorf("%d rules in a route", len(rules))
			}
			for _, r := range rules {
				rule := r.(map[string]any)
				matches := rule["matches"].([]any)
				if len(matches) > 64 {
					t.Errorf("%d matches in a rule", len(matches))
				}
				for _, m := range matches {
					h := m.(map[string]any)["headers"].([]any)[0].(map[string]any)
					if h["name"] != ModelNameHeader {
						t.Errorf("header %v", h["name"])
					}
					v := h["value"].(string)
					routed[v]++
					if v == "hot-lora" {
						hotRefs = rule["backendRefs"].([]any)
					}
				}
			}
		}
	}
	want := map[string]int{"InferencePool inference.networking.k8s.io/v1": 3,
		"InferenceObjective inference.networking.x-k8s.io/v1alpha2": 72, "HTTPRoute gateway.networking.k8s.io/v1": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%s: %d, want %d (all: %v)", k, kinds[k], n, kinds)
		}
	}
	for _, pn := range objectivePools {
		if !pools[pn] {
			t.Errorf("objective names pool %s, which is not rendered", pn)
		}
	}
	if len(routed) != 71 {
		t.Errorf("%d adapters routed, want 71", len(routed))
	}
	for a, n := range routed {
		if n != 1 {
			t.Errorf("%s routed %d times", a, n)
		}
	}
	if len(hotRefs) != 2 || hotRefs[0].(map[string]any)["weight"].(float64) != 3000 || hotRefs[1].(map[string]any)["weight"].(float64) != 1000 {
		t.Errorf("hot adapter's backends %v, want llama-1 weight 3000 and llama-2 weight 1000", hotRefs)
	}
	if !strings.Contains(string(out), "gpupool.dev/lora-engine: llama-0") {
		t.Error("pool selector label missing")
	}
	if _, err := LoRAGateway(LoRAGatewayInput{Namespace: "ml", Gateway: "gw", Plan: p, AdapterName: map[string]string{}}); err == nil {
		t.Error("a tenant without an adapter name was rendered")
	}
}
