//go:build linux

package main

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// swapDir puts the directory tmp at dir: a plain rename when dir does not exist, else one atomic
// exchange of the two (renameat2 RENAME_EXCHANGE), after which tmp holds the old content. It
// returns the path holding the old content, "" when there was none.
func swapDir(tmp, dir string) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", os.Rename(tmp, dir)
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return swapDirTwoRenames(tmp, dir) // a file system without the exchange
	}
	if err != nil {
		return "", &os.LinkError{Op: "exchange", Old: tmp, New: dir, Err: err}
	}
	return tmp, nil
}
