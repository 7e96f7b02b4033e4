package v1

import (
	"fmt"

	yamlv2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/yamlkey"
)

// yamlDuplicates is called when the strict YAML reader refused data. When the lax reader (which
// keeps the last value of a repeated key) accepts it and at least one key is given twice in one
// mapping, it returns one error per repeated key, with its path and lines, and the lax reader's
// JSON text; ok is false otherwise, and the strict reader's error stands.
func yamlDuplicates(data []byte) (FieldErrors, []byte, bool) {
	var root yaml3.Node
	if yaml3.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return nil, nil, false
	}
	var dups FieldErrors
	walkYAMLKeys(root.Content[0], "", &dups, 0)
	if len(dups) == 0 {
		return nil, nil, false
	}
	// Keys YAML reads as different values can still meet as one JSON key (1 and "1"); read
	// those the same way every time.
	lax, coll, ok := collidingKeys(data)
	if !ok {
		return nil, nil, false
	}
	seen := map[string]bool{}
	for _, d := range dups {
		seen[d.Path] = true
	}
	for _, c := range coll {
		if !seen[c.Path] {
			dups = append(dups, c)
		}
	}
	return dups, lax, true
}

// yamlToJSON converts YAML text to JSON strictly (a key written twice is an error) and returns,
// beside the JSON, one error per group of keys of a mapping that become one JSON key (1, "1",
// 0x1). The YAML-to-JSON conversion keeps whichever of such keys its map order meets last, and
// so, when one of their values is not finite, either fails or drops that value depending on the
// run; here a document with such keys is converted with one of each group kept by a fixed rule
// (see collidingKeys), so that the same text always gives the same JSON, or the same error.
func yamlToJSON(data []byte) ([]byte, FieldErrors, error) {
	var tree any
	if yamlv2.Unmarshal(data, &tree) == nil {
		var coll FieldErrors
		dropCollidingKeys(tree, "", &coll, 0)
		if len(coll) > 0 && yamlv2.UnmarshalStrict(data, new(any)) == nil {
			cleaned, err := yamlv2.Marshal(tree)
			if err != nil {
				return nil, nil, err
			}
			j, err := yaml.YAMLToJSON(cleaned)
			if err != nil {
				return nil, nil, err
			}
			return j, coll, nil
		}
	}
	j, err := yaml.YAMLToJSONStrict(data)
	return j, nil, err
}

// collidingKeys reads data the way the YAML-to-JSON conversion does (YAML 1.1, the last of a
// repeated key kept) and finds every mapping in which different keys become one JSON key: 1,
// "1", 0x1 and 1.0 all become "1", and the conversion would keep whichever its map order meets
// last, so the same text could decode to different values. It returns one error per such key
// and the JSON text with one of those keys kept by a fixed rule (a string key when there is one),
// or, when no keys meet, nil errors and the conversion's own text. ok is false when the reader
// or the conversion refuses data.
func collidingKeys(data []byte) ([]byte, FieldErrors, bool) {
	var tree any
	if yamlv2.Unmarshal(data, &tree) != nil {
		return nil, nil, false
	}
	var errs FieldErrors
	dropCollidingKeys(tree, "", &errs, 0)
	if len(errs) > 0 {
		cleaned, err := yamlv2.Marshal(tree)
		if err != nil {
			return nil, nil, false
		}
		data = cleaned
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, false
	}
	return j, errs, true
}

// dropCollidingKeys keeps one key of each group of keys of a mapping that convert to one JSON
// key, removes the others and appends an error naming them.
func dropCollidingKeys(v any, path string, errs *FieldErrors, depth int) {
	if depth > maxJSONDepth {
		return
	}
	switch x := v.(type) {
	case map[any]any:
		for _, g := range yamlkey.Groups(x) {
			keep := g.Keys[0]
			if len(g.Keys) > 1 {
				for _, k := range g.Keys[1:] {
					delete(x, k)
				}
				*errs = append(*errs, FieldError{Path: key(path, g.Name), Msg: g.Message()})
			}
			dropCollidingKeys(x[keep], key(path, g.Name), errs, depth+1)
		}
	case []any:
		for i, item := range x {
			dropCollidingKeys(item, index(path, i), errs, depth+1)
		}
	}
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
