package main

import "errors"

// Exit codes, documented in the README.
const (
	exitOK       = 0 // success
	exitInvalid  = 1 // invalid input: a file, flag or argument was wrong; nothing was written
	exitPartial  = 2 // partial result: some items could not be handled; the rest is in the output
	exitInternal = 3 // internal error: a bug or an environment failure
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

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var c *codedError
	if errors.As(err, &c) {
		return c.code
	}
	return exitInternal
}
