package render

import (
	"fmt"
	"strings"
)

// describe says what one artifact is.
func describe(path string) string {
	switch {
	case path == MigPartedPath:
		return "NVIDIA mig-parted config: `all-disabled` and one named config per distinct node MIG layout"
	case path == "mig-parted/configmap.yaml":
		return "ConfigMap `" + MigPartedConfigMap + "` holding the mig-parted config under key `config.yaml`, for the GPU Operator's MIG manager"
	case path == NodeLabelsPath:
		return "labels per node: `" + LabelMigConfig + "`, `" + LabelDeviceConfig + "` and `" + LabelPool + "`"
	case path == "device-plugin/configmap.yaml":
		return "ConfigMap `" + DevicePluginConfigMap + "` holding every node's device-plugin config, keyed by node name"
	case strings.HasPrefix(path, "device-plugin/"):
		return "k8s-device-plugin config of one node (also in the ConfigMap)"
	case strings.HasPrefix(path, "mps/"):
		return "MPS daemons of one node: who runs each, default active-thread percentage and pinned-memory limit, control commands, per-client environment"
	case strings.HasPrefix(path, "vllm/"):
		return "vLLM arguments and environment of every replica of one tenant"
	case path == "dra/shared.yaml":
		return "DRA path (NVIDIA's DRA driver): one ResourceClaim per shared device, referenced by every pod on it"
	case strings.HasPrefix(path, "dra/"):
		return "DRA path: ResourceClaimTemplates of one tenant's unshared devices, one per Deployment"
	case strings.HasPrefix(path, "k8s/"):
		return "Deployments of one tenant, one per slice kind and resource"
	case path == "pool-map.svg":
		return "pool map: every GPU as a row of its memory, replicas coloured by tenant"
	}
	return ""
}

func readmeArtifact(m *model, arts []Artifact) Artifact {
	var b strings.Builder
	fmt.Fprintf(&b, "# Artifacts of plan %s (pool %s)\n\n", m.plan.Metadata.Name, m.plan.Pool)
	b.WriteString("| file | what it is |\n|---|---|\n")
	engines := map[string]bool{}
	for _, e := range m.plan.LoRAEngines {
		engines["k8s/"+e.Name+".yaml"] = true
	}
	for _, a := range arts {
		d := describe(a.Path)
		if engines[a.Path] {
			d = "Deployment of one shared LoRA engine: its base model with `--enable-lora` and its adapters, on its planned GPU's node"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", a.Path, d)
	}
	b.WriteString(`
## How to apply

1. Run the NVIDIA GPU Operator with ` + "`mig.strategy=mixed`" + ` in its ClusterPolicy (MIG instances are
   advertised as ` + "`nvidia.com/mig-<profile>`" + `; each node's device-plugin config below overrides it with
   ` + "`migStrategy: none`" + ` on nodes without MIG GPUs, since the plugin refuses MPS with ` + "`mixed`" + `;
   the plugin's documentation gives its ` + "`--mig-strategy`" + ` flag and ` + "`MIG_STRATEGY`" + ` variable precedence over
   the config file, so check that the plugin's DaemonSet sets neither), ` + "`kubectl apply -f mig-parted/configmap.yaml -n <operator namespace>`" + `
   and set ` + "`migManager.config.name=" + MigPartedConfigMap + "`" + `. Without the operator:
   ` + "`nvidia-mig-parted apply -f " + MigPartedPath + " -c <config>`" + ` on each node.
2. ` + "`kubectl apply -f device-plugin/configmap.yaml -n <device-plugin namespace>`" + ` and point the device
   plugin at it (helm value ` + "`config.name=" + DevicePluginConfigMap + "`" + `).
3. Label the nodes as ` + "`" + NodeLabelsPath + "`" + ` says. Changing ` + "`" + LabelMigConfig + "`" + ` makes the MIG manager
   drain and re-partition the node's GPUs: do it one node at a time, within the pool's maxUnavailable.
`)
	for _, n := range m.nodes {
		fmt.Fprintf(&b, "   - `kubectl label node %s %s=%s %s=%s %s=%s --overwrite`\n", n.name,
			LabelMigConfig, n.migConfig, LabelDeviceConfig, n.dpConfig, LabelPool, n.pool)
	}
	if m.dra() {
		b.WriteString(draApplySteps)
	} else {
		b.WriteString(`4. Nothing to start for MPS: the device plugin runs whole-GPU MPS itself and hands each pod the
   pipe directory of the GPU it allocated (` + "`mps/`" + ` shows the settings). It runs no MPS on MIG
   devices, so MIG instances the plan shares by MPS are a problem below on this path; with
   ` + "`policy.kubernetesDeviceAPI: dra`" + ` NVIDIA's DRA driver runs MPS per claim (` + "`dra/shared.yaml`" + `).
5. ` + "`kubectl apply -f k8s/ -n <namespace>`" + `. Each Deployment asks for one device-plugin resource per pod
   (` + "`nvidia.com/gpu`" + `, ` + "`nvidia.com/mig-<profile>`" + `, or ` + "`.shared`" + ` for time-sliced and MPS-shared devices, since
   the configs set ` + "`renameByDefault: true`" + `) and is pinned to the plan's nodes.
`)
	}
	b.WriteString(`
## Semantics

* Kubernetes assigns devices by resource name, not by position: a pod gets some device of the
  resource it asks for on its node, not necessarily the GPU or MIG instance the plan names. Counts
  per node and resource always match the plan; the annotation ` + "`" + AnnotationSlots + "`" + ` records where the plan
  puts each replica.
* The device plugin applies one sharing setting to every device of a resource on a node
  (k8s-device-plugin README, "Shared Access to GPUs"), and time-slicing and MPS exclude each other
  on a node. Where the plan needs more, the resource is left unshared (never more shared than
  planned) and the problem is listed below.
* Canary GPUs are in no mig-parted entry, so mig-parted leaves them as they are.
* Time-slicing gives no memory or fault isolation; ` + "`failRequestsGreaterThanOne: true`" + ` keeps every
  pod at one reference.
`)
	if len(m.problems) > 0 {
		b.WriteString("\n## Problems: what the tools cannot express\n\n")
		for _, p := range m.problems {
			b.WriteString("* " + p.String() + "\n")
		}
	}
	if len(m.notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range m.notes {
			b.WriteString("* " + n + "\n")
		}
	}
	return Artifact{Path: "README.md", Data: []byte(b.String())}
}

// draApplySteps are README.md's steps 4 and 5 on a pool of the DRA path
// (policy.kubernetesDeviceAPI: dra), whose pods take their devices by ResourceClaims, not by
// device-plugin resources.
const draApplySteps = `4. Run NVIDIA's DRA driver (k8s-dra-driver-gpu) on these nodes with its ` + "`MPSSupport`" + ` and
   ` + "`TimeSlicingSettings`" + ` feature gates on (Alpha, off by default; without them the driver refuses
   the MPS and time-slicing settings of the claims in ` + "`dra/shared.yaml`" + `). The driver starts an MPS
   control daemon per MPS claim and hands its pods the daemon's pipe directory (` + "`mps/`" + ` shows the
   settings). The ` + "`device-plugin/`" + ` configs are for a device plugin running beside the driver; one
   that shares these nodes' GPUs by MPS starts MPS daemons of its own on them.
5. ` + "`kubectl apply -f dra/ -n <namespace>`" + `, then ` + "`kubectl apply -f k8s/ -n <namespace>`" + `, in one
   namespace. Each pod takes its device through a ResourceClaim, not a device-plugin resource: its
   own, from a ResourceClaimTemplate of ` + "`dra/<tenant>.yaml`" + `, or the named claim of its shared device
   in ` + "`dra/shared.yaml`" + `, which every pod on that device references; a pod whose template or claim
   is missing stays Pending. Each pod is pinned to the plan's nodes.
`
