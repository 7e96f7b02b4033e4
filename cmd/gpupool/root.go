package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// env is what every subcommand gets: its output streams. Nothing global.
type env struct {
	stdout io.Writer
	stderr io.Writer
}

// run is the whole program behind main; tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd(&env{stdout: stdout, stderr: stderr})
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && exitCode(err) == exitInternal && isUsageError(err) {
		return invalid(err)
	}
	return err
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
		newFairCmd(e),
		newServeCmd(e),
		newTenantCmd(e),
		newGrantsCmd(e),
		newTokenCmd(e),
		newNodeCmd(e),
		newApplyCmd(e),
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

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gpupool version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(e.stdout, "gpupool "+version+"\n")
			return err
		},
	}
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"
