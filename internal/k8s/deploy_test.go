package k8s

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/webhook.yaml from PodGateWebhookConfiguration")

const deployDir = "../../deploy/kubernetes"

// deployObjects decodes every object of the kustomization's resources, in its order.
func deployObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(deployDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(deployDir, r))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := DecodeObjects(b)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		out = append(out, objs...)
	}
	return out
}

// webhookForDeploy is the webhook configuration the manifests hold: the controller's Service.
func webhookForDeploy() *admissionregistrationv1.MutatingWebhookConfiguration {
	path := WebhookPath
	return PodGateWebhookConfiguration(admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: "gpupool-system", Name: "gpupool-webhook", Path: &path, Port: ptrTo(int32(443))}})
}

// TestDeployManifestsMatchCode: the manifests' CRDs are the ones the controller installs, and
// their webhook configuration is PodGateWebhookConfiguration's (go test -run this -update
// rewrites it).
func TestDeployManifestsMatchCode(t *testing.T) {
	for _, f := range []string{"gpupool.dev_controlstates.yaml", "gpupool.dev_gpupools.yaml", "gpupool.dev_inferencetenants.yaml", "gpupool.dev_reconfigurations.yaml"} {
		want, err := crdFiles.ReadFile("crds/" + f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(deployDir, "crds", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/kubernetes/crds/%s differs from internal/k8s/crds/%s: copy it", f, f)
		}
	}
	b, err := yaml.Marshal(webhookForDeploy())
	if err != nil {
		t.Fatal(err)
	}
	b = append([]byte("# Generated from k8s.PodGateWebhookConfiguration (go test ./internal/k8s -run TestDeployManifestsMatchCode -update).\n"), b...)
	p := filepath.Join(deployDir, "webhook.yaml")
	if *update {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b) {
		t.Errorf("%s differs from PodGateWebhookConfiguration; rewrite it with -update", p)
	}
}

// ensureNamespace creates ns unless it exists.
func ensureNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestDeployDryRun applies every object of deploy/kubernetes with server-side dry run on the real
// API server (kubectl apply --dry-run=server): schemas, RBAC references, the webhook
// configuration and the Deployment are validated and admitted there, and nothing is stored. The
// namespaces the objects live in must exist for that, so the test creates gpupool-system and the
// GPU Operator's gpu-operator first.
func TestDeployDryRun(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ensureNamespace(t, c, "gpupool-system")
	ensureNamespace(t, c, "gpu-operator")
	ensureNamespace(t, c, "gpupool-node")
	objs := deployObjects(t)
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		if u.GetKind() == "Deployment" || u.GetKind() == "DaemonSet" {
			// what kustomize's images: entry does
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, ci := range cs {
				ci.(map[string]any)["image"] = "gpupool:v0.1.0"
			}
			if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"); err != nil {
				t.Fatal(err)
			}
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gpupool-deploy-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "MutatingWebhookConfiguration", "DaemonSet", "ConfigMap"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in deploy/kubernetes", k)
		}
	}
	t.Logf("%d objects accepted with dry run: %v", len(objs), kinds)
}

// applyRBAC applies the manifests' ServiceAccount and RBAC objects for real and returns a
// config that impersonates the ServiceAccount.
func applyRBAC(t *testing.T, c client.Client) *rest.Config {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, c, "gpupool-system")
	ensureNamespace(t, c, "gpu-operator")
	for _, u := range deployObjects(t) {
		switch u.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gpupool-deploy-test"), client.ForceOwnership); err != nil {
				t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	cfg := rest.CopyConfig(testCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:gpupool-system:gpupool-controller"}
	return cfg
}

// TestDeployRBACDenies: the ServiceAccount cannot do what the controller never does (read
// Secrets, delete nodes, write ConfigMaps outside the GPU Operator's namespace), so the RBAC test
// below is not passing on a wildcard.
func TestDeployRBACDenies(t *testing.T) {
	c := needAPI(t)
	cfg := applyRBAC(t, c)
	sa := clientFor(t, cfg)
	ctx := context.Background()
	ns := newNamespace(t, c, "rbac")
	for what, err := range map[string]error{
		"list secrets":             sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
		"delete a node":            sa.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-such-node"}}),
		"create a configmap":       sa.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}),
		"list controlstates":       sa.List(ctx, &ControlStateList{}, client.InNamespace(ns)),
		"create a GPUPool":         sa.Create(ctx, &GPUPool{ObjectMeta: metav1.ObjectMeta{Name: "rbac-x"}, Spec: GPUPoolSpec{NodeSelector: map[string]string{"a": "b"}}}),
		"create a lease elsewhere": sa.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: ns}}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want forbidden", what, err)
		}
	}
	// The node agent does not talk to the API: its ServiceAccount may do nothing.
	acfg := rest.CopyConfig(testCfg)
	acfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:gpupool-node:gpupool-agent"}
	agentSA := clientFor(t, acfg)
	for what, err := range map[string]error{
		"get a node":            agentSA.Get(ctx, client.ObjectKey{Name: "no-such-node"}, &corev1.Node{}),
		"list pods":             agentSA.List(ctx, &corev1.PodList{}, client.InNamespace(ns)),
		"list configmaps":       agentSA.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("gpupool-node")),
		"list GPUPools":         agentSA.List(ctx, &GPUPoolList{}),
		"create a pod eviction": agentSA.SubResource("eviction").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}, &policyv1.Eviction{}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("agent: %s: %v, want forbidden", what, err)
		}
	}
}

// TestDeployAgentPod: a pod of the agent's DaemonSet, as the DaemonSet controller would create it
// on a node, passes the API server's admission (Pod Security privileged in the agent's
// namespace, the GPU Operator's RuntimeClass nvidia) with server-side dry run, and the same pod is
// refused in the controller's namespace, whose Pod Security level is restricted: the agent needs
// its own namespace.
func TestDeployAgentPod(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	applyRBAC(t, c) // the namespaces, with their Pod Security labels, and the ServiceAccounts
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"}
	if err := c.Create(ctx, rc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	for _, u := range deployObjects(t) {
		if u.GetKind() == "DaemonSet" {
			ds = &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in deploy/kubernetes")
	}
	if ds.Spec.Template.Spec.AutomountServiceAccountToken == nil || *ds.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("the agent's pods mount a ServiceAccount token they have no use for")
	}
	pod := func(ns string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpupool-agent-x", Namespace: ns, Labels: ds.Spec.Template.Labels},
			Spec: *ds.Spec.Template.Spec.DeepCopy()}
		p.Spec.NodeName = "some-node"
		p.Spec.Containers[0].Image = "gpupool:v0.1.0"
		return p
	}
	if err := c.Create(ctx, pod(ds.Namespace), client.DryRunAll); err != nil {
		t.Errorf("agent pod in %s: %v", ds.Namespace, err)
	}
	err := c.Create(ctx, pod("gpupool-system"), client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("agent pod in gpupool-system (restricted): %v, want refused by Pod Security", err)
	}
}

// TestDockerfile: the image's base images are pinned (a tag, never latest), the build image's Go
// is go.mod's, and the final stage runs as a non-root user.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goVersion string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goVersion = strings.TrimSpace(v)
		}
	}
	var froms []string
	user := ""
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "FROM":
			froms = append(froms, f[1])
			user = "" // a new stage
		case len(f) >= 2 && f[0] == "USER":
			user = f[1]
		}
	}
	if len(froms) < 2 {
		t.Fatalf("FROM lines %v: want a build stage and a runtime stage", froms)
	}
	for _, img := range froms {
		name := img[strings.LastIndex(img, "/")+1:]
		tag := ""
		if i := strings.Index(name, ":"); i >= 0 {
			tag = name[i+1:]
		}
		if tag == "" || tag == "latest" {
			t.Errorf("base image %s: not pinned to a tag", img)
		}
		if strings.Contains(name, "golang:") && !strings.HasPrefix(tag, goVersion+"-") && tag != goVersion {
			t.Errorf("build image %s: want Go %s (go.mod)", img, goVersion)
		}
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Errorf("final stage USER %q: want a non-root user", user)
	}
}
