package gpu

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nvmlDump is the go-nvml dump of the project's bench harness (testdata/observed/README.md).
type nvmlDump struct {
	CUDA    int    `json:"cuda"`
	Driver  string `json:"driver"`
	Devices []struct {
		Name           string
		PCIDeviceID    string
		MemTotal       int64 // bytes
		PowerDefaultmW int
		CCMajor        int
		CCMinor        int
		Profiles       []nvmlProfile
	} `json:"devices"`
}

// nvmlProfile is nvmlDeviceGetGpuInstanceProfileInfo for one profile enum, with its placements.
type nvmlProfile struct {
	Enum, ID, Slices, Count, SMs int
	CE, Dec, Enc, Jpg, Ofa       int
	MemMB                        int64 // MiB
	Placements                   []struct{ Start, Size int }
	Err                          string
}

// nvmlProfile1SliceRev1 is NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, the media-extension 1g.
const nvmlProfile1SliceRev1 = 7

const observedDir = "testdata/observed/"

func readNVMLDump(t *testing.T, name string) nvmlDump {
	t.Helper()
	data, err := os.ReadFile(observedDir + name)
	if err != nil {
		t.Fatal(err)
	}
	var d nvmlDump
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	if len(d.Devices) != 1 {
		t.Fatalf("%s: %d devices, want 1", name, len(d.Devices))
	}
	return d
}

// TestH200MatchesObservedNVML checks H200-141GB against one real H200 on driver 580.159.04: every
// profile the driver reports must be in the catalog with the same id, SMs, max count, starts,
// memory slices and engines, and usable memory at most the observed and within 1.5% of it.
func TestH200MatchesObservedNVML(t *testing.T) {
	d := readNVMLDump(t, "h200-nvml-driver-580.159.04.json")
	dev := d.Devices[0]
	b, err := Lookup(dev.Name)
	if err != nil || b.Name != "H200-141GB" {
		t.Fatalf("Lookup(%q) = %v, %v; want H200-141GB", dev.Name, b, err)
	}
	if got := ByPCIDeviceID(dev.PCIDeviceID); len(got) != 1 || got[0] != b {
		t.Errorf("ByPCIDeviceID(%s) = %v, want [H200-141GB]", dev.PCIDeviceID, boardNames(got))
	}
	// 150754820096 bytes / 1048576 = 143771 MiB exactly, nvidia-smi's memory.total.
	if dev.MemTotal%(1<<20) != 0 || dev.MemTotal>>20 != b.MemoryMiB || b.IsUnverified("memoryMiB") {
		t.Errorf("memory total %d B = %d MiB, catalog %d MiB (unverified %v)", dev.MemTotal, dev.MemTotal>>20, b.MemoryMiB, b.IsUnverified("memoryMiB"))
	}
	if got := float64(dev.PowerDefaultmW) / 1000; got != b.TDPWatts {
		t.Errorf("default power limit %v W, catalog TDP %v W", got, b.TDPWatts)
	}
	if cc := fmt.Sprintf("%d.%d", dev.CCMajor, dev.CCMinor); cc != b.ComputeCapability {
		t.Errorf("compute capability %s, catalog %s", cc, b.ComputeCapability)
	}
	if !slices.ContainsFunc(b.Sources, func(s string) bool { return strings.Contains(s, "driver "+d.Driver) }) {
		t.Errorf("board sources %v do not cite the driver %s measurement", b.Sources, d.Driver)
	}
	seen := map[string]bool{}
	for _, op := range dev.Profiles {
		if op.Err != "" || op.Count == 0 {
			continue // an enum this GPU does not support
		}
		p, err := b.ProfileByID(op.ID)
		if err != nil {
			t.Errorf("enum %d: %v", op.Enum, err)
			continue
		}
		seen[p.Name] = true
		checkObservedProfile(t, b, p, op, d.Driver)
	}
	// 7 supported enums (1g, 1g+me, 1g with 2 memory slices, 2g, 3g, 4g, 7g) = the 7 catalog rows.
	if len(seen) != len(b.Profiles) {
		t.Errorf("driver reports %d profiles %v, catalog has %v", len(seen), seen, b.ProfileNames())
	}
	if p, _ := b.Profile("7g.141gb"); b.SMsInMIG != p.SMs {
		t.Errorf("SMs in MIG mode %d, 7g.141gb has %d", b.SMsInMIG, p.SMs)
	}
}

func checkObservedProfile(t *testing.T, b *Board, p *Profile, op nvmlProfile, driver string) {
	t.Helper()
	where := fmt.Sprintf("%s %s (id %d)", b.Name, p.Name, op.ID)
	var starts []int
	for _, pl := range op.Placements {
		starts = append(starts, pl.Start)
		if pl.Size != p.MemorySlices {
			t.Errorf("%s: placement at %d spans %d memory slices, catalog %d", where, pl.Start, pl.Size, p.MemorySlices)
		}
	}
	got := fmt.Sprint(p.ComputeSlices, p.SMs, p.MaxCount, p.Starts, p.MediaExtension)
	want := fmt.Sprint(op.Slices, op.SMs, op.Count, starts, op.Enum == nvmlProfile1SliceRev1)
	if got != want {
		t.Errorf("%s: compute slices/SMs/max/starts/+me = %s, observed %s", where, got, want)
	}
	if e := eng(op.Dec, op.Jpg, op.Ofa, op.Enc, op.CE); p.Engines != e {
		t.Errorf("%s: engines %+v, observed %+v", where, p.Engines, e)
	}
	for _, f := range []string{"id", "sms", "maxCount", "starts", "engines", "memoryMiB"} {
		if p.IsUnverified(f) {
			t.Errorf("%s: %s is observed but marked unverified", where, f)
		}
	}
	// The catalog keeps the older driver's figure when it is smaller: 32.25 GiB = 33024 MiB vs
	// 33280 observed is 0.77% less; 139.75 GiB = 143104 vs 143360 is 0.18% less.
	if p.MemoryMiB > op.MemMB || 1000*(op.MemMB-p.MemoryMiB) > 15*op.MemMB {
		t.Errorf("%s: %d MiB, observed %d MiB: must be at most the observed and within 1.5%%", where, p.MemoryMiB, op.MemMB)
	}
	if p.MemoryMiB < op.MemMB {
		note := fmt.Sprintf("driver %s reports %.2f GiB (%d MiB)", driver, float64(op.MemMB)/1024, op.MemMB)
		if !slices.ContainsFunc(p.Sources, func(s string) bool { return strings.Contains(s, note) }) {
			t.Errorf("%s: keeps %d MiB below the observed %d but its sources %v do not say %q", where, p.MemoryMiB, op.MemMB, p.Sources, note)
		}
	}
}

var (
	// "|   0  MIG 1g.18gb         19     7/7        16.00      No     16     1     0   |"
	lgipRow = regexp.MustCompile(`MIG (\S+)\s+(\d+)\s+\d+/(\d+)\s+([\d.]+)\s+\S+\s+(\d+)`)
	// "GPU  0 Profile ID 15 Placements: {0,2,4,6}:2"
	lgippRow = regexp.MustCompile(`Profile ID\s+(\d+) Placements?\s*: \{([\d,]+)\}:(\d+)`)
)

// TestH200MatchesObservedSMI checks the names the driver prints against the catalog: each
// `-lgip` row's profile name carries the catalog id, max count and SMs, and each `-lgipp` row the
// catalog starts and memory slices. GiB is the newer driver's (see TestH200MatchesObservedNVML).
func TestH200MatchesObservedSMI(t *testing.T) {
	b, err := Lookup("H200-141GB")
	if err != nil {
		t.Fatal(err)
	}
	lgip := readObserved(t, "h200-lgip-driver-580.159.04.txt")
	rows := lgipRow.FindAllStringSubmatch(lgip, -1)
	if len(rows) != len(b.Profiles) {
		t.Fatalf("%d -lgip rows, catalog has %d profiles", len(rows), len(b.Profiles))
	}
	for _, m := range rows {
		p, err := b.Profile(m[1])
		if err != nil {
			t.Error(err)
			continue
		}
		if got, want := fmt.Sprint(p.ID, p.MaxCount, p.SMs), m[2]+" "+m[3]+" "+m[5]; got != want {
			t.Errorf("%s: id/max/SMs %s, -lgip %s", p.Name, got, want)
		}
		if g, _ := strconv.ParseFloat(m[4], 64); float64(p.MemoryMiB)/1024 > g {
			t.Errorf("%s: %d MiB is more than the %s GiB printed", p.Name, p.MemoryMiB, m[4])
		}
	}
	lgipp := lgippRow.FindAllStringSubmatch(readObserved(t, "h200-lgipp-driver-580.159.04.txt"), -1)
	if len(lgipp) != len(b.Profiles) {
		t.Fatalf("%d -lgipp rows, catalog has %d profiles", len(lgipp), len(b.Profiles))
	}
	for _, m := range lgipp {
		id, _ := strconv.Atoi(m[1])
		p, err := b.ProfileByID(id)
		if err != nil {
			t.Error(err)
			continue
		}
		if got, want := fmt.Sprintf("{%s}:%d", joinInts(p.Starts, ","), p.MemorySlices), "{"+m[2]+"}:"+m[3]; got != want {
			t.Errorf("%s: placements %s, -lgipp %s", p.Name, got, want)
		}
	}
}

func readObserved(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(observedDir + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
