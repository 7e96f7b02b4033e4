package nvml

import (
	"fmt"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Process is one compute process on a GPU (or on one of its MIG instances).
type Process struct {
	PID       uint32 `json:"pid"`
	UsedBytes uint64 `json:"usedBytes"`
	// GPUInstance and ComputeInstance name the MIG instance (NVML ids); both 0 without MIG.
	GPUInstance     uint32 `json:"gpuInstance"`
	ComputeInstance uint32 `json:"computeInstance"`
}

// Processes lists the compute processes on the GPU and the device memory each uses.
func (l *Lib) Processes(uuid string) ([]Process, error) {
	h, err := l.device(uuid)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var ps []gonvml.ProcessInfo
	if err := l.do("DeviceGetComputeRunningProcesses", func() (r gonvml.Return) { ps, r = h.GetComputeRunningProcesses(); return }); err != nil {
		return nil, fmt.Errorf("list processes on %s: %w", uuid, err)
	}
	out := make([]Process, len(ps))
	for i, p := range ps {
		out[i] = Process{PID: p.Pid, UsedBytes: p.UsedGpuMemory, GPUInstance: p.GpuInstanceId, ComputeInstance: p.ComputeInstanceId}
	}
	return out, nil
}

// Utilization is one process's SM and memory-controller utilisation, percent, over NVML's
// sampling window.
type Utilization struct {
	PID        uint32 `json:"pid"`
	SMPercent  uint32 `json:"smPercent"`
	MemPercent uint32 `json:"memPercent"`
	// Timestamp is NVML's sample time, µs since the epoch; pass the newest back as since.
	Timestamp uint64 `json:"timestamp"`
}

// ProcessUtilization returns the samples newer than since (µs since the epoch; 0 for all that
// NVML keeps). NVML answers Not Found when no process ran in the window: that is an empty list.
func (l *Lib) ProcessUtilization(uuid string, since uint64) ([]Utilization, error) {
	h, err := l.device(uuid)
	if err != nil {
		return nil, fmt.Errorf("read process utilisation: %w", err)
	}
	var ss []gonvml.ProcessUtilizationSample
	err = l.do("DeviceGetProcessUtilization", func() (r gonvml.Return) { ss, r = h.GetProcessUtilization(since); return })
	if e, ok := err.(*Error); ok && e.Return == gonvml.ERROR_NOT_FOUND {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read process utilisation on %s: %w", uuid, err)
	}
	out := make([]Utilization, len(ss))
	for i, s := range ss {
		out[i] = Utilization{PID: s.Pid, SMPercent: s.SmUtil, MemPercent: s.MemUtil, Timestamp: s.TimeStamp}
	}
	return out, nil
}

// EnergyMilliJoules returns the GPU's total-energy counter: mJ since the driver was loaded.
func (l *Lib) EnergyMilliJoules(uuid string) (uint64, error) {
	h, err := l.device(uuid)
	if err != nil {
		return 0, fmt.Errorf("read energy: %w", err)
	}
	var mj uint64
	if err := l.do("DeviceGetTotalEnergyConsumption", func() (r gonvml.Return) { mj, r = h.GetTotalEnergyConsumption(); return }); err != nil {
		return 0, fmt.Errorf("read energy on %s: %w", uuid, err)
	}
	return mj, nil
}

// LockClocks locks the GPU's graphics clock into [minMHz, maxMHz]; ResetClocks undoes it.
// It needs root on a real GPU; the agent applies it only when the operator allows it.
func (l *Lib) LockClocks(uuid string, minMHz, maxMHz uint32) error {
	h, err := l.device(uuid)
	if err != nil {
		return fmt.Errorf("lock clocks: %w", err)
	}
	if err := l.do("DeviceSetGpuLockedClocks", func() gonvml.Return { return h.SetGpuLockedClocks(minMHz, maxMHz) }); err != nil {
		return fmt.Errorf("lock clocks on %s to %d-%d MHz: %w", uuid, minMHz, maxMHz, err)
	}
	return nil
}

// ResetClocks removes a clock lock.
func (l *Lib) ResetClocks(uuid string) error {
	h, err := l.device(uuid)
	if err != nil {
		return fmt.Errorf("reset clocks: %w", err)
	}
	if err := l.do("DeviceResetGpuLockedClocks", func() gonvml.Return { return h.ResetGpuLockedClocks() }); err != nil {
		return fmt.Errorf("reset clocks on %s: %w", uuid, err)
	}
	return nil
}

// PowerLimit returns the GPU's power-management limit in milliwatts.
func (l *Lib) PowerLimit(uuid string) (uint32, error) {
	h, err := l.device(uuid)
	if err != nil {
		return 0, fmt.Errorf("read power limit: %w", err)
	}
	var mw uint32
	if err := l.do("DeviceGetPowerManagementLimit", func() (r gonvml.Return) { mw, r = h.GetPowerManagementLimit(); return }); err != nil {
		return 0, fmt.Errorf("read power limit on %s: %w", uuid, err)
	}
	return mw, nil
}

// SetPowerLimit sets the GPU's power-management limit in milliwatts.
func (l *Lib) SetPowerLimit(uuid string, mw uint32) error {
	h, err := l.device(uuid)
	if err != nil {
		return fmt.Errorf("set power limit: %w", err)
	}
	if err := l.do("DeviceSetPowerManagementLimit", func() gonvml.Return { return h.SetPowerManagementLimit(mw) }); err != nil {
		return fmt.Errorf("set power limit on %s to %d mW: %w", uuid, mw, err)
	}
	return nil
}

// XID is one XID error event.
type XID struct {
	GPU  string `json:"gpu"`
	Code uint64 `json:"code"` // 13, 31, 43, 48, 63, 64, 74, 79, 94, 95 …
}

// Events waits for XID events on the GPUs.
type Events struct {
	l   *Lib
	set gonvml.EventSet
	ids map[gonvml.Device]string
}

// WatchXID registers every listed GPU for critical XID events.
func (l *Lib) WatchXID(uuids []string) (*Events, error) {
	var set gonvml.EventSet
	if err := l.do("EventSetCreate", func() (r gonvml.Return) { set, r = l.n.EventSetCreate(); return }); err != nil {
		return nil, fmt.Errorf("watch xid: %w", err)
	}
	ev := &Events{l: l, set: set, ids: map[gonvml.Device]string{}}
	for _, u := range uuids {
		h, err := l.device(u)
		if err != nil {
			return nil, fmt.Errorf("watch xid: %w", err)
		}
		if err := l.do("DeviceRegisterEvents", func() gonvml.Return {
			return h.RegisterEvents(gonvml.EventTypeXidCriticalError, set)
		}); err != nil {
			return nil, fmt.Errorf("watch xid on %s: %w", u, err)
		}
		ev.ids[h] = u
	}
	return ev, nil
}

// Wait returns the next XID event, or ok=false when none came within d (d must be below the
// Lib's timeout).
func (e *Events) Wait(d time.Duration) (x XID, ok bool, err error) {
	var data gonvml.EventData
	err = e.l.doBounded("EventSetWait", func() (r gonvml.Return) { data, r = e.set.Wait(uint32(d.Milliseconds())); return })
	if ee, isErr := err.(*Error); isErr && ee.Return == gonvml.ERROR_TIMEOUT {
		return XID{}, false, nil
	}
	if err != nil {
		return XID{}, false, fmt.Errorf("wait xid: %w", err)
	}
	return XID{GPU: e.ids[data.Device], Code: data.EventData}, true, nil
}

// Close frees the event set.
func (e *Events) Close() error {
	return e.l.do("EventSetFree", func() gonvml.Return { return e.set.Free() })
}
