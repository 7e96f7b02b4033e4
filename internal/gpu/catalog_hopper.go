package gpu

import "fmt"

// Hopper boards. SM counts per profile come from real `nvidia-smi mig -lgip` output and differ per
// board: the same profile name carries fewer SMs on H100 PCIe than on H100 SXM5.

// hopperEngines are the media and copy engines of the Hopper profiles (MIG User Guide table; the
// same on every Hopper board it lists).
var (
	hopper1g   = eng(1, 1, 0, 0, 1)
	hopper1gme = eng(1, 1, 1, 0, 1)
	hopper2g   = eng(2, 2, 0, 0, 2)
	hopper3g   = eng(3, 3, 0, 0, 3)
	hopper4g   = eng(4, 4, 0, 0, 4)
	hopper7g   = eng(7, 7, 1, 0, 8)
)

func h100SXM5_80GB() *Board {
	s := src(srcGuide, srcLgipH100)
	return finish(&Board{
		Name:    "H100-SXM5-80GB",
		Aliases: []string{"H100", "H100-80GB", "H100-SXM", "H100-SXM5", "H800", "H800-80GB"},
		Arch:    "hopper", ComputeCapability: "9.0", MinDriver: "R525",
		NVMLNames:    []string{"NVIDIA H100 80GB HBM3", "NVIDIA H800"},
		PCIDeviceIDs: []string{"0x233010DE", "0x232410DE"},
		MemoryMiB:    81559, SMs: 132, SMsInMIG: 132,
		BandwidthGBs: 3350, TDPWatts: 700, BF16TFLOPS: 989.5, FP8TFLOPS: 1979,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "tdpWatts", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipH100, srcGuideMPS, srcBaseten, srcMigParted, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"SM counts are not compute slices x 16: 1g.20gb has 26 SMs, 3g.40gb 60, 7g.80gb 132.",
			"mig-parted lists the H800 PCIe (0x2322) with this board; the catalog maps it to H100-PCIe-80GB, whose SM counts a PCIe part shares.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.10gb", 16, hopper1g, gib(9.75), s),
			mk(s8x1gme, "1g.10gb+me", 16, hopper1gme, gib(9.75), s),
			mk(s8x1g2m, "1g.20gb", 26, hopper1g, gib(19.62), s),
			mk(s8x2g, "2g.20gb", 32, hopper2g, gib(19.62), s),
			mk(s8x3g, "3g.40gb", 60, hopper3g, mib(40448), src(srcGuide, srcLgipH100, srcGuideMPS)),
			mk(s8x4g, "4g.40gb", 64, hopper4g, gib(39.50), s),
			mk(s8x7g, "7g.80gb", 132, hopper7g, gib(79.25), s),
		},
	})
}

func h100PCIe80GB() *Board {
	s := src(srcGuide, srcLgipH100PCIe)
	return finish(&Board{
		Name:    "H100-PCIe-80GB",
		Aliases: []string{"H100-PCIe", "H800-PCIe", "H800-PCIe-80GB"},
		Arch:    "hopper", ComputeCapability: "9.0", MinDriver: "R525",
		NVMLNames:    []string{"NVIDIA H100 PCIe", "NVIDIA H800 PCIe"},
		PCIDeviceIDs: []string{"0x233110DE", "0x232210DE"},
		MemoryMiB:    81559, SMs: 114, SMsInMIG: 114,
		BandwidthGBs: 2000, TDPWatts: 350, BF16TFLOPS: 756, FP8TFLOPS: 1513,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipH100PCIe, srcPB11133, srcMigParted, srcDatasheet},
		Notes: []string{
			"Same profile names as H100 SXM5 but fewer SMs: 1g.20gb gets 14 SMs here, 26 on SXM5.",
			"The H800 PCIe (0x2322) is mapped here; mig-parted groups it with the 80GB boards and its per-profile SMs were not seen.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.10gb", 14, hopper1g, mib(9984), s),
			mk(s8x1gme, "1g.10gb+me", 14, hopper1gme, gib(9.75), s),
			mk(s8x1g2m, "1g.20gb", 14, hopper1g, gib(19.62), s),
			mk(s8x2g, "2g.20gb", 30, hopper2g, gib(19.62), s),
			mk(s8x3g, "3g.40gb", 46, hopper3g, gib(39.50), s),
			mk(s8x4g, "4g.40gb", 62, hopper4g, gib(39.50), s),
			mk(s8x7g, "7g.80gb", 114, hopper7g, gib(79.25), s),
		},
	})
}

func h100NVL94GB() *Board {
	s := src(srcGuide, srcLgipH100NVL)
	return finish(&Board{
		Name:    "H100-NVL-94GB",
		Aliases: []string{"H100-NVL", "H800-NVL", "H100-94GB"},
		Arch:    "hopper", ComputeCapability: "9.0", MinDriver: "R525",
		NVMLNames:    []string{"NVIDIA H100 NVL", "NVIDIA H800 NVL"},
		PCIDeviceIDs: []string{"0x232110DE", "0x233A10DE"},
		MemoryMiB:    95830, SMs: 132, SMsInMIG: 132,
		BandwidthGBs: 3900, TDPWatts: 400, BF16TFLOPS: 835.5, FP8TFLOPS: 1670.5,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipH100NVL, srcMigParted, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"Profile names overstate usable memory: 2x1g.12gb + 2g.24gb + 3g.47gb = 89.5 GiB (mig-parted PR #101).",
			"Some drivers print 46.12 / 92.62 GiB for 3g.47gb / 7g.94gb; the catalog keeps 46.38 / 93.12.",
			"TDP is configurable, 350-400 W.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.12gb", 16, hopper1g, gib(10.75), s),
			mk(s8x1gme, "1g.12gb+me", 16, hopper1gme, gib(10.75), s),
			mk(s8x1g2m, "1g.24gb", 26, hopper1g, gib(21.62), s),
			mk(s8x2g, "2g.24gb", 32, hopper2g, gib(21.62), s),
			mk(s8x3g, "3g.47gb", 60, hopper3g, gib(46.38), s),
			mk(s8x4g, "4g.47gb", 64, hopper4g, gib(46.38), s),
			mk(s8x7g, "7g.94gb", 132, hopper7g, gib(93.12), s),
		},
	})
}

// h100x96Profiles is the MIG table of the 96GB Hopper parts (MIG User Guide "H100 96GB" table).
// No usable-memory figures were found: MemoryMiB is the conservative estimate (see finish).
func h100x96Profiles(sms [7]int, extra ...opt) []Profile {
	o := func(more ...opt) []opt { return append(append([]opt{src(srcGuide, srcMigParted)}, extra...), more...) }
	return []Profile{
		mk(s8x1g, "1g.12gb", sms[0], hopper1g, o()...),
		mk(s8x1gme, "1g.12gb+me", sms[1], hopper1gme, o()...),
		mk(s8x1g2m, "1g.24gb", sms[2], hopper1g, o()...),
		mk(s8x2g, "2g.24gb", sms[3], hopper2g, o()...),
		mk(s8x3g, "3g.48gb", sms[4], hopper3g, o()...),
		mk(s8x4g, "4g.48gb", sms[5], hopper4g, o()...),
		mk(s8x7g, "7g.96gb", sms[6], hopper7g, o()...),
	}
}

func h100x96GB() *Board {
	ps := h100x96Profiles([7]int{16, 16, 26, 32, 60, 64, 132}, src(srcISC))
	ps[2].Unverified = appendUnique(ps[2].Unverified, "sms") // 1g.24gb: Hopper pattern, not measured
	return finish(&Board{
		Name:    "H100-96GB",
		Aliases: []string{"H100-96GB-GH200", "GH200", "GH200-96GB", "PG506-96GB"},
		Arch:    "hopper", ComputeCapability: "9.0",
		NVMLNames:    []string{"NVIDIA GH200 480GB", "NVIDIA GH200 120GB", "NVIDIA PG506-232"},
		PCIDeviceIDs: []string{"0x234210DE", "0x233D10DE", "0x20B610DE"},
		MemoryMiB:    97871, SMs: 132, SMsInMIG: 132,
		BandwidthGBs: 4000, TDPWatts: 1000, BF16TFLOPS: 989.5, FP8TFLOPS: 1979,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcISC, srcMigParted, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"The GPU of GH200 (96GB HBM3). TDP is the GH200 module's upper bound (450-1000 W, CPU+GPU+memory).",
			"Usable memory per profile was not seen in driver output: the catalog uses conservative estimates.",
		},
		Profiles: ps,
	})
}

func h20x96GB() *Board {
	return finish(&Board{
		Name:    "H20-96GB",
		Aliases: []string{"H20"},
		Arch:    "hopper", ComputeCapability: "9.0", MinDriver: "R535",
		NVMLNames:    []string{"NVIDIA H20"},
		PCIDeviceIDs: []string{"0x232910DE"},
		MemoryMiB:    97871, SMs: 78,
		BandwidthGBs: 4000, TDPWatts: 400, BF16TFLOPS: 148, FP8TFLOPS: 296,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "sms", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcMigParted, srcDatasheet},
		Notes: []string{
			"mig-parted and the MIG User Guide put the H20 (0x2329) in the H100 96GB table; the catalog keeps it a " +
				"separate board with the same profiles because its compute is a fraction of H100's (datasheet: 148 dense BF16 TFLOPS).",
			"Per-profile SMs and usable memory are unknown; memory is a conservative estimate.",
		},
		Profiles: h100x96Profiles([7]int{}),
	})
}

func gh200x144GB() *Board {
	s := src(srcLgipGH200, srcMigParted)
	cfg := src(srcMigParted)
	return finish(&Board{
		Name:    "GH200-144GB",
		Aliases: []string{"GH200-144GB-HBM3e", "GH200-144G"},
		Arch:    "hopper", ComputeCapability: "9.0",
		NVMLNames:    []string{"NVIDIA GH200 144G HBM3e"},
		PCIDeviceIDs: []string{"0x234810DE"},
		MemoryMiB:    146831, SMs: 132, SMsInMIG: 132,
		BandwidthGBs: 4900, TDPWatts: 1000, BF16TFLOPS: 989.5, FP8TFLOPS: 1979,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "smsInMig", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcLgipGH200, srcMigParted, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"3g.72gb, 4g.72gb and 7g.144gb come from mig-parted only: their SMs and engines follow the Hopper pattern.",
			"TDP is the GH200 module's upper bound (CPU+GPU+memory).",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.18gb", 16, hopper1g, gib(17.50), s),
			mk(s8x1gme, "1g.18gb+me", 16, hopper1gme, gib(17.50), src(srcLgipGH200)),
			mk(s8x1g2m, "1g.36gb", 26, hopper1g, gib(35.25), s),
			mk(s8x2g, "2g.36gb", 32, hopper2g, gib(35.25), s),
			mk(s8x3g, "3g.72gb", 60, hopper3g, unv("sms", "engines"), cfg),
			mk(s8x4g, "4g.72gb", 64, hopper4g, unv("sms", "engines"), cfg),
			mk(s8x7g, "7g.144gb", 132, hopper7g, unv("sms", "engines"), cfg),
		},
	})
}

// newerH200 records the usable memory driver 580.159.04 reports for an H200 row whose catalog
// value is the smaller R550 one.
func newerH200(g float64) opt {
	return src(fmt.Sprintf("driver 580.159.04 reports %.2f GiB (%d MiB); the catalog keeps the R550 value", g, mibFromGiB(g)))
}

func h200x141GB() *Board {
	s := src(srcGuide, srcLgipH200, srcObsH200)
	return finish(&Board{
		Name:    "H200-141GB",
		Aliases: []string{"H200", "H200-SXM", "H200-NVL"},
		Arch:    "hopper", ComputeCapability: "9.0", MinDriver: "R550",
		NVMLNames:    []string{"NVIDIA H200", "NVIDIA H200 NVL"},
		PCIDeviceIDs: []string{"0x233510DE", "0x233B10DE"},
		MemoryMiB:    143771, SMs: 132, SMsInMIG: 132,
		BandwidthGBs: 4800, TDPWatts: 700, BF16TFLOPS: 989.5, FP8TFLOPS: 1979,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipH200, srcObsH200, srcMigParted, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"H200 NVL (0x233B) shares this MIG table; it runs at 600 W with lower clocks than the SXM numbers shown.",
			"mig-parted's all-1g.35gb config filters on 0x2335 only.",
			"Profile memory is the R550 driver's (32.25 / 69.50 / 139.75 GiB for 1g.35gb and 2g.35gb / 3g.71gb and 4g.71gb / 7g.141gb). " +
				"Driver 580.159.04 reports 32.50 / 69.75 / 140.00 GiB (33280 / 71424 / 143360 MiB); the catalog keeps the smaller, older values for planning.",
			"Measured on one H200 SXM (0x2335) with driver 580.159.04: memory total 143771 MiB, default power limit 700 W, and every profile's id, SMs, engines, max count and placements as listed.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.18gb", 16, hopper1g, gib(16.00), s),
			mk(s8x1gme, "1g.18gb+me", 16, hopper1gme, gib(16.00), s),
			mk(s8x1g2m, "1g.35gb", 26, hopper1g, gib(32.25), s, newerH200(32.50)),
			mk(s8x2g, "2g.35gb", 32, hopper2g, gib(32.25), s, newerH200(32.50)),
			mk(s8x3g, "3g.71gb", 60, hopper3g, gib(69.50), s, newerH200(69.75)),
			mk(s8x4g, "4g.71gb", 64, hopper4g, gib(69.50), s, newerH200(69.75)),
			mk(s8x7g, "7g.141gb", 132, hopper7g, gib(139.75), s, newerH200(140.00)),
		},
	})
}
