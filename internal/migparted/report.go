package migparted

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// Severity grades a Finding.
type Severity string

const (
	// SeverityError marks a config that mig-parted would reject or fail to apply.
	SeverityError Severity = "error"
	// SeverityWarning marks something suspicious that does not stop the config from working,
	// e.g. a device-filter id this catalog does not know.
	SeverityWarning Severity = "warning"
)

// Finding is one problem Validate found. Entry is -1 when it is about the config as a whole;
// Field, Board and Profile are empty when they do not apply.
type Finding struct {
	Severity Severity
	Config   string
	Entry    int
	Field    string // within the entry, e.g. "device-filter[2]"
	Board    string
	Profile  string
	Message  string
}

// Error renders the finding as `mig-configs.NAME[ENTRY].FIELD on BOARD: MESSAGE`.
func (f Finding) Error() string {
	p := configPath(f.Config)
	if f.Entry >= 0 {
		p = entryPath(f.Config, f.Entry)
	}
	if f.Field != "" {
		p += "." + f.Field
	}
	if f.Board != "" {
		p += " on " + f.Board
	}
	return p + ": " + f.Message
}

// Check is the result of one entry of one config on one board.
type Check struct {
	Entry      int
	Board      string
	MigEnabled bool
	// Layout is where the entry's instances go on the board (sorted by start), when the check
	// passed and MIG is enabled.
	Layout gpu.Layout
	// NotApplicable marks a filter-less entry that does not fit this board although it fits
	// others: the file means it for those. Its Findings are then warnings.
	NotApplicable bool
	// Findings say why the check failed: errors, or warnings when NotApplicable.
	Findings []Finding
}

// OK reports whether the check has no error: the entry can be applied on the board, or it is
// not meant for it.
func (c Check) OK() bool {
	for _, f := range c.Findings {
		if f.Severity == SeverityError {
			return false
		}
	}
	return true
}

// ConfigReport is everything Validate found about one named config.
type ConfigReport struct {
	Name   string
	Checks []Check
	// Findings are the problems not tied to one check: unknown device-filter ids or profiles,
	// profiles no single board has, entries that overlap, a config checked on no board.
	Findings []Finding
}

// OK reports whether the config has no errors (warnings allowed).
func (c ConfigReport) OK() bool {
	for _, ch := range c.Checks {
		if !ch.OK() {
			return false
		}
	}
	for _, f := range c.Findings {
		if f.Severity == SeverityError {
			return false
		}
	}
	return true
}

// Summary counts a Report.
type Summary struct {
	Configs  int // named configs validated
	Checks   int // (config, entry, board) checks run
	Failures int // checks that failed
	Skipped  int // checks of filter-less entries on boards they are not meant for (NotApplicable)
	Errors   int // error findings, inside checks and out
	Warnings int // warning findings
}

// Report is the result of Validate: per config, per board, in file order.
type Report struct {
	Board   string // the board every entry was validated against; empty without an override
	Configs []ConfigReport
	Summary Summary
}

// OK reports whether no config has an error.
func (r Report) OK() bool { return r.Summary.Errors == 0 }

// Findings returns every finding in report order: per config, its checks' findings, then the rest.
func (r Report) Findings() []Finding {
	var out []Finding
	for _, c := range r.Configs {
		for _, ch := range c.Checks {
			out = append(out, ch.Findings...)
		}
		out = append(out, c.Findings...)
	}
	return out
}

// Err joins the error findings, or returns nil when there are none.
func (r Report) Err() error {
	var errs []error
	for _, f := range r.Findings() {
		if f.Severity == SeverityError {
			errs = append(errs, f)
		}
	}
	return errors.Join(errs...)
}

func (r *Report) summarize() {
	s := Summary{Configs: len(r.Configs)}
	for _, c := range r.Configs {
		s.Checks += len(c.Checks)
		for _, ch := range c.Checks {
			if !ch.OK() {
				s.Failures++
			}
			if ch.NotApplicable {
				s.Skipped++
			}
		}
	}
	for _, f := range r.Findings() {
		if f.Severity == SeverityError {
			s.Errors++
		} else {
			s.Warnings++
		}
	}
	r.Summary = s
}

// WriteText writes the report for people: one block per config, one line per check, then the
// config's other findings, then a summary line.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, c := range r.Configs {
		fmt.Fprintf(&b, "%s: %s\n", c.Name, configStatus(c))
		for _, ch := range c.Checks {
			fmt.Fprintf(&b, "  [%d] %s: %s\n", ch.Entry, ch.Board, checkText(ch))
			for _, f := range ch.Findings {
				fmt.Fprintf(&b, "      %s: %s\n", f.Severity, f.Message)
			}
		}
		for _, f := range c.Findings {
			fmt.Fprintf(&b, "  %s: %s\n", f.Severity, f.Error())
		}
	}
	s := r.Summary
	fmt.Fprintf(&b, "summary: %d configs, %d checks, %d failed, %d not applicable, %d errors, %d warnings",
		s.Configs, s.Checks, s.Failures, s.Skipped, s.Errors, s.Warnings)
	if r.Board != "" {
		fmt.Fprintf(&b, " (board %s)", r.Board)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func configStatus(c ConfigReport) string {
	if !c.OK() {
		return "FAIL"
	}
	for _, ch := range c.Checks {
		if !ch.NotApplicable {
			return "ok"
		}
	}
	return "not checked"
}

func checkText(ch Check) string {
	switch {
	case ch.NotApplicable:
		return "not applicable"
	case !ch.OK():
		return "error"
	case !ch.MigEnabled:
		return "ok, MIG disabled"
	case len(ch.Layout) == 0:
		return "ok, MIG enabled, no instances"
	default:
		return "ok " + FormatLayout(ch.Layout)
	}
}

// FormatLayout renders a layout as `profile@start` words sorted by start, e.g.
// `2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4`.
func FormatLayout(l gpu.Layout) string {
	words := make([]string, len(l))
	for i, in := range sortedLayout(l) {
		words[i] = fmt.Sprintf("%s@%d", in.Profile, in.Start)
	}
	return strings.Join(words, " ")
}

func sortedLayout(l gpu.Layout) gpu.Layout {
	out := append(gpu.Layout(nil), l...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].Profile < out[j].Profile
	})
	return out
}
