// Read-only NVML dump: device facts and the MIG GPU-instance profile table with placements.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type profile struct {
	Enum                                           int
	ID, Slices, Count, SMs, CE, Dec, Enc, Jpg, Ofa uint32
	MemMB                                          uint64
	Name                                           string
	Placements                                     []nvml.GpuInstancePlacement
	Err                                            string `json:",omitempty"`
}

type device struct {
	Index                        int
	Name, UUID, PCIBus           string
	PCIDeviceID                  string
	MemTotal                     uint64
	MIGCurrent, MIGPending       int
	PowerLimitmW, PowerDefaultmW uint32
	MaxSMClock, MaxMemClock      uint32
	Arch                         int
	CCMajor, CCMinor             int
	ComputeMode                  int
	Profiles                     []profile
	Errs                         []string
}

func cstr(b [96]int8) string {
	s := make([]byte, 0, 96)
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func main() {
	if r := nvml.Init(); r != nvml.SUCCESS {
		fmt.Println("init:", nvml.ErrorString(r))
		os.Exit(1)
	}
	defer nvml.Shutdown()
	drv, _ := nvml.SystemGetDriverVersion()
	nv, _ := nvml.SystemGetNVMLVersion()
	cuda, _ := nvml.SystemGetCudaDriverVersion_v2()
	n, _ := nvml.DeviceGetCount()
	out := map[string]any{"driver": drv, "nvml": nv, "cuda": cuda}
	var devs []device
	for i := 0; i < n; i++ {
		d, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			continue
		}
		var dv device
		dv.Index = i
		dv.Name, _ = d.GetName()
		dv.UUID, _ = d.GetUUID()
		if p, r := d.GetPciInfo(); r == nvml.SUCCESS {
			dv.PCIDeviceID = fmt.Sprintf("0x%08X", p.PciDeviceId)
			b := make([]byte, 0, 32)
			for _, c := range p.BusIdLegacy {
				if c == 0 {
					break
				}
				b = append(b, byte(c))
			}
			dv.PCIBus = string(b)
		}
		if m, r := d.GetMemoryInfo(); r == nvml.SUCCESS {
			dv.MemTotal = m.Total
		}
		dv.MIGCurrent, dv.MIGPending, _ = d.GetMigMode()
		dv.PowerLimitmW, _ = d.GetPowerManagementLimit()
		dv.PowerDefaultmW, _ = d.GetPowerManagementDefaultLimit()
		dv.MaxSMClock, _ = d.GetMaxClockInfo(nvml.CLOCK_SM)
		dv.MaxMemClock, _ = d.GetMaxClockInfo(nvml.CLOCK_MEM)
		a, _ := d.GetArchitecture()
		dv.Arch = int(a)
		dv.CCMajor, dv.CCMinor, _ = d.GetCudaComputeCapability()
		cm, _ := d.GetComputeMode()
		dv.ComputeMode = int(cm)
		for p := 0; p < nvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
			pr := profile{Enum: p}
			info, r := d.GetGpuInstanceProfileInfo(p)
			if r != nvml.SUCCESS {
				pr.Err = nvml.ErrorString(r)
				dv.Profiles = append(dv.Profiles, pr)
				continue
			}
			pr.ID, pr.Slices, pr.Count, pr.SMs = info.Id, info.SliceCount, info.InstanceCount, info.MultiprocessorCount
			pr.CE, pr.Dec, pr.Enc, pr.Jpg, pr.Ofa, pr.MemMB = info.CopyEngineCount, info.DecoderCount, info.EncoderCount, info.JpegCount, info.OfaCount, info.MemorySizeMB
			if v3, r := d.GetGpuInstanceProfileInfoV(p).V3(); r == nvml.SUCCESS {
				pr.Name = cstr(v3.Name)
			} else if v2, r := d.GetGpuInstanceProfileInfoV(p).V2(); r == nvml.SUCCESS {
				pr.Name = cstr(v2.Name)
			}
			pl, r := d.GetGpuInstancePossiblePlacements(&info)
			if r != nvml.SUCCESS {
				pr.Err = "placements: " + nvml.ErrorString(r)
			}
			pr.Placements = pl
			dv.Profiles = append(dv.Profiles, pr)
		}
		devs = append(devs, dv)
	}
	out["devices"] = devs
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(b))
}
