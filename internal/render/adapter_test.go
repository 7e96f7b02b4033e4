package render

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "gpupool.dev/gpupool/api/v1"
)

// An adapter tenant with replicas of its own (hard isolation keeps it out of shared engines)
// serves its adapter from them: --enable-lora and --lora-modules under the adapter's name, at the
// repo or at the mount of its volume, which its pod mounts read-only from the claim; an adapter
// given by an absolute dir alone is a problem with its field, and one without a rank in the pool
// leaves --max-lora-rank to vLLM with a note.
func TestOwnReplicaAdapterServed(t *testing.T) {
	pool := newPool(t, h100, []int{3},
		tenantSpec{"repo-ad", "a", v1.IsolationHard}, tenantSpec{"vol-ad", "b", v1.IsolationHard}, tenantSpec{"dir-ad", "c", v1.IsolationHard})
	pool.Tenants[0].Model.Adapter = &v1.Adapter{Name: "repo-lora", Repo: "acme/repo-lora", Rank: 24}
	pool.Tenants[1].Model.Adapter = &v1.Adapter{Name: "vol-lora", Volume: &v1.AdapterVolume{ClaimName: "adapters", SubPath: "vol"}, Rank: 8}
	pool.Tenants[2].Model.Adapter = &v1.Adapter{Name: "dir-lora", Dir: "/srv/adapters/dir-lora"}
	pl := newPlan(pool, h100)
	whole(pl, "n0", 0, v1.ModeExclusive, rep("repo-ad", v1.Limits{}))
	whole(pl, "n0", 1, v1.ModeExclusive, rep("vol-ad", v1.Limits{}))
	whole(pl, "n0", 2, v1.ModeExclusive, rep("dir-ad", v1.Limits{}))
	finish(pl, pool)
	arts, err := Artifacts(pl, pool)
	var pe *ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("want the dir-only adapter's problem, got %v", err)
	}
	if len(pe.Problems) != 1 || pe.Problems[0].Field != "tenants[2].model.adapter.dir" {
		t.Errorf("problems %v, want one on tenants[2].model.adapter.dir", pe.Problems)
	}
	files := artifactMap(arts)
	want := map[string][]string{
		"repo-ad": {"--enable-lora", "--max-loras 1", "--max-lora-rank 32", "--lora-modules repo-lora=acme/repo-lora"},
		"vol-ad":  {"--enable-lora", "--max-lora-rank 8", "--lora-modules vol-lora=" + AdapterMountPath("vol-lora")},
		"dir-ad":  {"--enable-lora", "--lora-modules dir-lora=/srv/adapters/dir-lora"},
	}
	for tenant, flags := range want {
		deps := decodeDeployments(t, files["k8s/"+tenant+".yaml"])
		if len(deps) != 1 {
			t.Fatalf("%s: %d Deployments", tenant, len(deps))
		}
		spec := deps[0].Spec.Template.Spec
		args := strings.Join(spec.Containers[0].Args, " ")
		if !containsAll(args, flags...) {
			t.Errorf("%s: args %s, want %v", tenant, args, flags)
		}
		if tenant == "dir-ad" && strings.Contains(args, "--max-lora-rank") {
			t.Errorf("dir-ad: args %s name a rank the pool does not give", args)
		}
		var claims []string
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s: hostPath volume %+v", tenant, v)
			}
			if c := v.PersistentVolumeClaim; c != nil && c.ReadOnly {
				claims = append(claims, c.ClaimName)
			}
		}
		mounted := slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPath == AdapterMountPath("vol-lora") && m.SubPath == "vol" && m.ReadOnly
		})
		if tenant == "vol-ad" && (!slices.Equal(claims, []string{"adapters"}) || !mounted) {
			t.Errorf("vol-ad: claims %v, mounted %v: want the claim mounted read-only", claims, mounted)
		}
		if tenant != "vol-ad" && len(claims) > 0 {
			t.Errorf("%s: claims %v", tenant, claims)
		}
	}
	readme := string(files["README.md"])
	if !strings.Contains(readme, "tenant dir-ad serves adapter dir-lora from replicas of its own with vLLM's default --max-lora-rank") {
		t.Errorf("README.md has no note on dir-ad's rank:\n%s", readme)
	}
}
