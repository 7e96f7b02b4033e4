package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gpupool.dev/gpupool/internal/fair"
)

// FieldError is one problem with one field of a request, named by its JSON path.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// InvalidError lists every problem of a request at once. A conflict is a request that is
// well-formed but collides with what is stored (409 rather than 400).
type InvalidError struct {
	Fields   []FieldError
	conflict bool
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Message // the body as a whole
		if f.Path != "" {
			parts[i] = f.Path + ": " + f.Message
		}
	}
	if e.conflict {
		return "conflict: " + strings.Join(parts, "; ")
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Is makes a conflict match ErrConflict.
func (e *InvalidError) Is(target error) bool { return e.conflict && target == ErrConflict }

func (e *InvalidError) add(path, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// has reports whether a problem is recorded for path.
func (e *InvalidError) has(path string) bool {
	return slices.ContainsFunc(e.Fields, func(f FieldError) bool { return f.Path == path })
}

func (e *InvalidError) err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}

// ErrNotFound, ErrConflict and ErrRemoved classify engine errors (wrapped with the identifiers).
// ErrFenced is a conflict: a node's agent spoke for an epoch the node has left (see Node.Epoch).
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrFenced   = fmt.Errorf("%w: fenced", ErrConflict)
	// ErrRemoved is a node an operator removed (DELETE /v1/nodes/{node}) speaking again: its
	// registration is refused (410 Gone) until an operator re-admits it.
	ErrRemoved = errors.New("removed")
)

// refusal turns the allocator's refusal of a change to one tenant into a conflict (409) that
// lists every problem with the request field it concerns: the field the allocator names
// (fair.FieldError), renamed by rename where the request calls it otherwise ("demand" is
// "replicas" in a demand request), or "" (the request as a whole) where it names none.
func refusal(err error, rename map[string]string) error {
	inv := &InvalidError{conflict: true}
	for _, e := range joinedErrors(err) {
		path, msg := "", e.Error()
		var fe *fair.FieldError
		if errors.As(e, &fe) {
			path, msg = fe.Field, strings.TrimPrefix(fe.Error(), fe.Field+": ")
			if r, ok := rename[path]; ok {
				path = r
			}
		}
		inv.add(path, "%s", msg)
	}
	return inv
}

// joinedErrors flattens the errors.Join trees of err into their leaves.
func joinedErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, joinedErrors(e)...)
		}
		return out
	}
	return []error{err}
}
