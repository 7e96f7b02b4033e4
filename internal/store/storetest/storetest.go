package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"gpupool.dev/gpupool/internal/store"
)

// Factory makes stores for the suite.
type Factory struct {
	// New returns a fresh, empty store. The suite closes it.
	New func(t *testing.T) store.Store
	// Reopen, when set, closes s and opens the same durable state again.
	Reopen func(t *testing.T, s store.Store) store.Store
}

// Run runs the contract suite.
func Run(t *testing.T, f Factory) {
	ctx := context.Background()
	t.Run("EmptyLoad", func(t *testing.T) {
		s := f.New(t)
		defer s.Close()
		snap, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Revision != 0 || countRecords(snap) != 0 {
			t.Fatalf("fresh store: revision %d, %d records; want 0, 0", snap.Revision, countRecords(snap))
		}
	})
	t.Run("PutDeleteRevision", func(t *testing.T) { testPutDelete(t, f.New(t)) })
	t.Run("InvalidBatchChangesNothing", func(t *testing.T) { testInvalid(t, f.New(t)) })
	t.Run("ConcurrentCommitsGetDistinctRevisions", func(t *testing.T) { testConcurrent(t, f.New(t)) })
	t.Run("ClosedStoreErrors", func(t *testing.T) {
		s := f.New(t)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, store.Batch{}); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("commit after close: %v, want ErrClosed", err)
		}
		if _, err := s.Load(ctx); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("load after close: %v, want ErrClosed", err)
		}
	})
	if f.Reopen != nil {
		t.Run("SurvivesReopen", func(t *testing.T) { testReopen(t, f) })
	}
}

func countRecords(s store.Snapshot) int {
	n := 0
	for _, m := range s.Records {
		n += len(m)
	}
	return n
}

func put(kind, key, v string) store.Record {
	return store.Record{Kind: kind, Key: key, Value: []byte(v)}
}

func testPutDelete(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	r1, err := s.Commit(ctx, store.Batch{Puts: []store.Record{put("tenants", "a", "1"), put("tenants", "b", "2"), put("grants", "7", "x")}})
	if err != nil {
		t.Fatal(err)
	}
	// Deletes go first, so deleting and putting the same key in one batch keeps the put.
	r2, err := s.Commit(ctx, store.Batch{
		Deletes: []store.Ref{{Kind: "tenants", Key: "a"}, {Kind: "grants", Key: "7"}, {Kind: "nothing", Key: "z"}},
		Puts:    []store.Record{put("grants", "7", "y")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r2 != r1+1 {
		t.Fatalf("revisions %d then %d, want consecutive", r1, r2)
	}
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != r2 {
		t.Fatalf("load revision %d, want %d", snap.Revision, r2)
	}
	want := map[string]string{"tenants/b": "2", "grants/7": "y"}
	if got := countRecords(snap); got != len(want) {
		t.Fatalf("%d records, want %d: %v", got, len(want), snap.Records)
	}
	for k, v := range want {
		kind, key, _ := cut(k)
		if got, ok := snap.Get(kind, key); !ok || !bytes.Equal(got, []byte(v)) {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func testInvalid(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	_, err := s.Commit(ctx, store.Batch{Puts: []store.Record{put("tenants", "ok", "1"), {Kind: "a/b", Key: "", Value: nil}}})
	if err == nil {
		t.Fatal("commit of an invalid batch succeeded")
	}
	for _, want := range []string{"puts[1].kind", "puts[1].key", "puts[1].value"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if countRecords(snap) != 0 || snap.Revision != 0 {
		t.Fatalf("invalid batch left %d records, revision %d", countRecords(snap), snap.Revision)
	}
}

func testConcurrent(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	const workers, each = 4, 10
	revs := make(chan uint64, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r, err := s.Commit(ctx, store.Batch{Puts: []store.Record{put("k", fmt.Sprintf("%d-%d", w, i), "v")}})
				if err != nil {
					t.Error(err)
					return
				}
				revs <- r
			}
		})
	}
	wg.Wait()
	close(revs)
	seen := map[uint64]bool{}
	for r := range revs {
		if seen[r] {
			t.Fatalf("revision %d returned twice", r)
		}
		seen[r] = true
	}
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != workers*each || len(snap.Records["k"]) != workers*each {
		t.Fatalf("revision %d with %d records, want %d each", snap.Revision, len(snap.Records["k"]), workers*each)
	}
}

func testReopen(t *testing.T, f Factory) {
	ctx := context.Background()
	s := f.New(t)
	rev, err := s.Commit(ctx, store.Batch{Puts: []store.Record{put("tenants", "a", `{"demand":3}`)}})
	if err != nil {
		t.Fatal(err)
	}
	s = f.Reopen(t, s)
	defer s.Close()
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := snap.Get("tenants", "a"); snap.Revision != rev || string(v) != `{"demand":3}` {
		t.Fatalf("after reopen: revision %d value %q; want %d %q", snap.Revision, v, rev, `{"demand":3}`)
	}
}
