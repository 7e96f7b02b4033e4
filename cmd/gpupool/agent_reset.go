package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// Refused is true when the agent took no request from this peer (its uid; Error says why).
	Refused bool `json:"refused,omitzero"`
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

// resetLeftCordoned says whether a reset left the node cordoned, and if so what the operator can do
// (exit 1): a reset whose answer says the node is still cordoned has not done what was asked, whatever
// the phase (ADR 0066, amended). With nothing to reset (a.Reset false) there is no failure: the
// gate was not failed and the command changed nothing. node is the node's name ("" when the
// config names none), cordon the cordon file.
func resetLeftCordoned(a resetAnswer, node, cordon, log string) error {
	if !a.Reset || !a.Cordoned {
		return nil
	}
	which := "the node"
	if node != "" {
		which = fmt.Sprintf("node %q", node)
	}
	err := fmt.Errorf("the failed change was reset, but %s is still cordoned (gate phase %s)", which, a.Phase)
	if a.Phase == string(gate.PhaseFailed) {
		return resetFailure(err, fmt.Sprintf("a change queued behind the failed one started after the reset and "+
			"failed too: its reason is in %s and %s; fix the GPU, then run --reset again", cordon, log))
	}
	return resetFailure(err, fmt.Sprintf("the uncordon did not happen: %s says why; run --reset again, and if it "+
		"then finds nothing to reset with the node still cordoned, remove %s by hand (no cordon file: not cordoned)",
		log, cordon))
}

// resetPause is nil outside tests. A test sets it in the agent child process to stop a reset from
// the socket at one point ("request": the request read, nothing done; "journaled": the reset's
// state journaled and fsynced, the uncordon not yet performed; "answer": the reset done, its
// answer not yet written) so that it can SIGKILL the agent there (TestAgentResetKilledMidway),
// or to look at the socket just bound ("bound": not yet mode 0600 nor in its place;
// TestAgentResetSocketBoundPrivately).
var resetPause func(point string)

// peerUIDFunc returns the user id of the process at the other end of a reset socket connection;
// errors.ErrUnsupported where the system gives none (socketPeerUID).
type peerUIDFunc func(c *net.UnixConn) (int, error)

// resetTmpPrefix names the private directories the reset socket is made in (serveReset).
const resetTmpPrefix = ".sock-"

// serveReset listens on stateDir/agent.sock and resets the running agent's gate for each request
// (docs/adr/0066). The socket is bound inside a fresh directory of mode 0700 under the state
// directory, changed to mode 0600 there, and only then renamed to its place (replacing an old
// one a killed agent left: the caller holds the state directory's lock), so no other user can
// connect between the bind, which makes it with the umask's mode, and the chmod; the process
// umask is left alone. Each connection's peer must run as the agent's own user or root
// (peerUID: SO_PEERCRED on Linux); others are answered with a refusal naming their uid, and
// the refusal is logged. Each answer is written only after resetFailed returned, so an
// acknowledged reset is on disk.
func serveReset(ctx context.Context, stateDir string, x *agent.Executor, log *slog.Logger, peerUID peerUIDFunc) (stop func(), err error) {
	path := filepath.Join(stateDir, resetSocketName)
	// Private directories a killed agent left between its bind and its rename.
	if old, err := filepath.Glob(filepath.Join(stateDir, resetTmpPrefix+"*")); err == nil {
		for _, d := range old {
			_ = os.RemoveAll(d)
		}
	}
	dir, err := os.MkdirTemp(stateDir, resetTmpPrefix) // mode 0700
	if err != nil {
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s") // short: a unix socket's path is at most about 100 bytes
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	// The listener is closed by path no more: stop removes the socket where it was renamed to.
	ln.SetUnlinkOnClose(false)
	if resetPause != nil {
		resetPause("bound")
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("reset socket: %w", err)
	}
	self := os.Getuid()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return // closed
			}
			handleReset(ctx, c, x, log, peerUID, self)
		}
	}()
	return func() { ln.Close(); <-done; _ = os.Remove(path) }, nil
}

// allowPeer says whether a peer of user id uid may reset the gate of an agent running as self:
// its own user or root.
func allowPeer(uid, self int) error {
	if uid == self || uid == 0 {
		return nil
	}
	return fmt.Errorf("refused: the connecting process runs as uid %d; the agent (uid %d) takes a reset "+
		"only from its own user or root", uid, self)
}

func handleReset(ctx context.Context, c *net.UnixConn, x *agent.Executor, log *slog.Logger, peerUID peerUIDFunc, self int) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var req resetRequest
	var ans resetAnswer
	// The request is read in full (one small line) before any answer, a refusal too: a unix
	// socket closed with unread data makes the peer's read fail, and it would get no answer.
	reqErr := json.NewDecoder(io.LimitReader(c, 4096)).Decode(&req)
	uid, credErr := peerUID(c)
	switch {
	case credErr != nil && !errors.Is(credErr, errors.ErrUnsupported):
		ans = resetAnswer{Refused: true, Error: "refused: the connecting process's uid is unknown: " + credErr.Error()}
		log.Warn("reset socket: refused a connection", "err", credErr)
	case credErr == nil && allowPeer(uid, self) != nil:
		ans = resetAnswer{Refused: true, Error: allowPeer(uid, self).Error()}
		log.Warn("reset socket: refused a connection", "uid", uid, "agent_uid", self)
	case reqErr != nil:
		ans.Error = "bad request: " + reqErr.Error()
	case req.Op != "reset":
		ans.Error = fmt.Sprintf("unknown op %q (want reset)", req.Op)
	default:
		if resetPause != nil {
			resetPause("request")
		}
		a, err := resetFailed(ctx, x)
		if err != nil {
			ans.Error = err.Error()
			log.Warn("reset from the reset socket", "err", err)
		} else {
			ans = a
		}
		if resetPause != nil {
			resetPause("answer")
		}
	}
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_ = json.NewEncoder(c).Encode(ans)
}

// resetFailure marks an expected failure of `gpupool agent --reset` (exit 1, as a refused peer
// uid is): the state directory, the GPU driver, the journal, or the running agent's socket and
// answer; todo says what the operator can do about it. An interrupt keeps its own code (130).
// Only an error no step of the reset marked is a bug (exit 3).
func resetFailure(err error, todo string) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return invalid(fmt.Errorf("%w; %s", err, todo))
}

// resetDenied marks a failure of `gpupool agent --reset` that a file's mode made (permission
// denied on the state directory, its lock file, journal or other files, or the running agent's
// reset socket): this user is neither the agent's nor root. It fails before anything was
// changed, and says so, which user ran it and which owns the state directory. It is nil for any
// other error, which the caller marks with its own advice.
func resetDenied(err error, stateDir string) error {
	if !errors.Is(err, fs.ErrPermission) {
		return nil
	}
	owner := ""
	if uid, ok := fileOwner(stateDir); ok {
		owner = fmt.Sprintf(", which belongs to uid %d", uid)
	}
	return resetFailure(err, fmt.Sprintf("this user (uid %d) may not use the agent's state directory %s%s: nothing was "+
		"reset; run --reset as the agent's user or root", os.Getuid(), stateDir, owner))
}

// resetRunning asks the agent that holds the state directory's lock to reset its gate through its
// reset socket, and prints its answer. It tries for a few seconds: an agent that has just started
// opens its socket once its gate has resumed.
func resetRunning(ctx context.Context, e *env, stateDir, node string, locked error) error {
	path := filepath.Join(stateDir, resetSocketName)
	var c net.Conn
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		var d net.Dialer
		if c, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		// The socket is made mode 0600 before it is in place: a refusal by its mode is final.
		if errors.Is(err, fs.ErrPermission) {
			return resetDenied(fmt.Errorf("%w, whose reset socket %s is not open to this user (%w)", locked, path, err), stateDir)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return resetFailure(fmt.Errorf("%w, which takes no reset on %s (%v)", locked, path, err),
				"it is an `agent --once`, an agent still resuming its gate or older than this command, or one that "+
					"could not open the socket (its log says why): nothing was reset; try again, or stop the agent "+
					"and run --reset")
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
		return resetFailure(fmt.Errorf("reset the running agent through %s: %w", path, err),
			"the request was not sent, nothing was reset; run --reset again (its log says whether the agent stopped)")
	}
	var ans resetAnswer
	if err := json.NewDecoder(c).Decode(&ans); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return resetFailure(fmt.Errorf("reset the running agent through %s: no answer (%w)", path, err),
			"its journal says whether the reset was taken: run --reset again (a reset with nothing failed changes nothing)")
	}
	if ans.Refused {
		return invalid(fmt.Errorf("the running agent on %s %s", path, ans.Error)) // run it as the agent's user
	}
	if ans.Error != "" {
		return resetFailure(fmt.Errorf("the running agent on %s did not reset its gate: %s", path, ans.Error),
			"the agent's log says why (a journal it cannot write, the disk); fix that, then run --reset again "+
				"(with nothing failed it changes nothing)")
	}
	fmt.Fprintf(e.stdout, "gate: the running agent answered on %s\n", path)
	printReset(e.stdout, ans)
	return resetLeftCordoned(ans, node, filepath.Join(stateDir, "cordon.json"), "the running agent's log")
}
