package render

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// On the DRA path the planner packs without the device plugin's per-node rules (each device is
// a claim with its own sharing setting), so the 100-tenant synthetic pool's plan uses a MIG
// profile two ways on some node. Rendered on its own path that is no problem: the pool's pods
// take claims, not the device plugin's resources, and README.md notes what the device plugin's
// config could not express. The same plan rendered for the device plugin is a problem there.
func TestDRAPlanNodeRulesAreNotes(t *testing.T) {
	pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 100, GPUs: 100, DeviceAPI: v1.DeviceAPIDRA}, rand.New(rand.NewPCG(100, 7)))
	pl, err := plan.Build(context.Background(), pool, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arts, err := Artifacts(pl, pool)
	if err != nil {
		t.Fatalf("DRA path: %v", err)
	}
	var readme string
	for _, a := range arts {
		if a.Path == "README.md" {
			readme = string(a.Data)
		}
	}
	if !strings.Contains(readme, "device-plugin config only (this pool's pods take their devices by DRA claims): node ") ||
		!strings.Contains(readme, "one sharing setting to every device of a resource on a node") {
		t.Error("DRA path: README.md notes no node whose device-plugin config cannot express the plan; the plan no longer exercises the rule")
	}
	dp := *pool
	dp.Policy.KubernetesDeviceAPI = v1.DeviceAPIDevicePlugin
	_, err = Artifacts(pl, &dp)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("device-plugin path: %v, want problems", err)
	}
	rule := 0
	for _, p := range pe.Problems {
		if strings.Contains(p.Message, "one sharing setting to every device of a resource on a node") {
			rule++
		}
	}
	if rule == 0 {
		t.Errorf("device-plugin path: no problem names the one-setting-per-resource rule among %d problems", len(pe.Problems))
	}
}
