package llm

import (
	"fmt"
	"strconv"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// ReplicaSlice is the slice one vLLM replica runs in on board b: the whole GPU (prof nil) or MIG
// instance prof, or, with a memory cap of capBytes > 0 (an MPS pinned-memory cap or a
// time-slice budget) below the memory CUDA reports there, a shared slice of that cap on it (a
// cap at or above it limits nothing). A replica without a cap that shares the
// GPU or instance with share − 1 others (share > 1) gets the planner's cap, the memory over
// share rounded down to a MiB. It is the slice the planner fits a candidate on (internal/plan's
// measure), and the simulator sizes each planned replica's KV cache on it.
func ReplicaSlice(b *gpu.Board, prof *gpu.Profile, capBytes int64, share int) Slice {
	devBytes := VisibleBytes(b.MemoryMiB)
	sl := Slice{Board: b.Name, Kind: SliceGPU, Name: "gpu", MemoryBytes: devBytes, GPUBytes: devBytes, SMs: b.SMs}
	if prof != nil {
		devBytes = prof.MemoryMiB * MiB
		sl = Slice{Board: b.Name, Kind: SliceMIG, Name: prof.Name, MemoryBytes: devBytes, GPUBytes: devBytes, SMs: prof.SMs}
	}
	switch {
	case capBytes >= devBytes:
		capBytes = 0 // no cap: the whole GPU or instance (as perf.Slice.MemoryMiB)
	case capBytes <= 0 && share > 1:
		capBytes = devBytes / int64(share) / MiB * MiB
	}
	if capBytes > 0 {
		sl = Slice{Board: b.Name, Kind: SliceShared, Name: "shared-" + FormatGiB(capBytes), MemoryBytes: capBytes, GPUBytes: devBytes}
	}
	return sl
}

// WithVLLMArgs returns o with the context, utilization and eager mode a replica's vLLM
// arguments give (--max-model-len, --gpu-memory-utilization, --enforce-eager; "--flag value" or
// "--flag=value", the last of a repeated flag winning as in vLLM's parser); options the arguments
// do not name are kept. A fit with the options the planner fitted and the arguments its fit
// wrote (VLLMArgs.Flags) is that fit: the utilization it chose is then given, and the fit
// evaluates the same attempt.
func (o Options) WithVLLMArgs(args []string) (Options, error) {
	for i, a := range args {
		name, v, hasV := strings.Cut(a, "=")
		if !hasV && i+1 < len(args) {
			v = args[i+1]
		}
		switch name {
		case "--max-model-len":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("vLLM argument --max-model-len %q is not a positive integer", v)
			}
			o.Context = n
		case "--gpu-memory-utilization":
			u, err := strconv.ParseFloat(v, 64)
			if err != nil || !(u > 0 && u <= 1) {
				return o, fmt.Errorf("vLLM argument --gpu-memory-utilization %q is outside (0, 1]", v)
			}
			o.GPUMemoryUtilization = u
		case "--enforce-eager":
			o.EnforceEager = !hasV || strings.EqualFold(v, "true")
		}
	}
	return o, nil
}
