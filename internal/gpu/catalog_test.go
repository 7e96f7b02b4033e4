package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestBoardsSortedAndNamesUnique(t *testing.T) {
	bs := Boards()
	if len(bs) < 14 {
		t.Fatalf("catalog has %d boards, want at least 14", len(bs))
	}
	if !slices.IsSortedFunc(bs, func(a, b *Board) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Boards() is not sorted by name")
	}
	if len(catalog.clashes) > 0 {
		t.Errorf("names claimed by two boards: %v", catalog.clashes)
	}
	bs[0] = nil // Boards returns a copy of the slice
	if Boards()[0] == nil {
		t.Error("Boards() exposes the catalog's slice")
	}
}

// TestCatalogGeometry checks the invariants every board's MIG table must keep.
func TestCatalogGeometry(t *testing.T) {
	boardFields := []string{"memoryMiB", "sms", "smsInMig", "bandwidthGBs", "tdpWatts", "bf16Tflops", "fp8Tflops",
		"nvmlNames", "pciDeviceIds"}
	profileFields := []string{"id", "memoryMiB", "sms", "starts", "engines", "maxCount"}
	for _, b := range Boards() {
		if !b.MIGCapable() || b.MaxInstances > b.ComputeSlices || b.ComputeSlices > b.MemorySlices {
			t.Errorf("%s: odd geometry %d memory / %d compute slices, %d instances", b.Name, b.MemorySlices, b.ComputeSlices, b.MaxInstances)
		}
		for _, f := range b.Unverified {
			if !slices.Contains(boardFields, f) {
				t.Errorf("%s: unverified field %q is not a board field", b.Name, f)
			}
		}
		if len(b.Sources) == 0 || b.Arch == "" {
			t.Errorf("%s: missing sources or arch", b.Name)
		}
		// An empty name or id list means unknown and must say so.
		if (len(b.NVMLNames) == 0) != b.IsUnverified("nvmlNames") || (len(b.PCIDeviceIDs) == 0) != b.IsUnverified("pciDeviceIds") {
			t.Errorf("%s: %d NVML names, %d PCI ids, unverified %v: empty lists must be marked, others not",
				b.Name, len(b.NVMLNames), len(b.PCIDeviceIDs), b.Unverified)
		}
		ids := map[int]string{}
		for _, p := range b.Profiles {
			where := b.Name + " " + p.Name
			if p.ID >= 0 {
				if prev, ok := ids[p.ID]; ok {
					t.Errorf("%s: id %d also used by %s", where, p.ID, prev)
				}
				ids[p.ID] = p.Name
			}
			last := -1
			for _, s := range p.Starts {
				if s <= last || s+p.MemorySlices > b.MemorySlices {
					t.Errorf("%s: starts %v not ascending inside %d slices", where, p.Starts, b.MemorySlices)
				}
				last = s
			}
			// The max count can never exceed the number of disjoint placements.
			if p.MaxCount < 1 || p.MaxCount > disjoint(p.Starts, p.MemorySlices) || p.MaxCount > b.MaxInstances {
				t.Errorf("%s: max count %d, %d disjoint starts", where, p.MaxCount, disjoint(p.Starts, p.MemorySlices))
			}
			if p.MemoryMiB <= 0 || p.MemoryMiB > b.MemoryMiB || (p.SMs > 0 && b.SMs > 0 && p.SMs > b.SMs) {
				t.Errorf("%s: %d MiB / %d SMs does not fit the board's %d MiB / %d SMs", where, p.MemoryMiB, p.SMs, b.MemoryMiB, b.SMs)
			}
			if nominalGB(p.Name) == 0 || !strings.HasPrefix(p.Name, fmt.Sprintf("%dg.", p.ComputeSlices)) {
				t.Errorf("%s: name does not read Ng.Mgb with N = %d", where, p.ComputeSlices)
			}
			for _, f := range p.Unverified {
				if !slices.Contains(profileFields, f) {
					t.Errorf("%s: unverified field %q is not a profile field", where, f)
				}
			}
		}
	}
}

// TestEstimateIsConservative: the memory estimate for rows without driver output must not exceed
// the real usable memory of any row that has it.
func TestEstimateIsConservative(t *testing.T) {
	checked := 0
	for _, b := range Boards() {
		for _, p := range b.Profiles {
			if p.IsUnverified("memoryMiB") {
				continue
			}
			checked++
			if est := estimateMiB(p.Name, p.MemorySlices, b.MemorySlices); est > p.MemoryMiB {
				t.Errorf("%s %s: estimate %d MiB exceeds the real %d MiB", b.Name, p.Name, est, p.MemoryMiB)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d verified rows checked", checked)
	}
}

func TestMibFromGiB(t *testing.T) {
	for _, tc := range []struct {
		gib  float64
		want int64
	}{
		{9.75, 9984},     // 9.75 x 1024, exact; H100 PCIe prints 9984 MiB
		{19.62, 20096},   // 19.625 x 1024 = 20096 (314 x 64), printed 19.62
		{21.62, 22144},   // H100 NVL 1g.24gb: a live instance showed 22144 MiB
		{46.38, 47488},   // H100 NVL 3g.47gb: 46.375 x 1024 = 47488, live instance
		{10.75, 11008},   // H100 NVL 1g.12gb: 11008 MiB live
		{139.75, 143104}, // H200 7g.141gb
		{0, 0},
	} {
		if got := mibFromGiB(tc.gib); got != tc.want {
			t.Errorf("mibFromGiB(%v) = %d, want %d", tc.gib, got, tc.want)
		}
	}
}

func TestEstimateMiB(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mem, tot   int
		want       int64
		arithmetic string
	}{
		{"3g.90gb", 4, 8, 89344, "90 x 0.97 = 87.3 GiB = 89395 MiB, down to 64: 89344"},
		{"1g.12gb", 1, 8, 10752, "12 x 0.88 = 10.56 GiB = 10813 MiB, down to 64: 10752"},
		{"7g.269gb", 8, 8, 267136, "269 x 0.97 = 260.93 GiB = 267192 MiB, down to 64: 267136"},
		{"1g.6gb+me", 1, 4, 5376, "6 x 0.88 = 5.28 GiB = 5406 MiB, down to 64: 5376"},
		{"weird", 1, 8, 0, "no nominal size"},
	} {
		if got := estimateMiB(tc.name, tc.mem, tc.tot); got != tc.want {
			t.Errorf("estimateMiB(%s) = %d, want %d (%s)", tc.name, got, tc.want, tc.arithmetic)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"H100-SXM5-80GB", "H100-SXM5-80GB"},
		{"h100-sxm5-80gb", "H100-SXM5-80GB"},
		{"H100", "H100-SXM5-80GB"},
		{"H100-80GB", "H100-SXM5-80GB"},
		{"H800-80GB", "H100-SXM5-80GB"},
		{"NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"},
		{"nvidia_h100_80gb_hbm3", "H100-SXM5-80GB"},
		{"H100 80GB HBM3", "H100-SXM5-80GB"}, // NVML name without "NVIDIA "
		{"NVIDIA H100 PCIe", "H100-PCIe-80GB"},
		{"NVIDIA H100 NVL", "H100-NVL-94GB"},
		{"NVIDIA H200", "H200-141GB"},
		{"H200", "H200-141GB"},
		{"NVIDIA H200 NVL", "H200-141GB"},
		{"NVIDIA GH200 480GB", "H100-96GB"},
		{"H100-96GB-GH200", "H100-96GB"},
		{"GH200-144GB-HBM3e", "GH200-144GB"},
		{"NVIDIA GH200 144G HBM3e", "GH200-144GB"},
		{"NVIDIA H20", "H20-96GB"},
		{"B200", "B200-180GB"},
		{"NVIDIA B200", "B200-180GB"},
		{"GB200", "GB200-186GB"},
		{"NVIDIA GB200", "GB200-186GB"}, // the 189 GB variant's NVML name is unknown
		{"GB200-189GB", "GB200-189GB"},
		{"GB200-189G", "GB200-189GB"},
		{"NVIDIA B300 SXM6 AC", "B300-269GB"},
		{"A100", "A100-SXM4-80GB"},
		{"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"},
		{"NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"},
		{"A100-PCIe-80GB", "A100-PCIe-80GB"},
		{"A100-PCIE-80GB", "A100-PCIe-80GB"},
		{"A30", "A30-24GB"},
		{"RTX-PRO-6000-Blackwell", "RTX-PRO-6000-Blackwell-96GB"},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000-Blackwell-96GB"},
		{"  H100  ", "H100-SXM5-80GB"},
	} {
		b, err := Lookup(tc.in)
		if err != nil {
			t.Errorf("Lookup(%q): %v", tc.in, err)
			continue
		}
		if b.Name != tc.want {
			t.Errorf("Lookup(%q) = %s, want %s", tc.in, b.Name, tc.want)
		}
	}
	_, err := Lookup("H300")
	if !errors.Is(err, ErrUnknownBoard) {
		t.Fatalf("Lookup(H300) error %v does not wrap ErrUnknownBoard", err)
	}
	for _, want := range []string{`lookup board "H300"`, "valid: A100-PCIe-40GB, A100-PCIe-80GB, A100-SXM4-40GB, A100-SXM4-80GB", "H200-141GB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup error %q lacks %q", err, want)
		}
	}
}

func TestByPCIDeviceID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0x233010DE", "H100-SXM5-80GB"},
		{"0x233010de", "H100-SXM5-80GB"},
		{"233010DE", "H100-SXM5-80GB"},
		{"0x2330", "H100-SXM5-80GB"},
		{"10de:2330", "H100-SXM5-80GB"},
		{"0x233110DE", "H100-PCIe-80GB"}, // mig-parted groups it with the 80GB SXM parts; it is the PCIe board
		{"0x232210DE", "H100-PCIe-80GB"}, // H800 PCIe
		{"0x232910DE", "H20-96GB"},
		{"0x20B610DE", "H100-96GB"}, // PG506
		{"0x233D10DE", "H100-96GB"},
		{"0x20F310DE", "A100-SXM4-80GB"}, // A800 80GB
		{"0x20B510DE", "A100-PCIe-80GB"}, // A100 80GB PCIe
		{"0x20F510DE", "A100-PCIe-80GB"}, // A800 80GB PCIe
		{"0x20F610DE", "A100-SXM4-40GB"}, // A800 40GB
		{"0x20B010DE", "A100-SXM4-40GB"},
		{"0x20B110DE", "A100-PCIe-40GB"}, // A100 PCIe 40GB
		{"0x20F110DE", "A100-PCIe-40GB"}, // A100 PCIe 40GB
		{"0x318210DE", "B300-269GB"},
		{"0x31C210DE", "GB300-278GB"},
		{"0x2BB510DE", "RTX-PRO-6000-Blackwell-96GB"},
		{"0x20B710DE", "A30-24GB"},
	} {
		got := ByPCIDeviceID(tc.in)
		if len(got) != 1 || got[0].Name != tc.want {
			t.Errorf("ByPCIDeviceID(%q) = %v, want [%s]", tc.in, boardNames(got), tc.want)
		}
	}
	if got := ByPCIDeviceID("0xFFFF10DE"); got != nil {
		t.Errorf("unknown id gave %v", boardNames(got))
	}
	if got := ByPCIDeviceID(""); got != nil {
		t.Errorf("empty id gave %v", boardNames(got))
	}
	// Every id of every board finds that board; boards without ids (GB200-189GB, RTX PRO 5000
	// and 4500) are found by no id at all.
	found := map[string]bool{}
	for _, b := range Boards() {
		for _, id := range b.PCIDeviceIDs {
			got := ByPCIDeviceID(id)
			if !slices.Contains(got, b) {
				t.Errorf("ByPCIDeviceID(%q) = %v, lacks %s", id, boardNames(got), b.Name)
			}
			for _, g := range got {
				found[g.Name] = true
			}
		}
	}
	for _, b := range Boards() {
		if len(b.PCIDeviceIDs) == 0 && found[b.Name] {
			t.Errorf("%s has no PCI ids but ByPCIDeviceID returns it", b.Name)
		}
	}
	if b, _ := Lookup("GB200-189GB"); b == nil || len(b.PCIDeviceIDs) != 0 || found[b.Name] {
		t.Error("GB200-189GB should exist with no PCI id")
	}
}

func boardNames(bs []*Board) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// TestKeyNumbers pins the numbers planners lean on, per (board, profile): SMs differ per board.
func TestKeyNumbers(t *testing.T) {
	for _, tc := range []struct {
		board, profile        string
		id, compute, mem, sms int
		mib                   int64
		max                   int
		starts                []int
	}{
		// H100 SXM5: 1g.20gb has 26 SMs although it has one compute slice; 3g 60, 7g 132 (not 7 x 16 = 112).
		{"H100-SXM5-80GB", "1g.10gb", 19, 1, 1, 16, 9984, 7, []int{0, 1, 2, 3, 4, 5, 6}}, // 9.75 GiB x 1024
		{"H100-SXM5-80GB", "1g.20gb", 15, 1, 2, 26, 20096, 4, []int{0, 2, 4, 6}},         // 19.62 GiB -> 19.625 x 1024
		{"H100-SXM5-80GB", "3g.40gb", 9, 3, 4, 60, 40448, 2, []int{0, 4}},                // 39.50 x 1024, MPS example
		{"H100-SXM5-80GB", "7g.80gb", 0, 7, 8, 132, 81152, 1, []int{0}},                  // 79.25 x 1024
		// H100 PCIe: same names, fewer SMs; 1g.20gb only 14.
		{"H100-PCIe-80GB", "1g.20gb", 15, 1, 2, 14, 20096, 4, []int{0, 2, 4, 6}},
		{"H100-PCIe-80GB", "7g.80gb", 0, 7, 8, 114, 81152, 1, []int{0}},
		{"A100-SXM4-40GB", "1g.5gb", 19, 1, 1, 14, 4864, 7, []int{0, 1, 2, 3, 4, 5, 6}},       // 4.75 GiB
		{"A100-SXM4-40GB", "1g.10gb", 15, 1, 2, 14, 9856, 4, []int{0, 2, 4, 6}},               // the 2-slice 1g on 40GB
		{"A100-SXM4-80GB", "3g.40gb", 9, 3, 4, 42, 40192, 2, []int{0, 4}},                     // 39.25 x 1024; 3 x 14 SMs
		{"H100-NVL-94GB", "3g.47gb", 9, 3, 4, 60, 47488, 2, []int{0, 4}},                      // 46.38 -> 46.375 x 1024
		{"H200-141GB", "1g.18gb", 19, 1, 1, 16, 16384, 7, []int{0, 1, 2, 3, 4, 5, 6}},         // 16.00 GiB
		{"H200-141GB", "7g.141gb", 0, 7, 8, 132, 143104, 1, []int{0}},                         // 139.75 x 1024
		{"GH200-144GB", "2g.36gb", 14, 2, 2, 32, 36096, 3, []int{0, 2, 4}},                    // 35.25 x 1024
		{"B200-180GB", "2g.45gb", 14, 2, 2, 36, 45312, 3, []int{0, 2, 4}},                     // 44.25 x 1024
		{"GB200-186GB", "2g.47gb", 14, 2, 2, 38, 46592, 3, []int{0, 2, 4}},                    // 45.50 x 1024
		{"GB200-189GB", "2g.47gb", 14, 2, 2, 38, 46592, 3, []int{0, 2, 4}},                    // copied from GB200-186GB, unverified
		{"GB200-189GB", "3g.95gb", 9, 3, 4, 0, 94336, 2, []int{0, 4}},                         // 95 x 0.97 = 92.15 GiB = 94361.6 MiB, down to 64
		{"GB200-189GB", "7g.189gb", 0, 7, 8, 0, 187712, 1, []int{0}},                          // 189 x 0.97 = 183.33 GiB = 187729.9 MiB, down to 64
		{"RTX-PRO-6000-Blackwell-96GB", "1g.24gb", 14, 1, 1, 46, 24192, 4, []int{0, 1, 2, 3}}, // 23.62 -> 23.625 x 1024
	} {
		b, err := Lookup(tc.board)
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.Profile(tc.profile)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(p.ID, p.ComputeSlices, p.MemorySlices, p.SMs, p.MemoryMiB, p.MaxCount, p.Starts)
		want := fmt.Sprint(tc.id, tc.compute, tc.mem, tc.sms, tc.mib, tc.max, tc.starts)
		if got != want {
			t.Errorf("%s %s: id/compute/mem/SMs/MiB/max/starts = %s, want %s", tc.board, tc.profile, got, want)
		}
	}
}

func TestBoardFacts(t *testing.T) {
	for _, tc := range []struct {
		board               string
		mib                 int64
		sms, smsMIG         int
		bw, tdp, bf16, fp8  float64
		unverified, trusted []string
	}{
		{"A100-SXM4-80GB", 81920, 108, 98, 2039, 400, 312, 0, []string{"bf16Tflops"}, []string{"sms", "smsInMig"}},
		{"H100-SXM5-80GB", 81559, 132, 132, 3350, 700, 989.5, 1979, []string{"fp8Tflops"}, []string{"bf16Tflops", "bandwidthGBs"}},
		{"H100-PCIe-80GB", 81559, 114, 114, 2000, 350, 756, 1513, []string{"bf16Tflops"}, []string{"memoryMiB", "tdpWatts"}},
		{"H200-141GB", 143771, 132, 132, 4800, 700, 989.5, 1979, []string{"bf16Tflops"}, []string{"sms", "memoryMiB", "nvmlNames"}}, // memory total measured
		{"B200-180GB", 183359, 148, 0, 8000, 1000, 2250, 4500, []string{"smsInMig", "bf16Tflops"}, []string{"bandwidthGBs", "tdpWatts"}},
		// 152 SMs: public kernel notes, not NVIDIA tables or driver output, so estimated.
		{"GB200-186GB", 189471, 152, 0, 8000, 1200, 2500, 5000, []string{"sms", "tdpWatts"}, []string{"pciDeviceIds"}},
		// 189 x 1024 from the 7g name; no PCI id or NVML name known.
		{"GB200-189GB", 193536, 152, 0, 8000, 1200, 2500, 5000, []string{"memoryMiB", "sms", "nvmlNames", "pciDeviceIds"}, nil},
		{"GB300-278GB", 284672, 152, 0, 8000, 1400, 2500, 5000, []string{"sms", "bf16Tflops"}, []string{"pciDeviceIds"}},
		// SMs from the product pages' CUDA cores; TFLOPS derived from sparse FP4 AI TOPS (5000) or
		// scaled from the RTX PRO 6000 by SMs (4500), both estimates.
		{"RTX-PRO-5000-Blackwell-48GB", 49152, 110, 0, 1344, 300, 258, 516, []string{"pciDeviceIds", "bf16Tflops", "fp8Tflops"}, []string{"nvmlNames", "sms"}},
		{"RTX-PRO-4500-Blackwell-32GB", 32768, 82, 0, 896, 200, 218, 436, []string{"pciDeviceIds", "bf16Tflops", "fp8Tflops"}, []string{"nvmlNames", "sms"}},
		{"H20-96GB", 97871, 78, 0, 4000, 400, 148, 296, []string{"sms", "bf16Tflops"}, nil},
	} {
		b, err := Lookup(tc.board)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(b.MemoryMiB, b.SMs, b.SMsInMIG, b.BandwidthGBs, b.TDPWatts, b.BF16TFLOPS, b.FP8TFLOPS)
		want := fmt.Sprint(tc.mib, tc.sms, tc.smsMIG, tc.bw, tc.tdp, tc.bf16, tc.fp8)
		if got != want {
			t.Errorf("%s: MiB/SMs/SMsInMIG/BW/TDP/BF16/FP8 = %s, want %s", tc.board, got, want)
		}
		for _, f := range tc.unverified {
			if !b.IsUnverified(f) {
				t.Errorf("%s: %s should be marked unverified", tc.board, f)
			}
		}
		for _, f := range tc.trusted {
			if b.IsUnverified(f) {
				t.Errorf("%s: %s is backed by the tables but marked unverified", tc.board, f)
			}
		}
	}
}

// Every board can size a replica from the catalog alone: perf.Slice.Validate refuses a board whose
// SMs, bandwidth or BF16 TFLOPS is not positive, and such a board served no tenant without a
// measured profile (the RTX PRO 5000/4500, GB200 and GB300 did). lacking lists the boards allowed
// to lack a figure, each with its reason; it is empty, and a board that gains a row without the
// figures must be added to it with a reason, or given the figures.
func TestEveryBoardHasComputeFigures(t *testing.T) {
	lacking := map[string]string{}
	for _, b := range Boards() {
		has := b.SMs > 0 && b.BandwidthGBs > 0 && b.BF16TFLOPS > 0
		if reason, listed := lacking[b.Name]; listed {
			if has {
				t.Errorf("%s has SMs, bandwidth and BF16 TFLOPS now: drop it from lacking (%s)", b.Name, reason)
			}
			continue
		}
		if !has {
			t.Errorf("%s: SMs %d, bandwidth %v GB/s, BF16 %v TFLOPS: every figure must be positive, or the board listed in lacking with a reason",
				b.Name, b.SMs, b.BandwidthGBs, b.BF16TFLOPS)
		}
		if b.FP8TFLOPS > 0 && b.FP8TFLOPS < b.BF16TFLOPS {
			t.Errorf("%s: FP8 %v TFLOPS below BF16 %v", b.Name, b.FP8TFLOPS, b.BF16TFLOPS)
		}
	}
}

func TestProfileErrors(t *testing.T) {
	b, _ := Lookup("H100-SXM5-80GB")
	_, err := b.Profile("4g.20gb")
	want := `profile "4g.20gb" does not exist on H100-SXM5-80GB (valid: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`
	if err == nil || err.Error() != want {
		t.Errorf("Profile error = %v, want %s", err, want)
	}
	if !errors.Is(err, ErrUnknownProfile) {
		t.Error("ProfileError does not match ErrUnknownProfile")
	}
	p, err := b.Profile("3G.40GB")
	if err != nil || p.Name != "3g.40gb" {
		t.Errorf("Profile is not case-insensitive: %v %v", p, err)
	}
	p, err = b.ProfileByID(9)
	if err != nil || p.Name != "3g.40gb" {
		t.Errorf("ProfileByID(9) = %v, %v", p, err)
	}
	if _, err := b.ProfileByID(-1); err == nil {
		t.Error("ProfileByID(-1) found a profile")
	}
	rtx, _ := Lookup("RTX-PRO-6000")
	if p, _ := rtx.Profile("2g.48gb"); p.ID != -1 || !p.IsUnverified("id") || !p.IsUnverified("starts") {
		t.Errorf("RTX 2g.48gb id %d unverified %v: unknown id must be -1 and marked", p.ID, p.Unverified)
	}
}

// Every board has its GPU-to-GPU link with a source, and no table row names a board that is not
// in the catalog.
func TestEveryBoardHasInterconnect(t *testing.T) {
	seen := 0
	for _, b := range Boards() {
		ic := b.Interconnect
		if ic.Kind == "" || !(ic.GBs > 0) || ic.MaxGPUs < 2 || ic.Source == "" {
			t.Errorf("%s: interconnect %+v incomplete", b.Name, ic)
		}
		if _, ok := interconnects[b.Name]; ok {
			seen++
		}
	}
	if seen != len(interconnects) {
		t.Errorf("%d of the %d interconnect rows name catalog boards", seen, len(interconnects))
	}
}

// TestA100PCIe80GB: the A100 80GB PCIe card is its own board, at its datasheet's 300 W and
// 1935 GB/s rather than the SXM4 board's 400 W and 2039 GB/s, with the same MIG table.
func TestA100PCIe80GB(t *testing.T) {
	sxm, err := Lookup("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"A100-PCIe-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A800 80GB PCIe"} {
		b, err := Lookup(in)
		if err != nil {
			t.Fatal(err)
		}
		if b.Name != "A100-PCIe-80GB" || b.TDPWatts != 300 || b.BandwidthGBs != 1935 {
			t.Errorf("Lookup(%q) = %s, %g W, %g GB/s; want A100-PCIe-80GB, 300 W, 1935 GB/s", in, b.Name, b.TDPWatts, b.BandwidthGBs)
		}
		if !slices.Equal(b.ProfileNames(), sxm.ProfileNames()) {
			t.Errorf("%s profiles %v, want the SXM4 board's %v", b.Name, b.ProfileNames(), sxm.ProfileNames())
		}
	}
	if sxm.TDPWatts != 400 || sxm.BandwidthGBs != 2039 {
		t.Errorf("A100-SXM4-80GB: %g W, %g GB/s; want 400 W, 2039 GB/s", sxm.TDPWatts, sxm.BandwidthGBs)
	}
}

// TestA100PCIe40GB: the A100 40GB PCIe card is its own board, at its datasheet's 250 W rather than
// the SXM4 board's 400 W, with the same 1555 GB/s and the same MIG table (1g.5gb, 1g.5gb+me,
// 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb).
func TestA100PCIe40GB(t *testing.T) {
	sxm, err := Lookup("A100-SXM4-40GB")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
	for _, in := range []string{"A100-PCIe-40GB", "A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB", "nvidia_a100-pcie-40gb"} {
		b, err := Lookup(in)
		if err != nil {
			t.Fatal(err)
		}
		if b.Name != "A100-PCIe-40GB" || b.TDPWatts != 250 || b.BandwidthGBs != 1555 || b.MemoryMiB != 40960 {
			t.Errorf("Lookup(%q) = %s, %g W, %g GB/s, %d MiB; want A100-PCIe-40GB, 250 W, 1555 GB/s, 40960 MiB",
				in, b.Name, b.TDPWatts, b.BandwidthGBs, b.MemoryMiB)
		}
		if !slices.Equal(b.ProfileNames(), want) || !slices.Equal(b.ProfileNames(), sxm.ProfileNames()) {
			t.Errorf("%s profiles %v, want %v (the SXM4 board's %v)", b.Name, b.ProfileNames(), want, sxm.ProfileNames())
		}
		if b.Interconnect.Kind != "pcie4" {
			t.Errorf("%s link %q, want pcie4", b.Name, b.Interconnect.Kind)
		}
	}
	if sxm.TDPWatts != 400 || sxm.BandwidthGBs != 1555 {
		t.Errorf("A100-SXM4-40GB: %g W, %g GB/s; want 400 W, 1555 GB/s", sxm.TDPWatts, sxm.BandwidthGBs)
	}
}

// The boards whose compute figures are the catalog's own estimates (each row's Notes give the
// derivation) say so in Estimated, which the planner reports on every tenant placed there. A
// figure is estimated only where it is also unverified, and only compute figures are listed.
func TestEstimatedFigures(t *testing.T) {
	want := map[string][]string{
		"GB200-186GB":                 {"sms"},
		"GB200-189GB":                 {"sms"},
		"GB300-278GB":                 {"sms"},
		"RTX-PRO-4500-Blackwell-32GB": {"bf16Tflops", "fp8Tflops"},
		"RTX-PRO-5000-Blackwell-48GB": {"bf16Tflops", "fp8Tflops"},
		"RTX-PRO-6000-Blackwell-96GB": {"bf16Tflops", "fp8Tflops"},
	}
	for _, b := range Boards() {
		if !slices.Equal(b.Estimated, want[b.Name]) {
			t.Errorf("%s: Estimated %q, want %q", b.Name, b.Estimated, want[b.Name])
		}
		for _, f := range b.Estimated {
			if f != "sms" && f != "bf16Tflops" && f != "fp8Tflops" {
				t.Errorf("%s: Estimated lists %q, not a compute figure", b.Name, f)
			}
			if !b.IsUnverified(f) {
				t.Errorf("%s: %s is estimated but not unverified", b.Name, f)
			}
		}
	}
}
