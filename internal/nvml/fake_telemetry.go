package nvml

import (
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// SetProcesses sets the compute processes NVML reports on the GPU, with one utilisation sample
// per process stamped at (µs since the epoch).
func (f *Fake) SetProcesses(uuid string, ps []Process, smPercent []uint32, at time.Time) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	infos := make([]gonvml.ProcessInfo, len(ps))
	samples := make([]gonvml.ProcessUtilizationSample, len(ps))
	for i, p := range ps {
		infos[i] = gonvml.ProcessInfo{Pid: p.PID, UsedGpuMemory: p.UsedBytes, GpuInstanceId: p.GPUInstance, ComputeInstanceId: p.ComputeInstance}
		var sm uint32
		if i < len(smPercent) {
			sm = smPercent[i]
		}
		samples[i] = gonvml.ProcessUtilizationSample{Pid: p.PID, SmUtil: sm, TimeStamp: uint64(at.UnixMicro())}
	}
	f.procs[uuid], f.util[uuid] = infos, samples
}

// SetPower sets the power the GPU draws; Advance integrates it into the energy counter.
func (f *Fake) SetPower(uuid string, watts float64) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	f.watts[uuid] = watts
}

// Advance moves the fake's time: every GPU's energy counter grows by its power × d, and every MIG
// instance's GPM SM-busy time by its activity × d.
func (f *Fake) Advance(d time.Duration) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	for u, w := range f.watts {
		f.energy[u] += uint64(w * d.Seconds() * 1000)
	}
	f.advanceGPM(d)
}

// LockedClocks returns the GPU's clock lock, if any.
func (f *Fake) LockedClocks(uuid string) (lo, hi uint32, ok bool) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	c, ok := f.locked[uuid]
	return c[0], c[1], ok
}

// InjectXID queues an XID event on the GPU with the index.
func (f *Fake) InjectXID(index int, code uint64) {
	f.xids <- gonvml.EventData{Device: f.srv.Devices[index], EventType: gonvml.EventTypeXidCriticalError, EventData: code}
}
