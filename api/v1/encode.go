package v1

import (
	"bytes"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// EncodeJSON returns d as indented JSON (two spaces) with a final newline. Fields appear in
// declaration order and map keys sorted, so the same value always gives the same bytes.
// Strings must be text (see Decode); a control character is an error, not an escape.
func EncodeJSON(d Document) ([]byte, error) {
	j, err := marshalText(d)
	if err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", kindOf(d), err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, j, "", "  "); err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", kindOf(d), err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// EncodeYAML returns d as block YAML with keys sorted alphabetically at every level, so the same
// value always gives the same bytes. Strings that YAML would read as another type ("no", "123")
// are quoted. Strings must be text, as for EncodeJSON.
func EncodeYAML(d Document) ([]byte, error) {
	j, err := marshalText(d)
	if err != nil {
		return nil, fmt.Errorf("encode %s as YAML: %w", kindOf(d), err)
	}
	b, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, fmt.Errorf("encode %s as YAML: %w", kindOf(d), err)
	}
	return b, nil
}

// marshalText marshals d to compact JSON and checks that every string in it is text.
func marshalText(d Document) ([]byte, error) {
	j, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	if jsonText(j) { // the common case: no string to name, no tree to build
		return j, nil
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var errs errList
	checkTree(tree, "", &errs)
	if err := errs.result(); err != nil {
		return nil, err
	}
	return j, nil
}

func kindOf(d Document) string {
	if d == nil {
		return "document"
	}
	return d.DocumentKind()
}
