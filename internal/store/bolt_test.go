package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"gpupool.dev/gpupool/internal/store"
	"gpupool.dev/gpupool/internal/store/storetest"
)

func openBolt(t *testing.T, path string) *store.Bolt {
	t.Helper()
	s, err := store.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBoltContract(t *testing.T) {
	paths := map[store.Store]string{}
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) store.Store {
			p := filepath.Join(t.TempDir(), "state.db")
			s := openBolt(t, p)
			paths[s] = p
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openBolt(t, paths[s])
		},
	})
}

// TestMigrateV1 writes a schema-1 file by hand (one "data" bucket, KIND/KEY keys, no schema key)
// and checks that Open moves every record and sets the revision to the record count.
func TestMigrateV1(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v1.db")
	db, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1 := map[string]string{"tenants/a": `{"demand":1}`, "tenants/b": `{"demand":2}`, "tokens/abc": `{"role":"operator"}`}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("data"))
		if err != nil {
			return err
		}
		for k, v := range v1 {
			if err := b.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openBolt(t, p)
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != uint64(len(v1)) {
		t.Errorf("revision %d after migration, want %d (one per migrated record)", snap.Revision, len(v1))
	}
	for k, v := range v1 {
		kind, key, _ := strings.Cut(k, "/")
		if got, ok := snap.Get(kind, key); !ok || string(got) != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	s.Close()

	// The migrated file is schema 2 and no "data" bucket is left.
	db, err = bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if got := string(tx.Bucket([]byte("meta")).Get([]byte("schema"))); got != "2" {
			t.Errorf("schema %q, want 2", got)
		}
		if tx.Bucket([]byte("data")) != nil {
			t.Error("version-1 bucket still present")
		}
		return nil
	})
}

func TestMigrateV1BadKeyLeavesFileUntouched(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v1bad.db")
	db, _ := bolt.Open(p, 0o600, nil)
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("data"))
		b.Put([]byte("tenants/a"), []byte("1"))
		return b.Put([]byte("noslash"), []byte("2"))
	})
	db.Close()
	if _, err := store.OpenBolt(p); err == nil || !strings.Contains(err.Error(), `"noslash"`) {
		t.Fatalf("open: %v, want an error naming the bad key", err)
	}
	db, _ = bolt.Open(p, 0o600, nil)
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("data")) == nil || tx.Bucket([]byte("kinds")) != nil {
			t.Error("failed migration changed the file")
		}
		return nil
	})
}

func TestNewerSchemaRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v9.db")
	db, _ := bolt.Open(p, 0o600, nil)
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("meta"))
		return b.Put([]byte("schema"), []byte("9"))
	})
	db.Close()
	if _, err := store.OpenBolt(p); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("open: %v, want a refusal naming version 9", err)
	}
}

func BenchmarkBoltCommit(b *testing.B) {
	s, err := store.OpenBolt(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := store.Batch{Puts: []store.Record{{Kind: "tenants", Key: "a", Value: []byte(`{"demand":3}`)}}}
	for b.Loop() {
		if _, err := s.Commit(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// damagedFile commits a few records to a new store file, closes it and returns its path and size.
func damagedFile(t *testing.T) (string, int64) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state.db")
	s := openBolt(t, p)
	for i := range 50 {
		b := store.Batch{Puts: []store.Record{{Kind: "tenants", Key: fmt.Sprintf("t%02d", i), Value: bytes.Repeat([]byte("x"), 300)}}}
		if _, err := s.Commit(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, fi.Size()
}

// TestTruncatedFileIsRefused: a store file cut short at every page boundary is either refused
// with ErrDamaged or, when the cut is past the last commit's pages, read whole. Before, a cut in
// the middle of the pages ended the process with SIGBUS (a fault in the memory-mapped file) on
// every start.
func TestTruncatedFileIsRefused(t *testing.T) {
	p, size := damagedFile(t)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for cut := int64(2 * 4096); cut < size; cut += 4096 {
		if err := os.WriteFile(p, orig[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := store.OpenBolt(p)
		if err != nil {
			if !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("cut at %d of %d: %v, want ErrDamaged", cut, size, err)
			}
			refused++
			continue
		}
		snap, err := s.Load(context.Background())
		s.Close()
		if err != nil || len(snap.Records["tenants"]) != 50 || snap.Revision != 50 {
			t.Fatalf("cut at %d of %d opened: %d tenants, revision %d, %v; want all 50 or ErrDamaged", cut, size, len(snap.Records["tenants"]), snap.Revision, err)
		}
	}
	if refused == 0 {
		t.Fatalf("no cut of a %d-byte file was refused", size)
	}
	t.Logf("%d of %d cuts refused", refused, (size-2*4096)/4096)
}

// TestSecondOpenIsLocked: a file held open (by another `gpupool serve`) is refused with a message
// that says so, not bbolt's bare "timeout".
func TestSecondOpenIsLocked(t *testing.T) {
	old := store.LockTimeout
	store.LockTimeout = 100 * time.Millisecond
	defer func() { store.LockTimeout = old }()
	p := filepath.Join(t.TempDir(), "state.db")
	s := openBolt(t, p)
	defer s.Close()
	_, err := store.OpenBolt(p)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// TestGarbledPagesAreRefused: data pages overwritten with garbage, all of them or one at a time,
// are refused with ErrDamaged or (a page not in use) read whole; before, a garbled page in use was
// a panic in bbolt's freelist rebuild (a goroutine of its own), which ended the test process.
func TestGarbledPagesAreRefused(t *testing.T) {
	p, size := damagedFile(t)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	garble := func(from, to int64) {
		b := bytes.Clone(orig)
		for i := from; i < to; i++ {
			b[i] = 0xA5
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	garble(2*4096, size)
	if s, err := store.OpenBolt(p); !errors.Is(err, store.ErrDamaged) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("every data page garbled: %v, want ErrDamaged", err)
	}
	refused := 0
	for page := int64(2); page*4096 < size; page++ {
		garble(page*4096, (page+1)*4096)
		s, err := store.OpenBolt(p)
		if err != nil {
			if !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("page %d garbled: %v, want ErrDamaged", page, err)
			}
			refused++
			continue
		}
		snap, err := s.Load(context.Background())
		s.Close()
		if err != nil || len(snap.Records["tenants"]) != 50 {
			t.Fatalf("page %d garbled opened: %d tenants, %v; want all 50 or ErrDamaged", page, len(snap.Records["tenants"]), err)
		}
	}
	if refused == 0 {
		t.Fatal("no garbled page was refused")
	}
	t.Logf("%d of %d pages garbled one at a time refused", refused, size/4096-2)
}

// A store file emptied or deleted after the store was committed to is refused (ErrLost) instead of
// starting an empty control plane; a 0-byte file without the marker (a first start killed before
// bbolt wrote its first pages) starts fresh, as a new store does. Before, both started empty.
func TestLostStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	// A first start killed before bbolt wrote anything: a 0-byte file, no marker.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openBolt(t, path)
	if _, err := os.Stat(store.MarkerPath(path)); err != nil {
		t.Fatalf("no marker after the first open: %v", err)
	}
	if _, err := s.Commit(context.Background(), store.Batch{Puts: []store.Record{{Kind: "tenants", Key: "a", Value: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	for _, tc := range []struct {
		name, want string
		damage     func() error
	}{
		{"emptied", "the file is empty (0 bytes)", func() error { return os.Truncate(path, 0) }},
		{"deleted", "the file is missing", func() error { return os.Remove(path) }},
	} {
		if err := tc.damage(); err != nil {
			t.Fatal(err)
		}
		s, err := store.OpenBolt(path)
		if err == nil {
			s.Close()
			t.Fatalf("%s store file opened", tc.name)
		}
		if !errors.Is(err, store.ErrLost) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), store.MarkerPath(path)) {
			t.Fatalf("%s store file: %v, want ErrLost saying %q and naming the marker", tc.name, err, tc.want)
		}
		// The refused open leaves the files as they were.
		if fi, err := os.Stat(path); tc.name == "deleted" && err == nil || tc.name == "emptied" && (err != nil || fi.Size() != 0) {
			t.Fatalf("%s store file changed by the refused open: %v %v", tc.name, fi, err)
		}
	}

	// Removing the marker is the way to start empty on purpose.
	if err := os.Remove(store.MarkerPath(path)); err != nil {
		t.Fatal(err)
	}
	s = openBolt(t, path)
	snap, err := s.Load(context.Background())
	s.Close()
	if err != nil || len(snap.Records["tenants"]) != 0 {
		t.Fatalf("new store after removing the marker: %d tenants, %v", len(snap.Records["tenants"]), err)
	}
}
