package gpu

// Ampere boards. Profile rows: MIG User Guide tables; SMs and MiB from real `nvidia-smi mig -lgip`
// output and, for A100-40GB memory, go-nvml's A100 fixture. Datasheet numbers (bandwidth, TDP,
// TFLOPS) are not in the project's verified tables and are marked unverified.

func a100SXM4_40GB() *Board {
	return finish(&Board{
		Name:    "A100-SXM4-40GB",
		Aliases: []string{"A100-40GB", "A800-40GB", "A800-SXM4-40GB"},
		Arch:    "ampere", ComputeCapability: "8.0", MinDriver: "R450",
		NVMLNames: []string{"NVIDIA A100-SXM4-40GB", "NVIDIA A100-PG509-200",
			"NVIDIA A800-SXM4-40GB", "NVIDIA A800 40GB Active"},
		PCIDeviceIDs: []string{"0x20B010DE", "0x20F610DE"},
		MemoryMiB:    40960, SMs: 108, SMsInMIG: 98,
		BandwidthGBs: 1555, TDPWatts: 400, BF16TFLOPS: 312, FP8TFLOPS: 0,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcGuideLgipp, srcGoNVMLMock, srcMigParted, srcDatasheet},
		Notes: []string{
			"A800 40GB shares this board; the A100 40GB PCIe card is A100-PCIe-40GB, with the same MIG table.",
			"1g.10gb on this board is the 2-memory-slice profile (max 4), not the 1-slice one of the 80GB boards.",
		},
		Profiles: a100x40GBProfiles(),
	})
}

// a100PCIe40GB is the A100 40GB PCIe card: the SXM4 board's GA100 with its MIG table (the MIG
// User Guide lists both 40GB boards with the same profiles), at the PCIe card's datasheet
// power (250 W against the SXM4 board's 400 W) and the same 1,555 GB/s.
func a100PCIe40GB() *Board {
	return finish(&Board{
		Name: "A100-PCIe-40GB",
		Arch: "ampere", ComputeCapability: "8.0", MinDriver: "R450",
		NVMLNames:    []string{"NVIDIA A100-PCIE-40GB"},
		PCIDeviceIDs: []string{"0x20B110DE", "0x20F110DE"},
		MemoryMiB:    40960, SMs: 108, SMsInMIG: 98,
		BandwidthGBs: 1555, TDPWatts: 250, BF16TFLOPS: 312, FP8TFLOPS: 0,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcGuideLgipp, srcGoNVMLMock, srcMigParted, srcDatasheet},
		Notes: []string{
			"Same MIG table as A100-SXM4-40GB; the datasheet gives the PCIe card 250 W against the SXM4 board's 400 W, both at 1555 GB/s.",
			"PCI device ids 0x20B1 and 0x20F1 are the A100 PCIe 40GB in the PCI ID database; mig-parted's default file groups them with the SXM4 board's 0x20B0.",
			"1g.10gb on this board is the 2-memory-slice profile (max 4), not the 1-slice one of the 80GB boards.",
		},
		Profiles: a100x40GBProfiles(),
	})
}

// a100x40GBProfiles is the MIG table of the A100 40GB boards, SXM4 and PCIe.
func a100x40GBProfiles() []Profile {
	return []Profile{
		mk(s8x1g, "1g.5gb", 14, eng(0, 0, 0, 0, 1), mib(4864), src(srcGuide, srcGuideLgipp, srcGoNVMLMock)),
		mk(s8x1gme, "1g.5gb+me", 14, eng(1, 1, 1, 0, 1), mib(4864), src(srcGuide, srcGuideLgipp)),
		mk(s8x1g2m, "1g.10gb", 14, eng(1, 0, 0, 0, 1), mib(9856), src(srcGuide, srcGuideLgipp, srcGoNVMLMock)),
		mk(s8x2g, "2g.10gb", 28, eng(1, 0, 0, 0, 2), mib(9856), src(srcGuide, srcGuideLgipp, srcGoNVMLMock)),
		mk(s8x3g, "3g.20gb", 42, eng(2, 0, 0, 0, 3), mib(19968), src(srcGuide, srcGuideLgipp, srcGoNVMLMock)),
		mk(s8x4g, "4g.20gb", 56, eng(2, 0, 0, 0, 4), mib(19968), src(srcGuide, srcGuideLgipp, srcGoNVMLMock)),
		mk(s8x7g, "7g.40gb", 98, eng(5, 1, 1, 0, 7), mib(40192), src(srcGuide, srcGuideLgipp, srcGoNVMLMock)),
	}
}

func a100SXM4_80GB() *Board {
	return finish(&Board{
		Name:    "A100-SXM4-80GB",
		Aliases: []string{"A100", "A100-80GB", "A800", "A800-80GB", "A800-SXM4-80GB"},
		Arch:    "ampere", ComputeCapability: "8.0", MinDriver: "R450",
		NVMLNames:    []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A800-SXM4-80GB"},
		PCIDeviceIDs: []string{"0x20B210DE", "0x20F310DE"},
		MemoryMiB:    81920, SMs: 108, SMsInMIG: 98,
		BandwidthGBs: 2039, TDPWatts: 400, BF16TFLOPS: 312, FP8TFLOPS: 0,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipA100, srcGoNVMLMock, srcMigParted, srcDatasheet},
		Notes: []string{
			"A800 80GB SXM4 shares this board; the PCIe cards (A100 and A800 80GB PCIe) are A100-PCIe-80GB, with the same MIG table.",
			"Drivers differ on 1g.10gb usable memory: 9.50 or 9.75 GiB; the catalog keeps 9.75.",
		},
		Profiles: a100x80GBProfiles(),
	})
}

// a100PCIe80GB is the A100 80GB PCIe card: the SXM4 board's GA100 with its MIG table (the MIG
// User Guide lists both 80GB boards with the same profiles), at the PCIe card's datasheet
// bandwidth (1,935 GB/s) and power (300 W).
func a100PCIe80GB() *Board {
	return finish(&Board{
		Name:    "A100-PCIe-80GB",
		Aliases: []string{"A800-PCIe-80GB"},
		Arch:    "ampere", ComputeCapability: "8.0", MinDriver: "R450",
		NVMLNames:    []string{"NVIDIA A100 80GB PCIe", "NVIDIA A800 80GB PCIe", "NVIDIA A800 80GB PCIe LC"},
		PCIDeviceIDs: []string{"0x20B510DE", "0x20F510DE"},
		MemoryMiB:    81920, SMs: 108, SMsInMIG: 98,
		BandwidthGBs: 1935, TDPWatts: 300, BF16TFLOPS: 312, FP8TFLOPS: 0,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipA100, srcGoNVMLMock, srcMigParted, srcDatasheet},
		Notes: []string{
			"Same MIG table as A100-SXM4-80GB; the datasheet gives the PCIe card 1935 GB/s and 300 W against the SXM4 board's 2039 GB/s and 400 W.",
			"A800 80GB PCIe shares this board (the same bandwidth and power).",
			"Drivers differ on 1g.10gb usable memory: 9.50 or 9.75 GiB; the catalog keeps 9.75.",
		},
		Profiles: a100x80GBProfiles(),
	})
}

// a100x80GBProfiles is the MIG table of the A100 80GB boards, SXM4 and PCIe.
func a100x80GBProfiles() []Profile {
	return []Profile{
		mk(s8x1g, "1g.10gb", 14, eng(0, 0, 0, 0, 1), gib(9.75), src(srcGuide, srcLgipA100)),
		mk(s8x1gme, "1g.10gb+me", 14, eng(1, 1, 1, 0, 1), gib(9.75), src(srcGuide, srcLgipA100)),
		mk(s8x1g2m, "1g.20gb", 14, eng(1, 0, 0, 0, 1), gib(19.50), src(srcGuide, srcLgipA100)),
		mk(s8x2g, "2g.20gb", 28, eng(1, 0, 0, 0, 2), gib(19.50), src(srcGuide, srcLgipA100)),
		mk(s8x3g, "3g.40gb", 42, eng(2, 0, 0, 0, 3), gib(39.25), src(srcGuide, srcLgipA100)),
		mk(s8x4g, "4g.40gb", 56, eng(2, 0, 0, 0, 4), gib(39.25), src(srcGuide, srcLgipA100)),
		// The 7g row was not seen in real -lgip output: 98 SMs = 7 x 14, MiB from go-nvml's fixture.
		mk(s8x7g, "7g.80gb", 98, eng(5, 1, 1, 0, 7), mib(80384), unv("sms", "memoryMiB"), src(srcGuide, srcGoNVMLMock)),
	}
}

func a30_24GB() *Board {
	return finish(&Board{
		Name:    "A30-24GB",
		Aliases: []string{"A30"},
		Arch:    "ampere", ComputeCapability: "8.0", MinDriver: "R460",
		NVMLNames:    []string{"NVIDIA A30"},
		PCIDeviceIDs: []string{"0x20B710DE"},
		MemoryMiB:    24576, SMs: 56,
		BandwidthGBs: 933, TDPWatts: 165, BF16TFLOPS: 165, FP8TFLOPS: 0,
		MemorySlices: 4, ComputeSlices: 4, MaxInstances: 4,
		Unverified: []string{"memoryMiB", "sms", "bandwidthGBs", "tdpWatts", "bf16Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcMigParted, srcDatasheet},
		Notes: []string{
			"No `-lgipp` output was found for A30: starts follow the 8-slot rule scaled to 4 slots.",
			"Profile ids are inferred (the ids A30 `-lgip` is commonly shown with), not seen in verified output.",
		},
		Profiles: []Profile{
			mk(s4x1g, "1g.6gb", 0, eng(0, 0, 0, 0, 1), withID(14), unv("starts", "id"), src(srcGuide)),
			mk(s4x1g, "1g.6gb+me", 0, eng(1, 1, 1, 0, 1), withID(21), maxCount(1), me(), unv("starts", "id"), src(srcGuide)),
			mk(s4x2g, "2g.12gb", 0, eng(2, 0, 0, 0, 2), withID(5), unv("starts", "id"), src(srcGuide)),
			mk(s4x2g, "2g.12gb+me", 0, eng(2, 1, 1, 0, 2), withID(6), maxCount(1), me(), unv("starts", "id"), src(srcGuide)),
			mk(s4x4g, "4g.24gb", 0, eng(4, 1, 1, 0, 4), withID(0), unv("id"), src(srcGuide)),
		},
	})
}
