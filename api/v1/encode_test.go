package v1

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestEncodeRoundTrip decodes each example, encodes it as YAML and as JSON, decodes that again
// and expects an equal value and byte-identical second encodings.
func TestEncodeRoundTrip(t *testing.T) {
	for _, name := range []string{"pool-valid.yaml", "plan-valid.yaml", "pool-invalid.yaml"} {
		first, err := Decode(readTestdata(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, enc := range []func(Document) ([]byte, error){EncodeYAML, EncodeJSON} {
			b1, err := enc(first)
			if err != nil {
				t.Fatal(err)
			}
			second, err := Decode(b1)
			if err != nil {
				t.Fatalf("%s: re-decode: %v\n%s", name, err, b1)
			}
			if !reflect.DeepEqual(first, second) {
				t.Errorf("%s: value changed across encode/decode", name)
			}
			b2, _ := enc(second)
			if !bytes.Equal(b1, b2) {
				t.Errorf("%s: second encoding differs:\n%s\n---\n%s", name, b1, b2)
			}
		}
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	p := loadValidPool(t)
	p.Fleet.Nodes[0].Labels = map[string]string{"z": "1", "a": "2", "m": "3", "b": "4", "y": "5"}
	first, _ := EncodeYAML(p)
	for range 20 { // map iteration order varies between runs; the output must not
		again, _ := EncodeYAML(p)
		if !bytes.Equal(first, again) {
			t.Fatal("EncodeYAML output varies")
		}
	}
}

func TestEncodeOmitsUnsetAndKeepsExplicitZero(t *testing.T) {
	p := &Pool{APIVersion: APIVersion, Kind: KindPool, Metadata: Metadata{Name: "p"},
		Policy:  Policy{BurstPoolPercent: ptr(0)},
		Tenants: []Tenant{{Name: "a", SLO: SLO{TTFTP99: ptr(Duration(0))}, Model: Model{Name: "m"}}}}
	b, err := EncodeYAML(p)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"burstPoolPercent: 0\n", "ttftP99: 0s\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	for _, absent := range []string{"weight", "cap", "replicas", "canaryGPUs", "traffic", "dir"} {
		if strings.Contains(got, absent) {
			t.Errorf("unset %q encoded in\n%s", absent, got)
		}
	}
}

func TestEncodeQuotesAmbiguousStrings(t *testing.T) {
	p := &Pool{APIVersion: APIVersion, Kind: KindPool, Metadata: Metadata{Name: "no"},
		Fleet: Fleet{Nodes: []Node{{Name: "123", GPUs: []GPUGroup{{Board: "true", Count: 1}}}}}}
	b, _ := EncodeYAML(p)
	back, err := DecodePool(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("round trip changed the pool:\n%s", b)
	}
}

// jsonText, the byte scan that spares encoding a tree walk, agrees with the walk (checkTree) on
// strings and keys with every kind of character json.Marshal escapes or writes as it is.
func TestJSONTextAgreesWithTreeCheck(t *testing.T) {
	pieces := []string{"a", "é", "≤", "<>&", "\t", "\n", "\r", "\b", "\f", "\x00", "\x1f", "\x7f", "\u0085", "\u009f",
		"\u00a0", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\ufffd", "\xff", "\xc3", "😀", `"`, `\`, "/"}
	check := func(s string) {
		t.Helper()
		for _, v := range []any{map[string]string{"k": s}, map[string]string{s: "v"}, []string{"x", s}} {
			j, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var tree any
			if err := json.Unmarshal(j, &tree); err != nil {
				t.Fatal(err)
			}
			var errs errList
			checkTree(tree, "", &errs)
			if got, want := jsonText(j), len(errs.errs) == 0; got != want {
				t.Errorf("%q: byte scan says text %v, the tree walk %v (%s)", s, got, want, j)
			}
		}
	}
	for _, a := range pieces {
		check(a)
		for _, b := range pieces {
			check(a + b)
		}
	}
	for r := rune(0); r < 0x3000; r++ {
		check("x" + string(r))
	}
}

// TestIndentCompactMatchesJSONIndent: EncodeJSON's indentation gives json.Indent's bytes for
// compact JSON, on the examples, on values marshalled from trees with empty and nested objects
// and arrays, and on strings holding JSON's punctuation, escaped quotes and backslashes.
func TestIndentCompactMatchesJSONIndent(t *testing.T) {
	var srcs [][]byte
	for _, name := range []string{"pool-valid.yaml", "plan-valid.yaml", "pool-invalid.yaml"} {
		d, err := Decode(readTestdata(t, name))
		if d == nil {
			t.Fatalf("%s: %v", name, err)
		}
		j, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, j)
	}
	for _, v := range []any{
		map[string]any{}, []any{}, "", 0, nil, true, 1.5e-7, "x",
		map[string]any{"a": map[string]any{}, "b": []any{}, "c": []any{map[string]any{}, []any{}, []any{[]any{}}}},
		map[string]any{"q": `he said "{[a, b]: c}" \ ` + `\"`, "k\"{": []any{`\`, `\\`, `"`, ",", ":", "]}", "é\t\n"}},
		[]any{1, []any{2, map[string]any{"x": []any{3, map[string]any{"y": nil}}}}, -4.25, false},
	} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, j)
	}
	for _, src := range srcs {
		var want bytes.Buffer
		if err := json.Indent(&want, src, "", "  "); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		prefix := []byte("kept ")
		got := indentCompact(append([]byte(nil), prefix...), src)
		if !bytes.Equal(got, append(prefix, want.Bytes()...)) {
			t.Errorf("indentCompact(%s):\n%s\nwant\n%s", src, got, want.Bytes())
		}
	}
}
