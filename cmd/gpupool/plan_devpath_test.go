package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// The planner never produces a plan its own renderer rejects on the pool's own device path:
// `plan --out` exits 0, with no render problem in README.md, for every Pool in examples/ (the
// device-plugin ones and ParvaGPU's scenarios on the DRA path); and a sample of synthetic pools
// of mixed tiers, with the device path drawn at random (unset, deviceplugin or dra), and the
// LoRA examples moved to the DRA path render without a problem (exit 2 there only with
// infeasible tenants in the plan).
func TestPlanOutCleanOnOwnDevicePath(t *testing.T) {
	var files []string
	for _, glob := range []string{"*.yaml", "*/*.yaml"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "examples", glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "\nkind: Pool\n") {
				files = append(files, f)
			}
		}
	}
	if len(files) < 12 {
		t.Fatalf("%d example pools found: %v", len(files), files)
	}
	n := 6
	if testing.Short() || raceEnabled { // each plan of up to 64 tenants is simulated (ADR 0035)
		n = 3
	}
	rng := rand.New(rand.NewPCG(13, 8))
	apis := []v1.KubernetesDeviceAPI{"", v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA}
	for i := range n {
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 5 + rng.IntN(40), GPUs: 16 + rng.IntN(24), Varied: i%2 == 1,
			DeviceAPI: apis[rng.IntN(len(apis))]}, rng)
		data, err := v1.EncodeYAML(pool)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, writeTemp(t, fmt.Sprintf("synthetic-%d.yaml", i), string(data)))
	}
	// The LoRA examples on the DRA path: no shared engine is planned there (none is rendered
	// for DRA), so their adapter tenants get replicas of their own, some short of capacity.
	partial := n
	for _, f := range []string{"lora-mixed.yaml", "lora-200.yaml"} {
		files = append(files, onDRA(t, filepath.Join("..", "..", "examples", f)))
		partial++
	}
	for i, f := range files {
		out := filepath.Join(t.TempDir(), "out")
		_, stderr, code := runCmd(t, "plan", f, "--out", out)
		readme, err := os.ReadFile(filepath.Join(out, "README.md"))
		if err != nil || strings.Contains(string(readme), "## Problems") {
			t.Errorf("%s: README.md lists problems (%v): %s", f, err, stderr)
			continue
		}
		mayBeShort := i >= len(files)-partial
		switch {
		case code == exitOK:
		case mayBeShort && code == exitPartial && infeasibleIn(t, filepath.Join(out, "plan.yaml")) > 0:
			// a tenant short of capacity or of its SLO exits 2 too; no render problem above
		default:
			t.Errorf("%s: plan --out exit %d, want %d: %s", f, code, exitOK, stderr)
		}
	}
}

// infeasibleIn counts the infeasible tenants of the plan file at path.
func infeasibleIn(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := v1.DecodePlan(b)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, tn := range pl.Tenants {
		if tn.Infeasible {
			k++
		}
	}
	return k
}

// The six-board review pool whose whole-GPU MPS once took nodes of their own until tenants were
// short beside idle GPUs (six-boards-250.yaml; TestSixBoardsNodeRules, internal/plan) plans with
// at most 12 tenants short (exit 2) and renders with no problem: every node's device-plugin
// config serves its GPUs as planned.
func TestSixBoardsNodesRender(t *testing.T) {
	if raceEnabled {
		t.Skip("250 tenants: slow under the race detector")
	}
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, code := runCmd(t, "plan", "testdata/review/six-boards-250.yaml", "--out", out)
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || strings.Contains(string(readme), "## Problems") {
		t.Fatalf("README.md lists problems (%v): %s", err, stderr)
	}
	if n := infeasibleIn(t, filepath.Join(out, "plan.yaml")); code != exitPartial || n == 0 || n > 12 {
		t.Errorf("plan --out: exit %d with %d tenants short, want %d with 1 to 12: %s", code, n, exitPartial, stderr)
	}
}
