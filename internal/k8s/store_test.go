package k8s

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/store"
	"gpupool.dev/gpupool/internal/store/storetest"
)

var nsSeq atomic.Int64

// newNamespace creates a fresh namespace for one test.
func newNamespace(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, nsSeq.Add(1))
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestCRDStoreContract runs the store contract suite against ControlState objects on the real API
// server: each store is a fresh object, and Reopen is a new CRDStore on the same object.
func TestCRDStoreContract(t *testing.T) {
	c := needAPI(t)
	ns := newNamespace(t, c, "store")
	var n atomic.Int64
	names := map[store.Store]string{}
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) store.Store {
			s := NewCRDStore(c, ns, fmt.Sprintf("state-%d", n.Add(1)))
			names[s] = s.name
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return NewCRDStore(c, ns, names[s])
		},
	})
}

// TestCRDStoreTwoWriters shows optimistic concurrency across two store values (two controller
// processes) on one object: 2×25 interleaved commits yield revisions 1..50, each once, and every
// record.
func TestCRDStoreTwoWriters(t *testing.T) {
	c := needAPI(t)
	ns := newNamespace(t, c, "store2")
	ctx := context.Background()
	a, b := NewCRDStore(c, ns, "shared"), NewCRDStore(c, ns, "shared")
	defer a.Close()
	defer b.Close()
	revs := make(chan uint64, 50)
	errs := make(chan error, 2)
	for w, s := range []*CRDStore{a, b} {
		go func() {
			for i := range 25 {
				r, err := s.Commit(ctx, store.Batch{Puts: []store.Record{{Kind: "k", Key: fmt.Sprintf("%d-%d", w, i), Value: []byte("v")}}})
				if err != nil {
					errs <- err
					return
				}
				revs <- r
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(revs)
	seen := map[uint64]bool{}
	for r := range revs {
		if seen[r] || r < 1 || r > 50 {
			t.Fatalf("revision %d out of range or repeated", r)
		}
		seen[r] = true
	}
	snap, err := a.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != 50 || len(snap.Records["k"]) != 50 {
		t.Fatalf("revision %d with %d records, want 50 and 50", snap.Revision, len(snap.Records["k"]))
	}
}
