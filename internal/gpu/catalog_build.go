package gpu

import (
	"math"
	"strconv"
	"strings"
)

// Public sources cited by the catalog. Profile and board rows name the ones they rest on.
const (
	srcGuide        = "NVIDIA MIG User Guide, Supported MIG Profiles"
	srcGuideLgipp   = "NVIDIA MIG User Guide, Getting Started (A100-40GB `nvidia-smi mig -lgipp` example)"
	srcGuideMPS     = "NVIDIA MIG User Guide, MPS example (H100 80GB HBM3 3g.40gb: 60 SMs, 40448 MiB)"
	srcGuideGPUs    = "NVIDIA MIG User Guide, Supported GPUs"
	srcMigParted    = "NVIDIA mig-parted deployments/systemd/config-default.yaml @bd7160f4"
	srcLgipA100     = "`nvidia-smi mig -lgip` on A100 80GB"
	srcGoNVMLMock   = "NVIDIA go-nvml pkg/nvml/mock/gpus/a100.go @2f9e261f (A100 memory sizes)"
	srcLgipH100     = "`nvidia-smi mig -lgip` on 4x H100 SXM5 80GB HBM3 (10de:2330), StackHPC slurm-appliance MIG docs"
	srcLgipH100PCIe = "`nvidia-smi mig -lgip` on NVIDIA H100 PCIe, driver 570.169"
	srcLgipH100NVL  = "`nvidia-smi mig -lgip/-lgipp` on H100 NVL (Azure NC40ads_H100_v5 walkthrough; NVIDIA gpu-operator PR #900; mig-parted PR #101)"
	srcISC          = "ISC'26 \"Taming GPU underutilization\" MIG characterisation (H100 96GB SM counts)"
	srcLgipGH200    = "`nvidia-smi mig -lgip` on GH200 144G HBM3e (NVIDIA mig-parted PR #139, gpu-operator PR #1057)"
	srcLgipH200     = "`nvidia-smi mig -lgip` on H200 (NVIDIA mig-parted issue #120)"
	srcObsH200      = "`nvidia-smi mig -lgip` and NVML on H200, driver 580.159.04 (this project's measurement, bench/gpu/results)"
	srcLgipB200     = "`nvidia-smi mig -lgip` on B200, first rows (NVIDIA mig-parted PR #166, #187; gpu-operator PR #1242, #1351)"
	srcLgipGB200    = "`nvidia-smi mig -lgip` on GB200, first rows (NVIDIA gpu-operator PR #1303; mig-parted issue #227, PR #228)"
	srcLgipRTX      = "`nvidia-smi mig -lgip` on RTX PRO 6000 Blackwell (bigstack-oss/cubecos #312; GoogleCloudPlatform/container-engine-accelerators PR #564; bottlerocket-kernel-kit PR #300)"
	srcBaseten      = "Baseten MIG blog (H100 SXM 3.35 TB/s, 989.5 dense FP16/BF16 TFLOPS)"
	srcPB11133      = "NVIDIA H100 PCIe product brief PB-11133 (350 W, >2 TB/s)"
	srcB200Overview = "Vultr HGX B200 overview; glennklockwood.com (B200 8 TB/s, 1000 W)"
	srcKernelNotes  = "public kernel-tuning notes (B200 148 SMs, B300 160 SMs, RTX PRO 6000 188 SMs)"
	srcDatasheet    = "NVIDIA product datasheet (not re-verified)"
	srcRTXPro       = "NVIDIA RTX PRO Blackwell product pages as reported at launch (RTX PRO 5000: 14,080 CUDA cores, 2,064 AI TOPS, 1,344 GB/s, 300 W; RTX PRO 4500: 10,496 CUDA cores, 896 GB/s, 200 W; RTX PRO 6000: 24,064 CUDA cores, 2,617 MHz boost, as is the 4500's)"
	srcGB200SMs     = "public GB200 kernel-tuning and profiling notes (the device reports 152 SMs; B300 148)"
	srcGB300SMs     = "public GB300 device queries (compute capability 10.3, 152 SMs; DGX Station GB300 too); NVIDIA \"Inside Blackwell Ultra\" blog (160 SMs in the full GPU)"
	srcSmiTotal     = "`nvidia-smi` memory total printed in public logs"
)

// shape is the MIG geometry a profile shares with every profile of the same kind on boards with
// the same slice count: its NVML id, compute and memory slices, max count and legal starts.
type shape struct {
	id, compute, memory, max int
	starts                   []int
	me                       bool
}

// Shapes of the 8-memory-slice, 7-compute-slice boards (A100, H100, H200, GH200, B200, GB200,
// B300, GB300). Ids and starts: MIG User Guide `-lgipp` example, identical on H100 NVL.
var (
	s8x1g   = shape{id: 19, compute: 1, memory: 1, max: 7, starts: []int{0, 1, 2, 3, 4, 5, 6}}
	s8x1gme = shape{id: 20, compute: 1, memory: 1, max: 1, starts: []int{0, 1, 2, 3, 4, 5, 6}, me: true}
	s8x1g2m = shape{id: 15, compute: 1, memory: 2, max: 4, starts: []int{0, 2, 4, 6}}
	s8x2g   = shape{id: 14, compute: 2, memory: 2, max: 3, starts: []int{0, 2, 4}}
	s8x3g   = shape{id: 9, compute: 3, memory: 4, max: 2, starts: []int{0, 4}}
	s8x4g   = shape{id: 5, compute: 4, memory: 4, max: 1, starts: []int{0}}
	s8x7g   = shape{id: 0, compute: 7, memory: 8, max: 1, starts: []int{0}}
)

// Shapes of the 4-slice boards (A30, RTX PRO 6000 Blackwell). No `-lgipp` output was found for
// them: the starts are the 8-slot rule scaled down and are marked unverified on every profile.
var (
	s4x1g = shape{id: -1, compute: 1, memory: 1, max: 4, starts: []int{0, 1, 2, 3}}
	s4x2g = shape{id: -1, compute: 2, memory: 2, max: 2, starts: []int{0, 2}}
	s4x4g = shape{id: -1, compute: 4, memory: 4, max: 1, starts: []int{0}}
	// Shapes of the 2-slice boards (RTX PRO 5000 / 4500 Blackwell), starts unverified as well.
	s2x1g = shape{id: -1, compute: 1, memory: 1, max: 2, starts: []int{0, 1}}
	s2x2g = shape{id: -1, compute: 2, memory: 2, max: 1, starts: []int{0}}
)

// opt adjusts a profile row.
type opt func(*Profile)

// gib sets usable memory from the GiB `nvidia-smi mig -lgip` prints (see mibFromGiB).
func gib(g float64) opt { return func(p *Profile) { p.MemoryMiB = mibFromGiB(g) } }

// mib sets usable memory from an exact MiB value seen in driver output.
func mib(n int64) opt { return func(p *Profile) { p.MemoryMiB = n } }

// withID overrides the shape's NVML profile id.
func withID(n int) opt { return func(p *Profile) { p.ID = n } }

// maxCount overrides the shape's max count.
func maxCount(n int) opt { return func(p *Profile) { p.MaxCount = n } }

// me marks a media-extension profile (at most one per GPU).
func me() opt { return func(p *Profile) { p.MediaExtension = true } }

// unv marks fields as unverified.
func unv(fields ...string) opt {
	return func(p *Profile) { p.Unverified = appendUnique(p.Unverified, fields...) }
}

// src names the sources of a row.
func src(s ...string) opt { return func(p *Profile) { p.Sources = append(p.Sources, s...) } }

// eng builds an Engines value: NVDEC, NVJPG, OFA, NVENC, copy engines.
func eng(dec, jpg, ofa, enc, ce int) Engines {
	return Engines{NVDEC: dec, NVJPG: jpg, OFA: ofa, NVENC: enc, CopyEngines: ce}
}

// noEng stands for engines nobody has published for the row; the field is marked unverified.
var noEng = Engines{}

// mk builds one profile row. sms == 0 means not found. Rows from shapes with unknown ids
// (id -1) get "id" marked unverified; missing SMs, engines or memory are marked too (finish).
func mk(s shape, name string, sms int, e Engines, opts ...opt) Profile {
	p := Profile{
		Name: name, ID: s.id, ComputeSlices: s.compute, MemorySlices: s.memory, SMs: sms,
		MaxCount: s.max, Starts: append([]int(nil), s.starts...), Engines: e, MediaExtension: s.me,
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// mibFromGiB turns the GiB nvidia-smi prints (two decimals) into MiB. Every MIG memory size seen
// in real driver output is a multiple of 64 MiB (9984, 11008, 22144, 40448, 47488), and 64 MiB is
// 0.0625 GiB, wider than the 0.01 GiB the print rounds to, so the nearest multiple of 64 MiB is
// the one value that prints as g. A test checks that every row prints back as its GiB.
func mibFromGiB(g float64) int64 {
	return int64(math.Round(g*1024/64)) * 64
}

// estimateMiB is the conservative usable memory for a profile no driver output was found for:
// the nominal GB in its name times the lowest usable/nominal ratio seen in real `-lgip` rows of
// that size class (0.97 for half a GPU or more, e.g. H100 3g.40gb 39.50/40 = 0.9875; 0.88 below,
// e.g. H200 1g.18gb 16.00/18 = 0.889), rounded down to 64 MiB.
func estimateMiB(name string, memSlices, totalSlices int) int64 {
	gb := nominalGB(name)
	f := 0.88
	if 2*memSlices >= totalSlices {
		f = 0.97
	}
	return int64(math.Floor(float64(gb)*f*1024/64)) * 64
}

// nominalGB reads M from a profile name "Ng.Mgb[+variant]"; 0 when the name has no such part.
func nominalGB(name string) int {
	_, rest, ok := strings.Cut(name, ".")
	if !ok {
		return 0
	}
	num, _, ok := strings.Cut(rest, "gb")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0
	}
	return n
}

// finish completes a board built from a table: it fills unknown profile memory with the
// conservative estimate and marks every missing or inferred value as unverified, including empty
// NVML-name and PCI-id lists (unknown, not absent).
func finish(b *Board) *Board {
	if b.Interconnect == (Interconnect{}) {
		b.Interconnect = interconnects[b.Name]
	}
	for i := range b.Profiles {
		p := &b.Profiles[i]
		if p.MemoryMiB == 0 {
			p.MemoryMiB = estimateMiB(p.Name, p.MemorySlices, b.MemorySlices)
			p.Unverified = appendUnique(p.Unverified, "memoryMiB")
		}
		if p.SMs == 0 {
			p.Unverified = appendUnique(p.Unverified, "sms")
		}
		if p.ID < 0 {
			p.Unverified = appendUnique(p.Unverified, "id")
		}
		if p.Engines == noEng {
			p.Unverified = appendUnique(p.Unverified, "engines")
		}
	}
	if b.SMs == 0 {
		b.Unverified = appendUnique(b.Unverified, "sms")
	}
	if b.SMsInMIG == 0 {
		b.Unverified = appendUnique(b.Unverified, "smsInMig")
	}
	if len(b.NVMLNames) == 0 {
		b.Unverified = appendUnique(b.Unverified, "nvmlNames")
	}
	if len(b.PCIDeviceIDs) == 0 {
		b.Unverified = appendUnique(b.Unverified, "pciDeviceIds")
	}
	return b
}

func appendUnique(list []string, items ...string) []string {
	for _, it := range items {
		found := false
		for _, x := range list {
			if x == it {
				found = true
				break
			}
		}
		if !found {
			list = append(list, it)
		}
	}
	return list
}
