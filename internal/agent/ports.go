package agent

import (
	"context"

	"gpupool.dev/gpupool/internal/gpu"
)

// MIG is the part of the GPU driver the gate's executor needs (internal/nvml.Lib implements it).
type MIG interface {
	// Observe returns the GPU's complete MIG instances and its half-made ones.
	Observe(uuid, board string) (complete, partial gpu.Layout, err error)
	// Create makes one instance (GPU instance, then compute instance).
	Create(uuid, board string, in gpu.Instance) error
	// Destroy removes one instance; absent is not an error.
	Destroy(uuid, board string, in gpu.Instance) error
}

// MIGMode is an optional part of MIG: turning a GPU's MIG mode on or off (internal/nvml.Lib). The
// driver refuses it while instances are left; where the new mode waits for a GPU reset it returns
// an error (the agent never resets a GPU).
type MIGMode interface {
	SetMIGMode(uuid string, on bool) error
}

// Node is the node's scheduling state: cordoned or not, and the replicas on GPU instances. Its one
// implementation is a file (LocalNode), in the Kubernetes DaemonSet too: the agent calls no
// Kubernetes API.
type Node interface {
	Cordon(ctx context.Context, reason string) error
	Uncordon(ctx context.Context) error
	// Drain returns once no replica runs on the instances of the GPU.
	Drain(ctx context.Context, gpu string, instances gpu.Layout) error
}

// Smoker runs the smoke check on new instances.
type Smoker interface {
	Smoke(ctx context.Context, gpu string, instances gpu.Layout) error
}
