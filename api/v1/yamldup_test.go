package v1

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// A key given twice is reported with its path beside the document's other problems, not alone.
func TestDuplicateKeysBesideOtherProblems(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"YAML", minimalPool + "    labels: {zone: a, zone: b}\ntenants:\n- name: a\n  weight: heavy\n  slo: {ttftP99: 1s}\n  slo: {ttftP99: 2s, tpotP99: 1s, tpotP99: 2s}\n",
			"fleet.nodes[0].labels.zone: duplicate key (lines 8 and 8; only the last is read)\n" +
				"tenants[0].slo: duplicate key (lines 12 and 13; only the last is read)\n" +
				"tenants[0].slo.tpotP99: duplicate key (lines 13 and 13; only the last is read)\n" +
				"tenants[0].weight: expected a number, got the string \"heavy\""},
		{"YAML header", "apiVersion: gpupool.dev/v1\nkind: Pool\nkind: Pool\nspec: {}\n",
			"kind: duplicate key (lines 2 and 3; only the last is read)\nspec: unknown field"},
		{"JSON", `{"apiVersion": "gpupool.dev/v1", "kind": "Pool", "tenants": [{"name": "a", "name": "b", "weight": "x"}]}`,
			"tenants[0].name: duplicate key\ntenants[0].weight: expected a number, got the string \"x\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode([]byte(tt.in))
			if d == nil {
				t.Fatalf("document not returned beside its errors: %v", err)
			}
			var fe FieldErrors
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not FieldErrors: %v", err, err)
			}
			if err.Error() != tt.want {
				t.Errorf("error =\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

// Aliases and merge keys are not repeated keys; a merged key set again is refused by the strict
// reader alone, as before; a syntax error stands beside a repeated key.
func TestDuplicateKeysNotReported(t *testing.T) {
	in := "apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: &m {name: p}\nfleet:\n  nodes:\n  - name: a\n    labels: &l {zone: a}\n    gpus: [{board: H100, count: 1}]\n  - name: m\n    labels: {<<: *l, rack: r}\n    gpus: [{board: H100, count: 1}]\n"
	if _, err := Decode([]byte(in)); err != nil {
		t.Errorf("alias or merge key read as a duplicate: %v", err)
	}
	_, err := Decode([]byte(strings.Replace(in, "rack: r", "zone: b", 1)))
	if want := "parse YAML: unmarshal errors:\n  line 10: key \"zone\" already set in map"; err == nil || err.Error() != want {
		t.Errorf("merged key set again: %v, want %q", err, want)
	}
	_, err = Decode([]byte("apiVersion: [\nkind: Pool\nkind: Pool\n"))
	if err == nil || !strings.Contains(err.Error(), "parse YAML") {
		t.Errorf("a YAML syntax error beside a repeated key: %v, want the parse error", err)
	}
}

// The review's pool with a repeated slo key and nine type and value errors: all ten are listed.
func TestDuplicateKeyReviewPool(t *testing.T) {
	b2, err := os.ReadFile("../../testdata/review7/b2-types-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b3, err := os.ReadFile("../../testdata/review7/b3-types-pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err2 := LoadPool(b2)
	_, err3 := LoadPool(b3)
	var fe2, fe3 FieldErrors
	if !errors.As(err2, &fe2) || !errors.As(err3, &fe3) {
		t.Fatalf("errors are not FieldErrors: %v; %v", err2, err3)
	}
	if len(fe2) != 10 {
		t.Errorf("%d problems, want 10:\n%v", len(fe2), err2)
	}
	if !strings.Contains(err2.Error(), "tenants[0].slo: duplicate key (lines 18 and 19; only the last is read)") {
		t.Errorf("duplicate slo not named:\n%v", err2)
	}
	// Every problem of the file without the repeated key, except those inside the repeated
	// key's first value (only the last is read), is listed beside it.
	for _, e := range fe3 {
		if strings.HasPrefix(e.Path, "tenants[0].slo") {
			continue
		}
		if !strings.Contains(err2.Error(), e.Error()) {
			t.Errorf("missing %q beside the duplicate:\n%v", e.Error(), err2)
		}
	}
}

// Keys YAML reads as different values but JSON as one (1, "1", 0x1, 1.0) are a repeated key:
// the document is refused with the same errors every time, never decoded to whichever value a
// map's order met last.
func TestKeysThatBecomeOneJSONKey(t *testing.T) {
	tests := []struct {
		labels string
		want   string
	}{
		{`{1: x, "1": w}`, `fleet.nodes[0].labels.1: duplicate key (the string "1" and the integer 1 are one key once read; quote keys as strings)`},
		{`{1.0: x, "1": w, zone: a}`, `fleet.nodes[0].labels.1: duplicate key (the string "1" and the float 1 are one key once read; quote keys as strings)`},
		{`{true: x, "true": w}`, `fleet.nodes[0].labels.true: duplicate key (the string "true" and the boolean true are one key once read; quote keys as strings)`},
		{`{1: x, "1": y, 0x1: z}`, `fleet.nodes[0].labels.1: duplicate key (the string "1" and the integer 1 are one key once read; quote keys as strings)` + "\n" +
			`fleet.nodes[0].labels.1: expected a string, got the boolean true (YAML reads yes, no, on, off, y and n as booleans: quote the value)` + "\n" +
			"fleet.nodes[0].labels.0x1: duplicate key (lines 8 and 8; only the last is read)"},
	}
	for _, tt := range tests {
		in := minimalPool + "    labels: " + tt.labels + "\n"
		first := ""
		for i := 0; i < 50; i++ {
			_, err := DecodePool([]byte(in))
			if err == nil {
				t.Fatalf("%s accepted", tt.labels)
			}
			if i == 0 {
				first = err.Error()
				if first != tt.want {
					t.Errorf("%s:\n%s\nwant\n%s", tt.labels, first, tt.want)
				}
			} else if err.Error() != first {
				t.Fatalf("%s: errors differ between two reads:\n%s\n---\n%s", tt.labels, first, err)
			}
		}
	}
	// An integer and a float of one value are named by their types.
	if _, err := DecodePool([]byte(minimalPool + "    labels: {1.0: x, 1: y}\n")); err == nil ||
		!strings.Contains(err.Error(), "labels.1: duplicate key (the float 1 and the integer 1 are one key once read") {
		t.Errorf("1.0 beside 1: %v", err)
	}
	// Distinct keys are untouched.
	if _, err := DecodePool([]byte(minimalPool + "    labels: {\"1\": a, \"01\": b, \"1.0\": c}\n")); err != nil {
		t.Errorf("distinct string keys refused: %v", err)
	}
}

// Keys that become one JSON key where one of the values is not finite (.inf, .nan): the
// conversion fails or drops that value depending on which key its map order met last, so the
// same text was refused with one of three errors, or accepted with the repeated key unnamed.
// Each text now gives one answer on every read.
func TestKeysThatBecomeOneJSONKeyNonFinite(t *testing.T) {
	tests := []struct {
		labels string
		want   string
	}{
		{`{1: .inf, "1": w}`, `fleet.nodes[0].labels.1: duplicate key (the string "1" and the integer 1 are one key once read; quote keys as strings)`},
		{`{1: w, "1": .inf}`, `fleet.nodes[0].labels.1: must be a finite number (got +Inf)`},
		{`{1: .nan, "1": .inf}`, `fleet.nodes[0].labels.1: must be a finite number (got +Inf)`},
		{`{0x1: .nan, 1.0: .inf, a: b}`, `fleet.nodes[0].labels.1: must be a finite number (got +Inf)`},
		{`{1: .inf, "1": w, 1: v}`, `fleet.nodes[0].labels.1: duplicate key (lines 8 and 8; only the last is read)`},
	}
	for _, tt := range tests {
		in := minimalPool + "    labels: " + tt.labels + "\n"
		for i := 0; i < 100; i++ {
			_, err := DecodePool([]byte(in))
			if err == nil {
				t.Fatalf("%s accepted", tt.labels)
			}
			if err.Error() != tt.want {
				t.Fatalf("%s, read %d:\n%s\nwant\n%s", tt.labels, i+1, err, tt.want)
			}
		}
	}
}
