package main

import (
	"fmt"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/render"
)

// loraGatewayFiles renders, per shared group of the plan, the gateway objects of its engines
// (render.LoRAGateway): gateway/<first engine>.yaml, as `gpupool lora --out` writes them.
func loraGatewayFiles(pl *v1.Plan, pool *v1.Pool, gateway, namespace string) ([]outFile, error) {
	names := map[string]string{}
	for _, t := range pool.Tenants {
		if a := t.Model.Adapter; a != nil {
			names[t.Name] = a.Name
		}
	}
	var out []outFile
	for _, g := range plan.LoRAGroupsOf(pl) {
		p := plan.LoRAPlanOf(pl, g)
		y, err := render.LoRAGateway(render.LoRAGatewayInput{Namespace: namespace, Gateway: gateway, Plan: p, AdapterName: names})
		if err != nil {
			return nil, err
		}
		epp, err := render.LoRAEndpointPickers(namespace, p)
		if err != nil {
			return nil, err
		}
		out = append(out, outFile{Path: "gateway/" + p.Engines[0].Name + ".yaml", Data: y},
			outFile{Path: "gateway/" + p.Engines[0].Name + "-epp.yaml", Data: epp})
	}
	return out, nil
}

// loraPlacedText says where a shared group's engines went ("2 shared LoRA engines on
// H100-SXM5-80GB", "1 … on A100-SXM4-80GB + 1 … on H100-SXM5-80GB"), or that none was placed.
func loraPlacedText(g plan.LoRAFleetGroup) string {
	var parts []string
	for _, p := range g.Placed {
		parts = append(parts, fmt.Sprintf("%s on %s", plural(len(p.Plan.Engines), "shared LoRA engine"), p.Board))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no shared LoRA engine placed (%d needed on %s, its best board)", len(g.Plan.Engines), g.Board)
	}
	if g.Held != "" {
		parts = append(parts[:len(parts)-1], parts[len(parts)-1]+" ("+g.Held+")")
	}
	return strings.Join(parts, " + ")
}
