package v1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"

	"gpupool.dev/gpupool/internal/yamlkey"
)

// Document is a decoded *Pool or *Plan.
type Document interface {
	// DocumentKind returns KindPool or KindPlan.
	DocumentKind() string
}

// DocumentKind returns KindPool.
func (*Pool) DocumentKind() string { return KindPool }

// DocumentKind returns KindPlan.
func (*Plan) DocumentKind() string { return KindPlan }

// MaxDocumentBytes bounds the input size; a pool or plan of tens of thousands of GPUs fits. The
// CLI checks every file it reads against the same limit before reading it.
const MaxDocumentBytes = 64 << 20

// Decode reads one YAML or JSON document (JSON when the first non-blank byte is '{'), checks
// apiVersion and kind, and decodes it strictly into a *Pool or *Plan: unknown fields, duplicate
// keys, wrong types and malformed durations, sizes and references are errors, all reported at
// once as FieldErrors with their paths; a document whose header is right is returned beside
// those errors with every well-formed field decoded (LoadPool validates that part). Decode
// neither fills defaults nor validates; the one value
// it rewrites is a tenant's model.quantization given as a known alias ("awq", "gptq", "w4a16",
// "fp8_e4m3", …), which it stores under the canonical name ("int4-awq", "int4-gptq", "fp8").
func Decode(data []byte) (Document, error) {
	tree, raw, dups, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	kind, err := checkTreeHeader(tree)
	if err != nil {
		return nil, withDuplicates(dups, err)
	}
	switch kind {
	case KindPool:
		p := new(Pool)
		err := decodeTreeRaw(tree, raw, p)
		normaliseQuantizations(p)
		return p, withDuplicates(dups, err)
	default:
		p := new(Plan)
		return p, withDuplicates(dups, decodeTreeRaw(tree, raw, p))
	}
}

// withDuplicates adds the duplicate-key errors to err (FieldErrors or nil), sorted by path.
func withDuplicates(dups FieldErrors, err error) error {
	if len(dups) == 0 {
		return err
	}
	all := append(FieldErrors{}, dups...)
	var fe FieldErrors
	if errors.As(err, &fe) {
		all = append(all, fe...)
	} else if err != nil {
		all = append(all, FieldError{Msg: err.Error()})
	}
	return sortFieldErrors(all)
}

// DecodePool is Decode for a document that must be a Pool.
func DecodePool(data []byte) (*Pool, error) {
	d, err := decodeKind(data, KindPool)
	if err != nil {
		return nil, err
	}
	return d.(*Pool), nil
}

// DecodePlan is Decode for a document that must be a Plan.
func DecodePlan(data []byte) (*Plan, error) {
	d, err := decodeKind(data, KindPlan)
	if err != nil {
		return nil, err
	}
	return d.(*Plan), nil
}

// LoadPool decodes a Pool, fills its defaults and validates it against the built-in catalog. A
// Pool with malformed fields (an unknown field, a wrong type) is still defaulted and validated
// without them, so that the error lists every problem of the document at once; problems at or
// under a malformed field's path are left to the decoding error.
func LoadPool(data []byte) (*Pool, error) { return Validator{}.LoadPool(data) }

// LoadPool is the package-level LoadPool with v's catalog.
func (v Validator) LoadPool(data []byte) (*Pool, error) {
	d, derr := decodePartial(data, KindPool)
	if d == nil {
		return nil, derr
	}
	p := d.(*Pool)
	Default(p)
	verr := v.Pool(p)
	if derr == nil && verr == nil {
		return p, nil
	}
	if derr == nil {
		return nil, verr
	}
	var dfe, vfe FieldErrors
	if !errors.As(derr, &dfe) {
		return nil, derr
	}
	errors.As(verr, &vfe)
	all := append(FieldErrors{}, dfe...)
	for _, e := range vfe {
		if !underAny(e.Path, dfe) {
			all = append(all, e)
		}
	}
	return nil, sortFieldErrors(all)
}

// underAny reports whether path is one of the errors' paths or lies under one of them.
func underAny(path string, errs FieldErrors) bool {
	for _, e := range errs {
		if e.Path == "" {
			continue
		}
		if path == e.Path || strings.HasPrefix(path, e.Path+".") || strings.HasPrefix(path, e.Path+"[") {
			return true
		}
	}
	return false
}

func decodeKind(data []byte, want string) (Document, error) {
	d, err := decodePartial(data, want)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// decodePartial is decodeKind that also returns what could be decoded of a document of the
// right kind when some of its fields are malformed (nil when the document is not one).
func decodePartial(data []byte, want string) (Document, error) {
	d, err := Decode(data)
	if d == nil {
		return nil, err
	}
	if got := d.DocumentKind(); got != want {
		return nil, FieldErrors{{Path: "kind", Msg: fmt.Sprintf("got %q, want %q", got, want)}}
	}
	return d, err
}

func checkTreeHeader(tree map[string]any) (string, error) {
	var errs errList
	if v, ok := tree["apiVersion"].(string); !ok || v != APIVersion {
		errs.add("apiVersion", "%s (supported: %s)", headerProblem(tree["apiVersion"]), APIVersion)
	}
	kind, ok := tree["kind"].(string)
	if !ok || (kind != KindPool && kind != KindPlan) {
		errs.add("kind", "%s (supported: %s, %s)", headerProblem(tree["kind"]), KindPlan, KindPool)
	}
	return kind, errs.result()
}

func headerProblem(v any) string {
	switch x := v.(type) {
	case nil:
		return "required"
	case string:
		return "unsupported " + strconv.Quote(truncate(x))
	}
	return "expected a string, got " + describe(v)
}

// decodeTree shape-checks tree against out's type, then decodes it with encoding/json. Values the
// shape check rejects are left out, so out holds every well-formed part of the document and the
// returned FieldErrors name every malformed one.
func decodeTree(tree map[string]any, out any) error { return decodeTreeRaw(tree, nil, out) }

// decodeTreeRaw is decodeTree given the JSON text the tree was parsed from: when the shape check
// neither rejected nor rewrote anything, out is decoded from that text, which saves encoding the
// tree again (a fifth of the time of a large pool).
func decodeTreeRaw(tree map[string]any, raw []byte, out any) error {
	var errs errList
	checkTree(tree, "", &errs)
	norm := checkShape(reflect.TypeOf(out).Elem(), tree, "", &errs)
	if norm == (rejected{}) {
		return errs.result()
	}
	if raw == nil || errs.rewrote || len(errs.errs) > 0 {
		var err error
		if raw, err = json.Marshal(norm); err != nil {
			errs.add("", "decode document: %v", err)
			return errs.result()
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		errs.add("", "decode document: %v", err)
	}
	return errs.result()
}

// parseTree turns YAML or JSON bytes into a generic tree whose numbers are json.Number.
func parseTree(data []byte) (map[string]any, error) {
	tree, _, err := parseTreeRaw(data)
	return tree, err
}

// parseTreeRaw is parseTree that also returns the JSON text the tree was read from. A key given
// twice is an error here; Decode reads past it (see parseDocument).
func parseTreeRaw(data []byte) (map[string]any, []byte, error) {
	tree, raw, dups, err := parseDocument(data)
	if err != nil {
		return nil, nil, err
	}
	if len(dups) > 0 {
		return nil, nil, dups
	}
	return tree, raw, nil
}

// parseDocument is parseTreeRaw that reads past keys given twice in one mapping: it returns them
// as dups, one error per repeated key with its path, and the tree holds the last value of each
// (what both the YAML reader and encoding/json keep), so the document's other problems can be
// reported in the same run.
func parseDocument(data []byte) (map[string]any, []byte, FieldErrors, error) {
	if len(data) > MaxDocumentBytes {
		return nil, nil, nil, docError("document is %d bytes, more than the %d allowed", len(data), MaxDocumentBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	var jsonData []byte
	var dups FieldErrors
	if len(trimmed) > 0 && trimmed[0] == '{' {
		d, err := checkJSONKeys(trimmed)
		if err != nil {
			return nil, nil, nil, err
		}
		dups, jsonData = d, trimmed
	} else {
		if err := checkSingleDocument(data); err != nil {
			return nil, nil, nil, err
		}
		j, coll, err := yamlToJSON(data)
		if err != nil {
			// A repeated key fails the strict reader at once; read on past it when that is all
			// that is wrong, naming every repeated key.
			if d, lax, ok := yamlDuplicates(data); ok {
				dups, j, err = d, lax, nil
			}
		} else if len(coll) > 0 {
			// No key is written twice, but two become one JSON key.
			dups = coll
		}
		if err != nil {
			if path, v, ok := findNonFinite(data); ok {
				return nil, nil, nil, FieldErrors{{Path: path, Msg: fmt.Sprintf("must be a finite number (got %s)", v)}}
			}
			return nil, nil, nil, docError("parse YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		jsonData = j
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, nil, nil, docError("parse JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, nil, docError("parse JSON: unexpected data after the document")
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		if tree == nil {
			return nil, nil, nil, docError("empty document")
		}
		return nil, nil, nil, docError("expected a mapping at the top of the document, got %s", describe(tree))
	}
	if len(dups) > 0 {
		// The text holds the repeated keys; decode from the tree, which holds the last of each.
		jsonData = nil
	}
	return obj, jsonData, dups, nil
}

func docError(format string, args ...any) error {
	return FieldErrors{{Msg: fmt.Sprintf(format, args...)}}
}

// checkSingleDocument rejects YAML streams with more than one document: the YAML reader would
// silently use only the first.
func checkSingleDocument(data []byte) error {
	content := false
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r \t")
		isMarker := line == "---" || strings.HasPrefix(line, "--- ")
		if isMarker && content {
			return docError("line %d: a second YAML document starts here; put one document in each file", i+1)
		}
		t := strings.TrimSpace(line)
		if !isMarker && t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(t, "%") {
			content = true
		}
	}
	return nil
}

// checkJSONKeys lists duplicate object keys in JSON text, with their paths; encoding/json
// silently keeps the last one. The error is for text that is not JSON.
func checkJSONKeys(data []byte) (FieldErrors, error) {
	paths, err := DuplicateJSONKeys(data)
	if err != nil {
		return nil, docError("parse JSON: %v", err)
	}
	var dups FieldErrors
	for _, path := range paths {
		dups = append(dups, FieldError{Path: path, Msg: "duplicate key"})
	}
	return dups, nil
}

// DuplicateJSONKeys lists the paths (as the validation errors write them) of the object keys
// given twice in JSON text, which encoding/json silently resolves to the last one. The error is
// for text that is not one JSON value or nests deeper than maxJSONDepth levels.
func DuplicateJSONKeys(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var dups []string
	err := walkJSONValue(dec, "", &dups, 0)
	return dups, err
}

const maxJSONDepth = 100

func walkJSONValue(dec *json.Decoder, path string, dups *[]string, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := t.(string)
			if seen[k] {
				*dups = append(*dups, key(path, k))
			}
			seen[k] = true
			if err := walkJSONValue(dec, key(path, k), dups, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walkJSONValue(dec, index(path, i), dups, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// findNonFinite finds the first YAML value that is infinite or not a number (.inf, .nan), which
// JSON cannot hold, and returns its path and how it was written.
func findNonFinite(data []byte) (string, string, bool) {
	var tree any
	if yamlv2.Unmarshal(data, &tree) != nil {
		return "", "", false
	}
	return nonFinite(tree, "")
}

func nonFinite(v any, path string) (string, string, bool) {
	switch x := v.(type) {
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return path, strconv.FormatFloat(x, 'g', -1, 64), true
		}
	case map[any]any:
		// Keys that print alike (1 and "1") are each walked, in an order of their own, so that
		// the same text always names the same value.
		keys := make([]any, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := fmt.Sprint(keys[i]), fmt.Sprint(keys[j])
			if a != b {
				return a < b
			}
			return yamlkey.Order(keys[i]) < yamlkey.Order(keys[j])
		})
		for _, k := range keys {
			if p, s, ok := nonFinite(x[k], key(path, fmt.Sprint(k))); ok {
				return p, s, true
			}
		}
	case []any:
		for i, item := range x {
			if p, s, ok := nonFinite(item, index(path, i)); ok {
				return p, s, true
			}
		}
	}
	return "", "", false
}
