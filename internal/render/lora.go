package render

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/plan"
)

// Gateway API Inference Extension kinds as that project defines them: InferencePool is GA in
// inference.networking.k8s.io/v1 (api/v1/inferencepool_types.go: selector.matchLabels,
// targetPorts[].number, endpointPickerRef); InferenceObjective is in
// inference.networking.x-k8s.io/v1alpha2 (apix/v1alpha2/inferenceobjective_types.go: poolRef
// with group, kind, name). Requests name their adapter in the OpenAI "model" field; the
// project's body-based router copies it to the X-Gateway-Model-Name header, which the HTTPRoute
// matches to send each adapter to the pool of the engines that serve it.
const (
	InferencePoolAPIVersion      = "inference.networking.k8s.io/v1"
	InferenceObjectiveAPIVersion = "inference.networking.x-k8s.io/v1alpha2"
	HTTPRouteAPIVersion          = "gateway.networking.k8s.io/v1"
	ModelNameHeader              = "X-Gateway-Model-Name"
	// LoRAEngineLabel selects an engine's pods.
	LoRAEngineLabel = "gpupool.dev/lora-engine"
	// AnnotationLoRATenants lists, on an engine's Deployment, the tenants whose adapters it serves.
	AnnotationLoRATenants = "gpupool.dev/lora-tenants"
	// vllmPort is the OpenAI server's port; eppPort the endpoint picker's gRPC port.
	vllmPort = 8000
	eppPort  = 9002
	// maxMatchesPerRule is Gateway API's limit on an HTTPRoute rule's matches (and
	// maxRulesPerRoute on a route's rules).
	maxMatchesPerRule = 64
	maxRulesPerRoute  = 16
)

// LoRAGatewayInput is a planned shared group, the Gateway its routes attach to, and each
// tenant's adapter name (what requests ask for).
type LoRAGatewayInput struct {
	Namespace, Gateway string
	Plan               plan.LoRAPlan
	AdapterName        map[string]string // tenant → adapter name
}

// LoRAGateway renders, for one planned group, an InferencePool per engine (its pods by label,
// its endpoint picker), an InferenceObjective per adapter tenant and engine naming that engine's
// pool,
// and HTTPRoutes that send each adapter's requests to the pools of the engines that serve it
// (weighted by the part of its traffic each carries). One multi-document YAML, in a stable order.
func LoRAGateway(in LoRAGatewayInput) ([]byte, error) {
	if in.Namespace == "" || in.Gateway == "" || len(in.Plan.Engines) == 0 {
		return nil, errors.New("render lora gateway: namespace, gateway and at least one engine are required")
	}
	var docs []any
	type backend struct {
		pool   string
		weight int
	}
	routes := map[string][]backend{} // adapter name → its pools
	for _, e := range in.Plan.Engines {
		docs = append(docs, inferencePool(in.Namespace, e.Name))
		for _, t := range e.Adapters {
			name, ok := in.AdapterName[t]
			if !ok {
				return nil, fmt.Errorf("render lora gateway: engine %s: tenant %s has no adapter name", e.Name, t)
			}
			obj := t // tenant names are DNS-1123 labels; adapter names need not be
			if len(in.Plan.Engines) > 1 {
				obj = t + "-" + e.Name
			}
			docs = append(docs, inferenceObjective(in.Namespace, obj, e.Name))
			routes[name] = append(routes[name], backend{pool: e.Name, weight: max(1, int(1000*e.Load[t]))})
		}
	}
	names := make([]string, 0, len(routes))
	for n := range routes {
		names = append(names, n)
	}
	sort.Strings(names)
	// Adapters with the same pools share a rule, up to the matches a rule may hold.
	var rules []map[string]any
	byPools := map[string][]string{}
	var keys []string
	for _, n := range names {
		k := fmt.Sprint(routes[n])
		if _, seen := byPools[k]; !seen {
			keys = append(keys, k)
		}
		byPools[k] = append(byPools[k], n)
	}
	for _, k := range keys {
		ads := byPools[k]
		var refs []map[string]any
		for _, b := range routes[ads[0]] {
			ref := map[string]any{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": b.pool}
			if len(routes[ads[0]]) > 1 {
				ref["weight"] = b.weight
			}
			refs = append(refs, ref)
		}
		for i := 0; i < len(ads); i += maxMatchesPerRule {
			var matches []map[string]any
			for _, a := range ads[i:min(i+maxMatchesPerRule, len(ads))] {
				matches = append(matches, map[string]any{"headers": []map[string]any{{"type": "Exact", "name": ModelNameHeader, "value": a}}})
			}
			rules = append(rules, map[string]any{"matches": matches, "backendRefs": refs})
		}
	}
	for i := 0; i < len(rules); i += maxRulesPerRoute {
		docs = append(docs, map[string]any{
			"apiVersion": HTTPRouteAPIVersion, "kind": "HTTPRoute",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-lora-%d", in.Plan.Engines[0].Name, i/maxRulesPerRoute), "namespace": in.Namespace},
			"spec": map[string]any{
				"parentRefs": []map[string]any{{"name": in.Gateway}},
				"rules":      rules[i:min(i+maxRulesPerRoute, len(rules))],
			},
		})
	}
	var out bytes.Buffer
	for i, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("render lora gateway: %w", err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}

func inferencePool(ns, engine string) map[string]any {
	return map[string]any{
		"apiVersion": InferencePoolAPIVersion, "kind": "InferencePool",
		"metadata": map[string]any{"name": engine, "namespace": ns},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": map[string]string{LoRAEngineLabel: engine}},
			"targetPorts":       []map[string]any{{"number": vllmPort}},
			"endpointPickerRef": map[string]any{"name": engine + "-epp", "port": map[string]any{"number": eppPort}},
		},
	}
}

func inferenceObjective(ns, name, pool string) map[string]any {
	return map[string]any{
		"apiVersion": InferenceObjectiveAPIVersion, "kind": "InferenceObjective",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"poolRef": map[string]any{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool},
		},
	}
}
