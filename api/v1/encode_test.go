package v1

import (
	"bytes"
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
