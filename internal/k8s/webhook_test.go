package k8s

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/render"
)

// TestWebhookGatesTenantPods: with the MutatingWebhookConfiguration installed on the real API
// server, a tenant pod created without the admission gate gets it, one created with it keeps
// exactly one, and a pod without the tenant label is left alone.
func TestWebhookGatesTenantPods(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "webhook")
	mk := func(name string, labels map[string]string, gated bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: render.Image}}}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: SchedulingGate}}
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gates := func(p *corev1.Pod) int {
		k := 0
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == SchedulingGate {
				k++
			}
		}
		return k
	}
	if p := mk("tenant-plain", map[string]string{render.LabelTenant: "chat"}, false); gates(p) != 1 {
		t.Errorf("tenant pod created without the gate: gates %v, want %s once", p.Spec.SchedulingGates, SchedulingGate)
	}
	if p := mk("tenant-gated", map[string]string{render.LabelTenant: "chat"}, true); gates(p) != 1 {
		t.Errorf("tenant pod created with the gate: gates %v, want %s once", p.Spec.SchedulingGates, SchedulingGate)
	}
	if p := mk("other", map[string]string{"app": "x"}, false); len(p.Spec.SchedulingGates) != 0 {
		t.Errorf("pod without the tenant label: gates %v, want none", p.Spec.SchedulingGates)
	}
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
}

// TestControllerServesWebhook: the controller's own webhook server (ControllerOptions.WebhookPort)
// answers an AdmissionReview for a tenant pod with a JSON patch that adds the admission gate.
func TestControllerServesWebhook(t *testing.T) {
	needAPI(t)
	wo := testEnv.WebhookInstallOptions
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewController(testCfg, ControllerOptions{Namespace: newNamespace(t, testClient, "whctrl"),
		WebhookPort: port, WebhookCertDir: wo.LocalServingCertDir})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, m)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(wo.LocalServingCAData)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{render.LabelTenant: "chat"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: render.Image}}}}
	raw, _ := json.Marshal(pod)
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "1", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object: runtime.RawExtension{Raw: raw}}}
	body, _ := json.Marshal(review)
	var resp *http.Response
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err = hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, WebhookPath), "application/json", bytes.NewReader(body))
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("webhook server: %v", err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || !out.Response.Allowed || !strings.Contains(string(out.Response.Patch), SchedulingGate) {
		t.Fatalf("response %+v, want allowed with a patch adding %s", out.Response, SchedulingGate)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
