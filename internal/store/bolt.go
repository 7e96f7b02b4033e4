package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime/debug"
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

// LockTimeout is how long OpenBolt waits for another process to let go of the file's lock.
var LockTimeout = 5 * time.Second

// ErrLocked is returned (wrapped) by OpenBolt when another process holds the file.
var ErrLocked = errors.New("the store file is locked by another process (is another `gpupool serve` using this data directory?)")

// ErrDamaged is returned (wrapped) by OpenBolt for a file shorter than its own last commit says:
// not something a crash of the process leaves (every commit is fsynced before it is
// acknowledged), so it is refused with a message, never read as empty or left to crash.
var ErrDamaged = errors.New("store file damaged")

// ErrLost is returned (wrapped) by OpenBolt when the store file is missing or empty although its
// marker (MarkerPath) says a store was committed there: a file deleted or emptied by hand, or a
// copy that failed, not a new store. Starting empty would drop every record without a word.
var ErrLost = errors.New("store file lost")

// MarkerPath is the marker beside the store file at path: written, and its directory fsynced, once
// a store was created and migrated there (its first commit). Its presence tells a lost store from
// a new one: a first start killed before bbolt wrote its first pages leaves a 0-byte file and no
// marker, and starts fresh.
func MarkerPath(path string) string { return path + ".committed" }

// OpenBolt opens (creating if needed) the store file at path and migrates it to SchemaVersion.
// A file that another process holds is ErrLocked; a file shorter than its last commit is
// ErrDamaged; a missing or empty file where the marker says a store was committed is ErrLost.
func OpenBolt(path string) (*Bolt, error) {
	if err := checkLost(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		// bbolt maps the file into memory and walks every page in a goroutine of its own when
		// it rebuilds the freelist: a page past the end of the file is a fault (SIGBUS) that ends
		// the process with a stack trace, on every start.
		if err := checkSize(path, fi.Size()); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		if err := readAll(path); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	// NoFreelistSync: the freelist is rebuilt from the pages on open instead of written on every
	// commit, which saves a page write per commit; the data and meta pages are still fsynced.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: LockTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: %w (waited %s)", path, ErrLocked, LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := db.Update(migrate); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := writeMarker(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Bolt{db: db}, nil
}

// checkLost refuses a missing or empty store file whose marker is present.
func checkLost(path string) error {
	if _, err := os.Stat(MarkerPath(path)); errors.Is(err, os.ErrNotExist) {
		return nil // never committed here: a missing or empty file is a new store
	} else if err != nil {
		return fmt.Errorf("read store marker: %w", err)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: the file is missing, but %s says a store was committed here (restore it from a backup; to start an empty store on purpose, remove %s)", ErrLost, MarkerPath(path), MarkerPath(path))
	case err != nil:
		return err
	case fi.Size() == 0:
		return fmt.Errorf("%w: the file is empty (0 bytes), but %s says a store was committed here (restore it from a backup; to start an empty store on purpose, remove both files)", ErrLost, MarkerPath(path))
	}
	return nil
}

// writeMarker writes the marker once the store is created and migrated (fsynced by bbolt): the
// marker is fsynced, then the directory, which also makes the store file's own entry durable.
func writeMarker(path string) error {
	m := MarkerPath(path)
	if _, err := os.Stat(m); err == nil {
		return nil
	}
	f, err := os.OpenFile(m, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write store marker: %w", err)
	}
	_, err = f.WriteString("gpupool: the store file beside this one has been committed to; a missing or empty store file is an error while this file exists\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write store marker: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write store marker: sync directory: %w", err)
	}
	return nil
}

// syncDir fsyncs a directory, making the entries created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readAll reads every record of an existing file on a read-only open, in this goroutine, where a
// damaged page is a panic (bbolt's page checks) or a fault that can be recovered and reported.
// The read-write open that follows rebuilds the freelist by walking the same pages in a goroutine
// of bbolt's own, where the same damage ends the process. A read-only open does not rebuild the
// freelist. Load reads the same records later, so a file that passes here is not refused for
// anything Load would not meet.
func readAll(path string) (err error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: LockTimeout, ReadOnly: true})
	if errors.Is(err, bolt.ErrTimeout) {
		return fmt.Errorf("%w (waited %s)", ErrLocked, LockTimeout)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	defer db.Close()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v (restore it from a backup)", ErrDamaged, r)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walkBucket(b) })
	})
}

func walkBucket(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return walkBucket(nb)
			}
		}
		return nil
	})
}

// checkSize compares the file's size with the size its newest valid meta page records (bbolt's
// page count times the page size), so that a truncated file is named as such before it is mapped.
// A file too short or without a valid meta page is left to bbolt, which refuses it.
func checkSize(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	need := int64(0)
	var txid uint64
	// The two meta pages are at page 0 and 1; the page size is in the first one (or, when it is
	// damaged, found by trying the usual sizes for the second).
	for _, off := range []int64{0, 4096, 8192, 16384, 32768, 65536} {
		m, ok := readMeta(f, off)
		if !ok || (off != 0 && int64(m.pageSize) != off) {
			continue
		}
		if m.txid >= txid {
			txid, need = m.txid, int64(m.pgid)*int64(m.pageSize)
		}
	}
	if need > size {
		return fmt.Errorf("%w: the file has %d bytes, its last commit needs %d (truncated; restore it from a backup)", ErrDamaged, size, need)
	}
	return nil
}

type metaPage struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

// readMeta reads a bbolt meta page at off: page header (16 bytes), then magic, version, page
// size, flags (4 bytes each), root bucket (16), freelist page (8), page count (8), txid (8) and
// an FNV-64a checksum of the meta fields before it.
func readMeta(f *os.File, off int64) (metaPage, bool) {
	var buf [16 + 64]byte
	if _, err := f.ReadAt(buf[:], off); err != nil {
		return metaPage{}, false
	}
	m := buf[16:]
	le := binary.LittleEndian
	if le.Uint32(m[0:4]) != 0xED0CDAED || le.Uint32(m[4:8]) != 2 {
		return metaPage{}, false
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:64]) {
		return metaPage{}, false
	}
	return metaPage{pageSize: le.Uint32(m[8:12]), pgid: le.Uint64(m[40:48]), txid: le.Uint64(m[48:56])}, true
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
