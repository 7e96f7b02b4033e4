package v1

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites the file when -update is given.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update after checking the change)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestGoldenInvalidPool(t *testing.T) {
	p, err := DecodePool(readTestdata(t, "pool-invalid.yaml"))
	if err != nil {
		t.Fatalf("pool-invalid.yaml must decode (its errors are semantic): %v", err)
	}
	Default(p)
	err = testValidator.Pool(p)
	if err == nil {
		t.Fatal("no errors")
	}
	golden(t, "pool-invalid.errors", []byte(err.Error()+"\n"))
}

func TestGoldenUndecodablePool(t *testing.T) {
	_, err := DecodePool(readTestdata(t, "pool-undecodable.yaml"))
	if err == nil {
		t.Fatal("no errors")
	}
	golden(t, "pool-undecodable.errors", []byte(err.Error()+"\n"))
}

// TestGoldenEncoding pins the encoded bytes of the examples: the defaulted pool (which shows
// every default Default fills) and the plan, in YAML and JSON.
func TestGoldenEncoding(t *testing.T) {
	pool := loadValidPool(t)
	plan := loadValidPlan(t)
	for _, c := range []struct {
		name string
		doc  Document
		enc  func(Document) ([]byte, error)
	}{
		{"pool-valid.defaulted.yaml", pool, EncodeYAML},
		{"pool-valid.defaulted.json", pool, EncodeJSON},
		{"plan-valid.encoded.yaml", plan, EncodeYAML},
		{"plan-valid.encoded.json", plan, EncodeJSON},
	} {
		got, err := c.enc(c.doc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		golden(t, c.name, got)
	}
}
