//go:build linux

package main

import (
	"net"

	"golang.org/x/sys/unix"
)

// socketPeerUID is the user id of the process at the other end of c, as the kernel recorded it
// when that process connected (SO_PEERCRED).
func socketPeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return int(cred.Uid), nil
}

// fileOwner is the user id that owns path, when it can be read.
func fileOwner(path string) (int, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, false
	}
	return int(st.Uid), true
}
