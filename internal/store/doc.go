// Package store owns the control plane's durable state: the Store port, its embedded bbolt
// implementation and the contract suite (package storetest) that every implementation passes.
//
// The model is deliberately small. State is a set of records, each named by a kind ("tenants",
// "grants", "tokens", …) and a key, holding opaque bytes (the control package encodes JSON). A
// Commit applies a batch of puts and deletes atomically and returns the new revision, a counter
// that grows by one per commit; Load returns every record and the revision. The bbolt
// implementation syncs the file to disk before Commit returns (bbolt's default), so a commit that
// returned survives SIGKILL and power loss of the process.
//
// Open refuses, with an error and without touching the file, a file that another process holds
// (ErrLocked, after LockTimeout: a second `gpupool serve` on one data directory) and a file
// shorter than its newest meta page says its last commit needs (ErrDamaged: a truncated copy or a
// damaged disk, not something a crash leaves). Such a file was mapped and read past its end
// before, a SIGBUS on every start. A file with a garbled page in use is ErrDamaged too: every
// record is read first on a read-only open, where bbolt's page checks panic in the caller's
// goroutine and are recovered; the read-write open's freelist rebuild walks the same pages in a
// goroutine of bbolt's own, where the panic ended the process.
//
// A store file missing or 0 bytes long is a new store, unless the marker beside it (MarkerPath,
// "state.db.committed") is present: Open writes the marker, fsynced with its directory, once the
// store is created and migrated, and refuses a missing or empty file after that (ErrLost), where it
// used to start empty and drop every record without a word. A first start killed before bbolt
// wrote its first pages leaves a 0-byte file and no marker, and starts fresh.
//
// Schema versions. The file records its schema version in the "meta" bucket:
//
//	1: every record in one bucket "data" under the key "KIND/KEY"; no revision.
//	2: one bucket per kind under the bucket "kinds"; the revision in meta.
//
// Open migrates a version-1 file to version 2 in one transaction (so a crash leaves either the
// old or the new layout) and refuses a file whose version is newer than it knows.
package store
