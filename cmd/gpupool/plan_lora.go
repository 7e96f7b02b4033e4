package main

import (
	"fmt"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/render"
)

// planLoRAFleet plans the Pool's shared adapter groups for the Plan (plan.PlanLoRA, as `gpupool
// lora` does, on the fleet's first board), each with its lower bound over every board of the
// fleet that holds the base model (plan.LoRABound). base is the Pool file's folder. It returns
// the groups' inputs too, for the simulator.
func planLoRAFleet(pool *v1.Pool, base string) ([]plan.LoRAFleetGroup, []loraGroupIn, error) {
	ins, _, names, err := loraInputs(pool, base, "")
	if err != nil {
		return nil, nil, err
	}
	var boards []*gpu.Board
	seen := map[string]bool{}
	for _, n := range pool.Fleet.Nodes {
		for _, g := range n.GPUs {
			b, err := gpu.Lookup(g.Board)
			if err != nil || seen[b.Name] {
				continue
			}
			seen[b.Name] = true
			boards = append(boards, b)
		}
	}
	var out []plan.LoRAFleetGroup
	for _, gi := range ins {
		p, err := plan.PlanLoRA(gi.in)
		if err != nil {
			return nil, nil, err
		}
		var lb []plan.LoRABoard
		for _, b := range boards {
			eng, lc, err := perf.PlaceLoRA(gi.arch, gi.base.Model.Quantization, b)
			if err != nil {
				continue // the base model does not fit a whole GPU of this board
			}
			lb = append(lb, plan.LoRABoard{Board: b.Name, Engine: eng, Cost: lc})
		}
		bound, why, err := plan.LoRABound(gi.in.Group, lb)
		if err != nil {
			return nil, nil, fmt.Errorf("group %s: %w", gi.in.Group.Key, err)
		}
		out = append(out, plan.LoRAFleetGroup{Plan: p, Board: gi.board.Name, Model: gi.base.Model.Name, ModelDir: gi.base.Model.Dir,
			Quantization: string(gi.base.Model.Quantization), AdapterName: names, Bound: bound, Why: why})
	}
	return out, ins, nil
}

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
		out = append(out, outFile{Path: "gateway/" + p.Engines[0].Name + ".yaml", Data: y})
	}
	return out, nil
}
