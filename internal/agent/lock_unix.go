//go:build unix

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockStateDir takes the state directory's lock (StateDir/lock, an exclusive flock) for the
// life of one agent process, and returns its release. A second agent gets ErrStateDirLocked
// naming the holder's process id (`gpupool agent --reset` then asks the running agent through its
// reset socket instead of resetting beside it): two processes
// appending to one gate journal and driving one node's GPUs would each resume from a state the
// other has moved on from. The lock is the kernel's, so a SIGKILLed agent leaves none behind.
func LockStateDir(dir string) (release func() error, err error) {
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		raw, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(raw))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("lock state dir %s: %w: held by %s", dir, ErrStateDirLocked, holder)
		}
		return nil, fmt.Errorf("lock state dir %s: %w", dir, err)
	}
	// The holder's id is for the message above only; the lock is the flock, not the content.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil
}
