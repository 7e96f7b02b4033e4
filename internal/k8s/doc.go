// Package k8s is gpupool's Kubernetes side and the only package that uses client-go and
// controller-runtime. It owns:
//
//   - the gpupool.dev/v1 API types (GPUPool, InferenceTenant, ControlState) and their
//     CustomResourceDefinitions (crds/, embedded, installed by InstallCRDs);
//   - CRDStore, the control plane's store.Store port kept in one ControlState object per store,
//     with optimistic concurrency through the object's resourceVersion;
//   - MIGGate, the per-node reconfiguration gate around NVIDIA's mig-manager: cordon, evict the
//     pods on the node's GPUs through the Eviction API, set nvidia.com/mig.config, wait for
//     nvidia.com/mig.config.state=success, verify allocatable, uncordon; restore the previous label
//     on failure or timeout. Its progress lives in node annotations, so a restarted controller
//     resumes where the previous one stopped;
//   - Admitter, fair admission of tenant pods through the scheduling gate gpupool.dev/admission,
//     and preemption through the Eviction API;
//   - NewController, a leader-elected controller-runtime manager that drives the gate of every
//     node with a request (the `gpupool controller` command);
//   - LoadConfig and InstallCRDs, the connection and the CRD installer the command uses.
//
// Tests run against a real kube-apiserver and etcd (see docs/kubernetes.md for how the binaries are
// built and found); nothing in this package's tests fakes API behaviour.
package k8s
