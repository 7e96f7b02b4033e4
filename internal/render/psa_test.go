package render

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// baseline evaluates a pod template against the Pod Security Standards' baseline level with the
// checks the API server's PodSecurity admission runs (k8s.io/pod-security-admission/policy):
// host namespaces (hostIPC, hostPID, hostNetwork), hostPath volumes, privileged containers,
// capabilities beyond the baseline set, host ports, AppArmor, SELinux, /proc mount, seccomp,
// sysctls and Windows host processes. It returns why the pod is forbidden, or "".
func baseline(t *testing.T, spec *corev1.PodSpec) string {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelBaseline, Version: psaapi.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, &metav1.ObjectMeta{}, spec))
	if res.Allowed {
		return ""
	}
	return res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

// tenantPods renders plan for pool on the given device path and returns the pod template of
// every tenant Deployment (k8s/<tenant>.yaml), by "<tenant>/<deployment>".
func tenantPods(t *testing.T, pl *v1.Plan, pool *v1.Pool, api v1.KubernetesDeviceAPI) map[string]corev1.PodSpec {
	t.Helper()
	files, _ := renderOnPath(t, pl, pool, api)
	out := map[string]corev1.PodSpec{}
	for _, tn := range pl.Tenants {
		data, ok := files["k8s/"+tn.Name+".yaml"]
		if !ok {
			continue // not an LLM tenant: no Deployment
		}
		for _, d := range decodeDeployments(t, data) {
			out[tn.Name+"/"+d.Name] = d.Spec.Template.Spec
		}
	}
	return out
}

// Every tenant pod rendered for the device plugin (and for DRA) passes the Pod Security baseline:
// MPS clients get the daemon's pipe directory and shared memory from whoever runs the daemon
// (the device plugin's Allocate, the DRA driver's CDI edits), never through hostIPC or a hostPath
// volume. Checked on the three golden plans (every slice kind, MIG + MPS included), the
// examples' planned pools and synthetic pools; the checker itself refuses the hostIPC + hostPath
// pod the MIG + MPS Deployments used to be.
func TestTenantPodsPassBaseline(t *testing.T) {
	type pp struct {
		name string
		plan *v1.Plan
		pool *v1.Pool
	}
	var cases []pp
	for name, load := range map[string]func(tb) (*v1.Plan, *v1.Pool){"example": loadFixture, "mixed-sharing": loadMixedSharing, "all-modes": allModesPlan} {
		pl, pool := load(t)
		cases = append(cases, pp{name, pl, pool})
	}
	build := func(name string, pool *v1.Pool) {
		pl, err := plan.Build(context.Background(), pool, plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, pp{name, pl, pool})
	}
	for _, f := range []string{"h100x8-mixed.yaml", "h100-7b-sharing.yaml", "h100-7b-sharing-4.yaml"} {
		build(f, examplePool(t, f))
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 4 {
		build(fmt.Sprintf("synthetic pool %d", i), plan.Synthetic(plan.SyntheticOptions{Tenants: 10 + rng.IntN(40), GPUs: 16 + rng.IntN(16), Varied: i%2 == 1}, rng))
	}
	migMPS := 0
	for _, c := range cases {
		for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
			pods := tenantPods(t, c.plan, c.pool, api)
			if len(pods) == 0 {
				t.Errorf("%s (%s): no tenant pods", c.name, api)
			}
			for name, spec := range pods {
				if why := baseline(t, &spec); why != "" {
					t.Errorf("%s (%s): %s: not baseline: %s", c.name, api, name, why)
				}
				if strings.Contains(name, "-mps") && strings.Contains(name, "-mig-") {
					migMPS++
				}
			}
		}
	}
	if migMPS == 0 {
		t.Fatal("no MIG + MPS Deployment among the cases: the test checks nothing about them")
	}

	// The checker refuses what the MIG + MPS pods used to be.
	pl, pool := allModesPlan(t)
	for name, spec := range tenantPods(t, pl, pool, v1.DeviceAPIDevicePlugin) {
		if !strings.Contains(name, "-mig-") || !strings.Contains(name, "-mps") {
			continue
		}
		hp := corev1.HostPathDirectory
		spec.HostIPC = true
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "mps-pipe", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/run/nvidia-mps", Type: &hp}}})
		why := baseline(t, &spec)
		if !strings.Contains(why, "host namespaces") || !strings.Contains(why, "hostPath volumes") {
			t.Errorf("%s with hostIPC and a hostPath volume: checker says %q", name, why)
		}
		return
	}
	t.Fatal("all-modes: no MIG + MPS Deployment")
}

// renderOnPath renders pl for pool on the given device path: the files by path and the render
// problems (nil when there are none); any other error fails the test.
func renderOnPath(t *testing.T, pl *v1.Plan, pool *v1.Pool, api v1.KubernetesDeviceAPI) (map[string][]byte, error) {
	t.Helper()
	p := *pool
	p.Policy.KubernetesDeviceAPI = api
	arts, err := Artifacts(pl, &p)
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatal(err)
	}
	return artifactMap(arts), err
}
