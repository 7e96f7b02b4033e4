package agent

import "errors"

// LockFileName is the state directory's lock file (see LockStateDir).
const LockFileName = "lock"

// ErrStateDirLocked is returned (wrapped) by LockStateDir when another process holds the state
// directory: another agent on the same stateDir, still running.
var ErrStateDirLocked = errors.New("another gpupool agent uses this state directory")
