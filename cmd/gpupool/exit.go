package main

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes, documented in the README.
const (
	exitOK          = 0   // success
	exitInvalid     = 1   // something the user can fix: a file, flag or argument, an unwritable output, what agent --reset meets
	exitPartial     = 2   // partial result: some items could not be handled; the rest is in the output
	exitInternal    = 3   // a bug in gpupool: a panic or an "impossible" state
	exitInterrupted = 130 // stopped by SIGINT or SIGTERM before it finished; nothing was written
)

// codedError carries the exit code a command wants for its error.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// invalid marks err as a user input error (exit 1).
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: exitInvalid, err: err}
}

// partial marks err as a partial result (exit 2): output was written, but not all of it.
func partial(err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: exitPartial, err: err}
}

// errInterrupted is what a command returns when its context was cancelled.
var errInterrupted = &codedError{code: exitInterrupted, err: errors.New("interrupted: stopped before finishing; nothing was written")}

// internalError is a bug (exit 3), with a request to report it.
func internalError(err error) error {
	return &codedError{code: exitInternal, err: fmt.Errorf("internal error (a bug in gpupool; please report it with the command line and input files): %w", err)}
}

// exitCode maps an error to the process exit code. Errors no command marked are bugs (3), except
// a cancelled context (130).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var c *codedError
	if errors.As(err, &c) {
		return c.code
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	return exitInternal
}
