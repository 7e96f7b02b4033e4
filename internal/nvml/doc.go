// Package nvml is gpupool's thin driver for NVIDIA GPUs and the only importer of
// github.com/NVIDIA/go-nvml. Lib wraps an nvml.Interface (the real library, or go-nvml's stateful
// DGX mocks) and speaks in gpupool's terms: boards from internal/gpu, MIG layouts as gpu.Layout,
// instances as profile@start.
//
// What it does: inventory (index, UUID, board, memory, MIG mode, instances and half-made
// instances), MIG create and destroy per instance (a GPU instance at a placement, then one
// compute instance spanning it; destroy removes the compute instances first), per-process memory
// and SM utilisation, the total-energy counter, each MIG instance's SM activity through GPM
// (InstanceActivity: nvmlGpmMigSampleGet between two calls; ErrGPMUnsupported before Hopper),
// locked clocks and power limits, and XID events.
//
// Every NVML call goes through one funnel (Lib.do) that bounds it with Options.Timeout, so a hung
// driver call returns an error instead of hanging the agent (the goroutine left behind is counted
// in Lib.Stuck; a hung NVML call cannot be cancelled), and that consults Options.Faults, so tests
// inject an error or a hang at any named call.
//
// NewFake builds a fake node on go-nvml's mocks (dgxa100, dgxh100, dgxh200) and adds what they
// lack: the real MIG placement rules of internal/gpu (an overlapping create fails with
// Insufficient Resources), destroy of a GPU instance that still has compute instances fails with
// In Use, per-process memory and utilisation, an energy counter, GPM per-instance activity
// (FakeOptions.GPM, SetInstanceActivity; go-nvml's mocks have none), clocks and power limits, an XID
// event queue, call counters, and, with FakeOptions.StatePath, the MIG state persisted to a file
// after every change, so that a process killed with SIGKILL and started again sees the
// "hardware" as it was, as a real GPU would keep it.
//
// The contract suite (contract_test.go) runs on every fake board, and on real NVML with
// `go test ./internal/nvml -run Contract -nvml.real` (read-only unless -nvml.write is also set).
package nvml
