package render

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const goldenDir = "testdata/golden"

// allModesPlan is a hand-built plan with every slice kind, each on a node of its own kind so the
// device plugin can express all of it but MIG + MPS (it runs no MPS on MIG devices: one problem):
// n0 exclusive + MIG, n1 time-sliced GPUs, n2 whole-GPU MPS, n3 MIG time-slicing and MIG + MPS.
func allModesPlan(t tb) (*v1.Plan, *v1.Pool) {
	pool := newPool(t, h100, []int{2, 2, 1, 2},
		tenantSpec{"api", "acme/web", v1.IsolationHard}, tenantSpec{"batch", "acme/web", v1.IsolationSoft},
		tenantSpec{"rare-a", "lab/x", v1.IsolationShared}, tenantSpec{"rare-b", "lab/x", v1.IsolationShared},
		tenantSpec{"embed", "acme/ml", v1.IsolationSoft}, tenantSpec{"rerank", "acme/ml", v1.IsolationSoft})
	plan := newPlan(pool, h100)
	whole(plan, "n0", 0, v1.ModeExclusive, rep("api", v1.Limits{Memory: 70 * v1.GiB}))
	mig(plan, "n0", 1, inst("3g.40gb", 0, "", rep("api", v1.Limits{Memory: 36 * v1.GiB})),
		inst("3g.40gb", 4, "", rep("batch", v1.Limits{Memory: 36 * v1.GiB})))
	whole(plan, "n1", 0, v1.ModeTimeSlice, rep("rare-a", ts(1)), rep("rare-b", ts(1)), rep("rare-a", ts(2)))
	whole(plan, "n1", 1, v1.ModeTimeSlice, rep("rare-b", ts(2)), rep("rare-a", ts(2)))
	whole(plan, "n2", 0, v1.ModeMPS, rep("embed", mps(50, 30*v1.GiB)), rep("rerank", mps(25, 20*v1.GiB)))
	mig(plan, "n3", 0, inst("1g.10gb", 0, v1.SharingTimeSlice, rep("rare-a", ts(1)), rep("rare-b", ts(1))),
		inst("1g.10gb", 1, v1.SharingTimeSlice, rep("rare-b", ts(1)), rep("rare-a", ts(1))),
		inst("2g.20gb", 2, ""),
		inst("3g.40gb", 4, v1.SharingMPS, rep("embed", mps(60, 20*v1.GiB)), rep("rerank", mps(40, 16*v1.GiB))))
	return finish(plan, pool), pool
}

// TestGolden renders the schema's example plan, the mixed-sharing plan, a plan with every slice
// kind and a DRA plan on nodes with GPUs of two boards (mixedBoardDRAPlan) and compares
// every artifact, and the list of problems, with testdata/golden/<case>.
func TestGolden(t *testing.T) {
	cases := map[string]func(tb) (*v1.Plan, *v1.Pool){"example": loadFixture, "mixed-sharing": loadMixedSharing, "all-modes": allModesPlan,
		"mixed-board-dra": mixedBoardDRAPlan}
	for name, load := range cases {
		t.Run(name, func(t *testing.T) {
			plan, pool := load(t)
			arts, err := Artifacts(plan, pool)
			var pe *ProblemsError
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("Artifacts: %v", err)
			}
			files := map[string][]byte{"problems.txt": []byte(strings.Join(problemStrings(err), "\n") + "\n")}
			for _, a := range arts {
				files[a.Path] = a.Data
			}
			compareGolden(t, filepath.Join(goldenDir, name), files)
		})
	}
}

// compareGolden checks files against dir, or rewrites dir with -update.
func compareGolden(t *testing.T, dir string, files map[string][]byte) {
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		for p, data := range files {
			full := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	var onDisk []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		onDisk = append(onDisk, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatalf("read golden files (run with -update to create them): %v", err)
	}
	for p, data := range files {
		want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("%s: not in the golden files (run with -update)", p)
			continue
		}
		if !bytes.Equal(data, want) {
			t.Errorf("%s differs from the golden file (run with -update and review the diff):\n%s", p, data)
		}
	}
	for _, p := range onDisk {
		if _, ok := files[p]; !ok {
			t.Errorf("golden file %s is no longer rendered", p)
		}
	}
}

// migMPSProblem tells whether p is the device-plugin path's problem with a MIG instance the plan
// shares by MPS (checkMIGMPS): the plugin runs no MPS on MIG devices. The hand-written plans here
// share MIG instances by MPS on that path; the planner does not (TestPlannedPoolsRenderClean).
func migMPSProblem(pl *v1.Plan, p Problem) bool {
	var g, i int
	if _, err := fmt.Sscanf(p.Field, "gpus[%d].instances[%d].sharing", &g, &i); err != nil || g >= len(pl.GPUs) || i >= len(pl.GPUs[g].Instances) {
		return false
	}
	return pl.GPUs[g].Instances[i].Sharing.Mode == v1.SharingMPS && strings.Contains(p.Message, "policy.kubernetesDeviceAPI: dra")
}

// onlyMIGMPS fails unless every problem err carries is the device-plugin path's MIG + MPS one.
func onlyMIGMPS(t *testing.T, plan *v1.Plan, err error) {
	t.Helper()
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("Artifacts: %v", err)
	}
	for _, p := range problemsOf(pe) {
		if !migMPSProblem(plan, p) {
			t.Errorf("problem: %s", p)
		}
	}
}

// TestAllModesClean: the all-modes plan renders without problems but its MIG + MPS instance's
// (the device plugin runs no MPS on MIG devices), and each node shares what it should.
func TestAllModesClean(t *testing.T) {
	plan, pool := allModesPlan(t)
	arts, err := Artifacts(plan, pool)
	onlyMIGMPS(t, plan, err)
	files := artifactMap(arts)
	// n1: GPU 0 takes 1 + 1 + 2 = 4 references, GPU 1 takes 2 + 2 = 4.
	if c := decodeDP(t, files["device-plugin/n1.yaml"]); c.Sharing == nil || c.Sharing.TimeSlicing == nil ||
		!slices.Equal(c.Sharing.TimeSlicing.Resources, []ReplicatedResource{{"nvidia.com/gpu", 4}}) {
		t.Errorf("n1: %+v", c.Sharing)
	}
	if c := decodeDP(t, files["device-plugin/n2.yaml"]); c.Sharing == nil || c.Sharing.MPS == nil ||
		!slices.Equal(c.Sharing.MPS.Resources, []ReplicatedResource{{"nvidia.com/gpu", 2}}) {
		t.Errorf("n2: %+v", c.Sharing)
	}
	// n3: each 1g.10gb holds 2 time-sliced references; the MPS-shared 3g.40gb 2 references.
	want := []ReplicatedResource{{"nvidia.com/mig-1g.10gb", 2}, {"nvidia.com/mig-3g.40gb", 2}}
	if c := decodeDP(t, files["device-plugin/n3.yaml"]); c.Sharing == nil || c.Sharing.TimeSlicing == nil ||
		!slices.Equal(c.Sharing.TimeSlicing.Resources, want) {
		t.Errorf("n3: %+v", c.Sharing)
	}
	if c := decodeDP(t, files["device-plugin/n0.yaml"]); c.Sharing != nil {
		t.Errorf("n0 shares %+v", c.Sharing)
	}
}

// TestFixtureHasNoProblems: the schema's example plan is deployable as written: its MPS-shared
// instance (4g.40gb on gpu-node-a/4) is the only device of its resource on the node, so the
// node's device-plugin config hands out exactly that resource as 2 references per device (by
// time-slicing: the plugin runs no MPS on MIG instances, the one problem on that path). On the
// DRA path, which runs MPS on the instance, there is no problem at all.
func TestFixtureHasNoProblems(t *testing.T) {
	plan, pool := loadFixture(t)
	arts, err := Artifacts(plan, pool)
	onlyMIGMPS(t, plan, err)
	files := artifactMap(arts)
	c := decodeDP(t, files["device-plugin/gpu-node-a.yaml"])
	if c.Sharing == nil || c.Sharing.MPS != nil || c.Sharing.TimeSlicing == nil ||
		!slices.Equal(c.Sharing.TimeSlicing.Resources, []ReplicatedResource{{"nvidia.com/mig-4g.40gb", 2}}) {
		t.Errorf("gpu-node-a sharing %+v, want nvidia.com/mig-4g.40gb × 2 by time-slicing", c.Sharing)
	}
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, err = Artifacts(plan, pool)
	if err != nil {
		t.Fatalf("Artifacts (dra): %v", err)
	}
	if bytes.Contains(artifactMap(arts)["README.md"], []byte("## Problems")) {
		t.Error("README.md lists problems for a deployable plan")
	}
}

// TestMixedSharingProblem: plan-mixed-sharing.yaml keeps two unshared 3g.40gb instances (GPU 3)
// and an MPS-shared 3g.40gb instance (GPU 4) on one node; the device plugin shares all devices of
// a resource on a node alike, so that is the one problem beside the MIG + MPS one (the plugin runs
// no MPS on MIG devices), and nothing is shared.
func TestMixedSharingProblem(t *testing.T) {
	plan, pool := loadMixedSharing(t)
	arts, err := Artifacts(plan, pool)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *ProblemsError, got %v", err)
	}
	if len(pe.Problems) != 2 || pe.Problems[0].Node != "gpu-node-a" || pe.Problems[0].Resource != "nvidia.com/mig-3g.40gb" ||
		pe.Problems[0].Field != "" || !migMPSProblem(plan, pe.Problems[1]) {
		t.Fatalf("problems = %+v", pe.Problems)
	}
	files := artifactMap(arts)
	if c := decodeDP(t, files["device-plugin/gpu-node-a.yaml"]); c.Sharing != nil {
		t.Errorf("gpu-node-a shares %+v; the conflicting resource must stay unshared", c.Sharing)
	}
	if !bytes.Contains(files["README.md"], []byte("## Problems")) {
		t.Error("README.md does not list the problem")
	}
}

// TestDeterministic: the same input gives the same artifacts, byte for byte.
func TestDeterministic(t *testing.T) {
	plan, pool := loadFixture(t)
	a, _ := Artifacts(plan, pool)
	for range 5 {
		b, _ := Artifacts(plan, pool)
		if !slices.EqualFunc(a, b, func(x, y Artifact) bool { return x.Path == y.Path && bytes.Equal(x.Data, y.Data) }) {
			t.Fatal("two renderings of the same plan differ")
		}
	}
}
