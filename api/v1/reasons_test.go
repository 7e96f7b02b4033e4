package v1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReasonCodesAreDeclaredDocumentedAndListed reads reasons.go: every ReasonCode constant must
// have a doc comment naming it, a value equal to its name without the "Reason" prefix, and a row
// in reasonTable; and the table holds nothing else.
func TestReasonCodesAreDeclaredDocumentedAndListed(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "reasons.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var declared []ReasonCode
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ReasonCode" {
				continue
			}
			name := vs.Names[0].Name
			value, _ := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
			if want := strings.TrimPrefix(name, "Reason"); value != want {
				t.Errorf("%s = %q, want %q", name, value, want)
			}
			if vs.Doc == nil || !strings.HasPrefix(vs.Doc.Text(), name+": ") {
				t.Errorf("%s has no doc comment starting %q", name, name+": ")
			}
			declared = append(declared, ReasonCode(value))
		}
	}
	slices.Sort(declared)
	if got := ReasonCodes(); !slices.Equal(got, declared) {
		t.Errorf("reasonTable = %v\ndeclared   = %v", got, declared)
	}
	if len(declared) < 20 {
		t.Errorf("only %d codes found; is the parser looking at the right declarations?", len(declared))
	}
}

func TestNewReason(t *testing.T) {
	r := NewReason(ReasonGateCooldown, "GPU %s was re-partitioned %s ago", "gpu-node-a/3", "12m")
	want := Reason{Code: ReasonGateCooldown, Message: "GPU gpu-node-a/3 was re-partitioned 12m ago", Retryable: true}
	if r != want {
		t.Errorf("NewReason = %+v, want %+v", r, want)
	}
	if NewReason(ReasonNoFit, "x").Retryable {
		t.Error("NoFit should not be retryable: the model will not fit later either")
	}
	if ReasonCode("Nope").Known() || !ReasonOverCap.Known() {
		t.Error("Known is wrong")
	}
}

// A plan tenant's Reason finds the first reason with a code, and says when there is none.
func TestPlanTenantReason(t *testing.T) {
	pt := PlanTenant{Name: "a", Reasons: []Reason{
		{Code: ReasonComputeBound, Message: "first"}, {Code: ReasonSimulated, Message: "sim"}, {Code: ReasonSimulated, Message: "again"},
	}}
	if r, ok := pt.Reason(ReasonSimulated); !ok || r.Message != "sim" {
		t.Errorf("Reason(Simulated) = %+v, %v; want the first Simulated reason", r, ok)
	}
	if r, ok := pt.Reason(ReasonNoCapacity); ok || r != (Reason{}) {
		t.Errorf("Reason(NoCapacity) = %+v, %v; want none", r, ok)
	}
}
