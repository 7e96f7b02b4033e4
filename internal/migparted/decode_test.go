package migparted

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func readDefault(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/config-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeDefault(t testing.TB) *Config {
	t.Helper()
	cfg, err := Decode(readDefault(t))
	if err != nil {
		t.Fatalf("Decode(default file): %v", err)
	}
	return cfg
}

func TestDecodeDefaultFile(t *testing.T) {
	cfg := decodeDefault(t)
	if got := len(cfg.Configs); got != 81 {
		t.Fatalf("configs = %d, want 81", got)
	}
	names := cfg.Names()
	// File order, not alphabetical: all-disabled comes before all-1g.5gb only in file order.
	wantFirst := []string{"all-disabled", "all-enabled", "all-1g.5gb", "all-1g.5gb.me", "all-2g.10gb"}
	if !reflect.DeepEqual(names[:5], wantFirst) {
		t.Errorf("first names = %v, want %v", names[:5], wantFirst)
	}
	if last := names[len(names)-1]; last != "all-7g.278gb" {
		t.Errorf("last name = %q, want all-7g.278gb", last)
	}

	dis, _ := cfg.Lookup("all-disabled")
	want := []Entry{{Devices: AllDevices(), MigEnabled: false}}
	if !reflect.DeepEqual(dis.Entries, want) {
		t.Errorf("all-disabled = %+v, want %+v", dis.Entries, want)
	}
	en, _ := cfg.Lookup("all-enabled")
	if e := en.Entries[0]; !e.MigEnabled || e.MigDevices == nil || len(e.MigDevices) != 0 {
		t.Errorf("all-enabled entry = %+v, want enabled with an empty, non-nil mig-devices", e)
	}

	bal, ok := cfg.Lookup("all-balanced")
	if !ok {
		t.Fatal("all-balanced missing")
	}
	// 12 device-filter branches: GB200, GB300, RTX PRO 6000, B200, B300, GH200 144G, H200,
	// H100 NVL, H100-80GB group, A100-40GB group, A30, H100-96GB group.
	if got := len(bal.Entries); got != 12 {
		t.Fatalf("all-balanced entries = %d, want 12", got)
	}
	a30 := bal.Entries[10] // written as a scalar: device-filter: "0x20B710DE"
	wantA30 := Entry{DeviceFilter: []string{"0x20B710DE"}, Devices: AllDevices(), MigEnabled: true,
		MigDevices: map[string]int{"1g.6gb": 2, "2g.12gb": 1}}
	if !reflect.DeepEqual(a30, wantA30) {
		t.Errorf("all-balanced[10] = %+v, want %+v", a30, wantA30)
	}
	if got := len(bal.Entries[8].DeviceFilter); got != 8 {
		t.Errorf("all-balanced[8] (H100-80GB group) filter ids = %d, want 8", got)
	}

	one, _ := cfg.Lookup("all-1g.10gb")
	if len(one.Entries) != 2 || one.Entries[0].MigDevices["1g.10gb"] != 7 || one.Entries[1].MigDevices["1g.10gb"] != 4 {
		t.Errorf("all-1g.10gb = %+v, want two branches with 7 and 4 instances", one.Entries)
	}
}

func TestDecodeKeepsFileOrder(t *testing.T) {
	src := `version: v1
mig-configs:
  zeta:
    - devices: all
      mig-enabled: false
  alpha:
    - devices: [1, 0]
      mig-enabled: false
  mid:
    - devices: all
      mig-enabled: false
`
	cfg, err := Decode([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Names(), []string{"zeta", "alpha", "mid"}; !reflect.DeepEqual(got, want) {
		t.Errorf("names = %v, want %v", got, want)
	}
	if got := cfg.Configs[1].Entries[0].Devices; !reflect.DeepEqual(got, Devices{Indices: []int{1, 0}}) {
		t.Errorf("alpha devices = %+v, want indices [1 0] in file order", got)
	}
}

// fieldErrors flattens the *FieldError values inside err.
func fieldErrors(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		var fe *FieldError
		if errors.As(e, &fe) && e == error(fe) {
			out = append(out, fe.Error())
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// entry wraps one entry body (indented for the list) into a complete file with config "c".
func entry(body string) string {
	return "version: v1\nmig-configs:\n  c:\n    - " + strings.ReplaceAll(strings.TrimSpace(body), "\n", "\n      ") + "\n"
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // every field error, in order; empty: a YAML-level error (want in raw)
		raw  string
	}{
		{"unknown entry field", entry("devices: all\nmig-enabled: true\nmig-devicez: {}\nmig-devices: {}"),
			[]string{"mig-configs.c[0].mig-devicez: unknown field"}, ""},
		{"unknown top-level field", "version: v1\nmig-config: {}\nmig-configs:\n  c:\n    - {devices: all, mig-enabled: false}\n",
			[]string{"mig-config: unknown field"}, ""},
		{"missing version", "mig-configs:\n  c:\n    - {devices: all, mig-enabled: false}\n",
			[]string{`version: required field missing (want "v1")`}, ""},
		{"wrong version", "version: v2\nmig-configs:\n  c:\n    - {devices: all, mig-enabled: false}\n",
			[]string{`version: unsupported version "v2" (want "v1")`}, ""},
		{"numeric version", "version: 1\nmig-configs:\n  c:\n    - {devices: all, mig-enabled: false}\n",
			[]string{`version: unsupported version 1 (want "v1")`}, ""},
		{"missing mig-configs", "version: v1\n", []string{"mig-configs: required field missing"}, ""},
		{"empty mig-configs", "version: v1\nmig-configs: {}\n", []string{"mig-configs: at least one named config is required"}, ""},
		{"mig-configs a list", "version: v1\nmig-configs: [a]\n",
			[]string{"mig-configs: must be a mapping of config names to lists, got a list"}, ""},
		{"config not a list", "version: v1\nmig-configs:\n  c: {devices: all}\n",
			[]string{"mig-configs.c: must be a list of entries, got a mapping"}, ""},
		{"config empty", "version: v1\nmig-configs:\n  c: []\n", []string{"mig-configs.c: at least one entry is required"}, ""},
		{"entry not a mapping", "version: v1\nmig-configs:\n  c: [all]\n",
			[]string{"mig-configs.c[0]: must be a mapping, got a string"}, ""},
		{"required fields missing", entry("device-filter: \"0x233010DE\""),
			[]string{"mig-configs.c[0].devices: required field missing", "mig-configs.c[0].mig-enabled: required field missing"}, ""},
		{"devices word", entry("devices: some\nmig-enabled: false"),
			[]string{`mig-configs.c[0].devices: invalid value "some" (want "all" or a list of GPU indices)`}, ""},
		{"devices negative and duplicate", entry("devices: [0, -1, 0]\nmig-enabled: false"),
			[]string{"mig-configs.c[0].devices[1]: GPU index -1 must not be negative", "mig-configs.c[0].devices[2]: duplicate GPU index 0"}, ""},
		{"devices empty", entry("devices: []\nmig-enabled: false"),
			[]string{`mig-configs.c[0].devices: must be "all" or a non-empty list of GPU indices`}, ""},
		{"devices not integers", entry("devices: [a, 1.5]\nmig-enabled: false"),
			[]string{`mig-configs.c[0].devices[0]: must be a non-negative integer GPU index, got "a"`,
				"mig-configs.c[0].devices[1]: must be a non-negative integer GPU index, got 1.5"}, ""},
		{"devices a number", entry("devices: 0\nmig-enabled: false"),
			[]string{`mig-configs.c[0].devices: must be "all" or a list of GPU indices, got a number`}, ""},
		// Unquoted, YAML reads 0x233010DE as the integer 590352606.
		{"filter unquoted", entry("device-filter: 0x233010DE\ndevices: all\nmig-enabled: false"),
			[]string{"mig-configs.c[0].device-filter: must be a PCI device id string or a list of them, got a number"}, ""},
		{"filter empty string", entry("device-filter: \"\"\ndevices: all\nmig-enabled: false"),
			[]string{"mig-configs.c[0].device-filter: must name at least one PCI device id (omit the field to match every device)"}, ""},
		{"filter empty list", entry("device-filter: []\ndevices: all\nmig-enabled: false"),
			[]string{"mig-configs.c[0].device-filter: must name at least one PCI device id (omit the field to match every device)"}, ""},
		{"filter short id", entry("device-filter: \"0x2330\"\ndevices: all\nmig-enabled: false"),
			[]string{`mig-configs.c[0].device-filter: invalid PCI device id "0x2330" (want 0x followed by 8 hex digits, device then vendor, e.g. 0x233010DE)`}, ""},
		{"filter bad and duplicate ids", entry("device-filter: [\"0x233010DE\", \"0x233010de\", \"233010DE\", 7]\ndevices: all\nmig-enabled: false"),
			[]string{"mig-configs.c[0].device-filter[3]: must be a quoted PCI device id string, got a number"}, ""},
		{"filter duplicate ids", entry("device-filter: [\"0x233010DE\", \"0x233010de\", \"233010DE\"]\ndevices: all\nmig-enabled: false"),
			[]string{`mig-configs.c[0].device-filter[1]: duplicate PCI device id "0x233010de"`,
				`mig-configs.c[0].device-filter[2]: invalid PCI device id "233010DE" (want 0x followed by 8 hex digits, device then vendor, e.g. 0x233010DE)`}, ""},
		{"mig-enabled not a bool", entry("devices: all\nmig-enabled: \"yes\"\nmig-devices: {\"1g.10gb\": 0}"),
			[]string{"mig-configs.c[0].mig-enabled: must be true or false, got a string",
				`mig-configs.c[0].mig-devices["1g.10gb"]: count 0 must be > 0`}, ""},
		{"disabled with devices", entry("devices: all\nmig-enabled: false\nmig-devices: {\"1g.10gb\": 7}"),
			[]string{"mig-configs.c[0].mig-devices: must be empty when mig-enabled is false"}, ""},
		{"enabled without devices", entry("devices: all\nmig-enabled: true"),
			[]string{"mig-configs.c[0].mig-devices: required when mig-enabled is true (use {} to enable MIG with no instances)"}, ""},
		{"mig-devices not a mapping", entry("devices: all\nmig-enabled: true\nmig-devices: [1g.10gb]"),
			[]string{"mig-configs.c[0].mig-devices: must be a mapping of MIG profile names to counts, got a list"}, ""},
		{"bad counts", entry("devices: all\nmig-enabled: true\nmig-devices: {\"1g.10gb\": 0, \"2g.20gb\": -1, \"3g.40gb\": two, \"4g.40gb\": 1.5}"),
			// Type errors come first, then the value rules.
			[]string{`mig-configs.c[0].mig-devices["3g.40gb"]: count must be a positive integer, got "two"`,
				`mig-configs.c[0].mig-devices["4g.40gb"]: count must be a positive integer, got 1.5`,
				`mig-configs.c[0].mig-devices["1g.10gb"]: count 0 must be > 0`,
				`mig-configs.c[0].mig-devices["2g.20gb"]: count -1 must be > 0`}, ""},
		{"bad profile name", entry("devices: all\nmig-enabled: true\nmig-devices: {\"3g40gb\": 1}"),
			[]string{`mig-configs.c[0].mig-devices["3g40gb"]: invalid MIG profile name "3g40gb" (want e.g. 3g.40gb, 1g.10gb+me)`}, ""},
		{"empty config name", "version: v1\nmig-configs:\n  \"\": [{devices: all, mig-enabled: false}]\n",
			[]string{"mig-configs.: config name must not be empty"}, ""},
		{"root a list", "- a\n", []string{"must be a mapping, got a list"}, ""},
		{"empty input", "", []string{"must be a mapping, got null"}, ""},
		{"duplicate key", "version: v1\nmig-configs:\n  c: [{devices: all, mig-enabled: false}]\n  c: [{devices: all, mig-enabled: false}]\n",
			nil, `key "c" already set in map`},
		{"not YAML", "version: [v1\n", nil, "did not find expected"},
		{"everything at once", `version: v9
extra: 1
mig-configs:
  a:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 0}
  b:
    - devices: [-2]
      mig-enabled: false
      bogus: 1
`, []string{
			"extra: unknown field",
			`version: unsupported version "v9" (want "v1")`,
			`mig-configs.a[0].mig-devices["1g.10gb"]: count 0 must be > 0`,
			"mig-configs.b[0].bogus: unknown field",
			"mig-configs.b[0].devices[0]: GPU index -2 must not be negative",
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Decode([]byte(tt.src))
			if err == nil {
				t.Fatalf("Decode succeeded: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Decode returned a config with an error")
			}
			if !strings.HasPrefix(err.Error(), "decode mig-parted config: ") {
				t.Errorf("error %q lacks the decode prefix", err)
			}
			if tt.want == nil {
				if !strings.Contains(err.Error(), tt.raw) {
					t.Errorf("error %q does not contain %q", err, tt.raw)
				}
				return
			}
			if got := fieldErrors(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("field errors:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want Entry
	}{
		// mig-parted accepts an empty mig-devices with MIG disabled; it decodes to nil.
		{"disabled with empty devices", entry("devices: all\nmig-enabled: false\nmig-devices: {}"),
			Entry{Devices: AllDevices()}},
		{"indices and subsystem filter", entry("device-filter: \"0x233010DE:0x16C110DE\"\ndevices: [0, 3]\nmig-enabled: true\nmig-devices: {\"1c.3g.40gb\": 2}"),
			Entry{DeviceFilter: []string{"0x233010DE:0x16C110DE"}, Devices: Devices{Indices: []int{0, 3}}, MigEnabled: true,
				MigDevices: map[string]int{"1c.3g.40gb": 2}}},
		{"attribute profiles", entry("devices: all\nmig-enabled: true\nmig-devices: {\"1g.24gb+me.all\": 1, \"1g.24gb-me\": 2, \"1g.24gb+gfx\": 1}"),
			Entry{Devices: AllDevices(), MigEnabled: true, MigDevices: map[string]int{"1g.24gb+me.all": 1, "1g.24gb-me": 2, "1g.24gb+gfx": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Decode([]byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Configs[0].Entries[0]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("entry = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Keys that are different YAML values but one JSON key (1 and "1", 0x1, true and "true") are a
// repeated key (0x1 beside 1 is one the strict reader already refuses): the YAML-to-JSON conversion kept whichever its map order met last, so the same
// file decoded to a config with MIG off on one read and 7 instances on the next.
func TestDecodeKeysThatBecomeOneJSONKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"version: v1\nmig-configs:\n  1:\n    - devices: all\n      mig-enabled: false\n" +
			"  \"1\":\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n",
			`decode mig-parted config: mig-configs.1: duplicate key (the string "1" and the integer 1 are one key once read; quote keys as strings)`},
		{"version: v1\nmig-configs:\n  0x1: [{devices: all, mig-enabled: false}]\n  \"1\": [{devices: all, mig-enabled: true, mig-devices: {}}]\n",
			`decode mig-parted config: mig-configs.1: duplicate key (the string "1" and the integer 1 are one key once read; quote keys as strings)`},
		{"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 1}\n      true: 1\n      \"true\": 2\n",
			`decode mig-parted config: mig-configs.a[0].true: duplicate key (the string "true" and the boolean true are one key once read; quote keys as strings)`},
	}
	for _, tt := range tests {
		for i := 0; i < 100; i++ {
			c, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("read %d of %q accepted: %+v", i+1, tt.in, c)
			}
			if err.Error() != tt.want {
				t.Fatalf("read %d of %q:\n%v\nwant\n%s", i+1, tt.in, err, tt.want)
			}
		}
	}
	// Distinct string keys are untouched.
	if _, err := Decode([]byte("version: v1\nmig-configs:\n  \"1\": [{devices: all, mig-enabled: false}]\n  \"01\": [{devices: all, mig-enabled: false}]\n")); err != nil {
		t.Errorf("distinct string keys refused: %v", err)
	}
}
