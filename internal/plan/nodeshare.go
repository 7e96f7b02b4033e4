package plan

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// mpsNodeRefs is, per node, the references a GPU of the node's one device-plugin MPS setting
// sets: the most replicas any whole-GPU MPS GPU of the node holds in pl (as the rendered config
// sets it and validation checks it).
func mpsNodeRefs(pl *v1.Plan) map[string]int {
	refs := map[string]int{}
	for _, g := range pl.GPUs {
		if g.Mode == v1.ModeMPS {
			refs[g.Node] = max(refs[g.Node], len(g.Replicas))
		}
	}
	return refs
}

// mpsSettingBroken names the nodes of pl, on the device-plugin path, where a whole-GPU MPS
// replica's limits are above the equal share of the node's one MPS setting (mpsNodeRefs): the
// plugin gives every client of the node's MPS GPUs 1/N of a GPU, so such a replica would not get
// what it was sized for. It is the rule validation holds a plan to (api/v1 checkEqualShares),
// asked before a plan is offered to it.
func mpsSettingBroken(pool *v1.Pool, pl *v1.Plan) []string {
	if pool.Policy.DeviceAPI() == v1.DeviceAPIDRA {
		return nil
	}
	refs := mpsNodeRefs(pl)
	var out []string
	for _, g := range pl.GPUs {
		k := refs[g.Node]
		if g.Mode != v1.ModeMPS || k < 2 || slices.Contains(out, g.Node) {
			continue
		}
		var mem v1.Bytes
		if b, err := gpu.Lookup(g.Board); err == nil {
			mem = v1.Bytes(b.MemoryMiB) * v1.MiB / v1.Bytes(k) / v1.MiB * v1.MiB
		}
		for _, r := range g.Replicas {
			if r.Limits.SMPercent > 100/k || mem > 0 && r.Limits.Memory > mem {
				out = append(out, g.Node)
				break
			}
		}
	}
	return out
}

// withoutNodes is gpus' idle GPUs on the nodes named, whose device-plugin MPS setting (refs: the
// references a GPU it sets) a placement on them broke: "n2/1 (node n2's MPS setting: 21
// references a GPU)".
func withoutNodes(gpus []v1.PlanGPU, nodes []string, refs map[string]int, adopt map[string]bool) string {
	var parts []string
	for _, node := range nodes {
		var idle []string
		for _, g := range gpus {
			if g.Node == node && adopt[gpuKey(g.Node, g.Index)] {
				idle = append(idle, g.Ref().String())
			}
		}
		parts = append(parts, fmt.Sprintf("%s (node %s's device-plugin MPS setting: %d references a GPU, which every MPS client of its GPUs shares equally)",
			strings.Join(idle, ", "), node, refs[node]))
	}
	return strings.Join(parts, "; ")
}
