//go:build !linux

package main

import (
	"errors"
	"io/fs"
	"os"
)

// swapDir puts the directory tmp at dir and returns the path holding the old content ("" when
// there was none). Without an atomic exchange it takes two renames; when the second fails the
// first is undone.
func swapDir(tmp, dir string) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", os.Rename(tmp, dir)
	}
	return swapDirTwoRenames(tmp, dir)
}
