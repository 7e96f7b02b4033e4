package nvml

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"gpupool.dev/gpupool/internal/gpu"
)

// ErrGPMUnsupported is returned (wrapped) by InstanceActivity when the GPU has no GPU
// Performance Monitoring: GPM needs a Hopper or newer GPU, so on an A100 per-instance activity
// is unknown and energy is split by instance size alone.
var ErrGPMUnsupported = errors.New("GPM (per-instance activity) is not supported on this GPU")

// InstanceActivity returns each MIG instance's SM activity, 0-1, between the previous call for
// the GPU and this one: GPM's SM utilisation (GPM_METRIC_SM_UTIL, percent of the instance's SMs
// busy, averaged over the time between two samples) from one nvmlGpmMigSampleGet per GPU
// instance per call. An instance sampled for the first time (new, or at the first call) has no
// entry: its first sample is taken now. The caller calls it once per polling interval, so that the
// activity covers the same interval as the energy counter's increase.
func (l *Lib) InstanceActivity(uuid, board string) (map[gpu.Instance]float64, error) {
	b, err := gpu.Lookup(board)
	if err != nil {
		return nil, fmt.Errorf("instance activity %s: %w", uuid, err)
	}
	h, err := l.device(uuid)
	if err != nil {
		return nil, fmt.Errorf("instance activity %s: %w", uuid, err)
	}
	var sup gonvml.GpmSupport
	err = l.do("GpmQueryDeviceSupport", func() (r gonvml.Return) { sup, r = h.GpmQueryDeviceSupport(); return })
	switch {
	case IsNotSupported(err) || err == nil && sup.IsSupportedDevice == 0:
		return nil, fmt.Errorf("instance activity %s: %w", uuid, ErrGPMUnsupported)
	case err != nil:
		return nil, fmt.Errorf("instance activity %s: %w", uuid, err)
	}
	infos, err := l.profileInfos(h, uuid, b)
	if err != nil {
		return nil, fmt.Errorf("instance activity %s: %w", uuid, err)
	}
	l.gmu.Lock()
	defer l.gmu.Unlock()
	if l.gpmPrev == nil {
		l.gpmPrev = map[string]gonvml.GpmSample{}
	}
	out := map[gpu.Instance]float64{}
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(infos)) {
		info := infos[name]
		gis, err := l.gpuInstances(h, &info)
		if err != nil {
			return nil, fmt.Errorf("instance activity %s profile %s: %w", uuid, name, err)
		}
		for _, gi := range gis {
			var gii gonvml.GpuInstanceInfo
			if err := l.do("GpuInstanceGetInfo", func() (r gonvml.Return) { gii, r = gi.GetInfo(); return }); err != nil {
				return nil, fmt.Errorf("instance activity %s profile %s: %w", uuid, name, err)
			}
			in := gpu.Instance{Profile: name, Start: int(gii.Placement.Start)}
			key := fmt.Sprintf("%s %s #%d", uuid, in, gii.Id)
			a, ok, err := l.sampleInstance(h, int(gii.Id), key)
			if err != nil {
				return nil, fmt.Errorf("instance activity %s instance %s: %w", uuid, in, err)
			}
			seen[key] = true
			if ok {
				out[in] = a
			}
		}
	}
	for key, s := range l.gpmPrev { // instances destroyed since the last call
		if strings.HasPrefix(key, uuid+" ") && !seen[key] {
			_ = l.do("GpmSampleFree", func() gonvml.Return { return s.Free() })
			delete(l.gpmPrev, key)
		}
	}
	return out, nil
}

// sampleInstance takes a GPM sample of GPU instance id and, when the instance has an earlier one
// (kept under key), returns the SM activity between the two; the new sample replaces the old.
// l.gmu is held.
func (l *Lib) sampleInstance(h gonvml.Device, id int, key string) (float64, bool, error) {
	var s gonvml.GpmSample
	if err := l.do("GpmSampleAlloc", func() (r gonvml.Return) { s, r = l.n.GpmSampleAlloc(); return }); err != nil {
		return 0, false, err
	}
	if err := l.do("GpmMigSampleGet", func() gonvml.Return { return h.GpmMigSampleGet(id, s) }); err != nil {
		_ = l.do("GpmSampleFree", func() gonvml.Return { return s.Free() })
		return 0, false, err
	}
	prev, ok := l.gpmPrev[key]
	l.gpmPrev[key] = s
	if !ok {
		return 0, false, nil
	}
	defer func() { _ = l.do("GpmSampleFree", func() gonvml.Return { return prev.Free() }) }()
	mg := &gonvml.GpmMetricsGetType{NumMetrics: 1, Sample1: prev, Sample2: s}
	mg.Metrics[0].MetricId = uint32(gonvml.GPM_METRIC_SM_UTIL)
	if err := l.do("GpmMetricsGet", func() gonvml.Return { return l.n.GpmMetricsGet(mg) }); err != nil {
		return 0, false, err
	}
	if r := gonvml.Return(mg.Metrics[0].NvmlReturn); r != gonvml.SUCCESS {
		return 0, false, &Error{Call: "GpmMetricsGet SM utilisation", Return: r}
	}
	v := mg.Metrics[0].Value / 100
	if math.IsNaN(v) {
		return 0, false, &Error{Call: "GpmMetricsGet SM utilisation", Return: gonvml.ERROR_UNKNOWN}
	}
	return min(max(v, 0), 1), true, nil
}
