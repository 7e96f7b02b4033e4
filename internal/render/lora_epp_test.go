package render

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/plan"
)

// LoRAEndpointPickers renders one picker per engine, in the plan's order, each for its own pool,
// and refuses what it cannot name.
func TestLoRAEndpointPickers(t *testing.T) {
	p := plan.LoRAPlan{Engines: []plan.LoRAEngine{{Name: "e-0"}, {Name: "e-1"}}}
	y, err := LoRAEndpointPickers("ns", p)
	if err != nil {
		t.Fatal(err)
	}
	var pools []string
	for _, doc := range bytes.Split(y, []byte("\n---\n")) {
		if !bytes.Contains(doc, []byte("kind: Deployment")) {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			t.Fatal(err)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		pools = append(pools, args[1])
		if d.Name != EPPName(args[1]) || args[3] != "ns" {
			t.Errorf("deployment %s: args %v", d.Name, args)
		}
	}
	if strings.Join(pools, ",") != "e-0,e-1" {
		t.Errorf("pickers for pools %v, want e-0,e-1", pools)
	}
	if _, err := LoRAEndpointPickers("", p); err == nil {
		t.Error("no namespace: no error")
	}
	if _, err := LoRAEndpointPickers("ns", plan.LoRAPlan{}); err == nil {
		t.Error("no engine: no error")
	}
}
