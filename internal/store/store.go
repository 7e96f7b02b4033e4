package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Store is the port the control plane persists through.
type Store interface {
	// Load returns every record and the current revision.
	Load(ctx context.Context) (Snapshot, error)
	// Commit applies a batch atomically and durably and returns the new revision. An empty batch
	// still makes a revision.
	Commit(ctx context.Context, b Batch) (uint64, error)
	// Close releases the store.
	Close() error
}

// Record is one stored value.
type Record struct {
	Kind  string
	Key   string
	Value []byte
}

// Ref names a record.
type Ref struct {
	Kind string
	Key  string
}

// Batch is one atomic change: Deletes are applied before Puts.
type Batch struct {
	Puts    []Record
	Deletes []Ref
}

// Snapshot is the whole stored state.
type Snapshot struct {
	Revision uint64
	// Records maps kind → key → value.
	Records map[string]map[string][]byte
}

// Get returns one value of a snapshot.
func (s Snapshot) Get(kind, key string) ([]byte, bool) {
	v, ok := s.Records[kind][key]
	return v, ok
}

// ErrClosed is returned by a Store used after Close.
var ErrClosed = errors.New("store is closed")

// Validate checks a batch: kinds and keys non-empty, kinds free of '/', values present.
// Every problem is returned at once.
func (b Batch) Validate() error {
	var errs []error
	for i, p := range b.Puts {
		errs = append(errs, checkRef(fmt.Sprintf("puts[%d]", i), p.Kind, p.Key))
		if p.Value == nil {
			errs = append(errs, fmt.Errorf("puts[%d].value: must be set (kind %q, key %q)", i, p.Kind, p.Key))
		}
	}
	for i, d := range b.Deletes {
		errs = append(errs, checkRef(fmt.Sprintf("deletes[%d]", i), d.Kind, d.Key))
	}
	return errors.Join(errs...)
}

func checkRef(path, kind, key string) error {
	var errs []error
	if kind == "" || strings.Contains(kind, "/") {
		errs = append(errs, fmt.Errorf("%s.kind: must be non-empty and without '/' (got %q)", path, kind))
	}
	if key == "" {
		errs = append(errs, fmt.Errorf("%s.key: must be non-empty (kind %q)", path, kind))
	}
	return errors.Join(errs...)
}
