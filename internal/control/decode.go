package control

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// decodeBody reads a JSON body strictly: unknown fields, duplicate keys, wrong types and
// trailing data are errors, all reported at once with their field paths.
func decodeBody(r *http.Request, v any) error {
	inv, err := decodeFields(r, v)
	if err != nil {
		return err
	}
	return inv.err()
}

// decodeFields reads a JSON body into v and returns its field problems (unknown fields,
// duplicate keys, wrong types), with v decoded as far as it could be, so that a handler can add
// its own checks and answer every problem at once. The error is for a body that cannot be read
// at all: over the size limit, or not one JSON value.
func decodeFields(r *http.Request, v any) (*InvalidError, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, err
		}
		return nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "reading the body: " + err.Error()}}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number out of float64's range is the struct decode's to report, with its path
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "body is not valid JSON: " + err.Error()}}}
	}
	if dec.More() {
		return nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "trailing data after the JSON value"}}}
	}
	inv := &InvalidError{}
	dups, err := v1.DuplicateJSONKeys(data)
	if err != nil {
		return nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "body is not valid JSON: " + err.Error()}}}
	}
	for _, path := range dups {
		inv.add(path, "duplicate key")
	}
	unknownFields(tree, reflect.TypeOf(v), "", inv)
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && strings.HasPrefix(te.Value, "number ") && te.Field == "":
			// A number too large for its field: encoding/json does not say which field.
			paths := hugeNumbers(tree, "")
			if len(paths) == 0 {
				paths = []string{""}
			}
			for _, path := range paths {
				inv.add(path, "must be %s in range (got %s)", jsonKind(te.Type), te.Value)
			}
		case errors.As(err, &te):
			inv.add(te.Field, "must be %s (got %s)", jsonKind(te.Type), te.Value)
		default:
			inv.add("", "%s", err.Error())
		}
	}
	return inv, nil
}

// merge adds err's field problems (an *InvalidError; any other error is returned as it is) to
// inv, leaving out a field inv already names, and returns inv's error.
func (e *InvalidError) merge(err error) error {
	var more *InvalidError
	if err != nil && !errors.As(err, &more) {
		return err
	}
	if more != nil {
		for _, f := range more.Fields {
			if !slices.ContainsFunc(e.Fields, func(g FieldError) bool { return g.Path == f.Path }) {
				e.Fields = append(e.Fields, f)
			}
		}
	}
	return e.err()
}

func fieldPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// unknownFields reports every object key that names no field of the struct type it decodes
// into (encoding/json's DisallowUnknownFields stops at the first), matching names as
// encoding/json does (exact, else case-insensitive).
func unknownFields(x any, t reflect.Type, path string, inv *InvalidError) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := x.(map[string]any)
		if !ok {
			return
		}
		fields := map[string]reflect.Type{}
		structFields(t, fields)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				for name, f := range fields {
					if strings.EqualFold(name, k) {
						ft, ok = f, true
						break
					}
				}
			}
			if !ok {
				inv.add(fieldPath(path, k), "unknown field")
				continue
			}
			unknownFields(obj[k], ft, fieldPath(path, k), inv)
		}
	case reflect.Slice, reflect.Array:
		arr, _ := x.([]any)
		for i, e := range arr {
			unknownFields(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), inv)
		}
	case reflect.Map:
		obj, _ := x.(map[string]any)
		for k, e := range obj {
			unknownFields(e, t.Elem(), fieldPath(path, k), inv)
		}
	}
}

// structFields maps a struct's JSON names to their types, embedded structs' fields included.
func structFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := out[name]; !ok {
			out[name] = f.Type
		}
	}
}

// jsonKind names what a Go type decodes from, in JSON's words.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

// hugeNumbers lists the paths of the numbers in a decoded tree (json.Number leaves) that do not
// fit a float64.
func hugeNumbers(x any, path string) []string {
	var out []string
	switch v := x.(type) {
	case json.Number:
		if _, err := v.Float64(); err != nil {
			out = append(out, path)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, hugeNumbers(v[k], fieldPath(path, k))...)
		}
	case []any:
		for i, e := range v {
			out = append(out, hugeNumbers(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}
