package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// interruptGrace is how long a command may take to stop after SIGINT or SIGTERM before the
// process exits anyway (commands check their context far more often than this).
const interruptGrace = 500 * time.Millisecond

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		stop() // a second signal ends the process at once
		select {
		case <-done:
		case <-time.After(interruptGrace):
			fmt.Fprintln(os.Stderr, "gpupool: "+errInterrupted.Error())
			os.Exit(exitInterrupted)
		}
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	close(done)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpupool: "+err.Error())
	}
	os.Exit(exitCode(err))
}
