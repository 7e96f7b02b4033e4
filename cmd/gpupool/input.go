package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// maxInputBytes is the one size limit on every file gpupool reads (pools, plans, mig-parted
// configs, fairness scenarios and steps, measured profiles, traces). It is checked before
// anything is parsed; a pool of 20,000 tenants is about 4 MiB.
const maxInputBytes = v1.MaxDocumentBytes

// openInput opens a file argument for reading after checking, without opening it, that it is
// not a directory and, for a regular file, that it holds at most maxInputBytes. A pipe (a shell's
// <(…), /dev/stdin) is accepted: readInput stops reading it past the limit, and Ctrl-C ends a
// wait on one. what names the argument in errors ("pool", "flag --plan").
func openInput(path, what string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("read %s: %s is not a regular file (%s)", what, path, strings.TrimPrefix(llm.FileKind(st.Mode()), "is "))
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

// capped reads at most maxInputBytes from r, then fails: a stream (a pipe given as a trace or a
// profile) cannot be checked before it is read, and must not be cut silently either.
type capped struct {
	r         io.Reader
	n         int64
	what, src string
}

func newCapped(r io.Reader, what, src string) *capped { return &capped{r: r, what: what, src: src} }

func (c *capped) Read(p []byte) (int, error) {
	if c.n > maxInputBytes {
		return 0, fmt.Errorf("read %s: %s is more than the %d bytes (64 MiB) gpupool reads", c.what, c.src, maxInputBytes)
	}
	if rest := maxInputBytes + 1 - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > maxInputBytes {
		return n, fmt.Errorf("read %s: %s is more than the %d bytes (64 MiB) gpupool reads", c.what, c.src, maxInputBytes)
	}
	return n, err
}
