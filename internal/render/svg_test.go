package render

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"unicode/utf8"
)

// rgbDistance is the Euclidean distance of two "#rrggbb" colours in RGB, 0–441.
func rgbDistance(a, b string) float64 {
	var d float64
	for i := 1; i < 7; i += 2 {
		x, _ := strconv.ParseUint(a[i:i+2], 16, 8)
		y, _ := strconv.ParseUint(b[i:i+2], 16, 8)
		d += (float64(x) - float64(y)) * (float64(x) - float64(y))
	}
	return math.Sqrt(d)
}

// Tenants of one group (chat-00 … chat-17, consecutive in name order) get clearly different
// colours: every two of 18 are at least 25 apart in RGB (of 441; the closest of Kelly's pairs,
// vivid yellow and vivid greenish yellow, are 28 apart). Hashing the names, as before, gave
// pairs 10 apart. Past 18 the colours repeat.
func TestTenantColorsDistinct(t *testing.T) {
	var names []string
	for i := range 19 {
		names = append(names, fmt.Sprintf("chat-%02d", i))
	}
	colors := TenantColors(names)
	for i, a := range names[:18] {
		for _, b := range names[i+1 : 18] {
			if d := rgbDistance(colors[a], colors[b]); d < 25 {
				t.Errorf("%s %s and %s %s are %.0f apart", a, colors[a], b, colors[b], d)
			}
		}
	}
	if colors[names[18]] != colors[names[0]] {
		t.Errorf("the 19th tenant has %s, want the first colour again", colors[names[18]])
	}
	again := TenantColors([]string{names[3], names[0], names[2], names[1]})
	if again[names[0]] != TenantColors(names[:4])[names[0]] {
		t.Error("colours depend on the order tenants are given in")
	}
}

// A label never runs past its cell: it is set smaller, cut, or left out.
func TestFitLabel(t *testing.T) {
	for _, tc := range []struct {
		s     string
		wd    int
		want  string
		wantS int
	}{
		{"chat/0", 560, "chat/0", 12},                   // 6 × 7.2 = 43 px
		{"code-complete/12", 70, "code-complete/12", 9}, // 16 × 7.2 = 115 > 66; 16 × 5.4 = 86 > 66 → cut
		{"summarizer/0", 80, "summarizer/0", 9},         // 12 × 7.2 = 86 > 76; 12 × 5.4 = 65 ≤ 76
		{"abc", 10, "", 9},                              // room 6 px: under two characters
	} {
		got, size := fitLabel(tc.s, tc.wd)
		if tc.s == "code-complete/12" {
			tc.want = "code-complete/12"[:11] + "…" // int(66 / 5.4) − 1 = 11 characters
		}
		if got != tc.want || size != tc.wantS {
			t.Errorf("fitLabel(%q, %d) = %q, %d; want %q, %d", tc.s, tc.wd, got, size, tc.want, tc.wantS)
		}
		if w := float64(utf8.RuneCountInString(got)) * svgCharEm * float64(size); w > float64(tc.wd-4) {
			t.Errorf("fitLabel(%q, %d) = %q is %.0f px wide", tc.s, tc.wd, got, w)
		}
	}
}
