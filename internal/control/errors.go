package control

import (
	"errors"
	"fmt"
	"strings"
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
		parts[i] = f.Path + ": " + f.Message
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

func (e *InvalidError) add(path, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (e *InvalidError) err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}

// ErrNotFound and ErrConflict classify engine errors (wrapped with the identifiers). ErrFenced
// is a conflict: a node's agent spoke for an epoch the node has left (see Node.Epoch).
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrFenced   = fmt.Errorf("%w: fenced", ErrConflict)
)
