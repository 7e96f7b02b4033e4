package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mixedSharingPlan runs unshared and MPS-shared 3g.40gb instances on one node, which the device
// plugin cannot express.
const mixedSharingPlan = "../../internal/render/testdata/plan-mixed-sharing.yaml"

// onDRA copies the pool file at path with policy.kubernetesDeviceAPI set to dra (its policy
// block must be in block style) and returns the copy's path.
func onDRA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, n := strings.Replace(string(b), "\npolicy:\n", "\npolicy:\n  kubernetesDeviceAPI: dra\n", 1), 0
	if n = strings.Count(s, "kubernetesDeviceAPI: dra"); n != 1 {
		t.Fatalf("%s: no block-style policy to set kubernetesDeviceAPI in", path)
	}
	return writeTemp(t, filepath.Base(path), s)
}

// The example plan renders without problems on the DRA path (on the device-plugin path its
// MIG + MPS instance is a problem: the plugin runs no MPS on MIG devices), and every file is
// written.
func TestRenderWritesArtifacts(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := runCmd(t, "render", validPlan, "--pool", onDRA(t, validPool), "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitOK, errs)
	}
	if !strings.Contains(out, "wrote ") || errs != "" {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}
	for _, f := range []string{"README.md", "mig-parted/config.yaml", "node-labels.yaml", "device-plugin/configmap.yaml",
		"device-plugin/gpu-node-a.yaml", "mps/gpu-node-a.yaml", "vllm/chat.yaml", "k8s/chat.yaml", "pool-map.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// What was written passes validate.
	if out, _, code := runCmd(t, "validate", filepath.Join(dir, "mig-parted", "config.yaml")); code != exitOK {
		t.Errorf("validate of the written mig-parted config: exit %d\n%s", code, out)
	}
}

// A plan the device plugin cannot express still renders every file, reports the problem and
// exits 2.
func TestRenderReportsProblemsExit2(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := runCmd(t, "render", mixedSharingPlan, "--pool", validPool, "--out", dir)
	if code != exitPartial {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitPartial, errs)
	}
	if !strings.Contains(out, "wrote ") || !strings.Contains(errs, "nvidia.com/mig-3g.40gb") {
		t.Errorf("stdout %q, stderr %q", out, errs)
	}
	if readme, err := os.ReadFile(filepath.Join(dir, "README.md")); err != nil || !strings.Contains(string(readme), "## Problems") {
		t.Errorf("README.md does not list the problem (%v)", err)
	}
	if _, _, code := runCmd(t, "render", mixedSharingPlan, "--pool", validPool, "--dry-run"); code != exitPartial {
		t.Errorf("dry run: exit %d, want %d", code, exitPartial)
	}
}

func TestRenderDryRunWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	out, _, code := runCmd(t, "render", validPlan, "--pool", onDRA(t, validPool), "--out", dir, "--dry-run")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "mig-parted/config.yaml\t") {
		t.Errorf("dry run does not list the files:\n%s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dry run created %s", dir)
	}
}

func TestRenderRejectsBadInput(t *testing.T) {
	for name, args := range map[string][]string{
		"no --out":          {"render", validPlan, "--pool", validPool},
		"no --pool":         {"render", validPlan, "--out", t.TempDir()},
		"plan is a pool":    {"render", validPool, "--pool", validPool, "--out", t.TempDir()},
		"unreadable pool":   {"render", validPlan, "--pool", "missing.yaml", "--out", t.TempDir()},
		"plan for no fleet": {"render", validPlan, "--pool", writeTemp(t, "p.yaml", smallPool), "--out", t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			if _, errs, code := runCmd(t, args...); code != exitInvalid {
				t.Errorf("exit %d, want %d; stderr %q", code, exitInvalid, errs)
			}
		})
	}
}

// smallPool is a valid pool the example plan does not fit.
const smallPool = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: inference-prod}
fleet:
  nodes:
  - name: gpu-node-a
    gpus: [{board: H100-SXM5-80GB, count: 1}]
tenants:
- name: chat
  model: {name: llama-3.1-8b}
`
