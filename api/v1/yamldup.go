package v1

import (
	"fmt"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// yamlDuplicates is called when the strict YAML reader refused data. When the lax reader (which
// keeps the last value of a repeated key) accepts it and at least one key is given twice in one
// mapping, it returns one error per repeated key, with its path and lines, and the lax reader's
// JSON text; ok is false otherwise, and the strict reader's error stands.
func yamlDuplicates(data []byte) (FieldErrors, []byte, bool) {
	lax, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, false
	}
	var root yaml3.Node
	if yaml3.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil, nil, false
	}
	var dups FieldErrors
	walkYAMLKeys(root.Content[0], "", &dups, 0)
	if len(dups) == 0 {
		return nil, nil, false
	}
	// Keys YAML reads as different values can still meet as one JSON key (1 and "1").
	seen := map[string]bool{}
	for _, d := range dups {
		seen[d.Path] = true
	}
	more, err := DuplicateJSONKeys(lax)
	if err != nil {
		return nil, nil, false
	}
	for _, p := range more {
		if !seen[p] {
			dups = append(dups, FieldError{Path: p, Msg: "duplicate key"})
		}
	}
	return dups, lax, true
}

// walkYAMLKeys appends an error for every key given twice in a mapping under n. Aliases are not
// followed (the anchored node is walked where it is written), and merge keys ("<<") are not keys
// of their own.
func walkYAMLKeys(n *yaml3.Node, path string, dups *FieldErrors, depth int) {
	if n == nil || depth > maxJSONDepth {
		return
	}
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			walkYAMLKeys(c, path, dups, depth+1)
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			walkYAMLKeys(c, index(path, i), dups, depth+1)
		}
	case yaml3.MappingNode:
		first := map[string]int{} // the line a key was first written on
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml3.ScalarNode && k.ShortTag() == "!!merge" {
				continue
			}
			name := k.Value
			p := key(path, name)
			if k.Kind == yaml3.ScalarNode {
				var kv any
				id := name
				if k.Decode(&kv) == nil {
					id = fmt.Sprintf("%T:%v", kv, kv)
				}
				if line, ok := first[id]; ok {
					*dups = append(*dups, FieldError{Path: p,
						Msg: fmt.Sprintf("duplicate key (lines %d and %d; only the last is read)", line, k.Line)})
				} else {
					first[id] = k.Line
				}
			}
			walkYAMLKeys(v, p, dups, depth+1)
		}
	}
}
