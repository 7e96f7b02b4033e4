// Package render turns a Plan into the files NVIDIA's and Kubernetes' own tools consume. It is
// pure: Artifacts returns paths and bytes and writes nothing; the same plan and pool always give
// the same artifacts, byte for byte, in path order.
//
// # Artifacts
//
//	README.md                    what each file is, how to apply it, the problems and notes below
//	mig-parted/config.yaml       NVIDIA mig-parted config (version v1)
//	mig-parted/configmap.yaml    the same as a ConfigMap (key config.yaml) for the GPU Operator's MIG manager
//	node-labels.yaml             per node: nvidia.com/mig.config, nvidia.com/device-plugin.config, gpupool.dev/pool
//	device-plugin/<node>.yaml    k8s-device-plugin config of the node
//	device-plugin/configmap.yaml the same configs as one ConfigMap, keyed by node name
//	mps/<node>.yaml              MPS daemons of the node (only nodes with MPS slices)
//	vllm/<tenant>.yaml           vLLM arguments and MPS environment of every replica
//	k8s/<tenant>.yaml            the tenant's Deployments (apps/v1), one YAML document each
//	dra/<tenant>.yaml            DRA path: ResourceClaimTemplates of the tenant's unshared devices
//	dra/shared.yaml              DRA path: one ResourceClaim per shared device (see below)
//	pool-map.svg                 every GPU as a row of its memory, replicas coloured by tenant
//
// Allocatable says, per node, which nvidia.com/ resources the device plugin advertises under the
// plan (the MIG gate's expectation); DRADevices says which devices NVIDIA's DRA driver publishes
// (the expectation on a pool of the DRA path).
//
// # DRA
//
// The second device path, for NVIDIA's DRA driver (resource.k8s.io/v1, DeviceClasses
// gpu.nvidia.com and mig.nvidia.com): a ResourceClaimTemplate per Deployment group of unshared
// devices (MIG ones select the profile), and a named ResourceClaim per shared device whose opaque
// config is the driver's GpuConfig or MigDeviceConfig with strategy TimeSlicing (interval Default
// on whole GPUs; MigDeviceConfig has no time-slicing settings) or MPS (the daemon's default
// thread percentage and pinned-memory limit are the largest of the device's replicas). A MIG
// request also selects the memorySlice<i> capacities the driver publishes for the slices an
// instance occupies, pinning its placement, when every legal layout of the GPU's profile counts
// puts that profile's instances at the plan's starts (mig-parted creates instances by count and
// the driver picks their starts, so elsewhere a pinned claim could match no instance and the
// request keeps the profile alone). Nothing pins the GPU: the driver publishes no GPU index (a
// whole GPU's uuid and pciBusID, a MIG device's parentUUID, are unknown to the plan), and the
// pods' node affinity picks the node. On a node with GPUs of more than one board the request
// also selects the board by the productName the driver publishes (the GPU's NVML name, a MIG
// device's parent's), listing the catalog's NVML names of the board, and the tenant's
// Deployments split by board (draBoardSelector). The driver's
// TimeSlicingSettings and MPSSupport feature gates (Alpha, off by default) must be on.
//
// The plan must pass v1.ValidatePlan against the pool (defaulted here on a copy); otherwise
// Artifacts fails and returns nothing.
//
// # mig-parted
//
// The config holds `all-disabled` (MIG off on every GPU, also the way back) and one named config
// per distinct node layout. A node's GPUs are grouped by (board, MIG mode, profile counts) into
// entries with `devices: [indices]`, or `devices: all` when one group covers the node; MIG entries
// carry the board's PCI ids as device-filter when the catalog knows them. Canary GPUs are in no
// entry, so mig-parted, which only touches the GPUs an entry selects, leaves them as they are
// (on a node of canaries only they get the plan's mode, since a config needs an entry). A node without MIG GPUs
// gets `all-disabled`; any other node's config is named "gpupool-" plus 10 hex digits of the
// SHA-256 of its encoded entries, so the nvidia.com/mig.config label changes exactly when the
// layout does, and nodes with equal layouts share one config. The file passes `gpupool validate`
// (migparted.Validate with no errors, on the catalog and on each board of the plan).
//
// mig-parted's mig-devices are counts: the start slices of the instances are chosen when they are
// created (by mig-parted's creation order and the driver), not by the plan. Every count set is
// checked to have a legal placement (gpu.Board.Place). When the plan's starts differ from those
// Place chooses for the same counts, README.md says so for that GPU. The device plugin hands out
// MIG devices by profile; DRA claims pin a start only where the counts allow no other. The GPU Operator must run with
// mig.strategy=mixed so instances are advertised as nvidia.com/mig-<profile>.
//
// # Device plugin
//
// Each node gets a config with `flags.migStrategy: mixed` when the plan gives one of its GPUs MIG
// mode and `none` otherwise (the plugin refuses MPS sharing with mixed: "using
// --mig-strategy=mixed is not supported with MPS"; the per-node config overrides the GPU
// Operator's ClusterPolicy `mig.strategy`, which stays mixed, when the plugin runs without the
// --mig-strategy flag and MIG_STRATEGY variable, which take precedence over the file). Whole-GPU MPS on a node with MIG
// GPUs is a Problem and the node shares no whole GPU. So is a resource whose devices on a node are
// of more than one board while replicas use it: the plugin hands a pod any device of its resource,
// and no config or label splits a resource by board (checkMixedBoards). When it shares devices, a config has either
// `sharing.timeSlicing` (renameByDefault and failRequestsGreaterThanOne true) or `sharing.mps`
// (renameByDefault true), with `resources: [{name, replicas}]` as in the k8s-device-plugin README.
// A resource is nvidia.com/gpu (whole GPUs) or nvidia.com/mig-<profile>; with renameByDefault a
// shared one is requested as <resource>.shared. References per device: for time-sliced slices the
// sum over the device's replicas of max(1, limits.timeSliceReplicas); for MPS the replicas. Pods
// always request one reference.
//
// MPS on the device-plugin path is the plugin's own: for whole GPUs (migStrategy none) its
// control daemon runs per resource, and its Allocate hands the container
// CUDA_MPS_PIPE_DIRECTORY and bind mounts of that daemon's pipe directory and shared memory
// (k8s-device-plugin internal/plugin/mps.go updateReponse), so the pods need neither hostIPC nor
// a hostPath volume. The plugin runs no MPS on MIG devices (getMPSOptions: "sharing using MPS is
// not supported for MIG devices"), and it hands a pod any instance of the profile, so no pod can
// be pointed at one instance's daemon: a MIG instance the plan shares by MPS is a Problem (field
// gpus[i].instances[j].sharing; the way out is policy.kubernetesDeviceAPI: dra, where the DRA
// driver runs MPS for the claim's instance), handed out as time-slicing references (one per
// replica) whose pods carry no MPS environment. No tenant Deployment's pod (k8s/<tenant>.yaml)
// uses hostIPC, hostPID, hostNetwork, a hostPath volume or a privileged container: each passes
// the Pod Security baseline (TestTenantPodsPassBaseline runs the API server's own checks).
//
// What the device plugin cannot express is a Problem, never an error, and never rendered as more
// sharing than planned:
//
//   - the plugin applies one setting to every device of a resource on a node, so devices of one
//     resource on one node that need different handling (one pod each vs N references, or
//     different N) leave that resource unshared;
//   - time-slicing and MPS are mutually exclusive on a node: a node needing both shares nothing;
//   - the plugin's MPS daemon splits a GPU equally (100/N percent, total/N MiB): a replica whose
//     limits exceed that share gets the share;
//   - Kubernetes hands out references of any device of a resource, so when several shared devices
//     of one resource on a node hold different tenants, the pairing is the plugin's choice: a
//     problem when a non-shared-isolation tenant among them could meet another trust group, else
//     a note in README.md.
//
// Devices without replicas (idle or burst GPUs, empty instances) of a shared resource are shared
// the same way; README.md notes them.
//
// Artifacts then returns all artifacts together with a *ProblemsError listing them (README.md
// lists them too); callers write the files and report a partial result.
//
// # MPS settings
//
// Per MPS domain the daemon's runner serves (a whole GPU in mode mps; on the DRA path also a MIG
// instance with sharing mps): who runs the daemon (k8s-device-plugin or k8s-dra-driver-gpu; it
// hands each container the pipe directory of the device it allocated, so no artifact names one),
// the defaults and the nvidia-cuda-mps-control commands (`set_default_active_thread_percentage P`, `set_default_device_pinned_mem_limit D NM`,
// which affect the next server spawned), and per client the environment that applies its own
// limits (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=NM"; client
// settings can only lower the server's, so the DRA driver's daemon's defaults are the largest client
// limits). Memory limits are whole MiB rounded down. Inside a MIG instance the device is 0.
//
// # vLLM
//
// A replica runs with the plan's vllmArgs; a replica that lists none takes those of the tenant's
// lowest-indexed replica that has them. --model is added when missing (the catalog model's
// Hugging Face id, or the checkpoint directory, which the pod must then mount), and
// --gpu-memory-utilization is added when missing (and no --kv-cache-memory-bytes is given) and the
// replica has a memory limit: the limit over the device's memory, rounded down to hundredths, so
// vLLM's budget (a fraction of the device's total memory) stays inside the plan's.
// An adapter tenant's own replicas (outside every shared LoRA engine) also get --enable-lora with
// one adapter slot, --max-lora-rank covering model.adapter.rank (vLLM's default, with a README
// note, when the pool gives none) and --lora-modules under the adapter's name; an adapter on a
// volume is mounted read-only as for an engine, one given by a dir alone is a Problem.
//
// # Kubernetes
//
// One Deployment per (tenant, slice kind, resource, arguments, MPS environment), named
// <tenant>-<slice> (chat-gpu, code-complete-mig-3g-40gb, docs-qa-mig-3g-40gb-mps, a-gpu-ts), with
// a numeric suffix when the same name recurs and a hash when it would exceed 63 characters. So a
// tenant on several slice kinds, or on two MIG profiles, gets several Deployments. Each pod asks
// for one device-plugin resource (nvidia.com/gpu, nvidia.com/mig-3g.40gb, nvidia.com/gpu.shared,
// nvidia.com/mig-1g.10gb.shared, …), is pinned to the plan's nodes by required node affinity on
// kubernetes.io/hostname, selects gpupool.dev/pool when those nodes share one pool, tolerates the
// nvidia.com/gpu taint, and is labelled with its tenant, trust group (path with '/' as '.'), slice
// kind and Deployment; the annotation gpupool.dev/replicas records where the plan puts each
// replica. Kubernetes does not choose devices by position: a pod gets some device of its resource
// on its node. The image is pinned (Image). Each vLLM container requests 2 CPUs and 16Gi of
// memory, has startup (up to 30 min for the model load), readiness and liveness probes on
// vLLM's /health, a 2Gi memory-backed /dev/shm, and HF_TOKEN from the Secret gpupool-hf-token
// (key token) when that Secret exists (optional, for gated models). Tenants whose model is only
// a measured profile outside the LLM catalog (ParvaGPU's bert, resnet50) get no vLLM launch file
// and no Deployment; the README says so.
//
// A node's pool (gpupool.dev/pool) is its most shared kind of slice with replicas: gpu-mps, else
// gpu-timeslice, else gpu-mig-shared, else gpu-mig, else gpu-exclusive.
//
// # Pool map
//
// pool-map.svg has one row per GPU (node order, then index): MIG GPUs as their memory slices with
// each instance over the slices it occupies, other GPUs as one bar; each replica in its tenant's
// colour (TenantColors: tenants in name order take Kelly's colours of maximum contrast in turn,
// so that tenants of one group are told apart), shared devices split between their
// replicas, with a legend of tenants. A label that does not fit its cell is set smaller, then
// cut with "…", then left out (the cell's tooltip still names it).
//
// # LoRA gateway objects
//
// LoRAGateway renders a planned LoRA group for the Gateway API Inference Extension: an
// InferencePool (inference.networking.k8s.io/v1) per engine, an InferenceObjective
// (inference.networking.x-k8s.io/v1alpha2) per adapter and engine, and HTTPRoutes matching the
// X-Gateway-Model-Name header to the pools, weighted by each engine's part of the adapter's traffic.
// LoRAEngineDeployments renders the engines themselves: a vLLM Deployment per engine on one GPU,
// with --enable-lora, its limits and --lora-modules under each adapter's name (LoRAModuleArgs),
// and the pod label (LoRAEngineLabel) its InferencePool selects. An adapter on a
// PersistentVolumeClaim (model.adapter.volume) is mounted read-only from it; nothing is mounted
// from the node (a hostPath volume fails the Pod Security baseline), so an adapter given by a dir
// alone is a Problem with its field. LoRAEndpointPickers renders the
// endpoint picker each InferencePool names (EPPName), as the extension's v1.5.0 chart does:
// Deployment (EPPImage), Service, ServiceAccount, Roles and plugins ConfigMap; LoRAReadme explains
// the output directory of `gpupool lora --out`.
package render
