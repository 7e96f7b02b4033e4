package yamlkey

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// JSON is the JSON key the YAML-to-JSON conversion writes for a YAML key: integers in decimal,
// floats in their shortest 32-bit form, booleans as true and false. Other keys make the
// conversion fail; ok is false for them.
func JSON(k any) (string, bool) {
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

// Group is the keys of one mapping that become one JSON key, Name: a string key first, then the
// others by type and value.
type Group struct {
	Name string
	Keys []any
}

// Groups returns the keys of m grouped by their JSON key, in name order; keys the conversion
// cannot write are left out.
func Groups(m map[any]any) []Group {
	byName := map[string][]any{}
	for k := range m {
		if s, ok := JSON(k); ok {
			byName[s] = append(byName[s], k)
		}
	}
	out := make([]Group, 0, len(byName))
	for s, ks := range byName {
		sort.Slice(ks, func(i, j int) bool { return Order(ks[i]) < Order(ks[j]) })
		out = append(out, Group{Name: s, Keys: ks})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Message is the error for a group of more than one key: "duplicate key (the string "1" and the
// integer 1 are one key once read; quote keys as strings)".
func (g Group) Message() string {
	shown := make([]string, len(g.Keys))
	for i, k := range g.Keys {
		shown[i] = Shown(k)
	}
	return fmt.Sprintf("duplicate key (%s are one key once read; quote keys as strings)", strings.Join(shown, " and "))
}

// Shown names a YAML key by its type and value: the string "1", the integer 1, the float 1.
func Shown(k any) string {
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

// Order is a sort key for YAML keys: a string key first, then the others by type and value.
func Order(k any) string {
	if s, ok := k.(string); ok {
		return "0" + s
	}
	return fmt.Sprintf("1%T:%v", k, k)
}
