// Command gpupool plans, allocates and operates shared NVIDIA GPUs for LLM inference tenants.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpupool: "+err.Error())
	}
	os.Exit(exitCode(err))
}
