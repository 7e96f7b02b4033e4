package archtest

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// rule is one row of the package table: a package directory and what it may import.
type rule struct {
	dir        string   // "internal/gpu", "api/v1", "cmd/gpupool"
	everything bool     // "everything": no check
	stdlib     bool     // the standard library is allowed
	modules    []string // this module's package directories it may import
	external   []string // external import path prefixes it may import
}

// corePackages are the IO-free policy packages ("core" in the table).
var corePackages = []string{"gpu", "llm", "perf", "plan", "fair", "gate"}

// purePackages are held to the core's IO-free rules without being "core" in the table.
var purePackages = []string{"cost"}

// parseRules reads the package table (the first Markdown table whose header starts with
// "| package") from design.md.
func parseRules(r io.Reader) ([]rule, error) {
	var rules []rule
	sc := bufio.NewScanner(r)
	inTable := false
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if !inTable {
			if strings.HasPrefix(t, "| package") {
				inTable = true
			}
			continue
		}
		if !strings.HasPrefix(t, "|") {
			if len(rules) > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(t, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(t, "|"), "|")
		if len(cells) < 3 {
			return nil, fmt.Errorf("parse package table: line %d: want 3 cells, got %d", line, len(cells))
		}
		r, err := parseRow(strings.TrimSpace(cells[0]), strings.TrimSpace(cells[len(cells)-1]))
		if err != nil {
			return nil, fmt.Errorf("parse package table: line %d: %w", line, err)
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read design document: %w", err)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("parse package table: no table with a \"| package\" header found")
	}
	sort.Slice(rules, func(i, j int) bool { return len(rules[i].dir) > len(rules[j].dir) })
	return rules, nil
}

func parseRow(pkgCell, importCell string) (rule, error) {
	r := rule{dir: strings.Trim(pkgCell, "` ")}
	if r.dir == "" {
		return r, fmt.Errorf("empty package cell")
	}
	for _, tok := range strings.Split(importCell, ",") {
		tok = strings.TrimSpace(tok)
		switch {
		case tok == "":
		case tok == "everything":
			r.everything = true
		case tok == "stdlib":
			r.stdlib = true
		case tok == "core":
			for _, c := range corePackages {
				r.modules = append(r.modules, "internal/"+c)
			}
		case strings.HasPrefix(tok, "`"):
			r.external = append(r.external, strings.Trim(tok, "`"))
		case tok == "v1":
			r.modules = append(r.modules, "api/v1")
		case strings.ContainsAny(tok, " ./"):
			return r, fmt.Errorf("package %s: cannot read import token %q (use stdlib, a package name, core, everything or a back-quoted path)", r.dir, tok)
		default:
			r.modules = append(r.modules, "internal/"+tok)
		}
	}
	return r, nil
}

// ruleFor returns the row for a package directory: its own, or its nearest listed parent's.
func ruleFor(rules []rule, dir string) (rule, bool) {
	for _, r := range rules { // longest dir first
		if dir == r.dir || strings.HasPrefix(dir, r.dir+"/") {
			return r, true
		}
	}
	return rule{}, false
}

// allowed reports whether a package in dir (governed by r) may import path, where module is this
// module's path.
func (r rule) allowed(module, dir, path string) bool {
	if r.everything {
		return true
	}
	if own, ok := strings.CutPrefix(path, module+"/"); ok {
		if own == dir || strings.HasPrefix(own, dir+"/") {
			return true // its own sub-packages
		}
		for _, m := range r.modules {
			if own == m || strings.HasPrefix(own, m+"/") {
				return true
			}
		}
		return false
	}
	if isStdlib(path) {
		return r.stdlib
	}
	for _, e := range r.external {
		if path == e || strings.HasPrefix(path, e+"/") || strings.HasPrefix(path, e) && strings.HasSuffix(e, "/") {
			return true
		}
	}
	return false
}

// isStdlib: the standard library's import paths have no dot in their first element.
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}
