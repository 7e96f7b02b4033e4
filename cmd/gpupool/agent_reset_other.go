//go:build !linux

package main

import (
	"errors"
	"net"
)

// socketPeerUID gives no peer user id outside Linux: there the reset socket's private directory
// and mode 0600 are its only authentication (docs/adr/0066).
func socketPeerUID(*net.UnixConn) (int, error) { return 0, errors.ErrUnsupported }

// fileOwner gives no owner outside Linux: the message of a refused --reset leaves it out.
func fileOwner(string) (int, bool) { return 0, false }
