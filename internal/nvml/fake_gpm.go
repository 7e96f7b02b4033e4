package nvml

import (
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"gpupool.dev/gpupool/internal/gpu"
)

// fakeGPM is the fake's GPU Performance Monitoring: each MIG instance's SM activity as a test
// sets it, integrated over the fake's time (Advance) into SM-busy seconds, which a sample
// records and GpmMetricsGet turns into the mean utilisation between two samples. go-nvml's mocks
// have no GPM of their own. Guarded by Fake.tmu.
type fakeGPM struct {
	activity map[string]map[gpu.Instance]float64 // uuid → instance → SM activity, 0-1
	busy     map[string]map[gpu.Instance]float64 // uuid → instance → SM-busy seconds
	now      float64                             // the fake's time, seconds
	live     int                                 // samples allocated and not freed
}

// fakeSample is one GPM sample of the fake.
type fakeSample struct {
	f       *Fake
	key     string // uuid and instance
	at, val float64
	taken   bool
}

func (s *fakeSample) Free() gonvml.Return {
	s.f.tmu.Lock()
	defer s.f.tmu.Unlock()
	s.f.gpm.live--
	return gonvml.SUCCESS
}
func (s *fakeSample) Get(gonvml.Device) gonvml.Return         { return gonvml.ERROR_NOT_SUPPORTED }
func (s *fakeSample) MigGet(gonvml.Device, int) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }

// SetInstanceActivity sets the SM activity (0-1) of a MIG instance from now on; until set, an
// instance's activity is 0.
func (f *Fake) SetInstanceActivity(uuid string, in gpu.Instance, activity float64) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if f.gpm.activity == nil {
		f.gpm.activity, f.gpm.busy = map[string]map[gpu.Instance]float64{}, map[string]map[gpu.Instance]float64{}
	}
	if f.gpm.activity[uuid] == nil {
		f.gpm.activity[uuid], f.gpm.busy[uuid] = map[gpu.Instance]float64{}, map[gpu.Instance]float64{}
	}
	f.gpm.activity[uuid][in] = activity
}

// GPMSamplesLive is how many GPM samples are allocated and not freed.
func (f *Fake) GPMSamplesLive() int {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return f.gpm.live
}

// advanceGPM integrates every instance's activity over d (f.tmu is held).
func (f *Fake) advanceGPM(d time.Duration) {
	f.gpm.now += d.Seconds()
	for u, m := range f.gpm.activity {
		for in, a := range m {
			f.gpm.busy[u][in] += a * d.Seconds()
		}
	}
}

func (f *Fake) gpmSupported() bool { return f.opt.GPM && f.opt.Model != "a100" }

func (f *Fake) wrapGPM(d *server.Device) {
	d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		s := gonvml.GpmSupport{Version: gonvml.GPM_SUPPORT_VERSION}
		if f.gpmSupported() {
			s.IsSupportedDevice = 1
		}
		return s, gonvml.SUCCESS
	}
	d.GpmMigSampleGetFunc = func(id int, gs gonvml.GpmSample) gonvml.Return {
		if !f.gpmSupported() {
			return gonvml.ERROR_NOT_SUPPORTED
		}
		s, ok := gs.(*fakeSample)
		if !ok {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		var in gpu.Instance
		found := false
		d.RLock()
		for gi := range d.GpuInstances {
			if int(gi.Info.Id) == id {
				in, found = gpu.Instance{Profile: f.profileName(d, gi.Info.ProfileId), Start: int(gi.Info.Placement.Start)}, true
			}
		}
		d.RUnlock()
		if !found {
			return gonvml.ERROR_NOT_FOUND
		}
		f.tmu.Lock()
		defer f.tmu.Unlock()
		s.key, s.at, s.val, s.taken = d.UUID+" "+in.String(), f.gpm.now, f.gpm.busy[d.UUID][in], true
		return gonvml.SUCCESS
	}
}

func (f *Fake) wrapGPMServer() {
	f.srv.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) {
		f.tmu.Lock()
		defer f.tmu.Unlock()
		f.gpm.live++
		return &fakeSample{f: f}, gonvml.SUCCESS
	}
	f.srv.GpmMetricsGetFunc = func(mg *gonvml.GpmMetricsGetType) gonvml.Return {
		a, ok1 := mg.Sample1.(*fakeSample)
		b, ok2 := mg.Sample2.(*fakeSample)
		if !ok1 || !ok2 || !a.taken || !b.taken || a.key != b.key || mg.NumMetrics > uint32(len(mg.Metrics)) {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		for i := range mg.NumMetrics {
			m := &mg.Metrics[i]
			switch {
			case gonvml.GpmMetricId(m.MetricId) != gonvml.GPM_METRIC_SM_UTIL:
				m.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
			case !(b.at > a.at):
				m.NvmlReturn = uint32(gonvml.ERROR_INVALID_ARGUMENT) // no time between the samples
			default:
				m.Value, m.NvmlReturn = 100*(b.val-a.val)/(b.at-a.at), uint32(gonvml.SUCCESS)
			}
		}
		return gonvml.SUCCESS
	}
}
