package nvml

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"gpupool.dev/gpupool/internal/gpu"
)

// Device is one GPU as the inventory reports it.
type Device struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Name        string `json:"name"`  // what NVML calls it, "NVIDIA H100 80GB HBM3"
	Board       string `json:"board"` // the catalog board, "H100-SXM5-80GB"; empty when unknown
	MemoryBytes uint64 `json:"memoryBytes"`
	MIG         bool   `json:"mig"` // MIG mode enabled (current)
	// Instances are the complete MIG instances; Partial the GPU instances without a compute instance.
	Instances gpu.Layout `json:"instances,omitzero"`
	Partial   gpu.Layout `json:"partial,omitzero"`
}

// profileIndex returns the NVML GPU-instance profile constant for a catalog profile, or -1.
func profileIndex(p *gpu.Profile) int {
	switch {
	case strings.ContainsAny(p.Name, "-") || strings.Contains(p.Name, "gfx"):
		return -1 // "-me" and graphics variants: not created by gpupool
	case p.ComputeSlices == 1 && p.MediaExtension:
		return gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1
	case p.ComputeSlices == 2 && p.MediaExtension:
		return gonvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1
	case p.MediaExtension:
		return -1
	case p.ComputeSlices == 1 && p.MemorySlices == 2:
		return gonvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2 // 1g.20gb on H100, 1g.10gb on A100-40GB
	}
	if c, ok := giByCompute[p.ComputeSlices]; ok {
		return c
	}
	return -1
}

var giByCompute = map[int]int{1: gonvml.GPU_INSTANCE_PROFILE_1_SLICE, 2: gonvml.GPU_INSTANCE_PROFILE_2_SLICE,
	3: gonvml.GPU_INSTANCE_PROFILE_3_SLICE, 4: gonvml.GPU_INSTANCE_PROFILE_4_SLICE, 6: gonvml.GPU_INSTANCE_PROFILE_6_SLICE,
	7: gonvml.GPU_INSTANCE_PROFILE_7_SLICE, 8: gonvml.GPU_INSTANCE_PROFILE_8_SLICE}

var ciByCompute = map[int]int{1: gonvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: gonvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: gonvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: gonvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 6: gonvml.COMPUTE_INSTANCE_PROFILE_6_SLICE,
	7: gonvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, 8: gonvml.COMPUTE_INSTANCE_PROFILE_8_SLICE}

// ciIndex returns the NVML compute-instance profile constant spanning n compute slices.
func ciIndex(n int) int { return ciByCompute[n] }

// resolveBoard finds the catalog board for an NVML name and PCI device id.
func resolveBoard(name string, pciID uint32) *gpu.Board {
	for _, n := range []string{name, strings.TrimPrefix(name, "Mock ")} {
		if b, err := gpu.Lookup(n); err == nil {
			return b
		}
	}
	if bs := gpu.ByPCIDeviceID(fmt.Sprintf("0x%08X", pciID)); len(bs) > 0 {
		// The first catalog board that lists the PCI id.
		return bs[0]
	}
	return nil
}

// Inventory lists every GPU with its board and MIG layout.
func (l *Lib) Inventory() ([]Device, error) {
	var count int
	if err := l.do("DeviceGetCount", func() (r gonvml.Return) { count, r = l.n.DeviceGetCount(); return }); err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	out := make([]Device, 0, count)
	for i := range count {
		dev, err := l.describe(i)
		if err != nil {
			return nil, fmt.Errorf("list devices: %w", err)
		}
		out = append(out, dev)
	}
	return out, nil
}

func (l *Lib) describe(i int) (Device, error) {
	var h gonvml.Device
	if err := l.do("DeviceGetHandleByIndex", func() (r gonvml.Return) { h, r = l.n.DeviceGetHandleByIndex(i); return }); err != nil {
		return Device{}, fmt.Errorf("get device %d: %w", i, err)
	}
	d := Device{Index: i}
	var mem gonvml.Memory
	var pci gonvml.PciInfo
	var cur int
	steps := []struct {
		call string
		f    func() gonvml.Return
	}{
		{"DeviceGetUUID", func() (r gonvml.Return) { d.UUID, r = h.GetUUID(); return }},
		{"DeviceGetName", func() (r gonvml.Return) { d.Name, r = h.GetName(); return }},
		{"DeviceGetMemoryInfo", func() (r gonvml.Return) { mem, r = h.GetMemoryInfo(); return }},
		{"DeviceGetPciInfo", func() (r gonvml.Return) { pci, r = h.GetPciInfo(); return }},
	}
	for _, s := range steps {
		if err := l.do(s.call, s.f); err != nil {
			return Device{}, fmt.Errorf("describe device %d: %w", i, err)
		}
	}
	d.MemoryBytes = mem.Total
	err := l.do("DeviceGetMigMode", func() (r gonvml.Return) { cur, _, r = h.GetMigMode(); return })
	switch {
	case IsNotSupported(err):
	case err != nil:
		return Device{}, fmt.Errorf("describe device %d %s: %w", i, d.UUID, err)
	default:
		d.MIG = cur == gonvml.DEVICE_MIG_ENABLE
	}
	b := resolveBoard(d.Name, pci.PciDeviceId)
	if b == nil {
		return d, nil
	}
	d.Board = b.Name
	if d.MIG {
		if d.Instances, d.Partial, err = l.observe(h, d.UUID, b); err != nil {
			return Device{}, err
		}
	}
	return d, nil
}

// profileInfos returns the board's profiles that the device supports, with their NVML infos.
func (l *Lib) profileInfos(h gonvml.Device, uuid string, b *gpu.Board) (map[string]gonvml.GpuInstanceProfileInfo, error) {
	out := map[string]gonvml.GpuInstanceProfileInfo{}
	for i := range b.Profiles {
		p := &b.Profiles[i]
		idx := profileIndex(p)
		if idx < 0 {
			continue
		}
		var info gonvml.GpuInstanceProfileInfo
		err := l.do("DeviceGetGpuInstanceProfileInfo", func() (r gonvml.Return) { info, r = h.GetGpuInstanceProfileInfo(idx); return })
		if IsNotSupported(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get profile %s on %s: %w", p.Name, uuid, err)
		}
		out[p.Name] = info
	}
	return out, nil
}

// Observe returns the GPU's complete MIG instances and its half-made ones (a GPU instance
// without a compute instance).
func (l *Lib) Observe(uuid, board string) (complete, partial gpu.Layout, err error) {
	b, err := gpu.Lookup(board)
	if err != nil {
		return nil, nil, fmt.Errorf("observe %s: %w", uuid, err)
	}
	h, err := l.device(uuid)
	if err != nil {
		return nil, nil, fmt.Errorf("observe %s: %w", uuid, err)
	}
	return l.observe(h, uuid, b)
}

func (l *Lib) observe(h gonvml.Device, uuid string, b *gpu.Board) (complete, partial gpu.Layout, err error) {
	infos, err := l.profileInfos(h, uuid, b)
	if err != nil {
		return nil, nil, err
	}
	complete = gpu.Layout{}
	for _, name := range slices.Sorted(maps.Keys(infos)) {
		info := infos[name]
		gis, err := l.gpuInstances(h, &info)
		if err != nil {
			return nil, nil, fmt.Errorf("observe %s profile %s: %w", uuid, name, err)
		}
		p, _ := b.Profile(name)
		for _, gi := range gis {
			var gii gonvml.GpuInstanceInfo
			if err := l.do("GpuInstanceGetInfo", func() (r gonvml.Return) { gii, r = gi.GetInfo(); return }); err != nil {
				return nil, nil, fmt.Errorf("observe %s profile %s: %w", uuid, name, err)
			}
			in := gpu.Instance{Profile: name, Start: int(gii.Placement.Start)}
			n, err := l.countCIs(gi, p.ComputeSlices)
			if err != nil {
				return nil, nil, fmt.Errorf("observe %s instance %s: %w", uuid, in, err)
			}
			if n > 0 {
				complete = append(complete, in)
			} else {
				partial = append(partial, in)
			}
		}
	}
	return complete.Sorted(), partial.Sorted(), nil
}

func (l *Lib) gpuInstances(h gonvml.Device, info *gonvml.GpuInstanceProfileInfo) ([]gonvml.GpuInstance, error) {
	var gis []gonvml.GpuInstance
	err := l.do("DeviceGetGpuInstances", func() (r gonvml.Return) { gis, r = h.GetGpuInstances(info); return })
	return gis, err
}

// ciProfiles returns the compute-instance profiles a GPU instance offers, smallest first.
func (l *Lib) ciProfiles(gi gonvml.GpuInstance, maxSlices int) ([]gonvml.ComputeInstanceProfileInfo, error) {
	var out []gonvml.ComputeInstanceProfileInfo
	for _, n := range []int{1, 2, 3, 4, 6, 7, 8} {
		if n > maxSlices {
			break
		}
		var ci gonvml.ComputeInstanceProfileInfo
		err := l.do("GpuInstanceGetComputeInstanceProfileInfo", func() (r gonvml.Return) {
			ci, r = gi.GetComputeInstanceProfileInfo(ciIndex(n), gonvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
			return
		})
		if IsNotSupported(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ci)
	}
	return out, nil
}

// countCIs counts the compute instances of every profile inside a GPU instance.
func (l *Lib) countCIs(gi gonvml.GpuInstance, slices int) (int, error) {
	profs, err := l.ciProfiles(gi, slices)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range profs {
		var cis []gonvml.ComputeInstance
		if err := l.do("GpuInstanceGetComputeInstances", func() (r gonvml.Return) { cis, r = gi.GetComputeInstances(&profs[i]); return }); err != nil {
			return 0, err
		}
		n += len(cis)
	}
	return n, nil
}

// Create makes one MIG instance: a GPU instance of the profile at the start, then one compute
// instance spanning it. A crash between the two leaves a partial instance that Observe reports.
func (l *Lib) Create(uuid, board string, in gpu.Instance) error {
	b, p, h, err := l.resolve(uuid, board, in)
	if err != nil {
		return fmt.Errorf("create instance %s on %s: %w", in, uuid, err)
	}
	info, err := l.infoFor(h, uuid, b, p)
	if err != nil {
		return fmt.Errorf("create instance %s on %s: %w", in, uuid, err)
	}
	place := gonvml.GpuInstancePlacement{Start: uint32(in.Start), Size: uint32(p.MemorySlices)}
	var gi gonvml.GpuInstance
	if err := l.doBounded("DeviceCreateGpuInstanceWithPlacement", func() (r gonvml.Return) {
		gi, r = h.CreateGpuInstanceWithPlacement(&info, &place)
		return
	}); err != nil {
		return fmt.Errorf("create instance %s on %s: %w", in, uuid, err)
	}
	var ci gonvml.ComputeInstanceProfileInfo
	if err := l.do("GpuInstanceGetComputeInstanceProfileInfo", func() (r gonvml.Return) {
		ci, r = gi.GetComputeInstanceProfileInfo(ciIndex(p.ComputeSlices), gonvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		return
	}); err != nil {
		return fmt.Errorf("create compute instance %s on %s: %w", in, uuid, err)
	}
	if err := l.doBounded("GpuInstanceCreateComputeInstance", func() (r gonvml.Return) {
		_, r = gi.CreateComputeInstance(&ci)
		return
	}); err != nil {
		return fmt.Errorf("create compute instance %s on %s: %w", in, uuid, err)
	}
	return nil
}

// Destroy removes one MIG instance: its compute instances, then the GPU instance. Destroying an
// instance that is not there is not an error (the gate may ask again after a crash).
func (l *Lib) Destroy(uuid, board string, in gpu.Instance) error {
	b, p, h, err := l.resolve(uuid, board, in)
	if err != nil {
		return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
	}
	info, err := l.infoFor(h, uuid, b, p)
	if err != nil {
		return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
	}
	gis, err := l.gpuInstances(h, &info)
	if err != nil {
		return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
	}
	for _, gi := range gis {
		var gii gonvml.GpuInstanceInfo
		if err := l.do("GpuInstanceGetInfo", func() (r gonvml.Return) { gii, r = gi.GetInfo(); return }); err != nil {
			return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
		}
		if int(gii.Placement.Start) != in.Start {
			continue
		}
		profs, err := l.ciProfiles(gi, p.ComputeSlices)
		if err != nil {
			return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
		}
		for i := range profs {
			var cis []gonvml.ComputeInstance
			if err := l.do("GpuInstanceGetComputeInstances", func() (r gonvml.Return) { cis, r = gi.GetComputeInstances(&profs[i]); return }); err != nil {
				return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
			}
			for _, ci := range cis {
				if err := l.doBounded("ComputeInstanceDestroy", func() gonvml.Return { return ci.Destroy() }); err != nil {
					return fmt.Errorf("destroy compute instance of %s on %s: %w", in, uuid, err)
				}
			}
		}
		if err := l.doBounded("GpuInstanceDestroy", func() gonvml.Return { return gi.Destroy() }); err != nil {
			return fmt.Errorf("destroy instance %s on %s: %w", in, uuid, err)
		}
	}
	return nil
}

func (l *Lib) resolve(uuid, board string, in gpu.Instance) (*gpu.Board, *gpu.Profile, gonvml.Device, error) {
	b, err := gpu.Lookup(board)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := b.Profile(in.Profile)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := l.device(uuid)
	return b, p, h, err
}

func (l *Lib) infoFor(h gonvml.Device, uuid string, b *gpu.Board, p *gpu.Profile) (gonvml.GpuInstanceProfileInfo, error) {
	idx := profileIndex(p)
	if idx < 0 {
		return gonvml.GpuInstanceProfileInfo{}, fmt.Errorf("profile %s of %s has no NVML profile constant", p.Name, b.Name)
	}
	var info gonvml.GpuInstanceProfileInfo
	err := l.do("DeviceGetGpuInstanceProfileInfo", func() (r gonvml.Return) { info, r = h.GetGpuInstanceProfileInfo(idx); return })
	return info, err
}

// SetMIGMode turns the GPU's MIG mode on or off (nvmlDeviceSetMigMode). The driver refuses it
// while the GPU has MIG instances or running processes. Where the new mode only becomes current
// after a GPU reset (NVML reports it pending: some A100 systems, passthrough VMs), the mode is
// left pending and an error says so: the agent never resets a GPU itself.
func (l *Lib) SetMIGMode(uuid string, on bool) error {
	h, err := l.device(uuid)
	if err != nil {
		return fmt.Errorf("set MIG mode of %s: %w", uuid, err)
	}
	mode := gonvml.DEVICE_MIG_DISABLE
	if on {
		mode = gonvml.DEVICE_MIG_ENABLE
	}
	if err := l.doBounded("DeviceSetMigMode", func() (r gonvml.Return) { _, r = h.SetMigMode(mode); return }); err != nil {
		return fmt.Errorf("set MIG mode of %s to %v: %w", uuid, on, err)
	}
	var cur, pending int
	if err := l.do("DeviceGetMigMode", func() (r gonvml.Return) { cur, pending, r = h.GetMigMode(); return }); err != nil {
		return fmt.Errorf("read MIG mode of %s: %w", uuid, err)
	}
	if cur != mode {
		return fmt.Errorf("MIG mode of %s is pending (current %d, pending %d): it takes effect after a GPU reset, which the agent does not do", uuid, cur, pending)
	}
	return nil
}
