package nvml

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"gpupool.dev/gpupool/internal/gpu"
)

// FakeOptions configure a fake node.
type FakeOptions struct {
	// Model is "a100" (DGX A100, A100-SXM4-40GB), "h100" (DGX H100) or "h200" (8 × H200 SXM as
	// measured by this project: NVML name "NVIDIA H200", PCI id 0x2335, 143771 MiB). Default h100.
	Model string
	// GPUs is how many GPUs the node has, 1–8; default 8.
	GPUs int
	// StatePath, when set, is the file the MIG state is kept in: read at start, rewritten
	// (atomically, fsynced) after every change.
	StatePath string
	// Hook, when set, is called before and after every MIG change with a short description
	// ("before create-gi GPU-… 3g.40gb@0"); crash tests kill the process from it.
	Hook func(point string)
	// GPM makes the GPUs report GPU Performance Monitoring, so that MIG instances have an SM
	// activity (SetInstanceActivity). Real GPM needs Hopper or newer: ignored for a100.
	GPM bool
	// Node, when set, is folded into the GPU UUIDs (a 16-bit hash of it in the first group), so
	// that the fake nodes of one pool report distinct GPUs; unset, every fake node's GPUs are
	// GPU-<model>0000-0000-4000-8000-<index>.
	Node string
}

// Fake is a node of fake GPUs on go-nvml's mocks, with the real MIG rules, telemetry and state
// that survives the process.
type Fake struct {
	srv   *server.Server
	opt   FakeOptions
	board *gpu.Board
	mu    sync.Mutex // serialises MIG changes and their persistence

	creates, destroys atomic.Int64

	tmu    sync.Mutex
	procs  map[string][]gonvml.ProcessInfo
	util   map[string][]gonvml.ProcessUtilizationSample
	energy map[string]uint64 // mJ
	watts  map[string]float64
	locked map[string][2]uint32
	power  map[string]uint32 // mW
	xids   chan gonvml.EventData
	gpm    fakeGPM
}

// fakeInstance is one GPU instance in the state file.
type fakeInstance struct {
	ProfileID uint32 `json:"profileId"`
	Start     uint32 `json:"start"`
	Compute   bool   `json:"compute"` // has its compute instance
}

// H200Measured is the H200 SXM as bench/gpu/results recorded it (driver 580.159.04), on the MIG
// tables of go-nvml's H200 mock.
var H200Measured = func() gpus.Config {
	c := gpus.H200_SXM5_141GB
	c.Name, c.PciDeviceId, c.MemoryMB = "NVIDIA H200", 0x233510DE, 143771
	return c
}()

// NewFake builds the node; with StatePath set it restores the MIG state kept there.
func NewFake(opt FakeOptions) (*Fake, error) {
	if opt.GPUs <= 0 || opt.GPUs > 8 {
		opt.GPUs = 8
	}
	var srv *server.Server
	var board string
	switch opt.Model {
	case "a100":
		cfg := gpus.A100_SXM4_40GB
		srv, board = dgxa100.NewWithGPUs(gpus.Multiple(opt.GPUs, cfg)...), "A100-SXM4-40GB"
	case "h100", "":
		opt.Model = "h100"
		srv, board = dgxh100.NewWithGPUs(gpus.Multiple(opt.GPUs, gpus.H100_SXM5_80GB)...), "H100-SXM5-80GB"
	case "h200":
		srv, board = dgxh200.NewWithGPUs(gpus.Multiple(opt.GPUs, H200Measured)...), "H200-141GB"
	default:
		return nil, fmt.Errorf("new fake node: unknown model %q (want a100, h100 or h200)", opt.Model)
	}
	b, err := gpu.Lookup(board)
	if err != nil {
		return nil, fmt.Errorf("new fake node: %w", err)
	}
	f := &Fake{srv: srv, opt: opt, board: b, procs: map[string][]gonvml.ProcessInfo{},
		util: map[string][]gonvml.ProcessUtilizationSample{}, energy: map[string]uint64{}, watts: map[string]float64{},
		locked: map[string][2]uint32{}, power: map[string]uint32{}, xids: make(chan gonvml.EventData, 64)}
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.UUID = fmt.Sprintf("GPU-%s%04x-0000-4000-8000-%012d", opt.Model, nodeTag(opt.Node), i)
		dev.MigMode = gonvml.DEVICE_MIG_ENABLE
		f.power[dev.UUID] = uint32(b.TDPWatts * 1000)
		f.wrapDevice(dev)
		f.wrapGPM(dev)
	}
	f.wrapServer()
	f.wrapGPMServer()
	if opt.StatePath != "" {
		if err := f.restore(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// nodeTag is the 16-bit FNV-1a hash of a node name (0 for none).
func nodeTag(node string) uint32 {
	if node == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(node))
	s := h.Sum32()
	return (s>>16 ^ s) & 0xffff
}

// Interface returns the fake as NVML.
func (f *Fake) Interface() gonvml.Interface { return f.srv }

// Board is the catalog board of every GPU of the node.
func (f *Fake) Board() *gpu.Board { return f.board }

// UUIDs lists the GPUs' UUIDs in index order.
func (f *Fake) UUIDs() []string {
	out := make([]string, len(f.srv.Devices))
	for i, d := range f.srv.Devices {
		out[i] = d.(*server.Device).UUID
	}
	return out
}

// Calls returns how many MIG creates and destroys (GPU and compute instances) the fake served.
func (f *Fake) Calls() (creates, destroys int64) { return f.creates.Load(), f.destroys.Load() }

func (f *Fake) hook(point string) {
	if f.opt.Hook != nil {
		f.opt.Hook(point)
	}
}

// profileName maps an NVML profile id of the mock to the catalog profile.
func (f *Fake) profileName(d *server.Device, id uint32) string {
	for i := range f.board.Profiles {
		p := &f.board.Profiles[i]
		idx := profileIndex(p)
		if info, ok := d.Config.MIGProfiles.GpuInstanceProfiles[idx]; idx >= 0 && ok && info.Id == id {
			return p.Name
		}
	}
	return ""
}

// layout returns the device's GPU instances as a layout (complete and partial together).
func (f *Fake) layout(d *server.Device) gpu.Layout {
	d.RLock()
	defer d.RUnlock()
	var l gpu.Layout
	for gi := range d.GpuInstances {
		l = append(l, gpu.Instance{Profile: f.profileName(d, gi.Info.ProfileId), Start: int(gi.Info.Placement.Start)})
	}
	return l.Sorted()
}

func (f *Fake) wrapDevice(d *server.Device) {
	create := d.CreateGpuInstanceWithPlacementFunc
	d.CreateGpuInstanceWithPlacementFunc = func(info *gonvml.GpuInstanceProfileInfo, p *gonvml.GpuInstancePlacement) (gonvml.GpuInstance, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		d.RLock()
		mode := d.MigMode
		d.RUnlock()
		if mode != gonvml.DEVICE_MIG_ENABLE {
			return nil, gonvml.ERROR_NOT_SUPPORTED // no instance outside MIG mode
		}
		in := gpu.Instance{Profile: f.profileName(d, info.Id), Start: int(p.Start)}
		if in.Profile == "" {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		prof, _ := f.board.Profile(in.Profile)
		if int(p.Size) != prof.MemorySlices {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		if err := f.board.Validate(append(f.layout(d), in)); err != nil {
			return nil, gonvml.ERROR_INSUFFICIENT_RESOURCES
		}
		point := fmt.Sprintf("create-gi %s %s", d.UUID, in)
		f.hook("before " + point)
		gi, r := create(info, p)
		if r == gonvml.SUCCESS {
			f.creates.Add(1)
			f.wrapGI(gi.(*server.GpuInstance))
			if err := f.save(); err != nil {
				return nil, gonvml.ERROR_UNKNOWN
			}
		}
		f.hook("after " + point)
		return gi, r
	}
	setMode := d.SetMigModeFunc
	d.SetMigModeFunc = func(mode int) (gonvml.Return, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if mode == gonvml.DEVICE_MIG_DISABLE && len(f.gpuInstances(d)) > 0 {
			return gonvml.ERROR_IN_USE, gonvml.ERROR_IN_USE // the driver refuses with instances left
		}
		point := fmt.Sprintf("set-mig-mode %s %d", d.UUID, mode)
		f.hook("before " + point)
		r, act := setMode(mode) // the mock's mode is current at once: no reset is modelled
		if r == gonvml.SUCCESS {
			if err := f.save(); err != nil {
				return gonvml.ERROR_UNKNOWN, gonvml.ERROR_UNKNOWN
			}
		}
		f.hook("after " + point)
		return r, act
	}
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		f.tmu.Lock()
		defer f.tmu.Unlock()
		return slices.Clone(f.procs[d.UUID]), gonvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = func(since uint64) ([]gonvml.ProcessUtilizationSample, gonvml.Return) {
		f.tmu.Lock()
		defer f.tmu.Unlock()
		var out []gonvml.ProcessUtilizationSample
		for _, s := range f.util[d.UUID] {
			if s.TimeStamp > since {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			return nil, gonvml.ERROR_NOT_FOUND
		}
		return out, gonvml.SUCCESS
	}
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) {
		f.tmu.Lock()
		defer f.tmu.Unlock()
		return f.energy[d.UUID], gonvml.SUCCESS
	}
	d.SetGpuLockedClocksFunc = func(lo, hi uint32) gonvml.Return {
		if lo > hi || hi == 0 {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		f.tmu.Lock()
		defer f.tmu.Unlock()
		f.locked[d.UUID] = [2]uint32{lo, hi}
		return gonvml.SUCCESS
	}
	d.ResetGpuLockedClocksFunc = func() gonvml.Return {
		f.tmu.Lock()
		defer f.tmu.Unlock()
		delete(f.locked, d.UUID)
		return gonvml.SUCCESS
	}
	d.GetPowerManagementLimitFunc = func() (uint32, gonvml.Return) {
		f.tmu.Lock()
		defer f.tmu.Unlock()
		return f.power[d.UUID], gonvml.SUCCESS
	}
	d.SetPowerManagementLimitFunc = func(mw uint32) gonvml.Return {
		if mw < 100_000 || float64(mw) > f.board.TDPWatts*1000 {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		f.tmu.Lock()
		defer f.tmu.Unlock()
		f.power[d.UUID] = mw
		return gonvml.SUCCESS
	}
	d.RegisterEventsFunc = func(types uint64, set gonvml.EventSet) gonvml.Return {
		if types&gonvml.EventTypeXidCriticalError == 0 {
			return gonvml.ERROR_NOT_SUPPORTED
		}
		return gonvml.SUCCESS
	}
}

func (f *Fake) wrapGI(gi *server.GpuInstance) {
	d := gi.Info.Device.(*server.Device)
	name := f.profileName(d, gi.Info.ProfileId)
	in := gpu.Instance{Profile: name, Start: int(gi.Info.Placement.Start)}
	createCI, destroyGI := gi.CreateComputeInstanceFunc, gi.DestroyFunc
	gi.CreateComputeInstanceFunc = func(info *gonvml.ComputeInstanceProfileInfo) (gonvml.ComputeInstance, gonvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		point := fmt.Sprintf("create-ci %s %s", d.UUID, in)
		f.hook("before " + point)
		ci, r := createCI(info)
		if r == gonvml.SUCCESS {
			f.creates.Add(1)
			f.wrapCI(ci.(*server.ComputeInstance), d, in)
			if err := f.save(); err != nil {
				return nil, gonvml.ERROR_UNKNOWN
			}
		}
		f.hook("after " + point)
		return ci, r
	}
	gi.DestroyFunc = func() gonvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		gi.RLock()
		busy := len(gi.ComputeInstances) > 0
		gi.RUnlock()
		if busy {
			return gonvml.ERROR_IN_USE
		}
		return f.destroyAt(fmt.Sprintf("destroy-gi %s %s", d.UUID, in), destroyGI)
	}
}

func (f *Fake) wrapCI(ci *server.ComputeInstance, d *server.Device, in gpu.Instance) {
	destroy := ci.DestroyFunc
	ci.DestroyFunc = func() gonvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.destroyAt(fmt.Sprintf("destroy-ci %s %s", d.UUID, in), destroy)
	}
}

// destroyAt runs a mock destroy between the crash hooks of its point, counting it and saving the
// state when it succeeds (f.mu is held).
func (f *Fake) destroyAt(point string, destroy func() gonvml.Return) gonvml.Return {
	f.hook("before " + point)
	r := destroy()
	if r == gonvml.SUCCESS {
		f.destroys.Add(1)
		if err := f.save(); err != nil {
			return gonvml.ERROR_UNKNOWN
		}
	}
	f.hook("after " + point)
	return r
}

func (f *Fake) wrapServer() {
	f.srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		set := &mock.EventSet{}
		set.WaitFunc = func(ms uint32) (gonvml.EventData, gonvml.Return) {
			select { // a queued event first, even with a zero timeout
			case e := <-f.xids:
				return e, gonvml.SUCCESS
			default:
			}
			select {
			case e := <-f.xids:
				return e, gonvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
			}
		}
		set.FreeFunc = func() gonvml.Return { return gonvml.SUCCESS }
		return set, gonvml.SUCCESS
	}
}

// gpuInstances returns the device's GPU instances (complete or not).
func (f *Fake) gpuInstances(d *server.Device) []*server.GpuInstance {
	d.RLock()
	defer d.RUnlock()
	var out []*server.GpuInstance
	for gi := range d.GpuInstances {
		out = append(out, gi)
	}
	return out
}

// migOffKey lists, in the state file, the GPUs whose MIG mode is off (a UUID never has this name).
const migOffKey = "migDisabled"

// state returns the MIG state of every device, by UUID, and under migOffKey the UUIDs of the
// devices whose MIG mode is off.
func (f *Fake) state() map[string]any {
	out := map[string]any{}
	off := []string{}
	for _, dd := range f.srv.Devices {
		d := dd.(*server.Device)
		d.RLock()
		if d.MigMode == gonvml.DEVICE_MIG_DISABLE {
			off = append(off, d.UUID)
		}
		list := []fakeInstance{}
		for gi := range d.GpuInstances {
			gi.RLock()
			list = append(list, fakeInstance{ProfileID: gi.Info.ProfileId, Start: gi.Info.Placement.Start, Compute: len(gi.ComputeInstances) > 0})
			gi.RUnlock()
		}
		d.RUnlock()
		slices.SortFunc(list, func(a, b fakeInstance) int { return int(a.Start) - int(b.Start) })
		out[d.UUID] = list
	}
	if len(off) > 0 {
		out[migOffKey] = off
	}
	return out
}

// save writes the MIG state to StatePath: a temporary file, fsync, rename, fsync of the folder.
func (f *Fake) save() error {
	if f.opt.StatePath == "" {
		return nil
	}
	data, err := json.Marshal(f.state())
	if err != nil {
		return fmt.Errorf("save fake state: %w", err)
	}
	return WriteFileSync(f.opt.StatePath, data)
}

// WriteFileSync replaces path with data durably: write a temporary file beside it, fsync it,
// rename it over path, fsync the folder.
func WriteFileSync(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync folder of %s: %w", path, err)
	}
	return nil
}

// restore re-creates the MIG state kept in StatePath, if the file exists.
func (f *Fake) restore() error {
	data, err := os.ReadFile(f.opt.StatePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore fake state: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("restore fake state %s: %w", f.opt.StatePath, err)
	}
	st := map[string][]fakeInstance{}
	var off []string
	for _, k := range slices.Sorted(maps.Keys(raw)) { // the first bad entry by key, every time
		v := raw[k]
		var err error
		if k == migOffKey {
			err = json.Unmarshal(v, &off)
		} else {
			var list []fakeInstance
			err = json.Unmarshal(v, &list)
			st[k] = list
		}
		if err != nil {
			return fmt.Errorf("restore fake state %s: %s: %w", f.opt.StatePath, k, err)
		}
	}
	hook := f.opt.Hook
	f.opt.Hook = nil
	defer func() { f.opt.Hook = hook }()
	path := f.opt.StatePath
	f.opt.StatePath = "" // no saves while replaying
	defer func() { f.opt.StatePath = path }()
	for _, dd := range f.srv.Devices {
		d := dd.(*server.Device)
		if slices.Contains(off, d.UUID) {
			d.MigMode = gonvml.DEVICE_MIG_DISABLE
		}
		for _, in := range st[d.UUID] {
			info := f.infoByID(d, in.ProfileID)
			if info == nil {
				return fmt.Errorf("restore fake state %s: GPU %s has unknown profile id %d", path, d.UUID, in.ProfileID)
			}
			gi, r := d.CreateGpuInstanceWithPlacement(info, &gonvml.GpuInstancePlacement{Start: in.Start, Size: f.memSlices(d, in.ProfileID)})
			if r != gonvml.SUCCESS {
				return fmt.Errorf("restore fake state %s: GPU %s profile id %d at %d: %s", path, d.UUID, in.ProfileID, in.Start, gonvml.ErrorString(r))
			}
			if in.Compute {
				p, _ := f.board.Profile(f.profileName(d, in.ProfileID))
				ci, r := gi.GetComputeInstanceProfileInfo(ciIndex(p.ComputeSlices), gonvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
				if r == gonvml.SUCCESS {
					_, r = gi.CreateComputeInstance(&ci)
				}
				if r != gonvml.SUCCESS {
					return fmt.Errorf("restore fake state %s: compute instance on GPU %s: %s", path, d.UUID, gonvml.ErrorString(r))
				}
			}
		}
	}
	f.creates.Store(0)
	return nil
}

func (f *Fake) infoByID(d *server.Device, id uint32) *gonvml.GpuInstanceProfileInfo {
	for _, info := range d.Config.MIGProfiles.GpuInstanceProfiles {
		if info.Id == id {
			return &info
		}
	}
	return nil
}

func (f *Fake) memSlices(d *server.Device, id uint32) uint32 {
	if p, err := f.board.Profile(f.profileName(d, id)); err == nil {
		return uint32(p.MemorySlices)
	}
	return 0
}
