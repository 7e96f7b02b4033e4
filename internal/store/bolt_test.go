package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

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
