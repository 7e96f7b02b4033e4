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
	out := countDevices(m, (*device).baseResource)
	for _, n := range m.nodes {
		res := out[n.name]
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
	}
	return out, nil
}

// DRADevices returns, per node of the plan, the devices NVIDIA's DRA driver (DRADriver) publishes
// in the node's ResourceSlices once the node runs the plan's MIG layout, counted by DRADeviceKey:
// with static MIG (the driver's default) a GPU whose MIG mode is off is one device of type gpu,
// and a MIG-enabled GPU publishes its MIG instances only, each of type mig with its profile. Sharing
// (time-slicing, MPS) is a claim's config, not more devices, so a shared device counts once. A
// node's MIG gate on a pool of the DRA path compares the node's ResourceSlices with this after
// mig-manager is done.
func DRADevices(plan *v1.Plan, pool *v1.Pool) (map[string]map[string]int64, error) {
	m, err := build(plan, pool)
	if err != nil {
		return nil, err
	}
	return countDevices(m, func(d *device) string {
		if d.instance != nil {
			return DRADeviceKey("mig", d.instance.Profile)
		}
		return DRADeviceKey("gpu", "")
	}), nil
}

// countDevices counts, per node of m, its devices by key.
func countDevices(m *model, key func(*device) string) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for _, n := range m.nodes {
		res := map[string]int64{}
		for _, d := range n.devices() {
			res[key(d)]++
		}
		out[n.name] = res
	}
	return out
}

// DRADeviceKey names a device the DRA driver publishes by its attributes type and profile: "gpu"
// for a whole GPU, "mig-<profile>" for a MIG device, and the type itself for any other type.
func DRADeviceKey(typ, profile string) string {
	if typ == "mig" {
		return "mig-" + profile
	}
	return typ
}

// devices lists the node's devices in GPU, instance order.
func (n *node) devices() []*device {
	var out []*device
	for _, g := range n.gpus {
		out = append(out, g.devices...)
	}
	return out
}
