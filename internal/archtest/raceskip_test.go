package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The test command runs the suite under the race detector, so a test that skips under it runs
// only where scripts/test.sh runs it again without the detector. Every such test must be named
// in one of that script's non-race `go test -run` patterns for its package, or it never runs.
func TestRaceSkippedTestsRunWithoutRace(t *testing.T) {
	root, _ := repoRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Non-race runs: `go test ... -run 'PATTERN' ./pkg` lines without -race.
	runs := map[string][]*regexp.Regexp{}
	line := regexp.MustCompile(`go test [^\n]*-run '([^']+)'[^\n]*?(\./[A-Za-z0-9_/]+)`)
	for _, l := range strings.Split(string(script), "\n") {
		if strings.Contains(l, "-race") || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		for _, m := range line.FindAllStringSubmatch(l, -1) {
			re, err := regexp.Compile(m[1])
			if err != nil {
				t.Fatalf("scripts/test.sh: -run %q: %v", m[1], err)
			}
			pkg := strings.TrimPrefix(m[2], "./")
			runs[pkg] = append(runs[pkg], re)
		}
	}
	var missing, found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			if !skipsUnderRace(fn.Body) {
				continue
			}
			found = append(found, rel+"."+fn.Name.Name)
			ran := false
			for _, re := range runs[filepath.ToSlash(rel)] {
				ran = ran || re.MatchString(fn.Name.Name)
			}
			if !ran {
				missing = append(missing, filepath.ToSlash(rel)+" "+fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no test skips under the race detector: the check found nothing to check (did the name raceEnabled change?)")
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s skips under the race detector and no non-race run of scripts/test.sh names it: it never runs", m)
	}
}

// skipsUnderRace: the body has an `if` whose condition reads raceEnabled and whose block calls
// a Skip method (t.Skip, t.Skipf, t.SkipNow).
func skipsUnderRace(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		is, ok := n.(*ast.IfStmt)
		if !ok || found {
			return !found
		}
		reads := false
		ast.Inspect(is.Cond, func(c ast.Node) bool {
			if id, ok := c.(*ast.Ident); ok && id.Name == "raceEnabled" {
				reads = true
			}
			return true
		})
		if !reads {
			return true
		}
		ast.Inspect(is.Body, func(c ast.Node) bool {
			if sel, ok := c.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
				found = true
			}
			return true
		})
		return true
	})
	return found
}
