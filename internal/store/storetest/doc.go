// Package storetest is the contract every store.Store implementation passes: call Run from the
// implementation's tests with a constructor that returns a fresh, empty store, and Reopen support
// when the store is durable. It checks empty loads, atomic batches (deletes before puts),
// consecutive revisions, that an invalid batch changes nothing and names every bad field,
// distinct revisions under concurrent commits, errors after Close, and survival across reopen.
package storetest
