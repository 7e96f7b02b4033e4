package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout Open writes and reads.
const SchemaVersion = 2

var (
	bucketMeta  = []byte("meta")
	bucketKinds = []byte("kinds")
	bucketV1    = []byte("data")
	keySchema   = []byte("schema")
	keyRevision = []byte("revision")
)

// Bolt is the embedded Store: one bbolt file, fsync on every commit.
type Bolt struct {
	mu     sync.RWMutex
	db     *bolt.DB
	closed bool
}

// OpenBolt opens (creating if needed) the store file at path and migrates it to SchemaVersion.
func OpenBolt(path string) (*Bolt, error) {
	// NoFreelistSync: the freelist is rebuilt from the pages on open instead of written on every
	// commit, which saves a page write per commit; the data and meta pages are still fsynced.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := db.Update(migrate); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Bolt{db: db}, nil
}

// migrate brings the file to SchemaVersion inside one transaction.
func migrate(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("create meta bucket: %w", err)
	}
	version := 0
	if v := meta.Get(keySchema); v != nil {
		if version, err = strconv.Atoi(string(v)); err != nil {
			return fmt.Errorf("read schema version %q: %w", v, err)
		}
	} else if tx.Bucket(bucketV1) != nil {
		version = 1 // version 1 files predate the meta bucket's schema key
	}
	switch {
	case version > SchemaVersion:
		return fmt.Errorf("read schema version: file has version %d, this build knows up to %d", version, SchemaVersion)
	case version == 1:
		if err := migrateV1toV2(tx); err != nil {
			return fmt.Errorf("migrate schema 1 to 2: %w", err)
		}
	}
	if _, err := tx.CreateBucketIfNotExists(bucketKinds); err != nil {
		return fmt.Errorf("create kinds bucket: %w", err)
	}
	return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
}

// migrateV1toV2 moves "KIND/KEY" records of the single data bucket into one bucket per kind.
func migrateV1toV2(tx *bolt.Tx) error {
	kinds, err := tx.CreateBucketIfNotExists(bucketKinds)
	if err != nil {
		return err
	}
	var n uint64
	err = tx.Bucket(bucketV1).ForEach(func(k, v []byte) error {
		kind, key, ok := bytes.Cut(k, []byte("/"))
		if !ok || len(kind) == 0 || len(key) == 0 {
			return fmt.Errorf("record %q: want KIND/KEY", k)
		}
		b, err := kinds.CreateBucketIfNotExists(kind)
		if err != nil {
			return fmt.Errorf("record %q: %w", k, err)
		}
		n++
		return b.Put(bytes.Clone(key), bytes.Clone(v))
	})
	if err != nil {
		return err
	}
	if err := tx.DeleteBucket(bucketV1); err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keyRevision, encodeRev(n))
}

func encodeRev(r uint64) []byte { return binary.BigEndian.AppendUint64(nil, r) }

func decodeRev(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Load returns every record and the revision.
func (s *Bolt) Load(ctx context.Context) (Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Snapshot{}, fmt.Errorf("load store: %w", ErrClosed)
	}
	snap := Snapshot{Records: map[string]map[string][]byte{}}
	err := s.db.View(func(tx *bolt.Tx) error {
		snap.Revision = decodeRev(tx.Bucket(bucketMeta).Get(keyRevision))
		return tx.Bucket(bucketKinds).ForEachBucket(func(kind []byte) error {
			m := map[string][]byte{}
			snap.Records[string(kind)] = m
			return tx.Bucket(bucketKinds).Bucket(kind).ForEach(func(k, v []byte) error {
				m[string(k)] = bytes.Clone(v)
				return nil
			})
		})
	})
	if err != nil {
		return Snapshot{}, fmt.Errorf("load store: %w", err)
	}
	return snap, ctx.Err()
}

// Commit applies b in one fsynced transaction.
func (s *Bolt) Commit(ctx context.Context, b Batch) (uint64, error) {
	if err := b.Validate(); err != nil {
		return 0, fmt.Errorf("commit batch: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("commit batch: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, fmt.Errorf("commit batch: %w", ErrClosed)
	}
	var rev uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		kinds := tx.Bucket(bucketKinds)
		for _, d := range b.Deletes {
			if kb := kinds.Bucket([]byte(d.Kind)); kb != nil {
				if err := kb.Delete([]byte(d.Key)); err != nil {
					return fmt.Errorf("delete %s/%s: %w", d.Kind, d.Key, err)
				}
			}
		}
		for _, p := range b.Puts {
			kb, err := kinds.CreateBucketIfNotExists([]byte(p.Kind))
			if err != nil {
				return fmt.Errorf("put %s/%s: %w", p.Kind, p.Key, err)
			}
			if err := kb.Put([]byte(p.Key), p.Value); err != nil {
				return fmt.Errorf("put %s/%s: %w", p.Kind, p.Key, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		rev = decodeRev(meta.Get(keyRevision)) + 1
		return meta.Put(keyRevision, encodeRev(rev))
	})
	if err != nil {
		return 0, fmt.Errorf("commit batch: %w", err)
	}
	return rev, nil
}

// Close closes the file; later calls return ErrClosed.
func (s *Bolt) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}
