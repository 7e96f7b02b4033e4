package archtest

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// coreForbiddenImports are standard-library packages that mean IO, which the policy core must not do.
var coreForbiddenImports = []string{"os", "os/exec", "os/signal", "net", "net/http", "log", "log/slog",
	"io/ioutil", "syscall", "runtime/pprof", "plugin", "database/sql"}

// coreForbiddenCalls are package-level functions that read the clock or global randomness, or
// write to the process's standard streams.
var coreForbiddenCalls = map[string][]string{
	"fmt":  {"Print", "Printf", "Println", "Scan", "Scanf", "Scanln"},
	"time": {"Now", "Since", "Until", "Sleep", "After", "Tick", "NewTimer", "NewTicker", "AfterFunc"},
	"rand": {"Int", "Intn", "Int31", "Int31n", "Int63", "Int63n", "Uint32", "Uint64", "Float32", "Float64",
		"Perm", "Shuffle", "Seed", "Read", "N", "IntN", "Int64", "Int64N", "Uint64N", "Uint32N", "NormFloat64", "ExpFloat64"},
}

type pkgFiles struct {
	dir   string
	files []*ast.File
	names []string
}

func repoRoot(t *testing.T) (root, module string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("open go.mod: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return root, strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod has no module line")
	return "", ""
}

// loadPackages parses the non-test Go files of every package directory under root.
func loadPackages(t *testing.T, root string) []pkgFiles {
	t.Helper()
	byDir := map[string]*pkgFiles{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir // a nested module is not part of this one
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := byDir[rel]
		if p == nil {
			p = &pkgFiles{dir: rel}
			byDir[rel] = p
		}
		p.files = append(p.files, f)
		p.names = append(p.names, name)
		return nil
	})
	if err != nil {
		t.Fatalf("walk repository: %v", err)
	}
	var out []pkgFiles
	for _, p := range byDir {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}

func TestImportsFollowDesignTable(t *testing.T) {
	root, module := repoRoot(t)
	f, err := os.Open(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatalf("open design document: %v", err)
	}
	rules, err := parseRules(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pkgs := loadPackages(t, root)
	if len(pkgs) < 3 {
		t.Fatalf("found only %d packages under %s: the walk is broken", len(pkgs), root)
	}
	for _, p := range pkgs {
		r, ok := ruleFor(rules, p.dir)
		if !ok {
			t.Errorf("package %s is not in the package table of docs/design.md: add a row", p.dir)
			continue
		}
		for i, file := range p.files {
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !r.allowed(module, p.dir, path) {
					t.Errorf("%s/%s imports %q, which the %s row of docs/design.md does not allow", p.dir, p.names[i], path, r.dir)
				}
			}
		}
	}
}

func TestCoreDoesNoIO(t *testing.T) {
	root, _ := repoRoot(t)
	for _, p := range loadPackages(t, root) {
		if !isCore(p.dir) {
			continue
		}
		for i, file := range p.files {
			where := p.dir + "/" + p.names[i]
			for _, name := range coreImportViolations(file) {
				t.Errorf("%s imports %q: the policy core does no IO (take an io.Reader, fs.FS or value instead)", where, name)
			}
			for _, call := range coreCallViolations(file) {
				t.Errorf("%s calls %s: the policy core takes time and randomness as arguments", where, call)
			}
		}
	}
}

func isCore(dir string) bool {
	for _, c := range append(corePackages, purePackages...) {
		if dir == "internal/"+c || strings.HasPrefix(dir, "internal/"+c+"/") {
			return true
		}
	}
	return false
}

func coreImportViolations(f *ast.File) []string {
	var bad []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		for _, forbidden := range coreForbiddenImports {
			if path == forbidden {
				bad = append(bad, path)
			}
		}
	}
	return bad
}

// coreCallViolations finds pkg.Func selectors on the time and math/rand packages' clock and global
// functions, following the file's import names.
func coreCallViolations(f *ast.File) []string {
	local := map[string]string{} // local name → "time" | "rand"
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		var key string
		switch path {
		case "time":
			key = "time"
		case "math/rand", "math/rand/v2":
			key = "rand"
		case "fmt":
			key = "fmt"
		default:
			continue
		}
		name := key
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = key
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		key, ok := local[id.Name]
		if !ok {
			return true
		}
		for _, fn := range coreForbiddenCalls[key] {
			if sel.Sel.Name == fn {
				bad = append(bad, id.Name+"."+fn)
			}
		}
		return true
	})
	return bad
}
