package perf

import (
	"strconv"
	"strings"
)

func pad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(" ", n-len(s))
}

func itoa(i int) string { return strconv.Itoa(i) }

func ftoa(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }
