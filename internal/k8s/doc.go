// Package k8s is gpupool's Kubernetes side and the only package that uses client-go and
// controller-runtime. It owns:
//
//   - the gpupool.dev/v1 API types (GPUPool, InferenceTenant, ControlState, Reconfiguration) and their
//     CustomResourceDefinitions (crds/, embedded, installed by InstallCRDs);
//   - CRDStore, the control plane's store.Store port kept in one ControlState object per store,
//     with optimistic concurrency through the object's resourceVersion;
//   - MIGGate, the per-node reconfiguration gate around NVIDIA's mig-manager: cordon, start
//     replacements of the Deployments to evict elsewhere first (surge.go), evict through the
//     Eviction API the pods that may hold a GPU whose MIG devices change (drainscope.go), set
//     nvidia.com/mig.config, wait for nvidia.com/mig.config.state=success, verify allocatable, run
//     smoke Jobs on the new devices (smoke.go), uncordon; restore the previous label on failure or
//     timeout. Its progress lives in node annotations, so a restarted controller resumes where the
//     previous one stopped, and each gate is recorded in a Reconfiguration written from those
//     annotations (reconfiguration.go);
//   - Admitter, fair admission of tenant pods through the scheduling gate gpupool.dev/admission,
//     and preemption through the Eviction API; GrantAdmission, which takes the grants from the
//     control plane's Engine (the fair allocator) over the devices the pools' nodes advertise;
//     PodGateHandler and PodGateWebhookConfiguration, the mutating webhook that adds the gate to
//     tenant pods;
//   - PoolReconciler, which plans each GPUPool from its nodes and InferenceTenants, renders the
//     plan and server-side applies the mig-parted and device-plugin ConfigMaps (shared by all
//     pools: each pool's keys under its own field manager, and the mig-parted config.yaml merged
//     from every pool's configs, see migconfig.go), node labels and
//     tenant Deployments (and, for a pool whose policy.kubernetesDeviceAPI is dra, the DRA
//     ResourceClaims and ResourceClaimTemplates they reference), requests the MIG gate where a
//     node's config changes, and writes status; it labels what it applies with the pool
//     (gpupool.dev/gpupool), deletes what a new plan no longer wants, names DRA claims and
//     templates by their content (their specs are immutable), and removes what a deleted
//     GPUPool applied through the finalizer gpupool.dev/pool-cleanup (lifecycle.go);
//   - NewController, a leader-elected controller-runtime manager running all of the above (the
//     `gpupool controller` command);
//   - LoadConfig and InstallCRDs, the connection and the CRD installer the command uses.
//
// deploy/kubernetes at the repository root is the kustomize base that installs it; its tests
// live here. Tests run against a real kube-apiserver and etcd (see docs/kubernetes.md for how the binaries are
// built and found); nothing in this package's tests fakes API behaviour.
package k8s
