package migparted

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestEncodeExact(t *testing.T) {
	c := &Config{Configs: []NamedConfig{
		{Name: "all-disabled", Entries: []Entry{{Devices: AllDevices()}}},
		{Name: "all-enabled", Entries: []Entry{{Devices: AllDevices(), MigEnabled: true}}}, // nil map: written as {}
		{Name: "mixed", Entries: []Entry{
			{DeviceFilter: []string{"0x233010DE", "0x20B210DE"}, Devices: AllDevices(), MigEnabled: true,
				MigDevices: map[string]int{"3g.40gb": 1, "1g.10gb": 2, "2g.20gb": 1}},
			{Devices: Devices{Indices: []int{2, 0}}, MigEnabled: false},
		}},
		{Name: "on", Entries: []Entry{{Devices: AllDevices()}}}, // YAML 1.1 would read a plain on as true
	}}
	got, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}

  mixed:
    - device-filter: ["0x233010DE", "0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
    - devices: [2, 0]
      mig-enabled: false

  "on":
    - devices: all
      mig-enabled: false
`
	if string(got) != want {
		t.Errorf("Encode:\n%s\nwant:\n%s", got, want)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if back.Configs[3].Name != "on" {
		t.Errorf("quoted name decoded as %q, want on", back.Configs[3].Name)
	}
}

func TestEncodeRoundTripDefaultFile(t *testing.T) {
	c := decodeDefault(t)
	out, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode(Encode(default)): %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, c) {
		t.Error("Decode(Encode(default)) differs from the decoded default file")
	}
	again, err := Encode(back)
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("Encode is not stable: err %v", err)
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	ok := Entry{Devices: AllDevices()}
	tests := []struct {
		name string
		c    *Config
		want []string
	}{
		{"nil", nil, nil},
		{"no configs", &Config{}, []string{"mig-configs: at least one named config is required"}},
		{"empty name and no entries", &Config{Configs: []NamedConfig{{Name: ""}}},
			[]string{"mig-configs.: config name must not be empty", "mig-configs.: at least one entry is required"}},
		{"duplicate name", &Config{Configs: []NamedConfig{{Name: "a", Entries: []Entry{ok}}, {Name: "a", Entries: []Entry{ok}}}},
			[]string{"mig-configs.a: duplicate config name"}},
		{"bad entry", &Config{Configs: []NamedConfig{{Name: "a", Entries: []Entry{{
			DeviceFilter: []string{"0x2330"},
			Devices:      Devices{Indices: []int{-1}},
			MigDevices:   map[string]int{"1g.10gb": 1},
		}}}}}, []string{
			`mig-configs.a[0].device-filter[0]: invalid PCI device id "0x2330" (want 0x followed by 8 hex digits, device then vendor, e.g. 0x233010DE)`,
			"mig-configs.a[0].devices[0]: GPU index -1 must not be negative",
			"mig-configs.a[0].mig-devices: must be empty when mig-enabled is false",
		}},
		{"empty filter, no devices, bad counts", &Config{Configs: []NamedConfig{{Name: "a", Entries: []Entry{{
			DeviceFilter: []string{},
			MigEnabled:   true,
			MigDevices:   map[string]int{"1g.10gb": 0, "x": 1},
		}}}}}, []string{
			"mig-configs.a[0].device-filter: must name at least one PCI device id (omit the field to match every device)",
			`mig-configs.a[0].devices: must be "all" or a non-empty list of GPU indices`,
			`mig-configs.a[0].mig-devices["1g.10gb"]: count 0 must be > 0`,
			`mig-configs.a[0].mig-devices["x"]: invalid MIG profile name "x" (want e.g. 3g.40gb, 1g.10gb+me)`,
		}},
		{"all and indices", &Config{Configs: []NamedConfig{{Name: "a", Entries: []Entry{{Devices: Devices{All: true, Indices: []int{1}}}}}}},
			[]string{"mig-configs.a[0].devices: cannot be both all and a list of indices"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Encode(tt.c)
			if err == nil {
				t.Fatalf("Encode succeeded:\n%s", out)
			}
			if !strings.HasPrefix(err.Error(), "encode mig-parted config: ") {
				t.Errorf("error %q lacks the encode prefix", err)
			}
			if got := fieldErrors(err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("field errors:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEncodeQuotesAwkwardNames(t *testing.T) {
	// Names YAML would otherwise read as something else, or that need escapes.
	names := []string{"yes", "No", "null", "1", "0x10", "1.5", "a: b", "#x", "-x", "a b", `q"uote`, `back\slash`,
		"tab\there", "nl\nx", "del\x7f", "é", "日本", "emoji😀", "\u2028", "~", "[x]", "{x}", "*x", "&x", "!x", "%x", "@x", "`x"}
	c := &Config{}
	for _, n := range names {
		c.Configs = append(c.Configs, NamedConfig{Name: n, Entries: []Entry{{Devices: AllDevices()}}})
	}
	out, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("Decode: %v\n%s", err, out)
	}
	if got := back.Names(); !reflect.DeepEqual(got, names) {
		t.Errorf("names after round trip:\n got %q\nwant %q", got, names)
	}
}
