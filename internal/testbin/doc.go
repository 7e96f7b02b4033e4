// Package testbin builds the project's programs for tests that run them as real child processes
// (to SIGKILL them mid-operation and start them again). It is imported by tests only.
package testbin
