package migparted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/yamlkey"
)

// Decode reads a mig-parted config file strictly. It returns every problem at once, each with its
// field path; see the package documentation for the rules.
func Decode(data []byte) (*Config, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("decode mig-parted config: %w", err)
	}
	if errs := collidingKeys(data); len(errs) > 0 {
		return nil, fmt.Errorf("decode mig-parted config: %w", errors.Join(errs...))
	}
	var root any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("decode mig-parted config: %w", err)
	}
	d := &decoder{}
	cfg := d.root(root, configOrder(data))
	if len(d.errs) > 0 {
		return nil, fmt.Errorf("decode mig-parted config: %w", errors.Join(d.errs...))
	}
	return cfg, nil
}

type decoder struct{ errs []error }

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) add(errs []*FieldError) {
	for _, e := range errs {
		d.errs = append(d.errs, e)
	}
}

// object asserts v is a mapping and reports its keys outside allowed as unknown fields.
func (d *decoder) object(path string, v any, allowed ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, "must be a mapping, got %s", kind(v))
		return nil, false
	}
	var unknown []string
	for k := range m {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		d.fail(join(path, k), "unknown field")
	}
	return m, true
}

func (d *decoder) root(v any, order []string) *Config {
	m, ok := d.object("", v, "version", "mig-configs")
	if !ok {
		return nil
	}
	switch ver, present := m["version"]; {
	case !present:
		d.fail("version", "required field missing (want %q)", Version)
	case ver != Version:
		d.fail("version", "unsupported version %s (want %q)", show(ver), Version)
	}
	raw, present := m["mig-configs"]
	if !present {
		d.fail("mig-configs", "required field missing")
		return nil
	}
	configs, ok := raw.(map[string]any)
	if !ok {
		d.fail("mig-configs", "must be a mapping of config names to lists, got %s", kind(raw))
		return nil
	}
	if len(configs) == 0 {
		d.fail("mig-configs", "at least one named config is required")
	}
	cfg := &Config{}
	for _, name := range orderedNames(configs, order) {
		cfg.Configs = append(cfg.Configs, d.named(name, configs[name]))
	}
	return cfg
}

func (d *decoder) named(name string, v any) NamedConfig {
	nc := NamedConfig{Name: name}
	p := configPath(name)
	if name == "" {
		d.fail(p, "config name must not be empty")
	}
	list, ok := v.([]any)
	if !ok {
		d.fail(p, "must be a list of entries, got %s", kind(v))
		return nc
	}
	if len(list) == 0 {
		d.fail(p, "at least one entry is required")
	}
	for i, ev := range list {
		nc.Entries = append(nc.Entries, d.entry(entryPath(name, i), ev))
	}
	return nc
}

func (d *decoder) entry(p string, v any) Entry {
	var e Entry
	m, ok := d.object(p, v, "device-filter", "devices", "mig-enabled", "mig-devices")
	if !ok {
		return e
	}
	if f, present := m["device-filter"]; present {
		e.DeviceFilter = d.filter(p+".device-filter", f)
	}
	if dv, present := m["devices"]; present {
		e.Devices = d.devices(p+".devices", dv)
	} else {
		d.fail(p+".devices", "required field missing")
	}
	enabledKnown := false
	if ev, present := m["mig-enabled"]; !present {
		d.fail(p+".mig-enabled", "required field missing")
	} else if b, isBool := ev.(bool); !isBool {
		d.fail(p+".mig-enabled", "must be true or false, got %s", kind(ev))
	} else {
		e.MigEnabled, enabledKnown = b, true
	}
	mv, present := m["mig-devices"]
	if present {
		e.MigDevices = d.migDevices(p+".mig-devices", mv)
	} else if e.MigEnabled {
		d.fail(p+".mig-devices", "required when mig-enabled is true (use {} to enable MIG with no instances)")
	}
	// With mig-enabled unreadable, still check the profile names and counts.
	d.add(checkMigDevices(p, e.MigEnabled || !enabledKnown, e.MigDevices))
	switch {
	case e.MigEnabled && e.MigDevices == nil:
		e.MigDevices = map[string]int{}
	case !e.MigEnabled:
		e.MigDevices = nil
	}
	return e
}

// filter reads device-filter: one id or a list of ids.
func (d *decoder) filter(p string, v any) []string {
	var ids []string
	switch t := v.(type) {
	case string:
		if t == "" {
			d.fail(p, "must name at least one PCI device id (omit the field to match every device)")
			return nil
		}
		ids = []string{t}
		if !pciIDPattern.MatchString(t) {
			d.fail(p, "invalid PCI device id %q (want 0x followed by 8 hex digits, device then vendor, e.g. 0x233010DE)", t)
			return ids
		}
		return ids
	case []any:
		ids = []string{}
		for i, x := range t {
			s, ok := x.(string)
			if !ok {
				d.fail(fmt.Sprintf("%s[%d]", p, i), "must be a quoted PCI device id string, got %s", kind(x))
				continue
			}
			ids = append(ids, s)
		}
		if len(ids) == len(t) {
			d.add(checkFilter(p, ids))
		}
		return ids
	default:
		d.fail(p, "must be a PCI device id string or a list of them, got %s", kind(v))
		return nil
	}
}

// devices reads `devices`: the string "all" or a list of GPU indices.
func (d *decoder) devices(p string, v any) Devices {
	switch t := v.(type) {
	case string:
		if t != "all" {
			d.fail(p, `invalid value %q (want "all" or a list of GPU indices)`, t)
		}
		return AllDevices()
	case []any:
		var out Devices
		ok := true
		for i, x := range t {
			n, isNum := x.(json.Number)
			idx, err := strconv.Atoi(string(n))
			if !isNum || err != nil {
				d.fail(fmt.Sprintf("%s[%d]", p, i), "must be a non-negative integer GPU index, got %s", show(x))
				ok = false
				continue
			}
			out.Indices = append(out.Indices, idx)
		}
		if ok {
			d.add(checkIndices(p, out))
		}
		return out
	default:
		d.fail(p, `must be "all" or a list of GPU indices, got %s`, kind(v))
		return AllDevices()
	}
}

// migDevices reads `mig-devices`: profile name → count. Value rules are checked by the caller.
func (d *decoder) migDevices(p string, v any) map[string]int {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(p, "must be a mapping of MIG profile names to counts, got %s", kind(v))
		return nil
	}
	out := make(map[string]int, len(m))
	for _, name := range sortedAnyKeys(m) {
		n, isNum := m[name].(json.Number)
		c, err := strconv.Atoi(string(n))
		if !isNum || err != nil {
			d.fail(profilePath(p, name), "count must be a positive integer, got %s", show(m[name]))
			c = 1 // keep the name so that later rules still see it
		}
		out[name] = c
	}
	return out
}

// collidingKeys finds the keys of a mapping that are different YAML values but one JSON key
// (1, "1" and 0x1; true and "true"): the YAML-to-JSON conversion keeps whichever of them its map
// order meets last, so the same file could decode to different configs from one read to the next.
// It returns one error per such group, in path order, and none when data cannot be read (the
// strict read has then already failed).
func collidingKeys(data []byte) []error {
	var tree any
	if yamlv2.Unmarshal(data, &tree) != nil {
		return nil
	}
	d := &decoder{}
	d.collisions(tree, "", 0)
	return d.errs
}

// maxDepth bounds the walk of collisions.
const maxDepth = 100

func (d *decoder) collisions(v any, path string, depth int) {
	if depth > maxDepth {
		return
	}
	switch x := v.(type) {
	case map[any]any:
		for _, g := range yamlkey.Groups(x) {
			if len(g.Keys) > 1 {
				d.fail(join(path, g.Name), "%s", g.Message())
			}
			for _, k := range g.Keys {
				d.collisions(x[k], join(path, g.Name), depth+1)
			}
		}
	case []any:
		for i, item := range x {
			d.collisions(item, fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	}
}

// configOrder returns the keys of mig-configs in file order, or nil when they cannot be read.
// JSON objects are unordered, so the order comes from a second, order-preserving YAML read.
func configOrder(data []byte) []string {
	var doc struct {
		MigConfigs yamlv2.MapSlice `yaml:"mig-configs"`
	}
	if yamlv2.Unmarshal(data, &doc) != nil {
		return nil
	}
	out := make([]string, 0, len(doc.MigConfigs))
	for _, it := range doc.MigConfigs {
		out = append(out, keyString(it.Key))
	}
	return out
}

// keyString renders a YAML map key as sigs.k8s.io/yaml does when it converts YAML to JSON.
func keyString(k any) string {
	if s, ok := yamlkey.JSON(k); ok {
		return s
	}
	return fmt.Sprint(k)
}

// orderedNames lists the keys of configs in file order; any key the order misses (it should not
// happen) follows, sorted.
func orderedNames(configs map[string]any, order []string) []string {
	out := make([]string, 0, len(configs))
	used := map[string]bool{}
	for _, k := range order {
		if _, ok := configs[k]; ok && !used[k] {
			out = append(out, k)
			used[k] = true
		}
	}
	for _, k := range sortedAnyKeys(configs) {
		if !used[k] {
			out = append(out, k)
		}
	}
	return out
}

func sortedAnyKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// kind names the YAML type of a decoded value for error messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// show renders a scalar for error messages, and the kind of anything else.
func show(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case json.Number:
		return string(t)
	case bool:
		return strconv.FormatBool(t)
	default:
		return kind(v)
	}
}
