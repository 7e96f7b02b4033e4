package render

import v1 "gpupool.dev/gpupool/api/v1"

// Allocatable returns, per node of the plan, the nvidia.com/ resources the device plugin
// advertises once the node runs the plan's MIG layout with its rendered device-plugin config:
// every whole GPU as nvidia.com/gpu and every MIG instance as nvidia.com/mig-<profile>, and a
// resource the config shares (renameByDefault) as <name>.shared, devices × replicas references.
// A node's MIG gate compares the node's allocatable with this after mig-manager is done.
func Allocatable(plan *v1.Plan, pool *v1.Pool) (map[string]map[string]int64, error) {
	m, err := build(plan, pool)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int64{}
	for _, n := range m.nodes {
		res := map[string]int64{}
		for _, g := range n.gpus {
			for _, d := range g.devices {
				res[d.baseResource()]++
			}
		}
		if sh := m.devicePluginConfig(n).Sharing; sh != nil {
			for _, rr := range []*ReplicatedResources{sh.TimeSlicing, sh.MPS} {
				if rr == nil {
					continue
				}
				for _, r := range rr.Resources {
					k := res[r.Name]
					delete(res, r.Name)
					name := r.Name
					if rr.RenameByDefault {
						name += ".shared"
					}
					res[name] += k * int64(r.Replicas)
				}
			}
		}
		out[n.name] = res
	}
	return out, nil
}
