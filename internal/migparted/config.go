package migparted

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// Version is the only schema version mig-parted reads and this package writes.
const Version = "v1"

// Config is a decoded mig-parted file: named configs in file order.
type Config struct {
	Configs []NamedConfig
}

// NamedConfig is one entry of `mig-configs`: the value a node's `nvidia.com/mig.config` label selects.
type NamedConfig struct {
	Name    string
	Entries []Entry
}

// Entry is one element of a named config's list: which devices it applies to and what they get.
type Entry struct {
	// DeviceFilter lists PCI device ids in mig-parted form ("0x233010DE", device then vendor,
	// optionally ":0xSSSSVVVV" for the subsystem). Nil means the entry applies to every device.
	DeviceFilter []string
	// Devices is `all` or a list of GPU indices on the node.
	Devices Devices
	// MigEnabled is the MIG mode the entry sets.
	MigEnabled bool
	// MigDevices maps profile names to instance counts. After Decode it is nil when MigEnabled is
	// false and non-nil (possibly empty) when it is true; Encode writes a nil map as `{}`.
	MigDevices map[string]int
}

// Devices is the `devices` field: `all`, or GPU indices on the node.
type Devices struct {
	All     bool
	Indices []int
}

// AllDevices is `devices: all`.
func AllDevices() Devices { return Devices{All: true} }

// String renders the field as it appears in a file: "all" or "[0, 1]".
func (d Devices) String() string {
	if d.All {
		return "all"
	}
	s := "["
	for i, x := range d.Indices {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(x)
	}
	return s + "]"
}

// overlaps reports whether two devices fields name a common GPU index.
func (d Devices) overlaps(o Devices) bool {
	if d.All || o.All {
		return true
	}
	for _, x := range d.Indices {
		if slices.Contains(o.Indices, x) {
			return true
		}
	}
	return false
}

// Lookup returns the named config.
func (c *Config) Lookup(name string) (*NamedConfig, bool) {
	for i := range c.Configs {
		if c.Configs[i].Name == name {
			return &c.Configs[i], true
		}
	}
	return nil, false
}

// Names returns the config names in file order.
func (c *Config) Names() []string {
	out := make([]string, len(c.Configs))
	for i, nc := range c.Configs {
		out[i] = nc.Name
	}
	return out
}

// FieldError is one problem in a file or a Config value, located by its field path, e.g.
// `mig-configs.all-balanced[0].mig-devicez: unknown field`.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Check reports every structural problem of c (the rules Decode applies to a file), joined.
// Encode refuses a Config that fails Check.
func (c *Config) Check() error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if len(c.Configs) == 0 {
		add("mig-configs", "at least one named config is required")
	}
	seen := map[string]bool{}
	for _, nc := range c.Configs {
		p := configPath(nc.Name)
		if nc.Name == "" {
			add(p, "config name must not be empty")
		}
		if seen[nc.Name] {
			add(p, "duplicate config name")
		}
		seen[nc.Name] = true
		if len(nc.Entries) == 0 {
			add(p, "at least one entry is required")
		}
		for i, e := range nc.Entries {
			ep := entryPath(nc.Name, i)
			for _, fe := range checkFilter(ep+".device-filter", e.DeviceFilter) {
				errs = append(errs, fe)
			}
			for _, fe := range checkIndices(ep+".devices", e.Devices) {
				errs = append(errs, fe)
			}
			for _, fe := range checkMigDevices(ep, e.MigEnabled, e.MigDevices) {
				errs = append(errs, fe)
			}
		}
	}
	return errors.Join(errs...)
}

func configPath(name string) string       { return "mig-configs." + name }
func entryPath(name string, i int) string { return fmt.Sprintf("mig-configs.%s[%d]", name, i) }

// pciIDPattern is mig-parted's device-filter form: 32 bits of device and vendor id in hex,
// optionally followed by the subsystem device and vendor.
var pciIDPattern = regexp.MustCompile(`^0[xX][0-9A-Fa-f]{8}(:0[xX][0-9A-Fa-f]{8})?$`)

// profilePattern is the grammar of a MIG profile name in mig-devices: an optional compute-instance
// prefix ("1c."), the GPU-instance slices and memory ("3g.40gb"), and optional attributes
// ("+me", "-me", "+me.all", "+gfx").
var profilePattern = regexp.MustCompile(`^([1-9][0-9]?c\.)?[1-9][0-9]?g\.[0-9]{1,4}gb([+-][A-Za-z][A-Za-z0-9]*([.,][A-Za-z][A-Za-z0-9]*)*)?$`)

func checkFilter(path string, ids []string) []*FieldError {
	if ids == nil {
		return nil
	}
	var errs []*FieldError
	if len(ids) == 0 {
		errs = append(errs, &FieldError{path, "must name at least one PCI device id (omit the field to match every device)"})
	}
	seen := map[string]bool{}
	for i, id := range ids {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !pciIDPattern.MatchString(id) {
			errs = append(errs, &FieldError{p, fmt.Sprintf("invalid PCI device id %q (want 0x followed by 8 hex digits, device then vendor, e.g. 0x233010DE)", id)})
			continue
		}
		if seen[normID(id)] {
			errs = append(errs, &FieldError{p, fmt.Sprintf("duplicate PCI device id %q", id)})
		}
		seen[normID(id)] = true
	}
	return errs
}

func checkIndices(path string, d Devices) []*FieldError {
	if d.All {
		if len(d.Indices) > 0 {
			return []*FieldError{{path, "cannot be both all and a list of indices"}}
		}
		return nil
	}
	if len(d.Indices) == 0 {
		return []*FieldError{{path, `must be "all" or a non-empty list of GPU indices`}}
	}
	var errs []*FieldError
	seen := map[int]bool{}
	for i, x := range d.Indices {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case x < 0:
			errs = append(errs, &FieldError{p, fmt.Sprintf("GPU index %d must not be negative", x)})
		case seen[x]:
			errs = append(errs, &FieldError{p, fmt.Sprintf("duplicate GPU index %d", x)})
		}
		seen[x] = true
	}
	return errs
}

func checkMigDevices(entry string, enabled bool, devs map[string]int) []*FieldError {
	path := entry + ".mig-devices"
	if !enabled && len(devs) > 0 {
		return []*FieldError{{path, "must be empty when mig-enabled is false"}}
	}
	var errs []*FieldError
	for _, name := range sortedKeys(devs) {
		p := profilePath(path, name)
		if !profilePattern.MatchString(name) {
			errs = append(errs, &FieldError{p, fmt.Sprintf("invalid MIG profile name %q (want e.g. 3g.40gb, 1g.10gb+me)", name)})
		}
		if n := devs[name]; n <= 0 {
			errs = append(errs, &FieldError{p, fmt.Sprintf("count %d must be > 0", n)})
		}
	}
	return errs
}

func profilePath(path, name string) string { return fmt.Sprintf("%s[%q]", path, name) }

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
