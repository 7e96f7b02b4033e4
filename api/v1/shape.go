package v1

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The shape check walks a generic JSON tree (maps, slices, json.Number, strings, bools, nil)
// against a Go type before encoding/json sees it. It names the path of every unknown field and
// every type mismatch, where encoding/json would stop at the first and name no path, and it makes
// field names case-sensitive (encoding/json matches them case-insensitively).

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// rejected stands for a value the shape check reported: its parent drops it, so that the rest
// of the document still decodes and can be validated (every problem is reported at once).
type rejected struct{}

// checkShape checks v against t, records problems in errs and returns v with numbers that stand
// for strings turned into strings (YAML reads `name: 2024` as a number).
func checkShape(t reflect.Type, v any, path string, errs *errList) any {
	if v == nil {
		return nil
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshalerType) {
		if !checkUnmarshaler(t, v, path, errs) {
			return rejected{}
		}
		return v
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(t.Elem(), v, path, errs)
	case reflect.Struct:
		return checkStruct(t, v, path, errs)
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			errs.add(path, "expected a list, got %s", describe(v))
			return rejected{}
		}
		for i := range arr {
			if arr[i] = checkShape(t.Elem(), arr[i], index(path, i), errs); arr[i] == (rejected{}) {
				arr[i] = nil // decodes as the element's zero value; its problem is reported
			}
		}
		return arr
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			errs.add(path, "expected a mapping, got %s", describe(v))
			return rejected{}
		}
		for k, item := range obj {
			if obj[k] = checkShape(t.Elem(), item, key(path, k), errs); obj[k] == (rejected{}) {
				delete(obj, k)
			}
		}
		return obj
	}
	return checkScalar(t, v, path, errs)
}

func checkUnmarshaler(t reflect.Type, v any, path string, errs *errList) bool {
	raw, err := json.Marshal(v)
	if err != nil {
		errs.add(path, "%v", err)
		return false
	}
	target := reflect.New(t).Interface().(json.Unmarshaler)
	if err := target.UnmarshalJSON(raw); err != nil {
		errs.add(path, "%v", err)
		return false
	}
	return true
}

func checkStruct(t reflect.Type, v any, path string, errs *errList) any {
	obj, ok := v.(map[string]any)
	if !ok {
		errs.add(path, "expected a mapping, got %s", describe(v))
		return rejected{}
	}
	fields := jsonFields(t)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := fields.byName[k]
		if !ok {
			errs.add(key(path, k), "unknown field%s", suggest(k, fields.names))
			delete(obj, k)
			continue
		}
		if obj[k] = checkShape(f.Type, obj[k], key(path, k), errs); obj[k] == (rejected{}) {
			delete(obj, k)
		}
	}
	return obj
}

func checkScalar(t reflect.Type, v any, path string, errs *errList) any {
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x
		case json.Number:
			errs.rewrote = true
			return x.String()
		case bool:
			errs.add(path, "expected a string, got %s (YAML reads yes, no, on, off, y and n as booleans: quote the value)", describe(v))
			return rejected{}
		}
		errs.add(path, "expected a string, got %s", describe(v))
		return rejected{}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			errs.add(path, "expected true or false, got %s", describe(v))
			return rejected{}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			errs.add(path, "expected an integer, got %s", describe(v))
			return rejected{}
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			if _, ferr := strconv.ParseFloat(n.String(), 64); ferr == nil && strings.ContainsAny(n.String(), ".eE") {
				errs.add(path, "expected an integer, got %s", n)
			} else {
				errs.add(path, "integer %s out of range", n)
			}
			return rejected{}
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			errs.add(path, "expected a number, got %s", describe(v))
			return rejected{}
		}
		if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			errs.add(path, "number %s out of range", n)
			return rejected{}
		}
	case reflect.Interface:
	default:
		errs.add(path, "cannot decode into %s", t)
		return rejected{}
	}
	return v
}

// describe names the JSON type of a generic value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "the string " + strconv.Quote(truncate(x))
	case json.Number:
		return "the number " + truncate(x.String())
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	}
	return "null"
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

type structFields struct {
	byName map[string]reflect.StructField
	names  []string
}

var fieldCache sync.Map // reflect.Type → *structFields

// jsonFields returns the JSON names of t's exported fields.
func jsonFields(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string]reflect.StructField{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		sf.byName[name] = f
		sf.names = append(sf.names, name)
	}
	fieldCache.Store(t, sf)
	return sf
}

// suggest returns ` (did you mean "x"?)` for the closest known name, when one is close.
func suggest(k string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(strings.ToLower(k), strings.ToLower(n))
		if strings.EqualFold(k, n) {
			d = 0
		} else if len(k) >= 4 && strings.HasPrefix(strings.ToLower(n), strings.ToLower(k)) {
			d = 1 // a truncated name: burstPool → burstPoolPercent
		}
		if d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	if best == "" || len(k) > 64 {
		return ""
	}
	return " (did you mean " + strconv.Quote(best) + "?)"
}

// editDistance is the Levenshtein distance, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
