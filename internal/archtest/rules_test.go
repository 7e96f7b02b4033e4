package archtest

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

const sampleTable = `# x
| package | owns | may import |
|---|---|---|
| ` + "`cmd/tool`" + ` | main | everything |
| ` + "`internal/gpu`" + ` | boards | stdlib |
| ` + "`internal/plan`" + ` | planner | stdlib, gpu, v1, ` + "`gonum.org/v1/gonum`" + ` |
| ` + "`internal/sim`" + ` | sim | core |

after the table
`

func TestRulesDecideImports(t *testing.T) {
	rules, err := parseRules(strings.NewReader(sampleTable))
	if err != nil {
		t.Fatal(err)
	}
	const mod = "example.com/m"
	cases := []struct {
		dir, imp string
		want     bool
	}{
		{"internal/gpu", "fmt", true},
		{"internal/gpu", "example.com/m/internal/llm", false},
		{"internal/gpu", "sigs.k8s.io/yaml", false},
		{"internal/gpu/sub", "fmt", true},                        // follows its parent's row
		{"internal/gpu", "example.com/m/internal/gpu/sub", true}, // own sub-package
		{"internal/plan", "example.com/m/internal/gpu", true},    // listed
		{"internal/plan", "example.com/m/api/v1", true},          // v1 token
		{"internal/plan", "example.com/m/internal/gpuX", false},  // prefix is not a package
		{"internal/plan", "gonum.org/v1/gonum/optimize", true},   // external prefix
		{"internal/plan", "gonum.org/v1/gonumx", false},          // not a path prefix
		{"internal/sim", "fmt", false},                           // no stdlib token
		{"internal/sim", "example.com/m/internal/fair", true},    // core
		{"cmd/tool", "k8s.io/client-go/kubernetes", true},        // everything
	}
	for _, c := range cases {
		r, ok := ruleFor(rules, c.dir)
		if !ok {
			t.Fatalf("no rule for %s", c.dir)
		}
		if got := r.allowed(mod, c.dir, c.imp); got != c.want {
			t.Errorf("%s importing %s: allowed=%v, want %v", c.dir, c.imp, got, c.want)
		}
	}
	if _, ok := ruleFor(rules, "internal/unknown"); ok {
		t.Error("an unlisted package must have no rule")
	}
}

func TestParseRulesRejectsUnreadableToken(t *testing.T) {
	bad := "| package | owns | may import |\n|---|---|---|\n| `a` | x | client go |\n"
	if _, err := parseRules(strings.NewReader(bad)); err == nil {
		t.Fatal("want an error for an unreadable token")
	}
	if _, err := parseRules(strings.NewReader("no table here")); err == nil {
		t.Fatal("want an error when there is no table")
	}
}

func TestCoreCallViolationsFollowImportNames(t *testing.T) {
	src := `package p
import (
	"fmt"
	clock "time"
	"math/rand"
)
func f() { _ = clock.Now(); _ = rand.Intn(3); r := rand.New(rand.NewSource(1)); _ = r.Intn(2); _ = clock.Duration(1); fmt.Println(fmt.Sprintf("x")) }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(coreCallViolations(f), ",")
	if got != "clock.Now,rand.Intn,fmt.Println" {
		t.Errorf("violations = %q, want clock.Now,rand.Intn,fmt.Println (r.Intn on an explicit *rand.Rand and fmt.Sprintf are fine)", got)
	}
}
