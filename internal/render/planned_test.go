package render

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// Every plan the planner produces can be served as planned on the pool's own device path: the
// examples' pools and synthetic pools of 1–60 tenants on 16–47 GPUs (mixed tiers, ten trust
// groups; every other pool with varied lengths, SLOs and concurrency), each planned once with
// policy.kubernetesDeviceAPI unset (the device plugin) and once with dra, render without any
// problem: on the device-plugin path no node needs two sharing settings for one resource,
// time-slicing and MPS together, whole-GPU MPS beside MIG GPUs, or shared instances of one
// profile holding tenants of different trust paths, and no MIG instance is shared by MPS (the
// plugin runs no MPS on MIG devices); on the DRA path each device is a claim with its own
// sharing, and what the device plugin's config could not express is a note
// (TestDRAPlanNodeRulesAreNotes). The DRA plans do share MIG instances by MPS (checked over
// the whole run), so both paths are exercised.
func TestPlannedPoolsRenderClean(t *testing.T) {
	draMIGMPS := 0
	check := func(name string, pool *v1.Pool) {
		t.Helper()
		for _, api := range []v1.KubernetesDeviceAPI{"", v1.DeviceAPIDRA} {
			p := *pool
			p.Policy.KubernetesDeviceAPI = api
			pl, err := plan.Build(context.Background(), &p, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Artifacts(pl, &p)
			var pe *ProblemsError
			if err != nil && !errors.As(err, &pe) {
				t.Fatal(err)
			}
			for _, pr := range problemsOf(pe) {
				t.Errorf("%s (device API %q): %s", name, api, pr)
			}
			if api == v1.DeviceAPIDRA {
				draMIGMPS += migMPSCount(pl)
			}
		}
	}
	for _, f := range []string{"h100x8-mixed.yaml", "h100-7b-exclusive.yaml", "h100-7b-sharing.yaml", "h100-7b-sharing-4.yaml"} {
		check(f, examplePool(t, f))
	}
	n := 60
	if testing.Short() {
		n = 15
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range n {
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 1 + rng.IntN(60), GPUs: 16 + rng.IntN(32), Varied: i%2 == 1}, rng)
		check(fmt.Sprintf("synthetic pool %d (%d tenants)", i, len(pool.Tenants)), pool)
	}
	if draMIGMPS == 0 {
		t.Error("no DRA plan shares a MIG instance by MPS: the test no longer covers that path")
	}
}

// migMPSCount counts the MIG instances with replicas that pl shares by MPS.
func migMPSCount(pl *v1.Plan) int {
	n := 0
	for _, g := range pl.GPUs {
		for _, in := range g.Instances {
			if in.Sharing.Mode == v1.SharingMPS && len(in.Replicas) > 0 {
				n++
			}
		}
	}
	return n
}

// examplePool loads the pool examples/<f>.
func examplePool(t *testing.T, f string) *v1.Pool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", f))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := v1.LoadPool(data)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func problemsOf(pe *ProblemsError) []Problem {
	if pe == nil {
		return nil
	}
	return pe.Problems
}

// A tensor-parallel plan renders as one pod per replica requesting the group's GPUs, vLLM told
// the degree, a memory-backed /dev/shm, and an unshared nvidia.com/gpu on a node with
// migStrategy none: Llama-3.1-70B in bf16 on H100s, which the planner gives groups of 2 GPUs.
func TestTensorParallelRendered(t *testing.T) {
	pool, err := v1.LoadPool([]byte(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: tp}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100-SXM5-80GB, count: 8}]
policy:
  burstPoolPercent: 0
tenants:
- name: big
  model: {name: llama-3.1-70b, quantization: bf16}
  isolation: hard
  concurrency: 32
  traffic: {rps: 0.5, inputTokens: 1024, outputTokens: 256}
  slo: {ttftP99: 5s, tpotP99: 100ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(context.Background(), pool, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Tenants[0].Infeasible {
		t.Fatalf("infeasible: %v", pl.Tenants[0].Reasons)
	}
	size := 0
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			size = r.TensorParallel.Size
		}
	}
	if size < 2 {
		t.Fatalf("no tensor-parallel replica in the plan")
	}
	arts, err := Artifacts(pl, pool)
	if err != nil {
		t.Fatal(err)
	}
	files := artifactMap(arts)
	deps := decodeDeployments(t, files["k8s/big.yaml"])
	if len(deps) != 1 || *deps[0].Spec.Replicas != int32(len(pl.Tenants[0].Replicas)) {
		t.Fatalf("%d deployments for %d replicas", len(deps), len(pl.Tenants[0].Replicas))
	}
	c := deps[0].Spec.Template.Spec.Containers[0]
	if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != int64(size) || len(c.Resources.Limits) != 1 {
		t.Errorf("limits %v, want nvidia.com/gpu: %d", c.Resources.Limits, size)
	}
	if v := flagValue(c.Args, "--tensor-parallel-size"); v != strconv.Itoa(size) {
		t.Errorf("args %v: --tensor-parallel-size %q, want %d", c.Args, v, size)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/dev/shm" {
		t.Errorf("mounts %v, want a /dev/shm", c.VolumeMounts)
	}
	if !strings.HasSuffix(deps[0].Name, "-tp"+strconv.Itoa(size)) {
		t.Errorf("deployment %q does not name the degree", deps[0].Name)
	}
	dp := decodeDP(t, files["device-plugin/n0.yaml"])
	if dp.Flags.MigStrategy != MigStrategyNone || dp.Sharing != nil {
		t.Errorf("device plugin config %+v, want migStrategy none and no sharing", dp)
	}
	if !strings.Contains(string(files["vllm/big.yaml"]), "gpuCount: "+strconv.Itoa(size)) {
		t.Errorf("vllm/big.yaml does not give the GPU count:\n%s", files["vllm/big.yaml"])
	}
}
