package gpu

// Blackwell boards. Only the first rows of the B200 and GB200 tables have been seen in real
// driver output; B300 and GB300 are known from mig-parted's configs alone, so nearly everything
// on them but their profile names, counts and the 8-slot geometry is unverified.

func b200x180GB() *Board {
	s := src(srcGuide, srcLgipB200)
	cfg := src(srcGuide, srcMigParted)
	return finish(&Board{
		Name:    "B200-180GB",
		Aliases: []string{"B200", "B200-192GB", "HGX-B200"},
		Arch:    "blackwell", ComputeCapability: "10.0", MinDriver: "R570",
		NVMLNames:    []string{"NVIDIA B200"},
		PCIDeviceIDs: []string{"0x290110DE"},
		MemoryMiB:    183359, SMs: 148,
		BandwidthGBs: 8000, TDPWatts: 1000, BF16TFLOPS: 2250, FP8TFLOPS: 4500,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipB200, srcMigParted, srcB200Overview, srcKernelNotes, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"180 GB usable of 192 GB physical HBM3e.",
			"`nvidia-smi mig -lgip` shows 2g.45gb with 2 NVDEC, 2 NVJPG and 4 copy engines; the MIG User Guide table says 1/1/3. The catalog keeps the guide's.",
			"1g.23gb printed 20.50 GiB on an earlier driver, 22.00 GiB now.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.23gb", 18, eng(1, 1, 0, 0, 2), gib(22.00), s),
			mk(s8x1gme, "1g.23gb+me", 18, eng(1, 1, 1, 0, 2), gib(22.00), s),
			mk(s8x1g2m, "1g.45gb", 30, eng(1, 1, 0, 0, 2), gib(44.25), s),
			mk(s8x2g, "2g.45gb", 36, eng(1, 1, 0, 0, 3), gib(44.25), s),
			mk(s8x3g, "3g.90gb", 0, eng(1, 1, 0, 0, 6), cfg),
			mk(s8x4g, "4g.90gb", 0, eng(1, 1, 0, 0, 8), cfg),
			mk(s8x7g, "7g.180gb", 0, eng(1, 1, 1, 0, 16), cfg),
		},
	})
}

func gb200x186GB() *Board {
	s := src(srcLgipGB200, srcMigParted)
	cfg := src(srcMigParted)
	return finish(&Board{
		Name:    "GB200-186GB",
		Aliases: []string{"GB200", "GB200-NVL72"},
		Arch:    "blackwell", ComputeCapability: "10.0", MinDriver: "R570",
		NVMLNames:    []string{"NVIDIA GB200"},
		PCIDeviceIDs: []string{"0x294110DE"},
		MemoryMiB:    189471, SMs: 152,
		BandwidthGBs: 8000, TDPWatts: 1200, BF16TFLOPS: 2500, FP8TFLOPS: 5000,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "sms", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Estimated:  []string{"sms"},
		Sources:    []string{srcLgipGB200, srcMigParted, srcGB200SMs, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"Not in the MIG User Guide tables; profile names from mig-parted.",
			"152 SMs is what public GB200 kernel and profiling notes report the device has, not an NVIDIA datasheet line (none gives a per-GPU SM count); it fits the MIG rows, which give GB200 more SMs than B200's 148 (2g.47gb 38 against B200's 2g.45gb 36). Estimated until seen in driver output.",
			"Early drivers named 1g.23gb 1g.24gb (20.00 GiB).",
			"Some GB200 boards use 7g.189gb / 3g.95gb / 4g.95gb (mig-parted): see GB200-189GB.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.23gb", 18, eng(1, 1, 0, 0, 2), gib(22.00), s),
			mk(s8x1gme, "1g.23gb+me", 18, eng(1, 1, 1, 0, 2), gib(22.00), src(srcLgipGB200)),
			mk(s8x1g2m, "1g.47gb", 32, eng(1, 1, 0, 0, 2), gib(45.50), s),
			mk(s8x2g, "2g.47gb", 38, eng(2, 2, 0, 0, 4), gib(45.50), s),
			mk(s8x3g, "3g.93gb", 0, noEng, cfg),
			mk(s8x4g, "4g.93gb", 0, noEng, cfg),
			mk(s8x7g, "7g.186gb", 0, noEng, cfg),
		},
	})
}

// gb200x189GB is the GB200 variant behind mig-parted's filter-less all-3g.95gb, all-4g.95gb and
// all-7g.189gb configs. Only those three names are published; the 1g and 2g rows are GB200-186GB's,
// copied and marked unverified (the names may differ on this board).
func gb200x189GB() *Board {
	cfg := []opt{unv("id"), src(srcMigParted)}
	cp := []opt{unv("id", "sms", "engines", "memoryMiB"), src(srcMigParted)}
	mem := func(g float64) []opt { return append([]opt{gib(g)}, cp...) }
	return finish(&Board{
		Name:    "GB200-189GB",
		Aliases: []string{"GB200-189G"},
		Arch:    "blackwell", ComputeCapability: "10.0", MinDriver: "R570",
		MemoryMiB: 189 * 1024, SMs: 152,
		BandwidthGBs: 8000, TDPWatts: 1200, BF16TFLOPS: 2500, FP8TFLOPS: 5000,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "sms", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Estimated:  []string{"sms"},
		Sources:    []string{srcMigParted, srcGB200SMs, srcDatasheet},
		Notes: []string{
			"Known only from mig-parted's filter-less configs all-3g.95gb, all-4g.95gb and all-7g.189gb, which NVIDIA lists for some GB200 boards.",
			"PCI device id and NVML name unknown: ByPCIDeviceID never returns this board, and \"NVIDIA GB200\" resolves to GB200-186GB. Select it by name.",
			"The 1g and 2g rows are GB200-186GB's (1g.23gb, 1g.47gb, 2g.47gb), assumed, not seen on this board.",
			"Full-board numbers are GB200-186GB's, its estimated 152 SMs included; memory is 189 GiB from the 7g name. Profile ids, SMs, engines and usable memory are unverified.",
		},
		Profiles: []Profile{
			mk(s8x1g, "1g.23gb", 18, eng(1, 1, 0, 0, 2), mem(22.00)...),
			mk(s8x1gme, "1g.23gb+me", 18, eng(1, 1, 1, 0, 2), mem(22.00)...),
			mk(s8x1g2m, "1g.47gb", 32, eng(1, 1, 0, 0, 2), mem(45.50)...),
			mk(s8x2g, "2g.47gb", 38, eng(2, 2, 0, 0, 4), mem(45.50)...),
			mk(s8x3g, "3g.95gb", 0, noEng, cfg...),
			mk(s8x4g, "4g.95gb", 0, noEng, cfg...),
			mk(s8x7g, "7g.189gb", 0, noEng, cfg...),
		},
	})
}

// cfgOnly8 is an 8-slice profile table known only from mig-parted's configs: the standard ids,
// SMs, engines and memory are all unverified.
func cfgOnly8(one, onePlus, twoMem, two, three, four, seven string) []Profile {
	o := []opt{unv("id"), src(srcMigParted)}
	return []Profile{
		mk(s8x1g, one, 0, noEng, o...),
		mk(s8x1gme, onePlus, 0, noEng, o...),
		mk(s8x1g2m, twoMem, 0, noEng, o...),
		mk(s8x2g, two, 0, noEng, o...),
		mk(s8x3g, three, 0, noEng, o...),
		mk(s8x4g, four, 0, noEng, o...),
		mk(s8x7g, seven, 0, noEng, o...),
	}
}

func b300x269GB() *Board {
	return finish(&Board{
		Name:    "B300-269GB",
		Aliases: []string{"B300", "B300-288GB", "HGX-B300"},
		Arch:    "blackwell-ultra", ComputeCapability: "10.3", MinDriver: "R580",
		NVMLNames:    []string{"NVIDIA B300 SXM6 AC"},
		PCIDeviceIDs: []string{"0x318210DE"},
		MemoryMiB:    269 * 1024, SMs: 160,
		BandwidthGBs: 8000, TDPWatts: 1100, BF16TFLOPS: 2250, FP8TFLOPS: 4500,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcMigParted, srcKernelNotes, srcDatasheet},
		Notes: []string{
			"288 GB physical HBM3e; MIG names count 269 GB.",
			"One public device query reports 148 SMs for \"NVIDIA B300 SXM6 AC\"; the catalog keeps 160 (kernel-tuning notes) until checked on hardware.",
			"Profile ids, SMs, engines and usable memory are not published: ids follow the other 8-slice boards, memory is a conservative estimate.",
		},
		Profiles: cfgOnly8("1g.34gb", "1g.34gb+me", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"),
	})
}

func gb300x278GB() *Board {
	return finish(&Board{
		Name:    "GB300-278GB",
		Aliases: []string{"GB300", "GB300-288GB", "GB300-NVL72"},
		Arch:    "blackwell-ultra", ComputeCapability: "10.3", MinDriver: "R595",
		NVMLNames:    []string{"NVIDIA GB300"},
		PCIDeviceIDs: []string{"0x31C210DE"},
		MemoryMiB:    278 * 1024, SMs: 152,
		BandwidthGBs: 8000, TDPWatts: 1400, BF16TFLOPS: 2500, FP8TFLOPS: 5000,
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7,
		Unverified: []string{"memoryMiB", "sms", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Estimated:  []string{"sms"},
		Sources:    []string{srcMigParted, srcGB300SMs, srcDatasheet},
		Notes: []string{
			"MIG names count 278 GB. The R595 minimum is the one the MIG User Guide gives for GB300 DGX Station.",
			"152 SMs is what public device queries on GB300 report (compute capability 10.3); NVIDIA's Blackwell Ultra blog gives 160 SMs for the full GPU, of which products enable fewer. Estimated until seen in driver output.",
			"Profile ids, SMs, engines and usable memory are not published: ids follow the other 8-slice boards, memory is a conservative estimate.",
		},
		Profiles: cfgOnly8("1g.35gb", "1g.35gb+me", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"),
	})
}

func rtxPro6000() *Board {
	g := src(srcGuide)
	s := src(srcGuide, srcLgipRTX)
	st := unv("starts")
	return finish(&Board{
		Name:    "RTX-PRO-6000-Blackwell-96GB",
		Aliases: []string{"RTX-PRO-6000-Blackwell", "RTX-PRO-6000", "RTX-PRO-6000-Server", "RTX-PRO-6000-Workstation"},
		Arch:    "blackwell", ComputeCapability: "12.0", MinDriver: "R575",
		NVMLNames: []string{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
			"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"},
		PCIDeviceIDs: []string{"0x2BB510DE"},
		MemoryMiB:    97887, SMs: 188, SMsInMIG: 184,
		BandwidthGBs: 1792, TDPWatts: 600, BF16TFLOPS: 500, FP8TFLOPS: 1000,
		MemorySlices: 4, ComputeSlices: 4, MaxInstances: 4,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Estimated:  []string{"bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcGuideGPUs, srcLgipRTX, srcMigParted, srcKernelNotes, srcSmiTotal, srcDatasheet},
		Notes: []string{
			"Workstation and Max-Q editions must be switched to compute display mode (DisplayModeSelector --gpumode=compute) before MIG; minimum vBIOS 98.02.55.00.00 (WS), 98.02.6A.00.00 (Max-Q).",
			"Max-Q draws 300 W; one report puts the Server Edition's bandwidth near 1.6 TB/s.",
			"+gfx = graphics APIs in the instance, +me.all = all media engines, -me = no media engines. +me and +me.all are both counted as media-extension instances (at most one per GPU): an inference.",
			"No `-lgipp` output was found: starts follow the 8-slot rule scaled to 4 slots. SMsInMIG is 4 x 46 (four 1g instances).",
			"TFLOPS are estimates derived from the datasheet's 4 PFLOPS sparse FP4 (dense FP8 = 1000, dense BF16 = 500), not datasheet lines.",
		},
		Profiles: []Profile{
			mk(s4x1g, "1g.24gb", 46, eng(1, 1, 0, 1, 1), withID(14), gib(23.62), st, s),
			mk(s4x1g, "1g.24gb+me", 46, eng(1, 1, 1, 1, 1), withID(21), maxCount(1), me(), st, s),
			mk(s4x1g, "1g.24gb+gfx", 46, eng(1, 1, 0, 1, 1), withID(47), st, s),
			mk(s4x1g, "1g.24gb+me.all", 46, eng(4, 4, 1, 4, 1), withID(65), maxCount(1), me(), st, s),
			mk(s4x1g, "1g.24gb-me", 0, eng(0, 0, 0, 0, 1), st, g),
			mk(s4x2g, "2g.48gb", 0, eng(2, 2, 0, 2, 2), st, src(srcGuide, srcMigParted)),
			mk(s4x2g, "2g.48gb+gfx", 0, eng(2, 2, 0, 2, 2), st, g),
			mk(s4x2g, "2g.48gb+me.all", 0, eng(4, 4, 1, 4, 2), maxCount(1), me(), st, g),
			mk(s4x2g, "2g.48gb-me", 0, eng(0, 0, 0, 0, 2), st, g),
			mk(s4x4g, "4g.96gb", 0, eng(4, 4, 1, 4, 4), src(srcGuide, srcMigParted)),
			mk(s4x4g, "4g.96gb+gfx", 0, eng(4, 4, 1, 4, 4), g),
		},
	})
}

func rtxPro5000() *Board {
	g := src(srcGuide)
	st := unv("starts")
	return finish(&Board{
		Name:    "RTX-PRO-5000-Blackwell-48GB",
		Aliases: []string{"RTX-PRO-5000-Blackwell", "RTX-PRO-5000"},
		Arch:    "blackwell", ComputeCapability: "12.0",
		NVMLNames: []string{"NVIDIA RTX PRO 5000 Blackwell"},
		MemoryMiB: 48 * 1024, SMs: 110,
		BandwidthGBs: 1344, TDPWatts: 300, BF16TFLOPS: 258, FP8TFLOPS: 516,
		MemorySlices: 2, ComputeSlices: 2, MaxInstances: 2,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Estimated:  []string{"bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcRTXPro, srcDatasheet},
		Notes: []string{
			"The current MIG User Guide shows this 2-way table; its v580 edition showed a 4-way one (1g.12gb ...). Check the driver in use.",
			"The minimum vBIOS is 98.02.73.00.00.",
			"110 SMs: the product page's 14,080 CUDA cores at 128 per Blackwell SM.",
			"TFLOPS are estimates derived from the product page's 2,064 AI TOPS (sparse FP4), as on the RTX PRO 6000: dense FP8 = 516, dense BF16 = 258; not datasheet lines.",
			"A 72 GB edition (same GPU, 1,344 GB/s, 2,064 AI TOPS) is not in the catalog: no MIG table for it was found.",
		},
		Profiles: []Profile{
			mk(s2x1g, "1g.24gb", 0, eng(1, 0, 0, 1, 1), st, g),
			mk(s2x1g, "1g.24gb+me", 0, eng(1, 1, 1, 1, 1), maxCount(1), me(), st, g),
			mk(s2x1g, "1g.24gb+gfx", 0, noEng, st, g),
			mk(s2x1g, "1g.24gb+me.all", 0, eng(3, 1, 1, 3, 1), maxCount(1), me(), st, g),
			mk(s2x1g, "1g.24gb-me", 0, noEng, st, g),
			mk(s2x2g, "2g.48gb", 0, eng(3, 1, 1, 3, 4), g),
			mk(s2x2g, "2g.48gb+gfx", 0, noEng, g),
		},
	})
}

func rtxPro4500() *Board {
	g := src(srcGuide)
	st := unv("starts")
	return finish(&Board{
		Name:    "RTX-PRO-4500-Blackwell-32GB",
		Aliases: []string{"RTX-PRO-4500-Blackwell", "RTX-PRO-4500"},
		Arch:    "blackwell", ComputeCapability: "12.0",
		NVMLNames: []string{"NVIDIA RTX PRO 4500 Blackwell"},
		MemoryMiB: 32 * 1024, SMs: 82,
		BandwidthGBs: 896, TDPWatts: 200, BF16TFLOPS: 218, FP8TFLOPS: 436,
		MemorySlices: 2, ComputeSlices: 2, MaxInstances: 2,
		Unverified: []string{"memoryMiB", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops"},
		Estimated:  []string{"bf16Tflops", "fp8Tflops"},
		Sources:    []string{srcGuide, srcRTXPro, srcDatasheet},
		Notes: []string{
			"82 SMs: the product page's 10,496 CUDA cores at 128 per Blackwell SM.",
			"No AI TOPS figure was found for this board. TFLOPS are estimates scaled from the RTX PRO 6000 by SM count at the same 2,617 MHz boost: 4,000 x 82/188 = 1,745 sparse FP4, so dense FP8 = 436 and dense BF16 = 218; not datasheet lines.",
		},
		Profiles: []Profile{
			mk(s2x1g, "1g.16gb", 0, noEng, st, g),
			mk(s2x1g, "1g.16gb+gfx", 0, noEng, st, g),
			mk(s2x1g, "1g.16gb+me.all", 0, noEng, maxCount(1), me(), st, g),
			mk(s2x1g, "1g.16gb-me", 0, noEng, st, g),
			mk(s2x2g, "2g.32gb", 0, noEng, g),
			mk(s2x2g, "2g.32gb+gfx", 0, noEng, g),
		},
	})
}
