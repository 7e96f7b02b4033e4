package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// maxInputBytes is the one size limit on every file gpupool reads (pools, plans, mig-parted
// configs, fairness scenarios and steps, measured profiles, traces). It is checked before
// anything is parsed; a pool of 20,000 tenants is about 4 MiB.
const maxInputBytes = 64 << 20

// openInput opens a file argument for reading after checking, without opening it, that it is a
// regular file (a FIFO or a device would block or never end) of at most maxInputBytes. what
// names the argument in errors ("pool", "flag --plan").
func openInput(path, what string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %s is not a regular file (%s)", what, path, fileType(st.Mode()))
	}
	if st.Size() > maxInputBytes {
		return nil, fmt.Errorf("read %s: %s is %d bytes, more than the %d (64 MiB) gpupool reads", what, path, st.Size(), maxInputBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return f, nil
}

// readInput reads a whole file argument, with openInput's checks; a file that grew past the
// limit since it was checked is refused too.
func readInput(ctx context.Context, path, what string) ([]byte, error) {
	f, err := openInput(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(&ctxReader{ctx: ctx, r: f}, maxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if len(data) > maxInputBytes {
		return nil, fmt.Errorf("read %s: %s is more than the %d bytes (64 MiB) gpupool reads", what, path, maxInputBytes)
	}
	return data, nil
}

// ctxReader stops reading once ctx is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func fileType(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
