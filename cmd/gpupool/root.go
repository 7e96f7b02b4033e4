package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// env is what every subcommand gets: its context and output streams. Nothing global.
type env struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
}

// run is the whole program behind main; tests call it directly. A panic anywhere in a command
// becomes exit 3 with a request to report it; a cancelled ctx becomes exit 130; a failed write
// to stdout (a closed pipe, a full disk) is exit 1.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = internalError(fmt.Errorf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	e := &env{ctx: ctx, stdout: &outWriter{w: stdout}, stderr: stderr}
	root := newRootCmd(e)
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return invalid(fmt.Errorf("%w (see %s --help)", err, c.CommandPath()))
	})
	err = root.ExecuteContext(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return errInterrupted
	case err != nil && exitCode(err) == exitInternal && isUsageError(err):
		return invalid(err)
	}
	return err
}

// outWriter marks write errors on stdout as exit 1: the reader went away or the disk is full,
// which the user fixes, not gpupool.
type outWriter struct{ w io.Writer }

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		return n, invalid(fmt.Errorf("write output: %w", err))
	}
	return n, nil
}

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpupool",
		Short: "Share NVIDIA GPUs between LLM-inference tenants: size, plan, emit, allocate, operate",
		Long: "gpupool sizes each tenant's model, plans how every GPU is shared (exclusive, MIG, MPS,\n" +
			"time-slicing), emits configs NVIDIA's and Kubernetes' tools accept, and allocates slices fairly.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	// One line per subcommand; each lives in its own file.
	root.AddCommand(
		newVersionCmd(e),
		newGpusCmd(e),
		newLayoutsCmd(e),
		newPerfCmd(e),
		newFitCmd(e),
		newValidateCmd(e),
		newRenderCmd(e),
		newSimulateCmd(e),
		newPlanCmd(e),
		newLoRACmd(e),
		newFairCmd(e),
		newAgentCmd(e),
		newServeCmd(e),
		newTenantCmd(e),
		newGrantsCmd(e),
		newTokenCmd(e),
		newNodeCmd(e),
		newGateCmd(e),
		newApplyCmd(e),
		newCostCmd(e),
		newControllerCmd(e),
	)
	return root
}

// isUsageError recognises cobra's own argument and flag errors, which are user input errors.
func isUsageError(err error) bool {
	var c *codedError
	if errors.As(err, &c) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires at most", "required flag", "if any flags in the group"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
