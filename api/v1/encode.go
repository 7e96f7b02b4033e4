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
	return append(indentCompact(make([]byte, 0, len(j)+len(j)/2), j), '\n'), nil
}

// indentCompact appends src, compact JSON as json.Marshal writes it (no space outside strings),
// to dst indented by two spaces a level: byte for byte what json.Indent(dst, src, "", "  ")
// gives, empty objects and arrays kept as {} and [], without json.Indent's scanner, which
// checks every byte's grammar and took half the time of encoding a large plan.
func indentCompact(dst, src []byte) []byte {
	depth, open, inString, escaped := 0, false, false, false
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for _, c := range src {
		if inString {
			dst = append(dst, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if open && c != '}' && c != ']' { // the first value of a non-empty object or array
			open = false
			depth++
			newline()
		}
		switch c {
		case '"':
			inString = true
			dst = append(dst, c)
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				newline()
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
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
