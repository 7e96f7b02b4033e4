package v1

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// maxFairYAMLBytes bounds a YAML scenario: a YAML tree costs tens of times its size in memory, so
// large scenarios are read as JSON, decoded directly into the document.
const maxFairYAMLBytes = 16 << 20

// DecodeFairScenario reads a fair-share scenario, YAML or JSON (JSON when the first non-blank
// byte is '{'), strictly: unknown fields, duplicate keys, wrong types, a second YAML document,
// YAML over 16 MiB and JSON over 64 MiB are errors, all reported at once as FieldErrors with their paths. YAML is
// read by YAML 1.2 rules into typed fields, so a name is the text written (`yes`, `007`). JSON is
// decoded directly (the fast path for large files); only a JSON document that fails is walked
// again to name every problem's path. DecodeFairScenario does not validate: see
// ValidateFairScenario.
func DecodeFairScenario(data []byte) (*FairScenario, error) {
	if len(data) > MaxDocumentBytes {
		return nil, docError("document is %d bytes, more than the %d allowed", len(data), MaxDocumentBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	sc := new(FairScenario)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return sc, decodeFairJSON(trimmed, sc)
	}
	if len(data) > maxFairYAMLBytes {
		return nil, docError("YAML document is %d bytes, more than the %d allowed for YAML; write large scenarios as JSON (up to %d bytes)",
			len(data), maxFairYAMLBytes, MaxDocumentBytes)
	}
	if err := checkSingleDocument(data); err != nil {
		return nil, err
	}
	var root yaml3.Node
	if err := yaml3.Unmarshal(data, &root); err != nil {
		return nil, docError("parse YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, docError("empty document")
	}
	var errs errList
	walkFairYAML(reflect.TypeFor[FairScenario](), root.Content[0], "", &errs, 0)
	if err := errs.result(); err != nil {
		return nil, err
	}
	if err := root.Content[0].Decode(sc); err != nil {
		return nil, docError("decode document: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return sc, nil
}

func decodeFairJSON(data []byte, sc *FairScenario) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(sc)
	if err == nil {
		if _, terr := dec.Token(); terr == nil {
			err = errors.New("unexpected data after the document")
		} else if !errors.Is(terr, io.EOF) {
			err = terr
		}
	}
	if err == nil {
		// The document is valid JSON: one fast pass names any duplicate key, which
		// encoding/json would silently resolve to the last value.
		folded, dup := fairDuplicateJSONKeys(data)
		if dup != nil || !folded {
			return dup
		}
		// A key is a field's name in other letter case ("Capacity"), which encoding/json
		// matches to the field, the last of them silently winning, while the YAML reading
		// refuses it: walk the document by its types to name the unknown fields (a map key
		// such as a tenant named "Name" is no field, and passes).
		return walkFairJSON(data)
	}
	// Walk the document as YAML (JSON is YAML) to name every problem's path.
	if werr := walkFairJSON(data); werr != nil {
		return werr
	}
	return docError("parse JSON: %v", err)
}

// walkFairJSON walks a JSON document as YAML (JSON is YAML) against the scenario's types and
// returns every problem with its path; nil when it finds none or cannot read the document.
func walkFairJSON(data []byte) error {
	var root yaml3.Node
	if yaml3.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil
	}
	var errs errList
	walkFairYAML(reflect.TypeFor[FairScenario](), root.Content[0], "", &errs, 0)
	return errs.result()
}

// walkFairYAML checks node n against type t: mappings for structs and maps (no duplicate keys, no
// unknown fields), sequences for slices, and every scalar decodable into its field's type.
func walkFairYAML(t reflect.Type, n *yaml3.Node, path string, errs *errList, depth int) {
	if depth > maxJSONDepth {
		errs.add(path, "nested deeper than %d levels", maxJSONDepth)
		return
	}
	if n.Kind == yaml3.AliasNode {
		errs.add(path, "YAML aliases are not supported")
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml3.ScalarNode && n.Tag == "!!null" {
		return // an empty value leaves the field unset
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml3.MappingNode {
			errs.add(path, "expected a mapping, got %s", fairNodeKind(n))
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
			}
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			p := field(path, k)
			if seen[k] {
				errs.add(p, "duplicate key")
				continue
			}
			seen[k] = true
			if ft, ok := fields[k]; ok {
				walkFairYAML(ft, v, p, errs, depth+1)
			} else {
				errs.add(p, "unknown field")
			}
		}
	case reflect.Map:
		if n.Kind != yaml3.MappingNode {
			errs.add(path, "expected a mapping, got %s", fairNodeKind(n))
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, v := n.Content[i], n.Content[i+1]
			p := key(path, kn.Value)
			if kn.Kind != yaml3.ScalarNode {
				errs.add(path, "a key must be a plain value, got %s", fairNodeKind(kn))
				continue
			}
			if seen[kn.Value] {
				errs.add(p, "duplicate key")
				continue
			}
			seen[kn.Value] = true
			walkFairYAML(t.Elem(), v, p, errs, depth+1)
		}
	case reflect.Slice:
		if n.Kind != yaml3.SequenceNode {
			errs.add(path, "expected a list, got %s", fairNodeKind(n))
			return
		}
		for i, c := range n.Content {
			walkFairYAML(t.Elem(), c, index(path, i), errs, depth+1)
		}
	default:
		if n.Kind != yaml3.ScalarNode {
			errs.add(path, "expected a %s, got %s", t.Kind(), fairNodeKind(n))
			return
		}
		if t.Kind() == reflect.String {
			return // any scalar is kept as the text written
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			errs.add(path, "expected a %s, got %q", fairScalarWord(t), truncate(n.Value))
		}
	}
}

func fairScalarWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "whole number"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean (true or false)"
	}
	return t.Kind().String()
}

func fairNodeKind(n *yaml3.Node) string {
	switch n.Kind {
	case yaml3.MappingNode:
		return "a mapping"
	case yaml3.SequenceNode:
		return "a list"
	case yaml3.ScalarNode:
		return "the value " + `"` + truncate(n.Value) + `"`
	}
	return "an alias"
}

// fairDuplicateJSONKeys scans a valid JSON document once and reports every object key that appears
// twice in the same object, with its path. It keeps the keys of the open objects only, so a
// large document of small objects costs one pass and little memory.
// folded is true when some key is not a field name of the scenario's types but is one in other
// letter case.
func fairDuplicateJSONKeys(data []byte) (folded bool, err error) {
	type frame struct {
		obj  bool
		keys []string
		idx  int
		key  string // the current key (objects)
	}
	var errs errList
	var stack []frame
	path := func() string {
		p := ""
		for _, f := range stack {
			if f.obj {
				p = key(p, f.key)
			} else {
				p = index(p, f.idx)
			}
		}
		return p
	}
	expectKey := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{':
			stack = append(stack, frame{obj: true})
			expectKey = true
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].obj {
					expectKey = true
				} else {
					stack[n-1].idx++
				}
			}
		case '"':
			j := i + 1
			escaped := false
			for ; j < len(data) && data[j] != '"'; j++ {
				if data[j] == '\\' {
					escaped = true
					j++
				}
			}
			if expectKey {
				k := string(data[i+1 : j])
				if escaped {
					_ = json.Unmarshal(data[i:j+1], &k)
				}
				f := &stack[len(stack)-1]
				f.key = k
				for _, seen := range f.keys {
					if seen == k {
						errs.add(path(), "duplicate key")
						break
					}
				}
				f.keys = append(f.keys, k)
				if !folded {
					if name, ok := fairFieldNames[strings.ToLower(k)]; ok && name != k {
						folded = true
					}
				}
				expectKey = false
			}
			i = j
		}
	}
	return folded, errs.result()
}

// fairFieldNames maps the lower-case form of every field name of FairScenario's types to the
// name itself.
var fairFieldNames = func() map[string]string {
	names := map[string]string{}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
				names[strings.ToLower(name)] = name
			}
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[FairScenario]())
	return names
}()
