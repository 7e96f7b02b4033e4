package migparted

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// Options tunes Validate.
type Options struct {
	// Board, when set, is the only board: every entry whose device-filter names one of its PCI
	// ids, and every entry without a filter, is validated against it, whether or not the board
	// has the entry's profiles (mig-parted would apply the entry to it). Without it each entry is
	// validated against the boards it resolves to (see the package documentation).
	Board *gpu.Board
}

// catalog is what validation needs from the board catalog; tests substitute a fake.
type catalog interface {
	boards() []*gpu.Board
	byPCIDeviceID(id string) []*gpu.Board
	profile(b *gpu.Board, name string) (*gpu.Profile, error)
	place(b *gpu.Board, counts map[string]int) (gpu.Layout, error)
}

// gpuCatalog is the real catalog of package gpu.
type gpuCatalog struct{}

func (gpuCatalog) boards() []*gpu.Board                                 { return gpu.Boards() }
func (gpuCatalog) byPCIDeviceID(id string) []*gpu.Board                 { return gpu.ByPCIDeviceID(id) }
func (gpuCatalog) profile(b *gpu.Board, n string) (*gpu.Profile, error) { return b.Profile(n) }
func (gpuCatalog) place(b *gpu.Board, c map[string]int) (gpu.Layout, error) {
	return b.Place(c)
}

// Validate checks every named config of cfg, entry by entry, on every board the entry applies to:
// each profile exists on the board and the counts have a legal placement. It never fails; the
// Report says what is wrong.
func Validate(cfg *Config, opts Options) Report {
	return validate(cfg, opts, gpuCatalog{})
}

func validate(cfg *Config, opts Options, cat catalog) Report {
	v := &validator{cat: cat, board: opts.Board}
	var r Report
	if opts.Board != nil {
		r.Board = opts.Board.Name
	}
	if cfg != nil {
		for _, nc := range cfg.Configs {
			r.Configs = append(r.Configs, v.config(nc))
		}
	}
	r.summarize()
	return r
}

type validator struct {
	cat   catalog
	board *gpu.Board
}

func (v *validator) config(nc NamedConfig) ConfigReport {
	cr := ConfigReport{Name: nc.Name}
	for i, e := range nc.Entries {
		var checks []Check
		for _, b := range v.resolve(&cr, i, e) {
			checks = append(checks, v.check(nc.Name, i, e, b))
		}
		if e.DeviceFilter == nil && v.board == nil {
			demoteMisfits(checks)
		}
		cr.Checks = append(cr.Checks, checks...)
	}
	cr.Findings = append(cr.Findings, overlaps(nc, cr.Checks)...)
	if len(cr.Checks) == 0 {
		f := Finding{Severity: SeverityWarning, Config: nc.Name, Entry: -1}
		if v.board != nil {
			f.Board = v.board.Name
			f.Message = "no entry applies to this board (mig-parted would leave it unchanged)"
		} else {
			f.Message = "not checked on any board"
		}
		cr.Findings = append(cr.Findings, f)
	}
	return cr
}

// demoteMisfits handles a filter-less entry (which mig-parted applies to every GPU) that fits
// some boards of the catalog but not others: the file means it for the boards where it fits, so
// the others are marked not applicable and their errors become warnings. When it fits no board,
// the errors stay.
func demoteMisfits(checks []Check) {
	fits := false
	for _, ch := range checks {
		fits = fits || ch.OK()
	}
	if !fits {
		return
	}
	for i := range checks {
		if checks[i].OK() {
			continue
		}
		checks[i].NotApplicable = true
		for j := range checks[i].Findings {
			checks[i].Findings[j].Severity = SeverityWarning
		}
	}
}

// resolve returns the boards entry i applies to, adding findings about its filter to cr.
func (v *validator) resolve(cr *ConfigReport, i int, e Entry) []*gpu.Board {
	if e.DeviceFilter == nil {
		if v.board != nil {
			return []*gpu.Board{v.board}
		}
		return v.filterless(cr, i, e)
	}
	var out []*gpu.Board
	seen := map[string]bool{}
	for j, id := range e.DeviceFilter {
		var found []*gpu.Board
		if v.board != nil {
			if hasPCIID(v.board, id) {
				found = []*gpu.Board{v.board}
			}
		} else {
			found = v.cat.byPCIDeviceID(primaryID(id))
			if len(found) == 0 {
				cr.Findings = append(cr.Findings, Finding{
					Severity: SeverityWarning, Config: cr.Name, Entry: i,
					Field:   fmt.Sprintf("device-filter[%d]", j),
					Message: fmt.Sprintf("PCI device id %s matches no board in the catalog; entry not checked for it", id),
				})
			}
		}
		for _, b := range found {
			if !seen[b.Name] {
				seen[b.Name] = true
				out = append(out, b)
			}
		}
	}
	return out
}

// filterless resolves an entry without a device-filter and without a board override: the MIG
// boards that have every profile it names (all MIG boards when it names none).
func (v *validator) filterless(cr *ConfigReport, i int, e Entry) []*gpu.Board {
	names := sortedKeys(e.MigDevices)
	var out []*gpu.Board
	has := map[string][]string{} // profile -> boards that have it
	for _, b := range v.cat.boards() {
		if !migCapable(b) {
			continue
		}
		all := true
		for _, n := range names {
			if _, err := v.cat.profile(b, gpuInstanceProfile(n)); err == nil {
				has[n] = append(has[n], b.Name)
			} else {
				all = false
			}
		}
		if all || !e.MigEnabled {
			out = append(out, b)
		}
	}
	if len(out) > 0 || len(names) == 0 {
		return out
	}
	var unknown, parts []string
	for _, n := range names {
		if len(has[n]) == 0 {
			unknown = append(unknown, strconv.Quote(n))
			continue
		}
		parts = append(parts, fmt.Sprintf("%q on %s", n, strings.Join(has[n], ", ")))
	}
	f := Finding{Config: cr.Name, Entry: i, Field: "mig-devices"}
	if len(unknown) > 0 {
		// Like an unknown PCI id: hardware the catalog does not know, not a proven mistake.
		f.Severity = SeverityWarning
		if len(names) == 1 {
			f.Profile = names[0]
		}
		f.Message = fmt.Sprintf("profile %s exists on no MIG board in the catalog; entry not checked", strings.Join(unknown, ", "))
	} else {
		f.Severity = SeverityError
		f.Message = "no MIG board in the catalog has all of its profiles (" + strings.Join(parts, "; ") + ")"
	}
	cr.Findings = append(cr.Findings, f)
	return nil
}

// check validates entry i of config name on board b.
func (v *validator) check(name string, i int, e Entry, b *gpu.Board) Check {
	ch := Check{Entry: i, Board: b.Name, MigEnabled: e.MigEnabled}
	fail := func(profile, format string, args ...any) {
		ch.Findings = append(ch.Findings, Finding{
			Severity: SeverityError, Config: name, Entry: i, Board: b.Name,
			Profile: profile, Message: fmt.Sprintf(format, args...),
		})
	}
	if !e.MigEnabled {
		return ch
	}
	if !migCapable(b) {
		fail("", "%s has no MIG support, but the entry enables MIG", b.Name)
		return ch
	}
	counts := map[string]int{}
	total := 0
	for _, n := range sortedKeys(e.MigDevices) {
		if e.MigDevices[n] <= 0 { // only in a Config that fails Check
			fail(n, "count %d of %s must be > 0", e.MigDevices[n], n)
			continue
		}
		gi := gpuInstanceProfile(n)
		p, err := v.cat.profile(b, gi)
		if err != nil {
			fail(n, "%v", err)
			continue
		}
		if c := computeSlices(n); c > p.ComputeSlices {
			fail(n, "compute instance of %d slices does not fit GPU instance %s (%d slices)", c, gi, p.ComputeSlices)
			continue
		}
		counts[p.Name] += e.MigDevices[n]                                 // the catalog's spelling of the name
		total = min(total, math.MaxInt-e.MigDevices[n]) + e.MigDevices[n] // saturate, never overflow
	}
	if !ch.OK() || total == 0 {
		return ch
	}
	if total > b.MemorySlices {
		fail("", "%d instances cannot fit on %s, which has %d memory slices", total, b.Name, b.MemorySlices)
		return ch
	}
	l, err := v.cat.place(b, counts)
	if err != nil {
		fail("", "%v", err) // Place's error names the board and the profiles
		return ch
	}
	ch.Layout = sortedLayout(l)
	return ch
}

// overlaps warns when two entries of one config both apply to the same board and GPU indices:
// mig-parted applies entries in order, so the later one wins there.
func overlaps(nc NamedConfig, checks []Check) []Finding {
	var out []Finding
	for x := range checks {
		for y := x + 1; y < len(checks); y++ {
			a, b := checks[x], checks[y]
			if a.Board != b.Board || a.Entry == b.Entry {
				continue
			}
			if !nc.Entries[a.Entry].Devices.overlaps(nc.Entries[b.Entry].Devices) {
				continue
			}
			out = append(out, Finding{
				Severity: SeverityWarning, Config: nc.Name, Entry: b.Entry, Board: a.Board,
				Message: fmt.Sprintf("entries %d and %d both apply to the same GPUs; mig-parted applies them in order, so entry %d wins", a.Entry, b.Entry, b.Entry),
			})
		}
	}
	return out
}

// computePrefix is the compute-instance prefix of a profile name: "1c." in "1c.3g.40gb".
var computePrefix = regexp.MustCompile(`^([1-9][0-9]?)c\.`)

// gpuInstanceProfile strips a compute-instance prefix: mig-parted creates one GPU instance of
// "3g.40gb" (holding one 1-slice compute instance) for each "1c.3g.40gb".
func gpuInstanceProfile(name string) string {
	if loc := computePrefix.FindStringIndex(name); loc != nil {
		return name[loc[1]:]
	}
	return name
}

// computeSlices is the N of an "Nc." prefix, 0 without one.
func computeSlices(name string) int {
	m := computePrefix.FindStringSubmatch(name)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// primaryID is the device+vendor part of a device-filter id, without a subsystem qualifier.
func primaryID(id string) string {
	p, _, _ := strings.Cut(id, ":")
	return p
}

// normID is the canonical form of a well-formed id: "0x" and upper-case hex.
func normID(id string) string {
	if len(id) < 2 {
		return id
	}
	return "0x" + strings.ToUpper(id[2:])
}

// migCapable reports whether b supports MIG: it has memory slices and profiles.
func migCapable(b *gpu.Board) bool { return b.MemorySlices > 0 && len(b.Profiles) > 0 }

func hasPCIID(b *gpu.Board, id string) bool {
	want := normID(primaryID(id))
	for _, have := range b.PCIDeviceIDs {
		if normID(have) == want {
			return true
		}
	}
	return false
}
