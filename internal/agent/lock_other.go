//go:build !unix

package agent

// LockStateDir does nothing where flock is not available.
func LockStateDir(string) (func() error, error) { return func() error { return nil }, nil }
