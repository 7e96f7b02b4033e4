package v1

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// GPURef names one GPU of the fleet as "node/index", for example "gpu-node-a/3". The index counts
// the node's GPUs from 0 in the order its `gpus` groups list them: with
// `gpus: [{board: H100-SXM5-80GB, count: 4}, {board: L40S, count: 2}]` the H100s are 0–3 and the
// L40S boards 4 and 5.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[0-9]+$`
type GPURef struct {
	Node  string
	Index int
}

// ParseGPURef parses "node/index".
func ParseGPURef(s string) (GPURef, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 || strings.Contains(s[:i], "/") {
		return GPURef{}, fmt.Errorf("invalid GPU reference %q: want \"node/index\", like \"gpu-node-a/3\"", s)
	}
	n, err := parseIndex(s[i+1:])
	if err != nil {
		return GPURef{}, fmt.Errorf("invalid GPU reference %q: index %w", s, err)
	}
	return GPURef{Node: s[:i], Index: n}, nil
}

// String returns "node/index".
func (r GPURef) String() string { return r.Node + "/" + strconv.Itoa(r.Index) }

// MarshalJSON encodes r as the string "node/index".
func (r GPURef) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON accepts the string "node/index".
func (r *GPURef) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("invalid GPU reference %s: want a string \"node/index\"", b)
	}
	v, err := ParseGPURef(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// InstanceRef names a MIG instance on a GPU as "profile@start", for example "3g.40gb@4": the
// profile at start memory slice 4.
type InstanceRef struct {
	Profile string
	Start   int
}

// ParseInstanceRef parses "profile@start".
func ParseInstanceRef(s string) (InstanceRef, error) {
	i := strings.LastIndexByte(s, '@')
	if i <= 0 || strings.Contains(s[:i], "@") {
		return InstanceRef{}, fmt.Errorf("invalid instance reference %q: want \"profile@start\", like \"3g.40gb@4\"", s)
	}
	n, err := parseIndex(s[i+1:])
	if err != nil {
		return InstanceRef{}, fmt.Errorf("invalid instance reference %q: start %w", s, err)
	}
	return InstanceRef{Profile: s[:i], Start: n}, nil
}

// String returns "profile@start".
func (r InstanceRef) String() string { return r.Profile + "@" + strconv.Itoa(r.Start) }

// IsZero reports whether r is unset, so that `omitzero` leaves it out.
func (r InstanceRef) IsZero() bool { return r == InstanceRef{} }

// MarshalJSON encodes r as the string "profile@start".
func (r InstanceRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON accepts the string "profile@start".
func (r *InstanceRef) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("invalid instance reference %s: want a string \"profile@start\"", b)
	}
	v, err := ParseInstanceRef(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// parseIndex parses a non-negative decimal integer with no sign and no leading zeros.
func parseIndex(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 1<<20 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// IntOrPercent is a count written either as an integer (3) or as a whole percentage ("25%").
type IntOrPercent struct {
	Value   int
	Percent bool
}

// Resolve returns the count for a total: the value itself, or Value% of total rounded down but
// at least 1 (so "25%" of 3 GPUs is 1). The result never exceeds total when total ≥ 1.
func (v IntOrPercent) Resolve(total int) int {
	n := v.Value
	if v.Percent {
		n = total * v.Value / 100
	}
	n = min(n, total)
	return max(n, 1)
}

// String returns "3" or "25%".
func (v IntOrPercent) String() string {
	if v.Percent {
		return strconv.Itoa(v.Value) + "%"
	}
	return strconv.Itoa(v.Value)
}

// MarshalJSON encodes an integer as a JSON number and a percentage as a string.
func (v IntOrPercent) MarshalJSON() ([]byte, error) {
	if v.Percent {
		return json.Marshal(v.String())
	}
	return json.Marshal(v.Value)
}

// UnmarshalJSON accepts a JSON integer or a string like "25%".
func (v *IntOrPercent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("invalid count %s: want an integer or a percentage like \"25%%\"", b)
		}
		*v = IntOrPercent{Value: n}
		return nil
	}
	num, ok := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || strings.HasPrefix(num, "+") {
		return fmt.Errorf("invalid count %q: want an integer or a whole percentage like \"25%%\"", s)
	}
	*v = IntOrPercent{Value: n, Percent: true}
	return nil
}
