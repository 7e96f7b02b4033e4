package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

func states(n int) []gate.State {
	out := make([]gate.State, n)
	for i := range out {
		out[i] = gate.State{Seq: uint64(i + 1), CordonReason: "r"}
	}
	return out
}

func writeJournal(t testing.TB, path string, sts []gate.State) {
	t.Helper()
	j, _, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if err := j.Append(s); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
}

// A torn tail (any prefix of the last record) is dropped, the record before it is the state, and
// reopening truncates the tail so that new appends follow good records.
func TestJournalTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	writeJournal(t, path, states(3))
	full, _ := os.ReadFile(path)
	rec3, _ := encodeRecord(states(3)[2])
	for cut := 1; cut < len(rec3); cut++ {
		torn := full[:len(full)-cut]
		rep, good, err := ReadJournal(bytes.NewReader(torn))
		if err != nil || rep.Last == nil || rep.Last.Seq != 2 || rep.Records != 2 || !rep.Torn {
			t.Fatalf("cut %d: last %v records %d torn %t err %v; want seq 2 of 2, torn", cut, rep.Last, rep.Records, rep.Torn, err)
		}
		if good != int64(len(full)-len(rec3)) {
			t.Fatalf("cut %d: good prefix %d, want %d", cut, good, len(full)-len(rec3))
		}
	}
	os.WriteFile(path, append(full[:len(full)-5:len(full)-5], 0xff), 0o600)
	j, rep, err := OpenJournal(path)
	if err != nil || rep.Last.Seq != 2 {
		t.Fatalf("reopen torn: %v %v", rep.Last, err)
	}
	j.Append(gate.State{Seq: 9})
	j.Close()
	f, _ := os.Open(path)
	defer f.Close()
	rep, _, err = ReadJournal(f)
	if err != nil || rep.Last.Seq != 9 || rep.Records != 3 || rep.Torn {
		t.Fatalf("after append on a truncated tail: last %v records %d torn %t err %v", rep.Last, rep.Records, rep.Torn, err)
	}
}

// A damaged record followed by good ones is not something a crash leaves: ErrCorrupt.
func TestJournalCorruptMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	writeJournal(t, path, states(3))
	b, _ := os.ReadFile(path)
	b[len(journalMagic)+10] ^= 0x55 // inside record 1's payload
	if _, _, err := ReadJournal(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

// Compaction keeps the journal bounded and the last state readable.
func TestJournalCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	j.compact = 10
	for _, s := range states(35) {
		if err := j.Append(s); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	f, _ := os.Open(path)
	defer f.Close()
	rep, _, err := ReadJournal(f)
	if err != nil || rep.Last.Seq != 35 || rep.Records > 10 {
		t.Fatalf("after compaction: last %v, %d records, err %v; want seq 35 in at most 10 records", rep.Last, rep.Records, err)
	}
}

func FuzzReadJournal(f *testing.F) {
	var buf bytes.Buffer
	buf.WriteString(journalMagic)
	for _, s := range states(2) {
		r, _ := encodeRecord(s)
		buf.Write(r)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(journalMagic))
	f.Add([]byte{})
	f.Add(append([]byte(journalMagic), 0, 0, 0, 1, 0, 0, 0, 0, '{'))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, good, err := ReadJournal(bytes.NewReader(b))
		if err != nil {
			return
		}
		if good < 0 || good > int64(len(b)) {
			t.Fatalf("good prefix %d outside 0..%d", good, len(b))
		}
		// The good prefix alone reads back to the same state, with nothing torn.
		again, g2, err := ReadJournal(bytes.NewReader(b[:good]))
		if err != nil || g2 != good || again.Records != rep.Records || again.Torn {
			t.Fatalf("prefix re-read: records %d/%d good %d/%d torn %t err %v", again.Records, rep.Records, g2, good, again.Torn, err)
		}
	})
}

// TestIncrementalCountsMockCalls: on a GPU with seven 1g instances where two become one 2g,
// the fake counts exactly the MIG calls for those: 2 compute + 2 GPU instance destroys, 1 GPU +
// 1 compute instance create. The five others are never touched.
func TestIncrementalCountsMockCalls(t *testing.T) {
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	u, board := fake.UUIDs()[0], fake.Board().Name
	from, _ := gpu.ParseLayout("1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6")
	to, _ := gpu.ParseLayout("2g.20gb@0 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6")
	for _, in := range from {
		if err := lib.Create(u, board, in); err != nil {
			t.Fatal(err)
		}
	}
	c0, d0 := fake.Calls()
	j, rep, _ := OpenJournal(filepath.Join(t.TempDir(), "j"))
	defer j.Close()
	ctx := context.Background()
	x, err := NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: lib, Node: &LocalNode{Path: filepath.Join(t.TempDir(), "c")}, Smoke: okSmoker{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Submit(ctx, gate.Desired{GPU: u, Board: board, Layout: to, Current: from}); err != nil {
		t.Fatal(err)
	}
	c1, d1 := fake.Calls()
	if c1-c0 != 2 || d1-d0 != 4 {
		t.Fatalf("creates %d destroys %d, want 2 (GI+CI of 2g@0) and 4 (CI+GI of 1g@0 and 1g@1)", c1-c0, d1-d0)
	}
	got, _, _ := lib.Observe(u, board)
	if got.String() != to.Sorted().String() {
		t.Fatalf("layout %q, want %q", got, to.Sorted())
	}
}

func BenchmarkJournalAppend(b *testing.B) {
	j, _, err := OpenJournal(filepath.Join(b.TempDir(), "j"))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	st := gate.State{Notes: make([]gate.Note, 32), LastChange: map[string]time.Time{"GPU-0": {}}}
	for b.Loop() {
		if err := j.Append(st); err != nil {
			b.Fatal(err)
		}
	}
}

// A crash during compaction (before the rename) leaves the old journal and a partial
// ".compact" file: the journal opens to its last record and the next compaction overwrites it.
func TestJournalCrashDuringCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	writeJournal(t, path, states(5))
	if err := os.WriteFile(path+".compact", []byte(journalMagic+"\x10\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, rep, err := OpenJournal(path)
	if err != nil || rep.Last.Seq != 5 {
		t.Fatalf("open beside a partial compaction: %v %v", rep.Last, err)
	}
	j.compact = 1
	if err := j.Append(gate.State{Seq: 6}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	f, _ := os.Open(path)
	defer f.Close()
	rep, _, err = ReadJournal(f)
	if err != nil || rep.Last.Seq != 6 || rep.Records != 1 {
		t.Fatalf("after compaction: last %v records %d err %v", rep.Last, rep.Records, err)
	}
}

// A new journal's directory entry goes through syncDir (the helper the cordon file, the MIG mode
// record and compaction use), an existing journal's open does not need it. This checks the call,
// not durability: no test here can cut the power.
func TestNewJournalSyncsDirectory(t *testing.T) {
	var synced []string
	old := syncDir
	syncDir = func(dir string) error { synced = append(synced, dir); return old(dir) }
	defer func() { syncDir = old }()

	dir := t.TempDir()
	path := filepath.Join(dir, "gate.journal")
	j, _, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("creating the journal synced directories %q, want [%q]", synced, dir)
	}
	if err := j.Append(gate.State{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	synced = nil
	if j, _, err = OpenJournal(path); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if len(synced) != 0 {
		t.Fatalf("reopening a journal with records synced %q", synced)
	}
	// A failing directory sync fails the open: the journal is not used unsynced.
	syncDir = func(string) error { return errors.New("sync failed") }
	if _, _, err := OpenJournal(filepath.Join(dir, "other.journal")); err == nil {
		t.Fatal("open of a new journal succeeded although its directory sync failed")
	}
}
