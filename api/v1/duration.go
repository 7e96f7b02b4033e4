package v1

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Duration is a span of time written in Go duration syntax: "500ms", "1.5s", "2m", "1h30m".
// Units are ns, us (or µs), ms, s, m and h; a unit is required (a bare number is rejected,
// because "ttftP99: 200" could mean milliseconds or seconds).
//
// It encodes to its canonical form, Go's time.Duration.String() with zero trailing minute and
// second parts dropped ("2m0s" → "2m", "1h0m0s" → "1h"), so a decoded value re-encodes to a
// stable string that decodes to the same value.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
type Duration time.Duration

// ParseDuration parses a duration string such as "500ms" or "1.5s".
func ParseDuration(s string) (Duration, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit, like \"500ms\", \"1.5s\" or \"2m\"", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit, like \"500ms\", \"1.5s\" or \"2m\"", s)
	}
	return Duration(d), nil
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String returns the canonical form: "500ms", "1.5s", "2m", "1h30m", "0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalJSON encodes d as its canonical string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON accepts a JSON string in Go duration syntax.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("invalid duration %s: want a string with a unit, like \"500ms\", \"1.5s\" or \"2m\"", b)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
