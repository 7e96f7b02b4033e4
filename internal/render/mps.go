package render

import (
	"fmt"
	"strconv"

	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Who runs an MPS control daemon.
const (
	// ManagedByDevicePlugin: whole GPUs on the device-plugin path, the plugin's own MPS control
	// daemon (one per resource, splitting every GPU equally among its references).
	ManagedByDevicePlugin = "k8s-device-plugin"
	// ManagedByDRADriver: on the DRA path, NVIDIA's DRA driver runs one daemon per claim, whole
	// GPU or MIG instance, with the claim's MPS config (dra/shared.yaml).
	ManagedByDRADriver = "k8s-dra-driver-gpu"
)

// MPSNode is the MPS settings file of one node (mps/<node>.yaml).
type MPSNode struct {
	Node    string      `json:"node"`
	Daemons []MPSDaemon `json:"daemons"`
}

// MPSDaemon is one MPS control daemon: a whole GPU or one MIG instance.
type MPSDaemon struct {
	GPU      int    `json:"gpu"`
	Instance string `json:"instance,omitempty"` // "3g.40gb@4"
	// ManagedBy runs the daemon and hands its pipe directory (CUDA_MPS_PIPE_DIRECTORY) and shared
	// memory to the containers of the device it allocated; no artifact names a pipe directory.
	ManagedBy string `json:"managedBy"`
	// Device is the device the control commands name: 0 inside a MIG instance (the daemon sees
	// only that instance through CUDA_VISIBLE_DEVICES), the GPU index for the plugin's daemon.
	Device                        int    `json:"device"`
	DefaultActiveThreadPercentage int    `json:"defaultActiveThreadPercentage"`
	DefaultPinnedMemoryLimit      string `json:"defaultPinnedMemoryLimit,omitempty"` // "20480M"
	// Commands are the nvidia-cuda-mps-control commands sent after the daemon starts.
	Commands []string    `json:"commands"`
	Clients  []MPSClient `json:"clients"`
}

// MPSClient is one tenant replica connecting to the daemon and the environment that applies its
// own limits (client-level settings can only lower the daemon's defaults).
type MPSClient struct {
	Tenant                 string            `json:"tenant"`
	Index                  int               `json:"index"`
	ActiveThreadPercentage int               `json:"activeThreadPercentage,omitempty"`
	PinnedMemoryLimit      string            `json:"pinnedMemoryLimit,omitempty"`
	Env                    map[string]string `json:"env,omitempty"`
}

// mib renders a pinned-memory limit in whole MiB, rounded down so the limit never exceeds the plan's.
func mib(b v1.Bytes) string { return strconv.FormatInt(int64(b/v1.MiB), 10) + "M" }

func (m *model) mpsDaemon(d *device) MPSDaemon {
	md := MPSDaemon{GPU: d.gpu}
	if d.instance == nil && !m.dra() {
		// The plugin's daemon splits the GPU equally: 100/N percent and total/N MiB per client.
		n := len(d.replicas)
		md.ManagedBy, md.Device = ManagedByDevicePlugin, d.gpu
		md.DefaultActiveThreadPercentage = 100 / n
		md.DefaultPinnedMemoryLimit = mib(d.capacity / v1.Bytes(n))
	} else {
		// The DRA driver's daemon takes the claim's MPS config: the largest limits of the
		// device's replicas (draConfig); a replica held to less lowers its own as a client.
		if d.instance != nil {
			md.Instance = d.instance.Ref().String()
		}
		md.ManagedBy, md.Device = ManagedByDRADriver, 0
		md.DefaultActiveThreadPercentage = 0
		var maxMem v1.Bytes
		for _, r := range d.replicas {
			md.DefaultActiveThreadPercentage = max(md.DefaultActiveThreadPercentage, r.Limits.SMPercent)
			maxMem = max(maxMem, r.Limits.Memory)
		}
		if md.DefaultActiveThreadPercentage == 0 {
			md.DefaultActiveThreadPercentage = 100
		}
		if maxMem > 0 {
			md.DefaultPinnedMemoryLimit = mib(maxMem)
		}
	}
	md.Commands = []string{fmt.Sprintf("set_default_active_thread_percentage %d", md.DefaultActiveThreadPercentage)}
	if md.DefaultPinnedMemoryLimit != "" {
		md.Commands = append(md.Commands, fmt.Sprintf("set_default_device_pinned_mem_limit %d %s", md.Device, md.DefaultPinnedMemoryLimit))
	}
	for _, r := range d.replicas {
		md.Clients = append(md.Clients, mpsClient(md, r))
	}
	return md
}

func mpsClient(md MPSDaemon, r v1.PlanReplica) MPSClient {
	c := MPSClient{Tenant: r.Tenant, Index: r.Index, Env: mpsEnv(r.Limits)}
	c.ActiveThreadPercentage = r.Limits.SMPercent
	if r.Limits.Memory > 0 {
		c.PinnedMemoryLimit = mib(r.Limits.Memory)
	}
	return c
}

// mpsEnv is the client environment that applies a replica's limits. Inside the container the
// device is ordinal 0. The pipe directory is not in it: the daemon's runner injects it.
func mpsEnv(l v1.Limits) map[string]string {
	env := map[string]string{}
	if l.SMPercent > 0 {
		env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = strconv.Itoa(l.SMPercent)
	}
	if l.Memory > 0 {
		env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + mib(l.Memory)
	}
	return env
}

// checkMPSShares reports whole-GPU MPS replicas whose limits exceed the plugin's equal share:
// client settings can only lower the daemon's. The plugin's MPS setting is one per node (the
// node's config sets the most replicas any of its MPS GPUs holds, resourceWant), and its daemon
// gives each client of a GPU 1/N of it, N that setting, however few replicas the GPU holds.
func (m *model) checkMPSShares(n *node) {
	refs := 0
	for _, g := range n.gpus {
		for _, d := range g.devices {
			if d.kind == v1.SliceMPS {
				refs = max(refs, len(d.replicas))
			}
		}
	}
	for _, g := range n.gpus {
		for _, d := range g.devices {
			if d.kind != v1.SliceMPS || len(d.replicas) == 0 {
				continue
			}
			k := refs
			share, pct := d.capacity/v1.Bytes(k), 100/k
			for _, r := range d.replicas {
				if r.Limits.Memory > share || r.Limits.SMPercent > pct {
					m.problem(n.name, "nvidia.com/gpu", "GPU %d: replica %d of tenant %s asks for %d%% SMs and %s, but the "+
						"device plugin's MPS daemon gives each of %d clients %d%% and %s; the client gets the smaller share",
						d.gpu, r.Index, r.Tenant, r.Limits.SMPercent, r.Limits.Memory, k, pct, mib(share))
				}
			}
		}
	}
}

// checkMIGMPS reports, on the device-plugin path, every MIG instance of the node that the plan
// shares by MPS. The device plugin runs no MPS on MIG devices (its getMPSOptions refuses "sharing
// using MPS is not supported for MIG devices"), and it hands a pod a reference of any instance of
// the profile, so no pod can be pointed at one instance's daemon. The pods share the instance by
// the time-slicing references of its device-plugin config instead (no MPS environment, no
// hostIPC, no hostPath); the DRA path runs MPS on the very instance a claim got.
func (m *model) checkMIGMPS(n *node) {
	if m.dra() {
		return
	}
	for _, g := range n.gpus {
		for j, d := range g.devices {
			if d.kind != v1.SliceMIGMPS || len(d.replicas) == 0 {
				continue
			}
			p := Problem{Node: n.name, Resource: d.baseResource(), Field: fmt.Sprintf("gpus[%d].instances[%d].sharing", g.at, j)}
			p.Message = fmt.Sprintf("GPU %d instance %s is shared by MPS among %d replicas, but the device plugin runs no MPS "+
				"on MIG devices and hands a pod any %s instance of the node, so no pod can be given this instance's "+
				"MPS daemon; its pods share the instance by time-slicing, without MPS or its SM limits (memory stays "+
				"bounded by --gpu-memory-utilization); set policy.kubernetesDeviceAPI: dra for MPS on MIG instances",
				d.gpu, d.instance.Ref(), len(d.replicas), d.instance.Profile)
			m.problems = append(m.problems, p)
		}
	}
}

// mpsArtifacts writes, per node, the MPS daemons the plan's MPS devices get: whole GPUs by the
// device plugin, or every MPS device by the DRA driver. On the device-plugin path no daemon
// serves a MIG instance (checkMIGMPS), so none is listed.
func mpsArtifacts(m *model) ([]Artifact, error) {
	var out []Artifact
	for _, n := range m.nodes {
		f := MPSNode{Node: n.name}
		for _, g := range n.gpus {
			for _, d := range g.devices {
				if len(d.replicas) == 0 || !(d.kind == v1.SliceMPS || d.kind == v1.SliceMIGMPS && m.dra()) {
					continue
				}
				f.Daemons = append(f.Daemons, m.mpsDaemon(d))
			}
		}
		if len(f.Daemons) == 0 {
			continue
		}
		data, err := yaml.Marshal(f)
		if err != nil {
			return nil, fmt.Errorf("render mps settings: node %s: %w", n.name, err)
		}
		head := "# MPS settings for node " + n.name + ", shown as the daemon's runner applies them: " + ManagedByDevicePlugin + "\n" +
			"# (whole GPUs, device-plugin path) or " + ManagedByDRADriver + " (every MPS device, DRA path). The\n" +
			"# runner hands each container the pipe directory of the device it allocated.\n"
		out = append(out, Artifact{Path: "mps/" + n.name + ".yaml", Data: append([]byte(head), data...)})
	}
	return out, nil
}
