package k8s

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "gpupool.dev/gpupool/api/v1"
)

func ptr[T any](v T) *T { return &v }

// TestGPUPoolRoundTrip writes a GPUPool with every policy field through the real API server and
// reads back exactly what the Go types hold, so the schema drops no field (structural schemas
// prune unknown ones silently).
func TestGPUPoolRoundTrip(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	cooldown, err := v1.ParseDuration("30m")
	if err != nil {
		t.Fatal(err)
	}
	p := &GPUPool{
		ObjectMeta: metav1.ObjectMeta{Name: "roundtrip"},
		Spec: GPUPoolSpec{
			NodeSelector: map[string]string{"gpupool.dev/pool": "a"},
			Policy: v1.Policy{
				CanaryGPUs:       []v1.GPURef{{Node: "node-1", Index: 7}},
				BurstPoolPercent: ptr(20),
				AllowedModes:     []v1.Mode{v1.ModeMIG, v1.ModeMPS},
				MaxUnavailable:   &v1.IntOrPercent{Value: 25, Percent: true},
				ReconfigCooldown: &cooldown,
				// The hand-written schema had no cost fields and pruned them; the generated one
				// follows the type.
				Cost: &v1.CostPolicy{Currency: "USD", IdlePolicy: v1.IdleNone,
					Boards: []v1.BoardCost{{Board: "H100-SXM5-80GB", HourlyPrice: ptr(2.5), Source: "quote 2026-01"}},
					PUE:    &v1.SourcedValue{Value: 1.3, Source: "facility report"}},
				KubernetesDeviceAPI: v1.DeviceAPIDRA,
				MaxMoves:            ptr(4),
			},
		},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	got := &GPUPool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Spec, p.Spec) {
		t.Fatalf("spec after the API server:\n got %+v\nwant %+v", got.Spec, p.Spec)
	}
	got.Status = GPUPoolStatus{ObservedGeneration: got.Generation, Nodes: 2, GPUs: 16, Replicas: 9, PlanDigest: "abc",
		Conditions: []metav1.Condition{{Type: "Planned", Status: metav1.ConditionTrue, Reason: "PlanApplied", Message: "ok", LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	again := &GPUPool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), again); err != nil {
		t.Fatal(err)
	}
	if again.Status.GPUs != 16 || len(again.Status.Conditions) != 1 {
		t.Fatalf("status after update: %+v", again.Status)
	}
}

// TestCRDValidation has the real API server reject objects that break the schemas and CEL rules;
// each case names the field the error must mention.
func TestCRDValidation(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "crd")
	tenant := func(name string, edit func(*v1.Tenant)) *InferenceTenant {
		tn := v1.Tenant{Model: v1.Model{Name: "llama-3.1-8b"}}
		edit(&tn)
		return &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: InferenceTenantSpec{Pool: "a", Tenant: tn}}
	}
	pool := func(name string, edit func(*GPUPoolSpec)) *GPUPool {
		s := GPUPoolSpec{NodeSelector: map[string]string{"gpupool.dev/pool": "a"}}
		edit(&s)
		return &GPUPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}
	}
	cases := []struct {
		name string
		obj  client.Object
		want string // "" means accepted
	}{
		{"valid tenant", tenant("ok", func(*v1.Tenant) {}), ""},
		{"valid pool", pool("ok", func(*GPUPoolSpec) {}), ""},
		{"empty node selector", pool("nosel", func(s *GPUPoolSpec) { s.NodeSelector = map[string]string{} }), "spec.nodeSelector"},
		{"burst over 50", pool("burst", func(s *GPUPoolSpec) { s.Policy.BurstPoolPercent = ptr(60) }), "spec.policy.burstPoolPercent"},
		{"maxUnavailable 0", pool("mu0", func(s *GPUPoolSpec) { s.Policy.MaxUnavailable = &v1.IntOrPercent{Value: 0} }), "spec.policy.maxUnavailable"},
		{"maxUnavailable 150%", pool("mu150", func(s *GPUPoolSpec) { s.Policy.MaxUnavailable = &v1.IntOrPercent{Value: 150, Percent: true} }), "spec.policy.maxUnavailable"},
		{"dra pool with a move budget", pool("dra", func(s *GPUPoolSpec) { s.Policy.KubernetesDeviceAPI, s.Policy.MaxMoves = v1.DeviceAPIDRA, ptr(3) }), ""},
		{"unknown device API", pool("devapi", func(s *GPUPoolSpec) { s.Policy.KubernetesDeviceAPI = "nvidia" }), "spec.policy.kubernetesDeviceAPI"},
		{"negative move budget", pool("moves", func(s *GPUPoolSpec) { s.Policy.MaxMoves = ptr(-1) }), "spec.policy.maxMoves"},
		{"unknown mode", pool("mode", func(s *GPUPoolSpec) { s.Policy.AllowedModes = []v1.Mode{"vgpu"} }), "spec.policy.allowedModes[0]"},
		{"cap below reservation", tenant("cap", func(tn *v1.Tenant) { tn.Reservation = 3; tn.Cap = ptr(2) }), "cap must be at least"},
		{"min over max", tenant("minmax", func(tn *v1.Tenant) { tn.MinReplicas = ptr(4); tn.MaxReplicas = ptr(2) }), "minReplicas must not exceed"},
		{"zero weight", tenant("weight", func(tn *v1.Tenant) { tn.Weight = ptr(0.0) }), "spec.tenant.weight"},
		{"bad isolation", tenant("iso", func(tn *v1.Tenant) { tn.Isolation = "medium" }), "spec.tenant.isolation"},
		{"model name and dir", tenant("model", func(tn *v1.Tenant) { tn.Model.Dir = "/models/x" }), "exactly one of model.name and model.dir"},
		{"tenant name differs", tenant("named", func(tn *v1.Tenant) { tn.Name = "other" }), "must equal metadata.name"},
		{"tenant name not a DNS label", tenant("a.b", func(*v1.Tenant) {}), "metadata.name must be a DNS-1123 label"},
		{"label value over 63", pool("longlabel", func(s *GPUPoolSpec) { s.NodeSelector["gpupool.dev/pool"] = strings.Repeat("a", 64) }), "spec.nodeSelector"},
		{"negative SLO", tenant("slo", func(tn *v1.Tenant) { tn.SLO.TTFTP99 = ptr(v1.Duration(-time.Second)) }), "spec.tenant.slo.ttftP99"},
		{"zero min replicas", tenant("min0", func(tn *v1.Tenant) { tn.MinReplicas = ptr(0) }), "spec.tenant.minReplicas"},
		{"bad tenant path", tenant("path", func(tn *v1.Tenant) { tn.Path = "Org/Team" }), "spec.tenant.path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(ctx, tc.obj)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error naming %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestInferenceTenantsFromExample stores every tenant of each example pool as an InferenceTenant,
// and its policy in a GPUPool, and reads back exactly what the Pool document holds (nothing
// rejected, pruned or rewritten by the schemas).
func TestInferenceTenantsFromExample(t *testing.T) {
	c := needAPI(t)
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := v1.LoadPool(data)
		if err != nil {
			continue // not a Pool document
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) { exampleThroughAPI(t, c, pool) })
	}
	if n < 2 {
		t.Fatalf("%d example pools found, want the examples/ Pool documents", n)
	}
}

func exampleThroughAPI(t *testing.T, c client.Client, pool *v1.Pool) {
	ctx := context.Background()
	gp := &GPUPool{ObjectMeta: metav1.ObjectMeta{Name: "example-" + pool.Metadata.Name},
		Spec: GPUPoolSpec{NodeSelector: map[string]string{"gpupool.dev/pool": pool.Metadata.Name}, Policy: pool.Policy}}
	if err := c.Create(ctx, gp); err != nil {
		t.Fatalf("GPUPool with the example's policy: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), gp) })
	gotPool := &GPUPool{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(gp), gotPool); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotPool.Spec.Policy, pool.Policy) {
		t.Errorf("policy after the API server:\n got %+v\nwant %+v", gotPool.Spec.Policy, pool.Policy)
	}
	ns := newNamespace(t, c, "example")
	for _, tn := range pool.Tenants {
		it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: ns}, Spec: InferenceTenantSpec{Pool: pool.Metadata.Name, Tenant: tn}}
		if err := c.Create(ctx, it); err != nil {
			t.Fatalf("tenant %s: %v", tn.Name, err)
		}
		got := &InferenceTenant{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(it), got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Spec.Tenant, tn) {
			t.Errorf("tenant %s after the API server:\n got %+v\nwant %+v", tn.Name, got.Spec.Tenant, tn)
		}
	}
	if len(pool.Tenants) == 0 {
		t.Fatal("example pool has no tenants")
	}
}

// TestReconfigurationSpecImmutable: the API server refuses a change to a Reconfiguration's spec
// (one object per gate operation) and a step name or outcome the gate does not write, while the
// status stays writable.
func TestReconfigurationSpecImmutable(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	r := &Reconfiguration{ObjectMeta: metav1.ObjectMeta{Name: "immutable-1"},
		Spec: ReconfigurationSpec{Node: "node-1", FromConfig: "all-disabled", ToConfig: "all-1g.10gb"}}
	if err := c.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), r) })
	changed := r.DeepCopyObject().(*Reconfiguration)
	changed.Spec.ToConfig = "all-2g.20gb"
	if err := c.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Fatalf("spec change: got %v, want an error saying the spec is immutable", err)
	}
	got := &Reconfiguration{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
		t.Fatal(err)
	}
	got.Status = ReconfigurationStatus{Phase: "Draining", Steps: []ReconfigurationStep{{Name: "Draining", State: StepStateRunning, Start: metav1.Now()}}}
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatalf("status update: %v", err)
	}
	bad := got.DeepCopyObject().(*Reconfiguration)
	bad.Status.Steps[0].Name = "Sleeping"
	if err := c.Status().Update(ctx, bad); err == nil || !strings.Contains(err.Error(), "status.steps[0].name") {
		t.Fatalf("unknown step name: got %v, want an error naming status.steps[0].name", err)
	}
	bad = got.DeepCopyObject().(*Reconfiguration)
	bad.Status.Outcome = "Maybe"
	if err := c.Status().Update(ctx, bad); err == nil || !strings.Contains(err.Error(), "status.outcome") {
		t.Fatalf("unknown outcome: got %v, want an error naming status.outcome", err)
	}
}
