package migparted

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/gpu"
)

// configs builds a file from named config bodies written as YAML lists.
func configs(pairs ...string) []byte {
	var b strings.Builder
	b.WriteString("version: v1\nmig-configs:\n")
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString("  " + pairs[i] + ": " + pairs[i+1] + "\n")
	}
	return []byte(b.String())
}

const (
	a100Filter = `device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]`
	h100Filter = `device-filter: ["0x233010DE", "0x232210DE"]`
)

// checkLines is a compact view of one Check: "entry board ok LAYOUT" or "entry board error".
func checkLines(r Report) map[string][]string {
	out := map[string][]string{}
	for _, c := range r.Configs {
		for _, ch := range c.Checks {
			out[c.Name] = append(out[c.Name], strings.TrimSpace(
				strings.Join([]string{strconv.Itoa(ch.Entry), ch.Board, checkText(ch)}, " ")))
		}
	}
	return out
}

func findingStrings(r Report, sev Severity) []string {
	var out []string
	for _, f := range r.Findings() {
		if f.Severity == sev {
			out = append(out, f.Error())
		}
	}
	return out
}

func TestValidateWithFakeCatalog(t *testing.T) {
	cat := newFakeCatalog()
	tests := []struct {
		name     string
		file     []byte
		board    string // override
		checks   map[string][]string
		errors   []string
		warnings []string
		summary  Summary
	}{
		{
			// Two filtered branches, like NVIDIA's all-balanced.
			// A100-40GB: 3g.20gb (4 mem) + 2g.10gb (2) + 2 x 1g.5gb (1+1) = 8 memory slices, 3+2+1+1 = 7 compute.
			// H100: 3g.40gb + 2g.20gb + 2 x 1g.10gb, the same shapes. 3g@0 leaves 1g for slot 7,
			// which no 1-slice profile may start at, so 3g goes to 4 and the small ones fill 0-3.
			name: "filtered branches",
			file: configs("balanced", `[{`+a100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
    {`+h100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]`),
			checks: map[string][]string{"balanced": {
				"0 A100-SXM4-40GB ok 2g.10gb@0 1g.5gb@2 1g.5gb@3 3g.20gb@4",
				"1 H100-SXM5-80GB ok 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4",
			}},
			summary: Summary{Configs: 1, Checks: 2},
		},
		{
			// A filter-less entry is checked only on the boards that have its profile:
			// 3g.40gb exists on H100 alone, 2 x 4 memory slices = 8.
			name:    "filter-less entry resolves to boards with the profile",
			file:    configs("all-3g.40gb", `[{devices: all, mig-enabled: true, mig-devices: {"3g.40gb": 2}}]`),
			checks:  map[string][]string{"all-3g.40gb": {"0 H100-SXM5-80GB ok 3g.40gb@0 3g.40gb@4"}},
			summary: Summary{Configs: 1, Checks: 1},
		},
		{
			// all-disabled and all-enabled apply to every MIG board (3 of the 4; L40S has no MIG).
			name: "disabled and enabled-empty",
			file: configs("disabled", `[{devices: all, mig-enabled: false}]`, "enabled", `[{devices: all, mig-enabled: true, mig-devices: {}}]`),
			checks: map[string][]string{
				"disabled": {"0 A100-SXM4-40GB ok, MIG disabled", "0 A30-24GB ok, MIG disabled", "0 H100-SXM5-80GB ok, MIG disabled"},
				"enabled":  {"0 A100-SXM4-40GB ok, MIG enabled, no instances", "0 A30-24GB ok, MIG enabled, no instances", "0 H100-SXM5-80GB ok, MIG enabled, no instances"},
			},
			summary: Summary{Configs: 2, Checks: 6},
		},
		{
			// 1g.10gb on A100-40GB takes 2 memory slices, so at most 4 fit (8 / 2); 7 do not.
			name:    "count that cannot be placed",
			file:    configs("c", `[{`+a100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}]`),
			checks:  map[string][]string{"c": {"0 A100-SXM4-40GB error"}},
			errors:  []string{"mig-configs.c[0] on A100-SXM4-40GB: 7 x 1g.10gb exceeds its maximum of 4 on A100-SXM4-40GB"},
			summary: Summary{Configs: 1, Checks: 1, Failures: 1, Errors: 1},
		},
		{
			name:    "profile missing on a filtered board",
			file:    configs("c", `[{`+h100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 1, "1g.10gb": 1}}]`),
			checks:  map[string][]string{"c": {"0 H100-SXM5-80GB error"}},
			errors:  []string{`mig-configs.c[0] on H100-SXM5-80GB: profile "1g.5gb" does not exist on H100-SXM5-80GB (valid: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`},
			summary: Summary{Configs: 1, Checks: 1, Failures: 1, Errors: 1},
		},
		{
			// 9 instances need at least 9 memory slices; A100 has 8.
			name:    "more instances than memory slices",
			file:    configs("c", `[{`+a100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 9}}]`),
			checks:  map[string][]string{"c": {"0 A100-SXM4-40GB error"}},
			errors:  []string{"mig-configs.c[0] on A100-SXM4-40GB: 9 instances cannot fit on A100-SXM4-40GB, which has 8 memory slices"},
			summary: Summary{Configs: 1, Checks: 1, Failures: 1, Errors: 1},
		},
		{
			// Like an unknown PCI id, a profile no board has is hardware the catalog does not know.
			name: "filter-less profile on no board",
			file: configs("c", `[{devices: all, mig-enabled: true, mig-devices: {"9g.99gb": 1, "1g.10gb": 1}}]`),
			warnings: []string{`mig-configs.c[0].mig-devices: profile "9g.99gb" exists on no MIG board in the catalog; entry not checked`,
				"mig-configs.c: not checked on any board"},
			summary: Summary{Configs: 1, Warnings: 2},
		},
		{
			// NVIDIA's all-1g.10gb without its filters: 7 x 1g.10gb fit H100 (1 memory slice each);
			// on A100-40GB 1g.10gb takes 2 slices, at most 4 fit, so the entry is not meant for it.
			name: "filter-less entry that fits some boards",
			file: configs("c", `[{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}]`),
			checks: map[string][]string{"c": {"0 A100-SXM4-40GB not applicable",
				"0 H100-SXM5-80GB ok 1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6"}},
			warnings: []string{"mig-configs.c[0] on A100-SXM4-40GB: 7 x 1g.10gb exceeds its maximum of 4 on A100-SXM4-40GB"},
			summary:  Summary{Configs: 1, Checks: 2, Skipped: 1, Warnings: 1},
		},
		{
			// 8 x 1g.10gb: 8 memory slices, but at most 7 on H100 and 4 on A100-40GB.
			name:   "filter-less entry that fits no board",
			file:   configs("c", `[{devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 8}}]`),
			checks: map[string][]string{"c": {"0 A100-SXM4-40GB error", "0 H100-SXM5-80GB error"}},
			errors: []string{"mig-configs.c[0] on A100-SXM4-40GB: 8 x 1g.10gb exceeds its maximum of 4 on A100-SXM4-40GB",
				"mig-configs.c[0] on H100-SXM5-80GB: 8 x 1g.10gb exceeds its maximum of 7 on H100-SXM5-80GB"},
			summary: Summary{Configs: 1, Checks: 2, Failures: 2, Errors: 2},
		},
		{
			name: "filter-less profiles no single board has",
			file: configs("c", `[{devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 1, "3g.40gb": 1}}]`),
			errors: []string{
				`mig-configs.c[0].mig-devices: no MIG board in the catalog has all of its profiles ("1g.5gb" on A100-SXM4-40GB; "3g.40gb" on H100-SXM5-80GB)`,
			},
			warnings: []string{"mig-configs.c: not checked on any board"},
			summary:  Summary{Configs: 1, Errors: 1, Warnings: 1},
		},
		{
			name:     "unknown PCI id",
			file:     configs("c", `[{device-filter: ["0xFFFF10DE", "0x20B710de"], devices: all, mig-enabled: true, mig-devices: {"4g.24gb": 1}}]`),
			checks:   map[string][]string{"c": {"0 A30-24GB ok 4g.24gb@0"}},
			warnings: []string{"mig-configs.c[0].device-filter[0]: PCI device id 0xFFFF10DE matches no board in the catalog; entry not checked for it"},
			summary:  Summary{Configs: 1, Checks: 1, Warnings: 1},
		},
		{
			name: "only unknown PCI ids",
			file: configs("c", `[{device-filter: "0xFFFF10DE", devices: all, mig-enabled: false}]`),
			warnings: []string{
				"mig-configs.c[0].device-filter[0]: PCI device id 0xFFFF10DE matches no board in the catalog; entry not checked for it",
				"mig-configs.c: not checked on any board",
			},
			summary: Summary{Configs: 1, Warnings: 2},
		},
		{
			name: "filter names a board without MIG",
			file: configs("enabled", `[{device-filter: "0x26B910DE", devices: all, mig-enabled: true, mig-devices: {}}]`,
				"disabled", `[{device-filter: "0x26B910DE", devices: all, mig-enabled: false}]`),
			checks:  map[string][]string{"enabled": {"0 L40S error"}, "disabled": {"0 L40S ok, MIG disabled"}},
			errors:  []string{"mig-configs.enabled[0] on L40S: L40S has no MIG support, but the entry enables MIG"},
			summary: Summary{Configs: 2, Checks: 2, Failures: 1, Errors: 1},
		},
		{
			// 1c.3g.20gb is a 3g.20gb GPU instance holding a 1-slice compute instance: 2 x 4 = 8 slices.
			// 4c does not fit a 3-slice GPU instance.
			name: "compute-instance prefix",
			file: configs("ok", `[{`+a100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1c.3g.20gb": 1, "3g.20gb": 1}}]`,
				"bad", `[{`+a100Filter+`, devices: all, mig-enabled: true, mig-devices: {"4c.3g.20gb": 1}}]`),
			checks:  map[string][]string{"ok": {"0 A100-SXM4-40GB ok 3g.20gb@0 3g.20gb@4"}, "bad": {"0 A100-SXM4-40GB error"}},
			errors:  []string{"mig-configs.bad[0] on A100-SXM4-40GB: compute instance of 4 slices does not fit GPU instance 3g.20gb (3 slices)"},
			summary: Summary{Configs: 2, Checks: 2, Failures: 1, Errors: 1},
		},
		{
			name: "overlapping entries",
			file: configs("c", `[{devices: [0, 1], mig-enabled: true, mig-devices: {"4g.24gb": 1}},
    {devices: [1], mig-enabled: true, mig-devices: {"2g.12gb": 2}},
    {devices: [2], mig-enabled: true, mig-devices: {"1g.6gb": 4}}]`),
			checks:   map[string][]string{"c": {"0 A30-24GB ok 4g.24gb@0", "1 A30-24GB ok 2g.12gb@0 2g.12gb@2", "2 A30-24GB ok 1g.6gb@0 1g.6gb@1 1g.6gb@2 1g.6gb@3"}},
			warnings: []string{"mig-configs.c[1] on A30-24GB: entries 0 and 1 both apply to the same GPUs; mig-parted applies them in order, so entry 1 wins"},
			summary:  Summary{Configs: 1, Checks: 3, Warnings: 1},
		},
		{
			// With a board override, mig-parted applies filter-less entries to that board whatever
			// they hold, so a missing profile is an error; entries filtered for other boards are skipped.
			name:  "board override",
			board: "A100-SXM4-40GB",
			file: configs("all-3g.40gb", `[{devices: all, mig-enabled: true, mig-devices: {"3g.40gb": 2}}]`,
				"h100-only", `[{`+h100Filter+`, devices: all, mig-enabled: false}]`,
				"balanced", `[{`+h100Filter+`, devices: all, mig-enabled: true, mig-devices: {"7g.80gb": 1}},
    {`+a100Filter+`, devices: all, mig-enabled: true, mig-devices: {"7g.40gb": 1}}]`),
			checks:   map[string][]string{"all-3g.40gb": {"0 A100-SXM4-40GB error"}, "balanced": {"1 A100-SXM4-40GB ok 7g.40gb@0"}},
			errors:   []string{`mig-configs.all-3g.40gb[0] on A100-SXM4-40GB: profile "3g.40gb" does not exist on A100-SXM4-40GB (valid: 1g.5gb, 1g.5gb+me, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)`},
			warnings: []string{"mig-configs.h100-only on A100-SXM4-40GB: no entry applies to this board (mig-parted would leave it unchanged)"},
			summary:  Summary{Configs: 3, Checks: 2, Failures: 1, Errors: 1, Warnings: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Decode(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var opts Options
			if tt.board != "" {
				opts.Board = cat.board(tt.board)
			}
			r := validate(cfg, opts, cat)
			if got := checkLines(r); !reflect.DeepEqual(got, nilIfEmpty(tt.checks)) {
				t.Errorf("checks:\n got %q\nwant %q", got, tt.checks)
			}
			if got := findingStrings(r, SeverityError); !reflect.DeepEqual(got, tt.errors) {
				t.Errorf("errors:\n got %q\nwant %q", got, tt.errors)
			}
			if got := findingStrings(r, SeverityWarning); !reflect.DeepEqual(got, tt.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", got, tt.warnings)
			}
			if r.Summary != tt.summary {
				t.Errorf("summary = %+v, want %+v", r.Summary, tt.summary)
			}
			if r.OK() != (tt.summary.Errors == 0) || (r.Err() == nil) != r.OK() {
				t.Errorf("OK() = %v, Err() = %v, want consistent with %d errors", r.OK(), r.Err(), tt.summary.Errors)
			}
		})
	}
}

func nilIfEmpty(m map[string][]string) map[string][]string {
	if m == nil {
		return map[string][]string{}
	}
	return m
}

func TestValidateFindingFields(t *testing.T) {
	cat := newFakeCatalog()
	cfg, err := Decode(configs("c", `[{`+a100Filter+`, devices: all, mig-enabled: false}, {`+h100Filter+`, devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 1}}]`))
	if err != nil {
		t.Fatal(err)
	}
	r := validate(cfg, Options{}, cat)
	fs := r.Findings()
	if len(fs) != 1 {
		t.Fatalf("findings = %v, want 1", fs)
	}
	want := Finding{Severity: SeverityError, Config: "c", Entry: 1, Board: "H100-SXM5-80GB", Profile: "1g.5gb",
		Message: `profile "1g.5gb" does not exist on H100-SXM5-80GB (valid: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`}
	if fs[0] != want {
		t.Errorf("finding = %+v, want %+v", fs[0], want)
	}
}

func TestValidateNilConfig(t *testing.T) {
	r := validate(nil, Options{}, newFakeCatalog())
	if !r.OK() || r.Summary != (Summary{}) {
		t.Errorf("validate(nil) = %+v, want an empty OK report", r)
	}
}

func TestReportText(t *testing.T) {
	cat := newFakeCatalog()
	cfg, err := Decode(configs(
		"good", `[{`+h100Filter+`, devices: all, mig-enabled: true, mig-devices: {"2g.20gb": 1, "1g.10gb": 2, "3g.40gb": 1}}]`,
		"bad", `[{device-filter: ["0xFFFF10DE", "0x20B710DE"], devices: all, mig-enabled: true, mig-devices: {"4g.24gb": 2}}]`,
		"disabled", `[{device-filter: "0x20B710DE", devices: all, mig-enabled: false}]`))
	if err != nil {
		t.Fatal(err)
	}
	r := validate(cfg, Options{}, cat)
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	// 4g.24gb takes all 4 memory slices of an A30, so at most 1 fits.
	want := `good: ok
  [0] H100-SXM5-80GB: ok 2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4
bad: FAIL
  [0] A30-24GB: error
      error: 2 x 4g.24gb exceeds its maximum of 1 on A30-24GB
  warning: mig-configs.bad[0].device-filter[0]: PCI device id 0xFFFF10DE matches no board in the catalog; entry not checked for it
disabled: ok
  [0] A30-24GB: ok, MIG disabled
summary: 3 configs, 3 checks, 1 failed, 0 not applicable, 1 errors, 1 warnings
`
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
}

func TestFormatLayout(t *testing.T) {
	// Sorted by start whatever the input order.
	l := gpu.Layout{{Profile: "3g.40gb", Start: 4}, {Profile: "1g.10gb", Start: 3}, {Profile: "2g.20gb", Start: 0}, {Profile: "1g.10gb", Start: 2}}
	if got, want := FormatLayout(l), "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4"; got != want {
		t.Errorf("FormatLayout = %q, want %q", got, want)
	}
	if l[0].Start != 4 {
		t.Error("FormatLayout reordered its argument")
	}
	if got := FormatLayout(nil); got != "" {
		t.Errorf("FormatLayout(nil) = %q, want empty", got)
	}
}

func TestValidateAbsurdCounts(t *testing.T) {
	cat := newFakeCatalog()
	// Both counts pass Check (> 0); their sum overflows int unless it saturates.
	huge := int(^uint(0) >> 1)
	cfg := &Config{Configs: []NamedConfig{{Name: "c", Entries: []Entry{{Devices: AllDevices(), MigEnabled: true,
		MigDevices: map[string]int{"1g.10gb": huge, "2g.20gb": huge}}}}}}
	r := validate(cfg, Options{Board: cat.board("H100-SXM5-80GB")}, cat)
	want := []string{"mig-configs.c[0] on H100-SXM5-80GB: " + strconv.Itoa(huge) + " instances cannot fit on H100-SXM5-80GB, which has 8 memory slices"}
	if got := findingStrings(r, SeverityError); !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %q, want %q", got, want)
	}
	// A Config that skipped Check: a zero count is reported, not placed.
	cfg.Configs[0].Entries[0].MigDevices = map[string]int{"1g.10gb": 0}
	r = validate(cfg, Options{Board: cat.board("H100-SXM5-80GB")}, cat)
	if got := findingStrings(r, SeverityError); len(got) != 1 || !strings.Contains(got[0], "count 0 of 1g.10gb must be > 0") {
		t.Errorf("errors = %q, want one zero-count error", got)
	}
}
