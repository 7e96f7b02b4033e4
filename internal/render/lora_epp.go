package render

import (
	"bytes"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/plan"
)

// The endpoint picker (EPP) each engine's InferencePool names in endpointPickerRef, as the
// Gateway API Inference Extension's v1.5.0 Helm chart renders it for a pool
// (config/charts/inferencepool with config/charts/epplib: _deployment.yaml, _service.yaml,
// _rbac.yaml, _config.yaml, values.yaml, the vLLM model server over HTTP, no latency predictor
// and no Prometheus monitoring). v1.5.0 is the project's last release that ships the EPP; from
// v1.6.0 it lives in the llm-d router project and the extension keeps the InferencePool API and a
// lightweight EPP for its conformance tests.
const (
	// EPPImage is the endpoint picker's image, pinned by tag.
	EPPImage = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
	// EPPVersion is the chart's app version the objects are labelled with.
	EPPVersion = "v1.5.0"
	// eppHealthPort serves gRPC health (service "inference-extension"); eppMetricsPort /metrics.
	eppHealthPort  = 9003
	eppMetricsPort = 9090
	// eppPluginsFile is the scheduling configuration the EPP reads from its ConfigMap.
	eppPluginsFile = "default-plugins.yaml"
	// eppPlugins is the chart's default EndpointPickerConfig for vLLM over HTTP: queue depth,
	// KV-cache use and prefix-cache affinity scored 2:2:3 from the model servers' metrics.
	eppPlugins = `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: metrics-data-source
  parameters:
    scheme: "http"
    path: "/metrics"
    insecureSkipVerify: true
- type: core-metrics-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
`
)

// EPPName is the endpoint picker of an engine's InferencePool: its Deployment, Service,
// ServiceAccount and ConfigMap (the chart's "<pool>-epp").
func EPPName(engine string) string { return engine + "-epp" }

// LoRAEndpointPickers renders, for one planned group, the endpoint picker of each engine's
// InferencePool (LoRAGateway names it in endpointPickerRef): a ServiceAccount; a Role and
// RoleBinding to get, list and watch pods, and one to get, list and watch InferencePools
// (inference.networking.k8s.io) and InferenceObjectives and InferenceModelRewrites
// (inference.networking.x-k8s.io) in the namespace; the ConfigMap of its scheduling plugins; a
// Deployment of one replica (Recreate, as the chart: one active picker) running EPPImage with
// --pool-name ENGINE --pool-namespace NS --pool-group inference.networking.k8s.io, gRPC ext-proc
// on 9002, gRPC health on 9003 (its probes) and metrics on 9090; and a ClusterIP Service on 9002
// and 9090. One multi-document YAML, engines in the plan's order.
func LoRAEndpointPickers(namespace string, p plan.LoRAPlan) ([]byte, error) {
	if namespace == "" || len(p.Engines) == 0 {
		return nil, errors.New("render endpoint pickers: a namespace and at least one engine are required")
	}
	var out bytes.Buffer
	for i, e := range p.Engines {
		for j, obj := range eppObjects(namespace, e.Name) {
			b, err := yaml.Marshal(obj)
			if err != nil {
				return nil, fmt.Errorf("render endpoint pickers: engine %s: %w", e.Name, err)
			}
			if i > 0 || j > 0 {
				out.WriteString("---\n")
			}
			out.Write(b)
		}
	}
	return out.Bytes(), nil
}

func eppObjects(ns, engine string) []any {
	name := EPPName(engine)
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/version": EPPVersion}
	selector := map[string]string{"inferencepool": name}
	meta := func(n string, kind, api string) (metav1.TypeMeta, metav1.ObjectMeta) {
		return metav1.TypeMeta{APIVersion: api, Kind: kind}, metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels}
	}
	var objs []any
	tm, om := meta(name, "ServiceAccount", "v1")
	objs = append(objs, corev1.ServiceAccount{TypeMeta: tm, ObjectMeta: om})
	read := []string{"get", "watch", "list"}
	for _, r := range []struct {
		suffix string
		rules  []rbacv1.PolicyRule
	}{
		{"-sa", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read}}},
		{"-non-sa", []rbacv1.PolicyRule{
			{APIGroups: []string{"inference.networking.x-k8s.io"}, Resources: []string{"inferenceobjectives", "inferencemodelrewrites"}, Verbs: read},
			{APIGroups: []string{"inference.networking.k8s.io"}, Resources: []string{"inferencepools"}, Verbs: read}}},
	} {
		tm, om := meta(name+r.suffix, "Role", "rbac.authorization.k8s.io/v1")
		objs = append(objs, rbacv1.Role{TypeMeta: tm, ObjectMeta: om, Rules: r.rules})
		tm, om = meta(name+r.suffix, "RoleBinding", "rbac.authorization.k8s.io/v1")
		objs = append(objs, rbacv1.RoleBinding{TypeMeta: tm, ObjectMeta: om,
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name + r.suffix}})
	}
	tm, om = meta(name, "ConfigMap", "v1")
	objs = append(objs, corev1.ConfigMap{TypeMeta: tm, ObjectMeta: om, Data: map[string]string{eppPluginsFile: eppPlugins}})

	probe := func(period int32, delay int32) *corev1.Probe {
		svc := "inference-extension"
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: eppHealthPort, Service: &svc}},
			InitialDelaySeconds: delay, PeriodSeconds: period}
	}
	c := corev1.Container{Name: "epp", Image: EPPImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Args: []string{"--pool-name", engine, "--pool-namespace", ns, "--pool-group", "inference.networking.k8s.io",
			"--zap-encoder", "json", "--config-file", "/config/" + eppPluginsFile, "--v", "1", "--tracing=false"},
		Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: eppPort}, {Name: "grpc-health", ContainerPort: eppHealthPort},
			{Name: "metrics", ContainerPort: eppMetricsPort}},
		LivenessProbe: probe(10, 5), ReadinessProbe: probe(2, 0),
		Env: []corev1.EnvVar{
			{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "plugins-config-volume", MountPath: "/config"}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")}},
	}
	one, grace := int32(1), int64(130)
	podLabels := map[string]string{"inferencepool": name, "inference.networking.k8s.io/igw-mode": "inferencepool"}
	depLabels := map[string]string{"inference.networking.k8s.io/igw-mode": "inferencepool"}
	for k, v := range labels {
		depLabels[k] = v
	}
	tm, om = meta(name, "Deployment", "apps/v1")
	om.Labels = depLabels
	objs = append(objs, appsv1.Deployment{TypeMeta: tm, ObjectMeta: om, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		Selector: &metav1.LabelSelector{MatchLabels: selector},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: corev1.PodSpec{
			ServiceAccountName: name, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c},
			Volumes: []corev1.Volume{{Name: "plugins-config-volume", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}}})
	tm, om = meta(name, "Service", "v1")
	objs = append(objs, corev1.Service{TypeMeta: tm, ObjectMeta: om, Spec: corev1.ServiceSpec{
		Selector: selector, Type: corev1.ServiceTypeClusterIP,
		Ports: []corev1.ServicePort{
			{Name: "grpc-ext-proc", Protocol: corev1.ProtocolTCP, Port: eppPort, TargetPort: intstr.FromInt32(eppPort)},
			{Name: "http-metrics", Protocol: corev1.ProtocolTCP, Port: eppMetricsPort, TargetPort: intstr.FromInt32(eppMetricsPort)}}}})
	return objs
}
