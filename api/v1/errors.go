package v1

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// FieldError is one problem in a document, at a field path such as `tenants[2].slo.ttftP99`.
// An empty Path means the document as a whole (for example a YAML syntax error).
type FieldError struct {
	Path string
	Msg  string
}

// Error returns "path: msg", or msg alone when the path is empty.
func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// FieldErrors is every problem found in one document. Decode, Validate and ValidatePlan return
// it sorted by path (field names alphabetically, list indices numerically), then by message.
type FieldErrors []FieldError

// Error returns one problem per line.
func (l FieldErrors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sortFieldErrors orders l by path segments (indices numerically), then message, and drops exact
// duplicates.
func sortFieldErrors(l FieldErrors) FieldErrors {
	sort.SliceStable(l, func(i, j int) bool {
		if c := comparePaths(l[i].Path, l[j].Path); c != 0 {
			return c < 0
		}
		return l[i].Msg < l[j].Msg
	})
	out := l[:0]
	for i, e := range l {
		if i > 0 && e == l[i-1] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// comparePaths compares two field paths segment by segment; a bracketed index compares
// numerically, so tenants[2] sorts before tenants[10].
func comparePaths(a, b string) int {
	sa, sb := splitPath(a), splitPath(b)
	for i := 0; i < len(sa) && i < len(sb); i++ {
		if c := compareSegments(sa[i], sb[i]); c != 0 {
			return c
		}
	}
	return len(sa) - len(sb)
}

func compareSegments(a, b string) int {
	na, errA := strconv.Atoi(a)
	nb, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return na - nb
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// splitPath turns `a.b[3].c` into ["a", "b", "3", "c"].
func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
}

// errList collects field errors while a document is checked.
type errList struct {
	errs FieldErrors
	// rewrote is set when the shape check changed a value (a number read as a string).
	rewrote bool
}

func (e *errList) add(path, format string, args ...any) {
	e.errs = append(e.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// result returns nil when nothing was found, else the sorted list.
func (e *errList) result() error {
	if len(e.errs) == 0 {
		return nil
	}
	return sortFieldErrors(e.errs)
}

// field appends a named field to a path.
func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// index appends a list index to a path.
func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// key appends a map key to a path; keys that are not plain words are quoted.
func key(path, k string) string {
	plain := k != ""
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			plain = false
			break
		}
	}
	if plain {
		return field(path, k)
	}
	return path + "[" + strconv.Quote(k) + "]"
}
