package k8s

import (
	"context"
	"encoding/json"
	"net/http"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"gpupool.dev/gpupool/internal/render"
)

// Names of the mutating webhook that adds the admission gate to tenant pods.
const (
	// WebhookPath is where the controller's webhook server answers.
	WebhookPath = "/mutate-v1-pod-admission-gate"
	// WebhookConfigName names the MutatingWebhookConfiguration.
	WebhookConfigName = "gpupool-admission-gate"
	// WebhookName is the webhook's name inside it.
	WebhookName = "admission-gate.gpupool.dev"
)

// PodGateHandler is the mutating admission webhook for pod creation: a pod carrying the tenant
// label gpupool.dev/tenant gets the scheduling gate gpupool.dev/admission (unless it has it), so
// the scheduler leaves it alone until GrantAdmission admits it. Pods without the label pass
// unchanged. A scheduling gate can only be added when a pod is created, which is the only
// operation the configuration sends here.
func PodGateHandler() admission.Handler {
	return admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		var p corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &p); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if _, ok := p.Labels[render.LabelTenant]; !ok || hasGate(&p) {
			return admission.Allowed("no change")
		}
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: SchedulingGate})
		b, err := json.Marshal(&p)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, b)
	})
}

// PodGateWebhookConfiguration is the MutatingWebhookConfiguration that sends the creation of
// every pod labelled gpupool.dev/tenant to the controller at cc. Its failure policy is Fail: a
// tenant pod created while no controller answers is refused (its owner retries) rather than let
// past fair admission.
func PodGateWebhookConfiguration(cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	scope := admissionregistrationv1.NamespacedScope
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         WebhookName,
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods"}, Scope: &scope},
			}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: render.LabelTenant, Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptrTo(int32(5)),
		}},
	}
}
