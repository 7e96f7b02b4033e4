package v1

import (
	"errors"
	"strings"
	"testing"
)

const minimalPool = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: p}
fleet:
  nodes:
  - name: node-1
    gpus: [{board: H100, count: 1}]
`

func TestDecodeKinds(t *testing.T) {
	doc, err := Decode([]byte(minimalPool))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := doc.(*Pool)
	if !ok || p.Metadata.Name != "p" || p.Fleet.Nodes[0].GPUs[0].Board != "H100" {
		t.Fatalf("Decode = %#v", doc)
	}
	if _, err := DecodePlan([]byte(minimalPool)); err == nil || err.Error() != `kind: got "Pool", want "Plan"` {
		t.Errorf("DecodePlan(pool) error = %v", err)
	}
	plan, err := DecodePlan(readTestdata(t, "plan-valid.yaml"))
	if err != nil || plan.DocumentKind() != KindPlan || len(plan.GPUs) != 12 {
		t.Fatalf("DecodePlan(plan-valid.yaml) = %d GPUs, %v", len(plan.GPUs), err)
	}
	if _, err := DecodePool(readTestdata(t, "plan-valid.yaml")); err == nil {
		t.Error("DecodePool(plan): no error")
	}
}

func TestDecodeJSONAndYAMLAgree(t *testing.T) {
	fromYAML := loadValidPool(t)
	js, err := EncodeJSON(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := DecodePool(js)
	if err != nil {
		t.Fatalf("decode JSON: %v", err)
	}
	again, _ := EncodeJSON(fromJSON)
	if string(again) != string(js) {
		t.Errorf("JSON round trip differs:\n%s\n---\n%s", js, again)
	}
}

// TestDecodeErrors lists every kind of decode error, each with its exact message.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "empty document"},
		{"comments only", "# nothing\n", "empty document"},
		{"top-level list", "- a\n- b\n", "expected a mapping at the top of the document, got a list"},
		{"top-level JSON string", `"x"`, "expected a mapping at the top of the document, got the string \"x\""},
		{"YAML syntax", "apiVersion: [\n", "parse YAML: line 1: did not find expected node content"},
		{"JSON syntax", `{"apiVersion": }`, "parse JSON: invalid character '}' looking for beginning of value"},
		{"JSON trailing data", `{"apiVersion": "gpupool.dev/v1", "kind": "Pool"} {}`, "parse JSON: unexpected data after the document"},
		{"no header", "metadata: {name: x}\n",
			"apiVersion: required (supported: gpupool.dev/v1)\nkind: required (supported: Plan, Pool)"},
		{"wrong apiVersion", "apiVersion: gpupool.dev/v2\nkind: Pool\n",
			`apiVersion: unsupported "gpupool.dev/v2" (supported: gpupool.dev/v1)`},
		{"wrong kind", "apiVersion: gpupool.dev/v1\nkind: Fleet\n", `kind: unsupported "Fleet" (supported: Plan, Pool)`},
		{"kind not a string", "apiVersion: gpupool.dev/v1\nkind: [Pool]\n", `kind: expected a string, got a list (supported: Plan, Pool)`},
		{"two documents", minimalPool + "---\n" + minimalPool,
			"line 8: a second YAML document starts here; put one document in each file"},
		{"duplicate YAML key", "apiVersion: gpupool.dev/v1\nkind: Pool\nkind: Pool\n",
			"kind: duplicate key (lines 2 and 3; only the last is read)"},
		{"duplicate JSON key", `{"apiVersion": "gpupool.dev/v1", "kind": "Pool", "fleet": {"nodes": [{"name": "a", "name": "b"}]}}`,
			"fleet.nodes[0].name: duplicate key"},
		{"unknown fields everywhere", minimalPool + "spec: {}\npolicy: {burstPool: 10}\ntenants:\n- name: a\n  isolaton: hard\n  Model: {name: x}\n",
			"policy.burstPool: unknown field (did you mean \"burstPoolPercent\"?)\n" +
				"spec: unknown field\n" +
				"tenants[0].Model: unknown field (did you mean \"model\"?)\n" +
				"tenants[0].isolaton: unknown field (did you mean \"isolation\"?)"},
		{"wrong types", minimalPool + "tenants:\n- name: [a]\n  weight: heavy\n  redundancy: 1\n  maxContext: 1.5\n  concurrency: 99999999999999999999\n  traffic: 5\n",
			"tenants[0].concurrency: integer 100000000000000000000 out of range\n" + // YAML reads it as the float 1e20 +
				"tenants[0].maxContext: expected an integer, got 1.5\n" +
				"tenants[0].name: expected a string, got a list\n" +
				"tenants[0].redundancy: expected true or false, got the number 1\n" +
				"tenants[0].traffic: expected a mapping, got the number 5\n" +
				"tenants[0].weight: expected a number, got the string \"heavy\""},
		{"bad quantities", minimalPool + "policy:\n  canaryGPUs: [n-0]\n  maxUnavailable: 12.5%\n  reconfigCooldown: 1 hour\ntenants:\n- name: a\n  slo: {ttftP99: 200}\n",
			"policy.canaryGPUs[0]: invalid GPU reference \"n-0\": want \"node/index\", like \"gpu-node-a/3\"\n" +
				"policy.maxUnavailable: invalid count \"12.5%\": want an integer or a whole percentage like \"25%\"\n" +
				"policy.reconfigCooldown: invalid duration \"1 hour\": want a number with a unit, like \"500ms\", \"1.5s\" or \"2m\"\n" +
				"tenants[0].slo.ttftP99: invalid duration 200: want a string with a unit, like \"500ms\", \"1.5s\" or \"2m\""},
		{"fleet not a list", "apiVersion: gpupool.dev/v1\nkind: Pool\nfleet: {nodes: {a: 1}}\n",
			"fleet.nodes: expected a list, got a mapping"},
		{"label value not a string", minimalPool + "  - name: m\n    labels: {zone: [a]}\n    gpus: []\n",
			"fleet.nodes[1].labels.zone: expected a string, got a list"},
		{"YAML 1.1 boolean", "apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: no}\n",
			"metadata.name: expected a string, got the boolean false (YAML reads yes, no, on, off, y and n as booleans: quote the value)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatal("no error")
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

func TestDecodeCoercesNumbersToStrings(t *testing.T) {
	// YAML reads `name: 2024` as a number; a string field takes it as written.
	p, err := DecodePool([]byte(strings.Replace(minimalPool, "name: p", "name: 2024", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Metadata.Name != "2024" {
		t.Errorf("name = %q, want \"2024\"", p.Metadata.Name)
	}
}

func TestDecodeAcceptsLeadingDocumentMarkerAndBOM(t *testing.T) {
	in := "\xef\xbb\xbf# a pool\n---\n" + minimalPool
	if _, err := DecodePool([]byte(in)); err != nil {
		t.Fatal(err)
	}
	js := "\xef\xbb\xbf  {\"apiVersion\": \"gpupool.dev/v1\", \"kind\": \"Pool\", \"metadata\": {\"name\": \"p\"}}"
	if _, err := DecodePool([]byte(js)); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejectsHugeInput(t *testing.T) {
	big := make([]byte, MaxDocumentBytes+1)
	if _, err := Decode(big); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("Decode(%d bytes) error = %v", len(big), err)
	}
}

func TestFieldErrorsSortNumerically(t *testing.T) {
	l := FieldErrors{
		{Path: "tenants[10].name", Msg: "b"},
		{Path: "tenants[2].slo", Msg: "a"},
		{Path: "fleet", Msg: "x"},
		{Path: "tenants[2].name", Msg: "a"},
		{Path: "", Msg: "whole"},
		{Path: "tenants[2].name", Msg: "a"},
		{Path: "tenants", Msg: "list"},
	}
	got := sortFieldErrors(l).Error()
	want := "whole\nfleet: x\ntenants: list\ntenants[2].name: a\ntenants[2].slo: a\ntenants[10].name: b"
	if got != want {
		t.Errorf("sorted =\n%s\nwant\n%s", got, want)
	}
}

func TestDecodeRefusesControlCharacters(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{minimalPool + "tenants: [{name: \"a\\x7fb\"}]\n", `tenants[0].name: the string "a\x7fb" contains the control character U+007F at byte 1`},
		{minimalPool + "tenants: [{name: \"a\\Nb\"}]\n", `tenants[0].name: the string "a\u0085b" contains the control character U+0085 at byte 1`},
		{minimalPool + "tenants: [{name: \"\\u2028\"}]\n", `tenants[0].name: the string "\u2028" contains the control character U+2028 at byte 0`},
		{`{"apiVersion": "gpupool.dev/v1", "kind": "Pool", "metadata": {"name": "\u0001"}}`,
			`metadata.name: the string "\x01" contains the control character U+0001 at byte 0`},
		{`{"apiVersion": "gpupool.dev/v1", "kind": "Pool", "fleet": {"nodes": [{"labels": {"a\u0000": "x"}}]}}`,
			`fleet.nodes[0].labels: the key "a\x00" contains the control character U+0000 at byte 1`},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Decode(%q) error =\n%v\nwant\n%s", tt.in, err, tt.want)
		}
	}
	// Tab and line feed are text.
	if _, err := DecodePool([]byte(minimalPool + "tenants: [{name: \"a\\tb\\nc\"}]\n")); err != nil {
		t.Error(err)
	}
}

func TestLoadPool(t *testing.T) {
	p, err := LoadPool(readTestdata(t, "pool-valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *p.Tenants[4].Weight != 0.5 || p.Tenants[3].Isolation != IsolationShared || p.Tenants[2].EnergyClass != EnergyEfficiency ||
		*p.Tenants[1].Weight != 2 || p.Tenants[4].Traffic.Pattern != PatternDiurnal || p.Tenants[0].Model.KVCacheDtype != "fp8" ||
		p.Tenants[4].Model.KVCacheDtype != "auto" {
		t.Errorf("LoadPool did not decode or default as expected: %+v", p.Tenants)
	}
	if _, err := LoadPool(readTestdata(t, "pool-invalid.yaml")); err == nil {
		t.Error("LoadPool(pool-invalid.yaml): no error")
	}
	if _, err := LoadPool(readTestdata(t, "pool-undecodable.yaml")); err == nil {
		t.Error("LoadPool(pool-undecodable.yaml): no error")
	}
}

// TestDecodeNormalisesQuantization: the spellings llm.ParseQuantization accepts are accepted in a
// Pool document too, and stored under the canonical name; unknown spellings are kept for
// Validate to report.
func TestDecodeNormalisesQuantization(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"awq", "int4-awq"},
		{"AWQ_Marlin", "int4-awq"},
		{"gptq", "int4-gptq"},
		{"w4a16", "int4-gptq"}, // compressed-tensors' default W4A16 layout is GPTQ
		{"w8a8", "int8"},
		{"fp8_e4m3", "fp8"},
		{"bfloat16", "bf16"},
		{"int4-awq", "int4-awq"},
		{"nf4", "nf4"},
	} {
		doc := minimalPool + "tenants:\n- name: a\n  model: {name: llama-3.1-8b, quantization: " + c.in + "}\n"
		p, err := DecodePool([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got := string(p.Tenants[0].Model.Quantization); got != c.want {
			t.Errorf("%s: quantization %q, want %q", c.in, got, c.want)
		}
	}
	// Through LoadPool an alias validates; an unknown value is still an error at its path.
	if p, err := LoadPool([]byte(minimalPool + "tenants:\n- name: a\n  model: {name: llama-3.1-8b, quantization: gptq}\n")); err != nil ||
		p.Tenants[0].Model.Quantization != "int4-gptq" {
		t.Errorf("LoadPool with gptq: %v", err)
	}
	_, err := LoadPool([]byte(minimalPool + "tenants:\n- name: a\n  model: {name: llama-3.1-8b, quantization: nf4}\n"))
	if err == nil || !strings.Contains(err.Error(), `tenants[0].model.quantization: unknown value "nf4"`) {
		t.Errorf("LoadPool with nf4: %v", err)
	}
}
