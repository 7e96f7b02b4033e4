package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/store"
)

// maxCommitConflicts bounds how often one Commit retries after losing an optimistic-concurrency
// race to another writer; each loss means another commit succeeded, so the store made progress.
const maxCommitConflicts = 1000

// CRDStore is the control plane's store.Store kept in one ControlState object. A Commit reads the
// object, applies the batch and writes it back guarded by the resourceVersion it read, retrying on
// a conflict, so every commit is atomic and adds exactly one to the revision even with several
// writers (processes or goroutines). All records live in the one object, so the store holds what
// one API object may hold (about 1.5 MiB with etcd's default request limit); the control plane's
// state (tenants, grants, tokens, nodes) is far smaller.
type CRDStore struct {
	c         client.Client
	namespace string
	name      string

	mu     sync.Mutex
	closed bool
}

// NewCRDStore returns the store kept in ControlState namespace/name; the object is created on
// the first Commit.
func NewCRDStore(c client.Client, namespace, name string) *CRDStore {
	return &CRDStore{c: c, namespace: namespace, name: name}
}

var _ store.Store = (*CRDStore)(nil)

func (s *CRDStore) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

func recordKey(kind, key string) string { return kind + "/" + key }

// Load returns every record and the current revision; a store never committed to is empty at
// revision 0.
func (s *CRDStore) Load(ctx context.Context) (store.Snapshot, error) {
	if err := s.check(); err != nil {
		return store.Snapshot{}, err
	}
	st, err := s.get(ctx)
	if err != nil {
		return store.Snapshot{}, err
	}
	snap := store.Snapshot{Revision: st.Revision, Records: map[string]map[string][]byte{}}
	for k, v := range st.Records {
		kind, key, ok := strings.Cut(k, "/")
		if !ok {
			return store.Snapshot{}, fmt.Errorf("load controlstate %s/%s: record %q has no kind", s.namespace, s.name, k)
		}
		if snap.Records[kind] == nil {
			snap.Records[kind] = map[string][]byte{}
		}
		snap.Records[kind][key] = v
	}
	return snap, nil
}

// get returns the object, or an empty one (no resourceVersion) when it does not exist yet.
func (s *CRDStore) get(ctx context.Context) (*ControlState, error) {
	st := &ControlState{}
	err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, st)
	if apierrors.IsNotFound(err) {
		return &ControlState{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get controlstate %s/%s: %w", s.namespace, s.name, err)
	}
	return st, nil
}

// Commit applies b atomically and returns the new revision.
func (s *CRDStore) Commit(ctx context.Context, b store.Batch) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if err := b.Validate(); err != nil {
		return 0, fmt.Errorf("commit to controlstate %s/%s: %w", s.namespace, s.name, err)
	}
	for range maxCommitConflicts {
		st, err := s.get(ctx)
		if err != nil {
			return 0, err
		}
		if st.Records == nil {
			st.Records = map[string][]byte{}
		}
		for _, d := range b.Deletes {
			delete(st.Records, recordKey(d.Kind, d.Key))
		}
		for _, p := range b.Puts {
			st.Records[recordKey(p.Kind, p.Key)] = p.Value
		}
		st.Revision++
		if st.ResourceVersion == "" {
			err = s.c.Create(ctx, st)
		} else {
			err = s.c.Update(ctx, st) // carries the resourceVersion read above
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // another writer committed first; apply the batch to its state
		}
		if err != nil {
			return 0, fmt.Errorf("commit to controlstate %s/%s at revision %d: %w", s.namespace, s.name, st.Revision, err)
		}
		return st.Revision, nil
	}
	return 0, fmt.Errorf("commit to controlstate %s/%s: %w", s.namespace, s.name, errTooManyConflicts)
}

var errTooManyConflicts = errors.New("lost the optimistic-concurrency race too many times")

// Close marks the store closed; the object stays.
func (s *CRDStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
