package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/gate"
)

// resetSocketName is the running agent's reset socket in its state directory (docs/adr/0066).
const resetSocketName = "agent.sock"

// resetRequest is what `gpupool agent --reset` sends on the reset socket: one JSON line.
type resetRequest struct {
	Op string `json:"op"` // "reset"
}

// resetAnswer is the agent's answer: the gate's phase after the reset, or why there was none.
type resetAnswer struct {
	Phase    string `json:"phase"`
	Cordoned bool   `json:"cordoned"`
	// Reset is false when no change had failed: nothing was done.
	Reset bool   `json:"reset"`
	Error string `json:"error,omitzero"`
}

// resetFailed clears a failed change through the executor, the one path of both resets (in-process
// and the running agent's socket): the gate's reset state is journaled (written and fsynced) and
// the node uncordoned before it returns.
func resetFailed(ctx context.Context, x *agent.Executor) (resetAnswer, error) {
	if x.State().Phase() != gate.PhaseFailed {
		st := x.State()
		return resetAnswer{Phase: string(st.Phase()), Cordoned: st.Cordoned}, nil
	}
	if err := x.Reset(ctx); err != nil {
		return resetAnswer{}, err
	}
	st := x.State()
	return resetAnswer{Phase: string(st.Phase()), Cordoned: st.Cordoned, Reset: true}, nil
}

// printReset prints a reset's outcome as `gpupool agent --reset` always has.
func printReset(w io.Writer, a resetAnswer) {
	if !a.Reset {
		fmt.Fprintf(w, "gate: phase %s, nothing to reset\n", a.Phase)
		return
	}
	fmt.Fprintf(w, "gate: phase %s, cordoned %t\n", a.Phase, a.Cordoned)
}

// serveReset listens on stateDir/agent.sock (an old one, left by a killed agent, is removed: the
// caller holds the state directory's lock) and resets the running agent's gate for each request.
// The socket is mode 0600: its file permission is the authentication, as the MPS control pipe's is.
// Each answer is written only after resetFailed returned, so an acknowledged reset is on disk.
func serveReset(ctx context.Context, stateDir string, x *agent.Executor, log *slog.Logger) (stop func(), err error) {
	path := filepath.Join(stateDir, resetSocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	// A socket is created with the umask's mode; connecting needs write permission on it, which
	// the usual umask (022) gives no one but the owner even before this.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			handleReset(ctx, c, x, log)
		}
	}()
	return func() { ln.Close(); <-done }, nil
}

func handleReset(ctx context.Context, c net.Conn, x *agent.Executor, log *slog.Logger) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req resetRequest
	var ans resetAnswer
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		ans.Error = "bad request: " + err.Error()
	} else if req.Op != "reset" {
		ans.Error = fmt.Sprintf("unknown op %q (want reset)", req.Op)
	} else if a, err := resetFailed(ctx, x); err != nil {
		ans.Error = err.Error()
		log.Warn("reset from the reset socket", "err", err)
	} else {
		ans = a
	}
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_ = json.NewEncoder(c).Encode(ans)
}

// resetRunning asks the agent that holds the state directory's lock to reset its gate through its
// reset socket, and prints its answer. It tries for a few seconds: an agent that has just started
// opens its socket once its gate has resumed.
func resetRunning(ctx context.Context, e *env, stateDir string, locked error) error {
	path := filepath.Join(stateDir, resetSocketName)
	var c net.Conn
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		var d net.Dialer
		if c, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w, which takes no reset on %s (%v): an `agent --once`, an agent still resuming "+
				"its gate or older than this command, or one that could not open the socket (its log says why); "+
				"try again, or stop the agent and run --reset", locked, path, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(c).Encode(resetRequest{Op: "reset"}); err != nil {
		return fmt.Errorf("reset the running agent through %s: %w", path, err)
	}
	var ans resetAnswer
	if err := json.NewDecoder(c).Decode(&ans); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("reset the running agent through %s: no answer (%w); its journal says whether the reset was taken: "+
			"run --reset again (a reset with nothing failed changes nothing)", path, err)
	}
	if ans.Error != "" {
		return fmt.Errorf("the running agent's reset failed: %s", ans.Error)
	}
	fmt.Fprintf(e.stdout, "gate: the running agent answered on %s\n", path)
	printReset(e.stdout, ans)
	return nil
}
