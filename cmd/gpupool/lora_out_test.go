package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/render"
)

var updateLoRAOut = flag.Bool("update-lora-out", false, "rewrite testdata/lora-out/golden")

// vllmServeFlags are the flags the engines' arguments may use, as vLLM v0.12.0's `vllm serve`
// defines them: --model, --enable-lora, --max-loras, --max-lora-rank and --max-cpu-loras in
// vllm/engine/arg_utils.py (EngineArgs.add_cli_args; the LoRA ones from LoRAConfig's fields,
// vllm/config/lora.py), --lora-modules in vllm/entrypoints/openai/cli_args.py (FrontendArgs,
// nargs "+", each value name=path). The value says whether the flag takes values: 0 none, 1 one,
// -1 one or more.
var vllmServeFlags = map[string]int{"--model": 1, "--enable-lora": 0, "--max-loras": 1, "--max-lora-rank": 1,
	"--max-cpu-loras": 1, "--lora-modules": -1}

// parseServeArgs parses args as vllm serve's argparse would for the flags above; unknown flags,
// missing values and values without a flag fail the test.
func parseServeArgs(t *testing.T, args []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for i := 0; i < len(args); {
		f := args[i]
		n, ok := vllmServeFlags[f]
		if !ok {
			t.Fatalf("argument %q (at %d) is not a vllm serve flag of v0.12.0: %q", f, i, args)
		}
		if _, dup := out[f]; dup {
			t.Fatalf("flag %s given twice: %q", f, args)
		}
		i++
		vals := []string{}
		for i < len(args) && !strings.HasPrefix(args[i], "--") && (n == -1 || len(vals) < n) {
			vals = append(vals, args[i])
			i++
		}
		if (n == 1 && len(vals) != 1) || (n == -1 && len(vals) == 0) {
			t.Fatalf("flag %s has values %q", f, vals)
		}
		out[f] = vals
	}
	return out
}

// lora --out on a pool with a hot adapter the plan spreads over two engines, five small ones
// and one adapter of another trust group: every engine is a Deployment whose pods its
// InferencePool selects, with arguments vllm serve parses; every adapter is in the
// --lora-modules of exactly the engines the plan gives it; the directory is byte-stable and
// matches the golden copy.
func TestLoRAOut(t *testing.T) {
	pool := filepath.Join("testdata", "lora-out", "pool.yaml")
	dir := filepath.Join(t.TempDir(), "out")
	args := []string{"lora", pool, "--simulate", "0", "--gateway", "gw", "--namespace", "ml", "--out", dir}
	if _, stderr, code := runCmd(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files := readTree(t, dir)

	// The plan's engines per adapter, from lora.json's shares.
	var res loraOut
	if err := json.Unmarshal(files["lora.json"], &res); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{} // adapter name → engines
	for _, g := range res.Groups {
		for _, s := range g.Shares {
			want[s.Tenant+"-lora"] = append(want[s.Tenant+"-lora"], s.Engine)
		}
	}
	if len(want) != 7 || len(want["hot-lora"]) < 2 {
		t.Fatalf("plan: engines per adapter %v; want 7 adapters, hot-lora on several engines", want)
	}

	got := map[string][]string{}
	podLabels := map[string]map[string]string{} // deployment → pod labels
	for path, data := range files {
		if !strings.HasPrefix(path, "k8s/") {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(data, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.Kind != "Deployment" || d.Namespace != "ml" || *d.Spec.Replicas != 1 || path != "k8s/"+d.Name+".yaml" {
			t.Errorf("%s: %s %s/%s replicas %d", path, d.Kind, d.Namespace, d.Name, *d.Spec.Replicas)
		}
		for k, v := range d.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: selector %s=%s does not select its own pods %v", path, k, v, d.Spec.Template.Labels)
			}
		}
		podLabels[d.Name] = d.Spec.Template.Labels
		c := d.Spec.Template.Spec.Containers[0]
		if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 || !strings.HasPrefix(c.Image, "vllm/vllm-openai:v") {
			t.Errorf("%s: gpu limit %v, image %s", path, q.String(), c.Image)
		}
		a := parseServeArgs(t, c.Args)
		maxLoRAs, _ := strconv.Atoi(a["--max-loras"][0])
		rank, _ := strconv.Atoi(a["--max-lora-rank"][0])
		cpu, _ := strconv.Atoi(a["--max-cpu-loras"][0])
		if a["--model"][0] != "meta-llama/Llama-3.1-8B" || a["--enable-lora"] == nil || maxLoRAs < 1 ||
			!slices.Contains(llm.LoRARanks, rank) || cpu < maxLoRAs || cpu < len(a["--lora-modules"]) {
			t.Errorf("%s: arguments %v", path, a)
		}
		for _, m := range a["--lora-modules"] {
			name, p, ok := strings.Cut(m, "=")
			if name == "s5-lora" {
				// On its claim: mounted read-only at its subPath, served from the mount.
				mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.MountPath == p && m.SubPath == "acme/s5-lora" && m.ReadOnly && slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
						return v.Name == m.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "lora-adapters" && v.PersistentVolumeClaim.ReadOnly
					})
				})
				if p != "/adapters/s5-lora" || !mounted {
					t.Errorf("%s: s5-lora at %q, mounts %+v, volumes %+v", path, p, c.VolumeMounts, d.Spec.Template.Spec.Volumes)
				}
			} else if !ok || p != "acme/"+name {
				t.Errorf("%s: --lora-modules value %q, want name=acme/name", path, m)
			}
			got[name] = append(got[name], d.Name)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s: hostPath volume %+v", path, v)
			}
		}
	}
	for n := range want {
		sort.Strings(want[n])
		sort.Strings(got[n])
		if !slices.Equal(got[n], want[n]) {
			t.Errorf("adapter %s in the --lora-modules of %v; the plan puts it on %v", n, got[n], want[n])
		}
	}
	if len(got) != len(want) {
		t.Errorf("--lora-modules name %d adapters, the plan %d", len(got), len(want))
	}

	// Every InferencePool selects the pods of exactly one Deployment: its engine's.
	pools := 0
	for path, data := range files {
		if !strings.HasPrefix(path, "gateway/") {
			continue
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var o struct {
				Kind     string
				Metadata struct{ Name string }
				Spec     struct {
					Selector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					}
				}
			}
			if err := yaml.Unmarshal(doc, &o); err != nil {
				t.Fatal(err)
			}
			if o.Kind != "InferencePool" {
				continue
			}
			pools++
			var selected []string
			for dep, labels := range podLabels {
				match := len(o.Spec.Selector.MatchLabels) > 0
				for k, v := range o.Spec.Selector.MatchLabels {
					match = match && labels[k] == v
				}
				if match {
					selected = append(selected, dep)
				}
			}
			if len(selected) != 1 || selected[0] != o.Metadata.Name {
				t.Errorf("InferencePool %s selects the pods of %v", o.Metadata.Name, selected)
			}
		}
	}
	if pools != len(podLabels) || pools != 3 {
		t.Errorf("%d InferencePools for %d Deployments, want 3 each", pools, len(podLabels))
	}

	checkEndpointPickers(t, files, "ml", 3)

	// A second run into a fresh directory writes the same bytes; both match the golden copy.
	dir2 := filepath.Join(t.TempDir(), "out")
	if _, stderr, code := runCmd(t, append(args[:len(args)-1], dir2)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files2 := readTree(t, dir2)
	golden := filepath.Join("testdata", "lora-out", "golden")
	if *updateLoRAOut {
		if err := os.RemoveAll(golden); err != nil {
			t.Fatal(err)
		}
		for p, b := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(golden, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(golden, p), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want3 := readTree(t, golden)
	for _, other := range []map[string][]byte{files2, want3} {
		if len(other) != len(files) {
			t.Errorf("%d files, then %d", len(files), len(other))
		}
		for p, b := range files {
			if !bytes.Equal(other[p], b) {
				t.Errorf("%s differs between runs or from %s (go test ./cmd/gpupool -run TestLoRAOut -update-lora-out rewrites it)", p, golden)
			}
		}
	}
}

// eppFlags are the endpoint picker flags the rendered pickers may use, as the extension's v1.5.0
// defines them: pool-name, pool-namespace, pool-group, config-file and tracing in
// pkg/epp/server/options.go (Options.AddFlags), v and the zap flags in
// pkg/common/observability/logging/options.go.
var eppFlags = map[string]bool{"--pool-name": true, "--pool-namespace": true, "--pool-group": true,
	"--config-file": true, "--tracing": true, "--v": true, "--zap-encoder": true}

// strictAs decodes one YAML document strictly into a T (unknown fields fail the test).
func strictAs[T any](t *testing.T, doc []byte, where string) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return v
}

// checkEndpointPickers checks the endpoint pickers of an output directory's gateway/ files: every
// object decodes strictly into its Kubernetes type; each of the pools InferencePools (their
// endpointPickerRef) names a Service of that name on the ext-proc port whose selector picks the
// pods of the picker's Deployment, which runs the pinned image for that pool and namespace with
// gRPC health probes, under a ServiceAccount whose Roles let it watch pods, InferencePools and
// InferenceObjectives, and reads its plugins from a ConfigMap that holds an EndpointPickerConfig.
func checkEndpointPickers(t *testing.T, files map[string][]byte, ns string, pools int) {
	t.Helper()
	refs := map[string]string{} // pool → picker
	deps := map[string]appsv1.Deployment{}
	svcs := map[string]corev1.Service{}
	cms := map[string]corev1.ConfigMap{}
	sas := map[string]bool{}
	can := map[string]map[string]bool{} // service account → "group/resource" it may watch
	roles := map[string]rbacv1.Role{}
	var bindings []rbacv1.RoleBinding
	for path, data := range files {
		if !strings.HasPrefix(path, "gateway/") {
			continue
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var head struct {
				Kind     string
				Metadata struct{ Name, Namespace string }
				Spec     struct {
					EndpointPickerRef struct {
						Name string
						Port struct{ Number int }
					} `json:"endpointPickerRef"`
				}
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if head.Metadata.Namespace != ns {
				t.Errorf("%s: %s %s in namespace %q", path, head.Kind, head.Metadata.Name, head.Metadata.Namespace)
			}
			where := path + ": " + head.Kind + " " + head.Metadata.Name
			switch head.Kind {
			case "InferencePool":
				if head.Spec.EndpointPickerRef.Port.Number != 9002 {
					t.Errorf("pool %s: endpoint picker port %d", head.Metadata.Name, head.Spec.EndpointPickerRef.Port.Number)
				}
				refs[head.Metadata.Name] = head.Spec.EndpointPickerRef.Name
			case "Deployment":
				deps[head.Metadata.Name] = strictAs[appsv1.Deployment](t, doc, where)
			case "Service":
				svcs[head.Metadata.Name] = strictAs[corev1.Service](t, doc, where)
			case "ConfigMap":
				cms[head.Metadata.Name] = strictAs[corev1.ConfigMap](t, doc, where)
			case "ServiceAccount":
				sas[strictAs[corev1.ServiceAccount](t, doc, where).Name] = true
			case "Role":
				roles[head.Metadata.Name] = strictAs[rbacv1.Role](t, doc, where)
			case "RoleBinding":
				bindings = append(bindings, strictAs[rbacv1.RoleBinding](t, doc, where))
			case "InferenceObjective", "HTTPRoute":
			default:
				t.Errorf("%s: unexpected kind %q", path, head.Kind)
			}
		}
	}
	for _, b := range bindings {
		r, ok := roles[b.RoleRef.Name]
		if !ok || b.RoleRef.Kind != "Role" || len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Namespace != ns {
			t.Errorf("role binding %s: %+v", b.Name, b)
			continue
		}
		for _, rule := range r.Rules {
			if !slices.Contains(rule.Verbs, "watch") || !slices.Contains(rule.Verbs, "list") || !slices.Contains(rule.Verbs, "get") {
				continue
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					if can[b.Subjects[0].Name] == nil {
						can[b.Subjects[0].Name] = map[string]bool{}
					}
					can[b.Subjects[0].Name][g+"/"+res] = true
				}
			}
		}
	}
	if len(refs) != pools {
		t.Fatalf("%d InferencePools, want %d", len(refs), pools)
	}
	for pool, name := range refs {
		svc, ok := svcs[name]
		d, dok := deps[name]
		if !ok || !dok {
			t.Errorf("pool %s: no Service and Deployment %s for its endpoint picker", pool, name)
			continue
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 9002 && p.TargetPort.IntValue() == 9002 }) {
			t.Errorf("service %s: ports %+v, want ext-proc on 9002", name, svc.Spec.Ports)
		}
		for k, v := range svc.Spec.Selector {
			if d.Spec.Template.Labels[k] != v || d.Spec.Selector.MatchLabels[k] != v {
				t.Errorf("service %s selects %s=%s, not the pods of its Deployment %v", name, k, v, d.Spec.Template.Labels)
			}
		}
		c := d.Spec.Template.Spec.Containers[0]
		for _, a := range c.Args {
			f, _, _ := strings.Cut(a, "=")
			if strings.HasPrefix(f, "--") && !eppFlags[f] {
				t.Errorf("picker %s: %s is not a flag of the v1.5.0 endpoint picker", name, f)
			}
		}
		args := strings.Join(c.Args, " ")
		if c.Image != render.EPPImage || strings.HasSuffix(c.Image, ":latest") ||
			!strings.Contains(args, "--pool-name "+pool+" --pool-namespace "+ns+" --pool-group inference.networking.k8s.io") {
			t.Errorf("picker %s: image %s, args %q", name, c.Image, args)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.GRPC == nil || c.ReadinessProbe.GRPC.Port != 9003 ||
			!slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 9002 }) {
			t.Errorf("picker %s: probe %+v, ports %+v", name, c.ReadinessProbe, c.Ports)
		}
		sa := d.Spec.Template.Spec.ServiceAccountName
		for _, need := range []string{"/pods", "inference.networking.k8s.io/inferencepools", "inference.networking.x-k8s.io/inferenceobjectives"} {
			if !sas[sa] || !can[sa][need] {
				t.Errorf("picker %s: service account %q (exists: %v) may not watch %s", name, sa, sas[sa], need)
			}
		}
		vol := d.Spec.Template.Spec.Volumes[0].ConfigMap
		var cfg struct{ Kind string }
		if vol == nil || len(cms[vol.Name].Data) != 1 {
			t.Errorf("picker %s: plugins volume %+v", name, vol)
		} else {
			for _, v := range cms[vol.Name].Data {
				if err := yaml.Unmarshal([]byte(v), &cfg); err != nil || cfg.Kind != "EndpointPickerConfig" {
					t.Errorf("picker %s: plugins %q: %v", name, v, err)
				}
			}
		}
	}
}

// --out refuses a non-empty directory gpupool did not write, leaving it as it was, unless
// --force; it needs --gateway.
func TestLoRAOutRefusesForeignDir(t *testing.T) {
	pool := filepath.Join("testdata", "lora-out", "pool.yaml")
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"lora", pool, "--simulate", "0", "--gateway", "gw", "--out", dir}
	_, stderr, code := runCmd(t, args...)
	if code != 1 || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "flag --out") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b, err := os.ReadFile(mine); err != nil || string(b) != "mine" {
		t.Fatalf("the directory was changed: %q %v", b, err)
	}
	if _, stderr, code := runCmd(t, append(args, "--force")...); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(mine); !os.IsNotExist(err) {
		t.Errorf("--force kept %s: %v", mine, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "k8s", "llama-3-1-8b-lora-0.yaml")); err != nil {
		t.Error(err)
	}
	// A second run over its own output needs no --force.
	if _, stderr, code := runCmd(t, args...); code != 0 {
		t.Fatalf("rerun: exit %d: %s", code, stderr)
	}
	_, stderr, code = runCmd(t, "lora", pool, "--simulate", "0", "--out", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "flag --gateway: required with --out") {
		t.Errorf("--out without --gateway: exit %d: %s", code, stderr)
	}
}

// readTree reads every regular file under dir by its slash path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lora --out with an adapter given by a folder only (no volume): the engine would need a hostPath
// volume, which the Pod Security baseline forbids, so the directory is written with the folder
// passed as written and nothing mounted from the node, and the problem names the adapter's field
// (exit 2).
func TestLoRAOutAdapterDirIsAProblem(t *testing.T) {
	pool := loraPool(t, peftDir(t, 16), 0)
	dir := filepath.Join(t.TempDir(), "out")
	_, stderr, code := runCmd(t, "lora", pool, "--simulate", "0", "--gateway", "gw", "--out", dir)
	if code != 2 || !strings.Contains(stderr, "llama-3-1-8b-lora-0: tenants[0].model.adapter.dir: adapter a-lora: ") ||
		!strings.Contains(stderr, "needs a hostPath volume, and the Pod Security baseline forbids those") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	spec := readDeployment(t, filepath.Join(dir, "k8s", "llama-3-1-8b-lora-0.yaml")).Spec.Template.Spec
	if args := strings.Join(spec.Containers[0].Args, " "); !strings.Contains(args, "a-lora="+adapterDirOf(t, pool)) {
		t.Errorf("args %s", args)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("hostPath volume %+v", v)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Error(err)
	}
}
