package v1

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
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
		groups := map[string][]any{}
		for k := range x {
			if s, ok := jsonKey(k); ok {
				groups[s] = append(groups[s], k)
			}
		}
		names := make([]string, 0, len(groups))
		for s := range groups {
			names = append(names, s)
		}
		sort.Strings(names)
		for _, s := range names {
			ks := groups[s]
			sort.Slice(ks, func(i, j int) bool { return keyOrder(ks[i]) < keyOrder(ks[j]) })
			keep := ks[0]
			if len(ks) > 1 {
				shown := make([]string, len(ks))
				for i, k := range ks {
					shown[i] = keyShown(k)
					if k != keep {
						delete(x, k)
					}
				}
				*errs = append(*errs, FieldError{Path: key(path, s),
					Msg: fmt.Sprintf("duplicate key (%s are one key once read; quote keys as strings)", strings.Join(shown, " and "))})
			}
			dropCollidingKeys(x[keep], key(path, s), errs, depth+1)
		}
	case []any:
		for i, item := range x {
			dropCollidingKeys(item, index(path, i), errs, depth+1)
		}
	}
}

// keyOrder sorts a string key first, then the others by type and value.
func keyOrder(k any) string {
	if s, ok := k.(string); ok {
		return "0" + s
	}
	return fmt.Sprintf("1%T:%v", k, k)
}

// jsonKey is the JSON key the YAML-to-JSON conversion writes for a YAML key: integers in
// decimal, floats in their shortest 32-bit form, booleans as true and false. Other keys make the
// conversion fail; ok is false for them.
func jsonKey(k any) (string, bool) {
	switch x := k.(type) {
	case string:
		return x, true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		switch s := strconv.FormatFloat(x, 'g', -1, 32); s {
		case "+Inf":
			return ".inf", true
		case "-Inf":
			return "-.inf", true
		case "NaN":
			return ".nan", true
		default:
			return s, true
		}
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
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

// keyShown names a YAML key by its type and value: the string "1", the integer 1, the float 1.
func keyShown(k any) string {
	switch x := k.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case int, int64, uint64:
		return fmt.Sprintf("the integer %v", x)
	case float64:
		return fmt.Sprintf("the float %v", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	}
	return fmt.Sprintf("%#v", k)
}
