package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// Validator checks documents against a Catalog. The zero Validator uses Builtin.
type Validator struct {
	Catalog Catalog
}

// Validate checks a Pool with the built-in catalog and returns every problem as FieldErrors, or
// nil. Run Default first: Validate accepts unset fields (they mean "use the default") but checks
// the header, so a Pool built in code needs apiVersion and kind.
func Validate(p *Pool) error { return Validator{}.Pool(p) }

// ValidatePlan checks a Plan, and its agreement with pool when pool is not nil, with the built-in
// catalog; it returns every problem as FieldErrors, or nil.
func ValidatePlan(plan *Plan, pool *Pool) error { return Validator{}.Plan(plan, pool) }

func (v Validator) catalog() Catalog {
	if v.Catalog == nil {
		return Builtin
	}
	return v.Catalog
}

// boards memoises catalog board lookups for one validation run.
type boards struct {
	cat   Catalog
	found map[string]*gpu.Board
	names []string
}

func newBoards(cat Catalog) *boards {
	return &boards{cat: cat, found: map[string]*gpu.Board{}}
}

// check resolves name, reporting an unknown board at path; it returns nil when unknown.
func (b *boards) check(errs *errList, path, name string) *gpu.Board {
	if name == "" {
		errs.add(path, "required")
		return nil
	}
	if bd, ok := b.found[name]; ok {
		if bd == nil {
			errs.add(path, "unknown board %q (valid: %s)", name, b.valid())
		}
		return bd
	}
	bd, err := b.cat.Board(name)
	if err != nil {
		bd = nil
		errs.add(path, "unknown board %q (valid: %s)", name, b.valid())
	}
	b.found[name] = bd
	return bd
}

func (b *boards) valid() string {
	if b.names == nil {
		b.names = b.cat.BoardNames()
	}
	return listOrNone(b.names)
}

func listOrNone[T ~string](items []T) string {
	if len(items) == 0 {
		return "none known"
	}
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = string(it)
	}
	return strings.Join(s, ", ")
}

// checkHeader checks apiVersion and kind of a document built in code or decoded.
func checkHeader(errs *errList, apiVersion, kind, wantKind string) {
	if apiVersion != APIVersion {
		errs.add("apiVersion", "must be %q (got %q)", APIVersion, apiVersion)
	}
	if kind != wantKind {
		errs.add("kind", "must be %q (got %q)", wantKind, kind)
	}
}

var (
	labelRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
)

const (
	labelRule     = "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
	subdomainRule = "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit, at most 253 characters"
)

func isLabel(s string) bool { return len(s) <= 63 && labelRE.MatchString(s) }

func isSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !isLabel(part) {
			return false
		}
	}
	return true
}

// checkName reports a missing or malformed name; subdomain selects the DNS-1123 subdomain rule
// over the label rule.
func checkName(errs *errList, path, name string, subdomain bool) {
	switch {
	case name == "":
		errs.add(path, "required")
	case subdomain && !isSubdomain(name):
		errs.add(path, "%s (got %q)", subdomainRule, name)
	case !subdomain && !isLabel(name):
		errs.add(path, "%s (got %q)", labelRule, name)
	}
}

// checkLabels checks Kubernetes label syntax: key [prefix/]name, name and value at most 63
// characters of letters, digits, '-', '_' and '.', starting and ending alphanumeric.
func checkLabels(errs *errList, path string, labels map[string]string) {
	for k, v := range labels {
		p := key(path, k)
		prefix, name, hasPrefix := strings.Cut(k, "/")
		if !hasPrefix {
			prefix, name = "", k
		}
		if (hasPrefix && !isSubdomain(prefix)) || len(name) > 63 || !labelNameRE.MatchString(name) {
			errs.add(p, "invalid label key %q: want [prefix/]name, the name at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k)
		}
		if v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
			errs.add(p, "invalid label value %q: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", v)
		}
	}
}

// checkEnum reports a value outside valid; empty is allowed (it means the default).
func checkEnum[T ~string](errs *errList, path string, v T, valid []T) {
	if v != "" && !slices.Contains(valid, v) {
		errs.add(path, "unknown value %q (valid: %s)", string(v), listOrNone(valid))
	}
}

// dupTracker remembers where each name was first seen.
type dupTracker map[string]string

// check reports name at path when it was seen before, else remembers path.
func (d dupTracker) check(errs *errList, path, what, name string) {
	if first, ok := d[name]; ok {
		errs.add(path, "duplicate %s %q (first at %s)", what, name, first)
		return
	}
	d[name] = path
}

// fleetGPUs flattens a fleet: node name → board name per GPU index. Counts outside 0–64 are
// clamped, and expansion stops at MaxFleetGPUs GPUs in all (later nodes get none), so that a
// malformed document cannot make this allocate without bound; Validate reports both.
func fleetGPUs(f Fleet) map[string][]string {
	out := make(map[string][]string, min(len(f.Nodes), MaxFleetGPUs))
	total := 0
	for _, n := range f.Nodes {
		if _, dup := out[n.Name]; dup {
			continue
		}
		var gpus []string
		for _, g := range n.GPUs {
			for range min(max(g.Count, 0), maxGPUsPerNode) {
				if len(gpus) < maxGPUsPerNode && total < MaxFleetGPUs {
					gpus = append(gpus, g.Board)
					total++
				}
			}
		}
		out[n.Name] = gpus
	}
	return out
}

// fleetSize counts a fleet's GPUs, each group's count clamped to 0–64.
func fleetSize(f Fleet) int {
	total := 0
	for _, n := range f.Nodes {
		for _, g := range n.GPUs {
			total += min(max(g.Count, 0), maxGPUsPerNode)
		}
	}
	return total
}

// maxGPUsPerNode bounds a node's GPU count; the largest single systems today hold 16.
const maxGPUsPerNode = 64

// checkGPURef reports a reference to a node or index the fleet does not have.
func checkGPURef(errs *errList, path string, r GPURef, fleet map[string][]string) bool {
	gpus, ok := fleet[r.Node]
	if !ok {
		errs.add(path, "unknown node %q", r.Node)
		return false
	}
	if r.Index < 0 || r.Index >= len(gpus) {
		errs.add(path, "node %q has %s, got index %d", r.Node, gpuRange(len(gpus)), r.Index)
		return false
	}
	return true
}

func gpuRange(n int) string {
	switch n {
	case 0:
		return "no GPUs"
	case 1:
		return "1 GPU (index 0)"
	}
	return strconv.Itoa(n) + " GPUs (indices 0–" + strconv.Itoa(n-1) + ")"
}

func quoted(v fmt.Stringer) string { return strconv.Quote(v.String()) }
