package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"gpupool.dev/gpupool/internal/gate"
)

// The journal is an append-only file of records, each the gate's whole state after one step:
//
//	magic "GPJ1" once, then per record: length uint32 LE | CRC-32C of payload uint32 LE | payload (JSON)
//
// A record is acknowledged once Append returned: it was written and fsynced. A crash during an
// append leaves a torn tail (short header, short payload or bad checksum) that the reader
// drops; the record before it is the state to resume from. See docs/adr/0012.
const journalMagic = "GPJ1"

// maxRecord bounds one record (a gate state is a few KiB).
const maxRecord = 16 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned (wrapped) when a damaged record is followed by good ones: not a torn
// tail, so not something a crash can leave.
var ErrCorrupt = errors.New("journal corrupt")

// Journal appends gate states to a file, fsyncing each.
type Journal struct {
	path    string
	f       *os.File
	records int
	compact int // rewrite the file to its last record when it holds more than this
	// Hook, when set, is called around each append's write and sync (crash tests).
	Hook func(point string)
}

// Replay is what a journal held when opened.
type Replay struct {
	Last    *gate.State // nil for a new journal
	Records int
	Torn    bool // a torn tail was dropped
}

// ReadJournal reads records from r and returns the last good one. It stops at a torn tail and
// fails with ErrCorrupt when a bad record is followed by a good one.
func ReadJournal(r io.Reader) (Replay, int64, error) {
	br := bufio.NewReader(r)
	var rep Replay
	magic := make([]byte, len(journalMagic))
	n, err := io.ReadFull(br, magic)
	if n == 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
		return rep, 0, nil
	}
	if err != nil || string(magic) != journalMagic {
		return rep, 0, fmt.Errorf("read journal: bad magic %q: %w", magic[:n], ErrCorrupt)
	}
	good := int64(len(journalMagic))
	var last []byte
	for {
		payload, size, err := readRecord(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			rep.Torn = true
			// A torn tail must be the end: nothing decodable may follow it.
			if rest, _ := io.ReadAll(br); hasRecord(rest) {
				return rep, good, fmt.Errorf("read journal: record %d at byte %d: %v, and good records follow: %w", rep.Records+1, good, err, ErrCorrupt)
			}
			break
		}
		last = payload
		good += size
		rep.Records++
	}
	if last != nil {
		var st gate.State
		if err := json.Unmarshal(last, &st); err != nil {
			return rep, good, fmt.Errorf("read journal: decode record %d: %v: %w", rep.Records, err, ErrCorrupt)
		}
		rep.Last = &st
	}
	return rep, good, nil
}

func readRecord(br *bufio.Reader) ([]byte, int64, error) {
	var hdr [8]byte
	n, err := io.ReadFull(br, hdr[:])
	if n == 0 && err == io.EOF {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, fmt.Errorf("short header (%d of 8 bytes)", n)
	}
	size, sum := binary.LittleEndian.Uint32(hdr[:4]), binary.LittleEndian.Uint32(hdr[4:])
	if size == 0 || size > maxRecord {
		return nil, 0, fmt.Errorf("length %d out of range", size)
	}
	payload := make([]byte, size)
	if n, err := io.ReadFull(br, payload); err != nil {
		return nil, 0, fmt.Errorf("short payload (%d of %d bytes)", n, size)
	}
	if crc32.Checksum(payload, castagnoli) != sum {
		return nil, 0, errors.New("checksum mismatch")
	}
	return payload, int64(8 + size), nil
}

// hasRecord reports whether a good record starts at any offset of b.
func hasRecord(b []byte) bool {
	for i := 0; i+8 < len(b); i++ {
		size := binary.LittleEndian.Uint32(b[i : i+4])
		if size == 0 || size > maxRecord || i+8+int(size) > len(b) {
			continue
		}
		if crc32.Checksum(b[i+8:i+8+int(size)], castagnoli) == binary.LittleEndian.Uint32(b[i+4:i+8]) {
			return true
		}
	}
	return false
}

func encodeRecord(st gate.State) ([]byte, error) {
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	rec := make([]byte, 8+len(payload))
	binary.LittleEndian.PutUint32(rec[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(payload, castagnoli))
	copy(rec[8:], payload)
	return rec, nil
}

// OpenJournal opens (or creates) the journal at path, drops a torn tail, and returns what it held.
// A journal it creates (or finds empty) is fsynced with its directory before it returns.
func OpenJournal(path string) (*Journal, Replay, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, Replay{}, fmt.Errorf("open journal %s: %w", path, err)
	}
	rep, good, err := ReadJournal(f)
	if err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("open journal %s: %w", path, err)
	}
	created := good == 0
	if created {
		if _, err := f.WriteAt([]byte(journalMagic), 0); err != nil {
			f.Close()
			return nil, rep, fmt.Errorf("init journal %s: %w", path, err)
		}
		good = int64(len(journalMagic))
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("truncate journal %s to %d: %w", path, good, err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("seek journal %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("sync journal %s: %w", path, err)
	}
	// A new journal's directory entry is made durable too, as the cordon file's and a compacted
	// journal's are: without it a power loss could lose the file although an append returned.
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, rep, fmt.Errorf("sync directory of journal %s: %w", path, err)
		}
	}
	return &Journal{path: path, f: f, records: rep.Records, compact: 1024}, rep, nil
}

func (j *Journal) hook(p string) {
	if j.Hook != nil {
		j.Hook(p)
	}
}

// Append writes st and fsyncs; when it returns nil the state is durable.
func (j *Journal) Append(st gate.State) error {
	if j.records >= j.compact {
		if err := j.rewrite(st); err != nil {
			return err
		}
		return nil
	}
	rec, err := encodeRecord(st)
	if err != nil {
		return fmt.Errorf("append journal %s: %w", j.path, err)
	}
	j.hook("before journal-write")
	if _, err := j.f.Write(rec); err != nil {
		return fmt.Errorf("append journal %s: %w", j.path, err)
	}
	j.hook("before journal-sync")
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	j.hook("after journal-sync")
	j.records++
	return nil
}

// rewrite replaces the journal with one holding only st (temporary file, fsync, rename, fsync
// of the folder), so the file does not grow without bound.
func (j *Journal) rewrite(st gate.State) error {
	rec, err := encodeRecord(st)
	if err != nil {
		return fmt.Errorf("compact journal %s: %w", j.path, err)
	}
	tmp := j.path + ".compact"
	if err := writeSync(tmp, append([]byte(journalMagic), rec...)); err != nil {
		return fmt.Errorf("compact journal %s: %w", j.path, err)
	}
	j.hook("before journal-rename")
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("compact journal %s: %w", j.path, err)
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		return fmt.Errorf("compact journal %s: %w", j.path, err)
	}
	j.f.Close()
	f, err := os.OpenFile(j.path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("reopen journal %s: %w", j.path, err)
	}
	j.f, j.records = f, 1
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

func writeSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory, making the entries created or renamed in it durable. A variable so
// that tests can see which writes go through it.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SetAsideJournal renames a damaged journal to path.damaged-TIME (a free name: an existing file
// is never replaced) and fsyncs the directory, so that the next OpenJournal starts a new journal
// while the damaged one stays for inspection. It never deletes anything. It returns the new name.
func SetAsideJournal(path string, now time.Time) (string, error) {
	base := path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	aside := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		} else if err != nil {
			return "", fmt.Errorf("set journal %s aside: %w", path, err)
		}
		aside = fmt.Sprintf("%s.%d", base, i)
	}
	// A hard link, then the removal of the old name: unlike rename, link never replaces a file
	// that appeared in between.
	if err := os.Link(path, aside); err != nil {
		return "", fmt.Errorf("set journal %s aside: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("set journal %s aside: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("set journal %s aside: %w", path, err)
	}
	return aside, nil
}
