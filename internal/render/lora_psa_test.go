package render

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// enginePods renders pl for pool on the given device path and returns the pod template of
// every shared LoRA engine's Deployment (k8s/<engine>.yaml) by engine, and the problems of the
// engines.
func enginePods(t *testing.T, pl *v1.Plan, pool *v1.Pool, api v1.KubernetesDeviceAPI) (map[string]corev1.PodSpec, []string) {
	t.Helper()
	files, err := renderOnPath(t, pl, pool, api)
	out := map[string]corev1.PodSpec{}
	for _, e := range pl.LoRAEngines {
		deps := decodeDeployments(t, files["k8s/"+e.Name+".yaml"])
		if len(deps) != 1 {
			t.Fatalf("engine %s: %d Deployments", e.Name, len(deps))
		}
		out[e.Name] = deps[0].Spec.Template.Spec
	}
	var problems []string // the engines' own: other tenants' problems are not theirs
	for _, ps := range problemStrings(err) {
		for _, e := range pl.LoRAEngines {
			if strings.Contains(ps, ": "+e.Name+": ") || strings.HasPrefix(ps, e.Name+": ") {
				problems = append(problems, ps)
				break
			}
		}
	}
	return out, problems
}

// Every shared LoRA engine pod rendered for the LoRA examples passes the Pod Security baseline on
// both device paths, and on the device-plugin path the examples' engines (adapters given by
// repo) render without problems. The same pools with their adapters on a PersistentVolumeClaim still do, the
// claim mounted read-only; with their adapters given by an absolute dir alone the pods still pass
// (nothing is mounted from the node) and every engine's adapter is a problem naming its field.
func TestLoRAEnginePodsPassBaseline(t *testing.T) {
	for _, f := range []string{"lora-200.yaml", "lora-mixed.yaml"} {
		pool := examplePool(t, f)
		pl, _, err := plan.BuildWithLoRA(context.Background(), pool, plan.Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.LoRAEngines) == 0 {
			t.Fatalf("%s: no engines planned: the test checks nothing", f)
		}
		served := 0 // adapter entries over all engines
		for _, e := range pl.LoRAEngines {
			served += len(e.Adapters)
		}
		for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
			pods, problems := enginePods(t, pl, pool, api)
			for name, spec := range pods {
				if why := baseline(t, &spec); why != "" {
					t.Errorf("%s (%s): engine %s: not baseline: %s", f, api, name, why)
				}
			}
			if api == v1.DeviceAPIDevicePlugin && len(problems) != 0 {
				t.Errorf("%s: problems %q", f, problems)
			}
		}

		variant := func(how string, set func(i int, a *v1.Adapter)) *v1.Pool {
			p := *pool
			p.Tenants = append([]v1.Tenant(nil), pool.Tenants...)
			for i := range p.Tenants {
				if a := p.Tenants[i].Model.Adapter; a != nil {
					c := *a
					set(i, &c)
					p.Tenants[i].Model.Adapter = &c
				}
			}
			if err := v1.Validate(&p); err != nil {
				t.Fatalf("%s, %s: %v", f, how, err)
			}
			return &p
		}
		onClaim := variant("on a claim", func(_ int, a *v1.Adapter) {
			a.Repo, a.Volume = "", &v1.AdapterVolume{ClaimName: "lora-adapters", SubPath: "acme/" + a.Name}
		})
		pods, problems := enginePods(t, pl, onClaim, v1.DeviceAPIDevicePlugin)
		mounted := 0
		for name, spec := range pods {
			if why := baseline(t, &spec); why != "" {
				t.Errorf("%s, on a claim: engine %s: not baseline: %s", f, name, why)
			}
			for _, m := range spec.Containers[0].VolumeMounts {
				if m.ReadOnly && strings.HasPrefix(m.MountPath, AdapterMountRoot+"/") && m.SubPath == "acme/"+strings.TrimPrefix(m.MountPath, AdapterMountRoot+"/") {
					mounted++
				}
			}
		}
		if len(problems) != 0 || mounted != served {
			t.Errorf("%s, on a claim: problems %q, %d adapters mounted at their subPath, want none and %d", f, problems, mounted, served)
		}

		onNode := variant("by an absolute dir", func(_ int, a *v1.Adapter) {
			a.Repo, a.Dir = "", "/srv/adapters/"+a.Name
		})
		pods, problems = enginePods(t, pl, onNode, v1.DeviceAPIDevicePlugin)
		for name, spec := range pods {
			if why := baseline(t, &spec); why != "" {
				t.Errorf("%s, by an absolute dir: engine %s: not baseline: %s", f, name, why)
			}
		}
		hostPathProblems := 0
		for _, p := range problems {
			if strings.Contains(p, ".model.adapter.dir: adapter ") && strings.Contains(p, "needs a hostPath volume") {
				hostPathProblems++
			}
		}
		if hostPathProblems != served {
			t.Errorf("%s, by an absolute dir: %d hostPath problems of %d, want one per adapter on an engine (%d): %s",
				f, hostPathProblems, len(problems), served, fmt.Sprint(problems[:min(3, len(problems))]))
		}
	}
}
