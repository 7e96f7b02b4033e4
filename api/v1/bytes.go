package v1

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
)

// Bytes is a size in bytes, written in Kubernetes quantity style:
//
//   - plain bytes: 1048576
//   - binary units (powers of 1024): Ki, Mi, Gi, Ti, Pi, also spelled KiB, MiB, GiB, TiB, PiB
//   - decimal units (powers of 1000): K (or k), M, G, T, P, also spelled KB, MB, GB, TB, PB
//
// A fractional number is allowed when the result is a whole number of bytes ("1.5Gi" is
// 1610612736; "0.1Ki" is rejected). Negative sizes and sizes above 2^63-1 bytes are rejected.
//
// It encodes to the shortest exact form among plain bytes, the largest binary unit and the
// largest decimal unit that divide it evenly, preferring binary on a tie: 42949672960 → "40Gi",
// 80000000000 → "80GB", 1000 → "1KB", 1536 → "1536", 0 → "0". That form decodes to the same value.
type Bytes int64

// Units of Bytes.
const (
	KiB Bytes = 1 << 10
	MiB Bytes = 1 << 20
	GiB Bytes = 1 << 30
	TiB Bytes = 1 << 40
)

var bytesRE = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]+))?([A-Za-z]*)$`)

var byteUnits = map[string]int64{
	"": 1, "B": 1,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
	"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
	"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
}

const bytesHint = `want a whole number of bytes or a number with a unit, like "512Mi", "40Gi" or "80GB"`

// ParseBytes parses a size such as "40Gi", "512Mi", "80GB" or "1048576".
func ParseBytes(s string) (Bytes, error) {
	m := bytesRE.FindStringSubmatch(s)
	if m == nil {
		if len(s) > 0 && s[0] == '-' {
			return 0, fmt.Errorf("invalid size %q: must not be negative", s)
		}
		return 0, fmt.Errorf("invalid size %q: %s", s, bytesHint)
	}
	unit, ok := byteUnits[m[3]]
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (valid: Ki, Mi, Gi, Ti, Pi, K, M, G, T, P, optionally followed by B)", s, m[3])
	}
	num, ok := new(big.Rat).SetString(m[1] + "." + m[2] + "0")
	if !ok {
		return 0, fmt.Errorf("invalid size %q: %s", s, bytesHint)
	}
	num.Mul(num, new(big.Rat).SetInt64(unit))
	if !num.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	if !num.Num().IsInt64() {
		return 0, fmt.Errorf("invalid size %q: larger than %d bytes", s, int64(math.MaxInt64))
	}
	return Bytes(num.Num().Int64()), nil
}

// String returns the canonical form described on Bytes.
func (b Bytes) String() string {
	if b < 0 {
		return strconv.FormatInt(int64(b), 10)
	}
	best := strconv.FormatInt(int64(b), 10)
	if b == 0 {
		return best
	}
	candidates := []string{
		exactUnit(int64(b), 1024, []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}),
		exactUnit(int64(b), 1000, []string{"KB", "MB", "GB", "TB", "PB", "EB"}),
	}
	for _, c := range candidates {
		if c != "" && len(c) < len(best) {
			best = c
		}
	}
	return best
}

// exactUnit writes v with the largest unit (base^k) that divides it evenly, or "" when none does.
// "Ei"/"EB" are only reached for values ≥ 2^60 or 10^18 and parse back through big.Rat below.
func exactUnit(v, base int64, names []string) string {
	k := -1
	for v%base == 0 && k+1 < len(names) {
		v /= base
		k++
	}
	if k < 0 {
		return ""
	}
	if names[k] == "Ei" || names[k] == "EB" {
		// Not accepted by ParseBytes; spell the next smaller unit instead.
		return strconv.FormatInt(v*base, 10) + names[k-1]
	}
	return strconv.FormatInt(v, 10) + names[k]
}

// MarshalJSON encodes b as a JSON string in its canonical form.
func (b Bytes) MarshalJSON() ([]byte, error) {
	return json.Marshal(b.String())
}

// UnmarshalJSON accepts a JSON string ("40Gi") or a non-negative JSON integer (plain bytes).
func (b *Bytes) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		s = string(data)
	}
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}
