package v1

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// seedDecoders adds the examples, their JSON forms and a few edge cases to a fuzz corpus.
func seedDecoders(f *testing.F, files ...string) {
	for _, name := range files {
		data := readTestdata(f, name)
		f.Add(data)
		if d, err := Decode(data); err == nil {
			js, _ := EncodeJSON(d)
			f.Add(js)
		}
	}
	for _, s := range []string{
		minimalPool,
		"",
		"{}",
		"[]",
		"apiVersion: gpupool.dev/v1\nkind: Plan\n",
		`{"apiVersion":"gpupool.dev/v1","kind":"Pool","fleet":{"nodes":[{"name":"a","name":"b"}]}}`,
		"apiVersion: gpupool.dev/v1\nkind: Pool\ntenants: [{name: a, slo: {ttftP99: 1s}, slo: {ttftP99: x}, weight: w}]\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\nkind: Plan\nfleet: {nodes: [{name: a, labels: {1: x, \"1\": y, 0x1: z}}]}\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\nfleet: {nodes: [{name: a, labels: {1: .inf, \"1\": y}}, {name: b, labels: {1: y, \"1\": .nan, true: .inf}}]}\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\nfleet: {nodes: [{name: a, labels: &l {z: a}}, {name: b, labels: {<<: *l, z: b}}]}\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\ntenants: [{name: a, slo: {ttftP99: 1.5s}, weight: 1e3}]\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\ntenants: [{name: a, model: {name: x, quantization: ' AWQ_Marlin '}}, {name: b, model: {quantization: nf4}}]\n",
		"apiVersion: gpupool.dev/v1\nkind: Plan\ngpus: [{node: a, index: 0, instances: [{profile: x, replicas: [{limits: {memory: 1.5Gi}}]}]}]\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: &a {name: x}\nfleet: {nodes: [{name: *a}]}\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\nfleet: {nodes: [{name: n1, labels: {\"<<\": x, \"\": y}}]}\n",
		"apiVersion: gpupool.dev/v1\nkind: Pool\npolicy: {cost: {currency: USD, boards: [{board: H100, capex: 3e4, amortizationYears: 5, source: q}], pue: {value: 1.5, source: s}, carbonIntensity: {locationBased: {value: 390, source: g}}, idlePolicy: use}}\n",
	} {
		f.Add([]byte(s))
	}
}

// checkRoundTrip encodes an accepted document both ways and expects it to decode to an equal
// value whose encoding is byte-identical.
func checkRoundTrip(t *testing.T, d Document) {
	for _, enc := range []func(Document) ([]byte, error){EncodeYAML, EncodeJSON} {
		b1, err := enc(d)
		if err != nil {
			t.Fatalf("encode accepted document: %v", err)
		}
		again, err := Decode(b1)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, b1)
		}
		if !reflect.DeepEqual(d, again) {
			b2, _ := EncodeJSON(again)
			t.Fatalf("value changed across encode/decode:\n%s\n---\n%s", b1, b2)
		}
		b2, err := enc(again)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("second encoding differs (%v):\n%s\n---\n%s", err, b1, b2)
		}
	}
}

func FuzzDecodePool(f *testing.F) {
	seedDecoders(f, "pool-valid.yaml", "pool-invalid.yaml", "pool-undecodable.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRawDecode(t, data)
		checkSameEveryRead(t, data)
		p, err := DecodePool(data)
		checkNoDuplicateAccepted(t, data, err)
		_, lerr := LoadPool(data)
		if err != nil {
			if _, ok := err.(FieldErrors); !ok {
				t.Fatalf("error %T is not FieldErrors", err)
			}
			// LoadPool reports every decoding problem too, beside the validation's.
			if lerr == nil {
				t.Fatalf("LoadPool accepted a document DecodePool rejects: %v", err)
			}
			for _, e := range err.(FieldErrors) {
				if !strings.Contains(lerr.Error(), e.Error()) {
					t.Fatalf("LoadPool's errors lack %q:\n%v", e.Error(), lerr)
				}
			}
			return
		}
		checkRoundTrip(t, p)
		_ = testValidator.Pool(p)
		Default(p)
		checkRoundTrip(t, p)
		_ = testValidator.Pool(p)
		_ = Validate(p)
	})
}

func FuzzDecodePlan(f *testing.F) {
	seedDecoders(f, "plan-valid.yaml", "pool-valid.yaml")
	pool := loadValidPool(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePlan(data)
		if err != nil {
			if _, ok := err.(FieldErrors); !ok {
				t.Fatalf("error %T is not FieldErrors", err)
			}
			return
		}
		checkRoundTrip(t, p)
		_ = testValidator.Plan(p, nil)
		_ = testValidator.Plan(p, pool)
		_ = ValidatePlan(p, pool)
	})
}

// checkSameEveryRead: the same bytes decode to the same document and the same error text on
// every read (map order inside the YAML conversion must not show).
func checkSameEveryRead(t *testing.T, data []byte) {
	t.Helper()
	d0, e0 := Decode(data)
	for range 3 {
		d, e := Decode(data)
		if fmt.Sprint(e) != fmt.Sprint(e0) || !reflect.DeepEqual(d, d0) {
			t.Fatalf("two reads differ:\n%+v\n%v\n---\n%+v\n%v", d0, e0, d, e)
		}
	}
}

// checkRawDecode: decoding from the document's own JSON text and from the re-encoded tree give
// the same Pool and the same errors.
func checkRawDecode(t *testing.T, data []byte) {
	t.Helper()
	tree, raw, _, err := parseDocument(data)
	if err != nil {
		return
	}
	again, _, _, _ := parseDocument(data)
	a, b := new(Pool), new(Pool)
	ea, eb := decodeTreeRaw(tree, raw, a), decodeTreeRaw(again, nil, b)
	if fmt.Sprint(ea) != fmt.Sprint(eb) || !reflect.DeepEqual(a, b) {
		t.Fatalf("raw decode %+v (%v) differs from re-encoded %+v (%v)", a, ea, b, eb)
	}
}

// checkNoDuplicateAccepted: reading past a repeated key never accepts a document that has one:
// an accepted YAML document passes the strict YAML reader, an accepted JSON one has no repeated
// key.
func checkNoDuplicateAccepted(t *testing.T, data []byte, err error) {
	t.Helper()
	if err != nil {
		return
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		if dups, derr := DuplicateJSONKeys(trimmed); derr != nil || len(dups) > 0 {
			t.Fatalf("accepted JSON with duplicate keys %v (%v)", dups, derr)
		}
		return
	}
	if _, serr := yaml.YAMLToJSONStrict(data); serr != nil {
		t.Fatalf("accepted YAML the strict reader refuses: %v", serr)
	}
}
