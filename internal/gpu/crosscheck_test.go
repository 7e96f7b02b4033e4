package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCatalogMatchesProfileTables checks every board and profile row of the project's MIG
// tables (testdata/mig-profiles.yaml) against the Go catalog: geometry, ids, SMs, memory, engines
// and unverified marks. A value the tables leave out or mark unverified must be marked
// unverified in the catalog too.
func TestCatalogMatchesProfileTables(t *testing.T) {
	for _, rb := range readProfilesYAML(t) {
		t.Run(rb.name, func(t *testing.T) {
			b, err := Lookup(rb.name)
			if err != nil {
				t.Fatalf("the tables' board name must resolve: %v", err)
			}
			checkBoardKeys(t, b, rb)
			if len(rb.profiles) != len(b.Profiles) {
				t.Errorf("%s: %d profiles in the tables, %d in the catalog (%v)", b.Name, len(rb.profiles), len(b.Profiles), b.ProfileNames())
			}
			for _, rp := range rb.profiles {
				p := b.profile(rp["name"])
				if p == nil || p.Name != rp["name"] {
					t.Errorf("%s: profile %q missing from the catalog", b.Name, rp["name"])
					continue
				}
				checkProfileRow(t, b, p, rp)
			}
		})
	}
}

func checkBoardKeys(t *testing.T, b *Board, rb *refBoard) {
	t.Helper()
	for key, got := range map[string]int{
		"sms": b.SMs, "sms_in_mig_mode": b.SMsInMIG, "memory_slices_total": b.MemorySlices,
		"compute_slices_total": b.ComputeSlices, "max_instances": b.MaxInstances, "memory_mib_total": int(b.MemoryMiB),
	} {
		v, ok := rb.kv[key]
		if !ok || v == "null" {
			continue
		}
		if want, err := strconv.Atoi(v); err != nil || want != got {
			t.Errorf("%s %s: catalog %d, tables %s", b.Name, key, got, v)
		}
	}
	if v, ok := rb.kv["sms"]; (!ok || v == "null") && !b.IsUnverified("sms") {
		t.Errorf("%s: SMs not in the tables but not marked unverified", b.Name)
	}
	// Every PCI id of the tables' board maps to one catalog board with the same profile names
	// (the catalog moves 0x2322 to H100 PCIe and 0x2329 to its own H20 board; both keep the table).
	var names []string
	for _, rp := range rb.profiles {
		names = append(names, rp["name"])
	}
	slices.Sort(names)
	for _, id := range parseList(rb.kv["pci_device_ids"]) {
		if id == "" {
			continue
		}
		got := ByPCIDeviceID(id)
		if len(got) != 1 {
			t.Errorf("%s: PCI id %s maps to %d boards", b.Name, id, len(got))
			continue
		}
		have := got[0].ProfileNames()
		slices.Sort(have)
		if !slices.Equal(have, names) {
			t.Errorf("%s: PCI id %s maps to %s with profiles %v, the tables say %v", b.Name, id, got[0].Name, have, names)
		}
	}
}

func checkProfileRow(t *testing.T, b *Board, p *Profile, rp map[string]string) {
	t.Helper()
	where := b.Name + " " + p.Name
	for key, got := range map[string]int{
		"compute_slices": p.ComputeSlices, "memory_slices": p.MemorySlices, "max_count": p.MaxCount,
		"profile_id": p.ID, "sms": p.SMs, "memory_mib": int(p.MemoryMiB),
	} {
		v, ok := rp[key]
		if !ok || v == "null" {
			if key == "sms" || key == "profile_id" {
				if field := map[string]string{"sms": "sms", "profile_id": "id"}[key]; !p.IsUnverified(field) {
					t.Errorf("%s: %s not in the tables but not marked unverified", where, key)
				}
			}
			continue
		}
		if want, err := strconv.Atoi(v); err != nil || want != got {
			t.Errorf("%s %s: catalog %d, tables %s", where, key, got, v)
		}
	}
	if got, want := p.Starts, parseInts(t, rp["placements"]); !slices.Equal(got, want) {
		t.Errorf("%s starts: catalog %v, tables %v", where, got, want)
	}
	checkMemory(t, where, p, rp)
	checkEngines(t, where, p, rp)
	for _, f := range parseList(rp["unverified_fields"]) {
		field := map[string]string{"placements": "starts"}[f]
		if field == "" {
			field = f
		}
		if f != "" && !p.IsUnverified(field) {
			t.Errorf("%s: the tables mark %s unverified, the catalog does not", where, f)
		}
	}
	if wantME := strings.HasSuffix(p.Name, "+me") || strings.HasSuffix(p.Name, "+me.all"); p.MediaExtension != wantME {
		t.Errorf("%s: MediaExtension %v, want %v", where, p.MediaExtension, wantME)
	}
}

// checkMemory: the catalog's MiB must print as the tables' GiB (nvidia-smi prints two decimals).
func checkMemory(t *testing.T, where string, p *Profile, rp map[string]string) {
	t.Helper()
	g, hasGiB := rp["memory_gib_nvml"]
	if hasGiB {
		want, err := strconv.ParseFloat(g, 64)
		if err != nil {
			t.Fatalf("%s: memory_gib_nvml %q: %v", where, g, err)
		}
		if got := fmt.Sprintf("%.2f", float64(p.MemoryMiB)/1024); got != fmt.Sprintf("%.2f", want) {
			t.Errorf("%s: %d MiB prints as %s GiB, the tables say %s", where, p.MemoryMiB, got, g)
		}
	}
	if _, hasMiB := rp["memory_mib"]; !hasMiB && !hasGiB && !p.IsUnverified("memoryMiB") {
		t.Errorf("%s: memory not in the tables but not marked unverified", where)
	}
}

func checkEngines(t *testing.T, where string, p *Profile, rp map[string]string) {
	t.Helper()
	raw, ok := rp["engines"]
	if !ok {
		if !p.IsUnverified("engines") {
			t.Errorf("%s: engines not in the tables but not marked unverified", where)
		}
		return
	}
	e := parseFlow(raw)
	for key, got := range map[string]int{"nvdec": p.Engines.NVDEC, "nvjpg": p.Engines.NVJPG, "ofa": p.Engines.OFA,
		"nvenc": p.Engines.NVENC, "copy_engines": p.Engines.CopyEngines} {
		want := 0
		if v, ok := e[key]; ok {
			want, _ = strconv.Atoi(v)
		}
		if got != want {
			t.Errorf("%s engines %s: catalog %d, tables %d", where, key, got, want)
		}
	}
}

// TestAllBalancedPlacesLikeMigParted places every board's all_balanced multiset from the tables:
// on 8-slice boards the result must be mig-parted's 2g@0 + 1g@2 + 1g@3 + 3g@4.
func TestAllBalancedPlacesLikeMigParted(t *testing.T) {
	for _, rb := range readProfilesYAML(t) {
		raw, ok := rb.kv["all_balanced"]
		if !ok {
			continue
		}
		b, err := Lookup(rb.name)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for k, v := range parseFlow(raw) {
			counts[k], _ = strconv.Atoi(v)
		}
		l, err := b.Place(counts)
		if err != nil {
			t.Errorf("%s: place all-balanced %v: %v", b.Name, counts, err)
			continue
		}
		if err := b.Validate(l); err != nil {
			t.Errorf("%s: placed all-balanced does not validate: %v", b.Name, err)
		}
		if b.MemorySlices == 8 {
			var one, two, three string
			for name := range counts {
				switch name[0] {
				case '1':
					one = name
				case '2':
					two = name
				case '3':
					three = name
				}
			}
			want := fmt.Sprintf("%s@0 %s@2 %s@3 %s@4", two, one, one, three)
			if l.String() != want {
				t.Errorf("%s: all-balanced placed as %q, want %q", b.Name, l, want)
			}
		}
	}
}

// TestMigPartedConfigs checks every config of NVIDIA's mig-parted default file: each device-filter
// id maps to a board, each filtered entry places on the boards of its ids, and each unfiltered
// entry places on every board that has its profiles.
func TestMigPartedConfigs(t *testing.T) {
	for _, e := range readMigParted(t) {
		if len(e.devices) == 0 {
			continue
		}
		var boards []*Board
		if len(e.filters) > 0 {
			for _, id := range e.filters {
				bs := ByPCIDeviceID(id)
				if len(bs) == 0 {
					t.Errorf("%s: device-filter %s maps to no board", e.config, id)
				}
				boards = append(boards, bs...)
			}
		} else {
			for _, b := range Boards() {
				if hasAll(b, e.devices) {
					boards = append(boards, b)
				}
			}
			// Every profile of the file exists somewhere: the 189 GB GB200 names (3g.95gb,
			// 4g.95gb, 7g.189gb) live on GB200-189GB.
			if len(boards) == 0 {
				t.Errorf("%s: no board has profiles %v", e.config, e.devices)
			}
		}
		placed := 0
		for _, b := range boards {
			l, err := b.Place(e.devices)
			switch {
			case err == nil:
				placed++
				if err := b.Validate(l); err != nil {
					t.Errorf("%s on %s: placed layout invalid: %v", e.config, b.Name, err)
				}
			case len(e.filters) > 0 || errors.Is(err, ErrNoPlacement):
				// A filtered entry must place on its boards; an unfiltered one ("devices: all")
				// may exceed the counts of a smaller board with the same names (RTX PRO 5000's
				// 1g.24gb x2 vs RTX PRO 6000's x4) but never be geometrically impossible.
				t.Errorf("%s on %s: %v", e.config, b.Name, err)
			}
		}
		if len(boards) > 0 && placed == 0 {
			t.Errorf("%s: places on none of %d boards with its profiles", e.config, len(boards))
		}
	}
}

func hasAll(b *Board, counts map[string]int) bool {
	for name := range counts {
		if p := b.profile(name); p == nil || p.Name != name {
			return false
		}
	}
	return true
}
