package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/agent"
)

// resetExit runs `gpupool agent --fake --config cfg --reset` as a child process through main, so
// that the exit status is the one an operator sees, and returns it with the process's output.
func resetExit(t *testing.T, cfg string) (code int, stdout, stderr string) {
	t.Helper()
	return agentExit(t, "--config", cfg, "--reset")
}

// agentExit runs `gpupool agent --fake ARGS` as a child process through main and returns its exit
// status and output; a child still running after a minute is killed (the test then fails on its
// status).
func agentExit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return commandExit(t, append([]string{"agent", "--fake"}, args...)...)
}

// commandExit runs `gpupool ARGS` as a child process through main and returns its exit status
// and output; a child still running after a minute is killed.
func commandExit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run agent %q: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// resetStateDir writes an agent configuration on a fresh state directory and returns the
// configuration's path and the directory.
func resetStateDir(t *testing.T) (cfg, state string) {
	t.Helper()
	dir := t.TempDir()
	state = filepath.Join(dir, "state")
	must(t, os.MkdirAll(state, 0o755))
	cfg = filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("node: n1\nstateDir: %s\nlisten: 127.0.0.1:0\ngpus: []\n", state)), 0o644))
	return cfg, state
}

// holdLock takes the state directory's lock for the test, as a running agent holds it, so that
// --reset goes to the reset socket.
func holdLock(t *testing.T, state string) {
	t.Helper()
	unlock, err := agent.LockStateDir(state)
	must(t, err)
	t.Cleanup(func() { _ = unlock() })
}

// fakeResetSocket listens on state/agent.sock in place of an agent: for each connection it reads
// the request line and then writes answer (nothing when answer is empty) and closes.
func fakeResetSocket(t *testing.T, state, answer string) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(state, resetSocketName))
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(c).ReadString('\n')
			if answer != "" {
				_, _ = c.Write([]byte(answer + "\n"))
			}
			c.Close()
		}
	}()
}

// TestAgentResetExitCodes: every failure an operator meets with `gpupool agent --reset` exits 1
// (something to fix or retry) with a message that says what happened and what to do, never 3
// (a bug in gpupool, "please report"), which every one of them did before but the peer-uid
// refusal (TestAgentResetPeerUID). The lock held with no socket at its place, a stale socket that
// refuses the connection, an agent that closes without answering, an agent that answers its reset
// failed, and a journal that cannot be opened; a gate with nothing failed still exits 0. The
// command is run as a child process through main, so the exit status is the process's own.
func TestAgentResetExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, state string)
		code  int
		want  []string // in stderr (stdout for exit 0)
		out   []string // in stdout, for a failure that prints the gate's answer first
	}{
		{name: "no socket", setup: func(t *testing.T, state string) { holdLock(t, state) }, code: exitInvalid,
			want: []string{"another gpupool agent uses this state directory", "takes no reset", resetSocketName,
				"no such file", "nothing was reset", "stop the agent and run --reset"}},
		{name: "refused", setup: func(t *testing.T, state string) {
			holdLock(t, state)
			// A killed agent's socket: the file is there, nobody listens on it.
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(state, resetSocketName), Net: "unix"})
			must(t, err)
			ln.SetUnlinkOnClose(false)
			must(t, ln.Close())
		}, code: exitInvalid,
			want: []string{"takes no reset", "connection refused", "nothing was reset", "stop the agent and run --reset"}},
		{name: "no answer", setup: func(t *testing.T, state string) {
			holdLock(t, state)
			fakeResetSocket(t, state, "")
		}, code: exitInvalid,
			want: []string{"no answer", "its journal says whether the reset was taken", "run --reset again"}},
		{name: "agent error", setup: func(t *testing.T, state string) {
			holdLock(t, state)
			ans, err := json.Marshal(resetAnswer{Error: "journal gate step reset: write: no space left on device"})
			must(t, err)
			fakeResetSocket(t, state, string(ans))
		}, code: exitInvalid,
			want: []string{"did not reset its gate", "no space left on device", "the agent's log says why", "run --reset again"}},
		// The reset was done, but the node is still cordoned: a change queued behind the failed one
		// started after it and failed too, or the uncordon did not happen. The command did not do
		// what it was asked (exit 0 before).
		{name: "cordoned, failed again", setup: answerReset(resetAnswer{Phase: "failed", Cordoned: true, Reset: true}),
			code: exitInvalid, out: []string{"the running agent answered", "gate: phase failed, cordoned true"},
			want: []string{`the failed change was reset, but node "n1" is still cordoned (gate phase failed)`,
				"failed too", "cordon.json", "the running agent's log", "fix the GPU, then run --reset again"}},
		{name: "cordoned, no uncordon", setup: answerReset(resetAnswer{Phase: "uncordon", Cordoned: true, Reset: true}),
			code: exitInvalid, out: []string{"gate: phase uncordon, cordoned true"},
			want: []string{`node "n1" is still cordoned (gate phase uncordon)`, "the uncordon did not happen",
				"the running agent's log says why", "run --reset again", "remove", "cordon.json by hand"}},
		// A reset that uncordoned, and a gate with nothing failed (cordoned by a change in progress),
		// are no failure.
		{name: "reset, uncordoned", setup: answerReset(resetAnswer{Phase: "idle", Reset: true}), code: exitOK,
			want: []string{"the running agent answered", "gate: phase idle, cordoned false"}},
		{name: "nothing to reset, cordoned", setup: answerReset(resetAnswer{Phase: "drain", Cordoned: true}), code: exitOK,
			want: []string{"gate: phase drain, nothing to reset"}},
		{name: "journal", setup: func(t *testing.T, state string) {
			// A journal that cannot be opened (a directory in its place: this test may run as root,
			// whom file modes do not stop).
			must(t, os.Mkdir(filepath.Join(state, "gate.journal"), 0o755))
		}, code: exitInvalid,
			want: []string{"open journal", "gate.journal", "nothing was reset", "run --reset again"}},
		{name: "nothing to reset", setup: func(*testing.T, string) {}, code: exitOK,
			want: []string{"gate: phase idle, nothing to reset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // two of them wait the 5 s --reset gives a socket to appear
			cfg, state := resetStateDir(t)
			tc.setup(t, state)
			code, stdout, stderr := resetExit(t, cfg)
			if code != tc.code {
				t.Fatalf("--reset (%s): exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, stdout, stderr)
			}
			got := stderr
			if tc.code == exitOK {
				got = stdout
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("--reset (%s): output lacks %q:\n%s", tc.name, w, got)
				}
			}
			for _, w := range tc.out {
				if !strings.Contains(stdout, w) {
					t.Errorf("--reset (%s): stdout lacks %q:\n%s", tc.name, w, stdout)
				}
			}
			if strings.Contains(stderr, "internal error") {
				t.Errorf("--reset (%s) calls itself a bug:\n%s", tc.name, stderr)
			}
		})
	}
}

// answerReset stands in for a running agent (the state directory's lock held, its socket
// listening) that answers a reset with a.
func answerReset(a resetAnswer) func(t *testing.T, state string) {
	return func(t *testing.T, state string) {
		holdLock(t, state)
		data, err := json.Marshal(a)
		must(t, err)
		fakeResetSocket(t, state, string(data))
	}
}

// TestAgentStateDirLockedExit: an agent started on a state directory whose lock another process
// holds (an agent already running there) exits 1, naming the directory and the holder's process
// id and saying what to do, not 3 ("internal error, please report"), which it did before: a second
// agent on one node is an operator's situation, not a bug. Both a plain start and --once, each run
// as a child process through main.
func TestAgentStateDirLockedExit(t *testing.T) {
	for _, args := range [][]string{nil, {"--once"}} {
		t.Run(strings.Join(append([]string{"agent"}, args...), " "), func(t *testing.T) {
			t.Parallel()
			cfg, state := resetStateDir(t)
			holdLock(t, state) // this test process is the holder
			code, stdout, stderr := agentExit(t, append([]string{"--config", cfg}, args...)...)
			if code != exitInvalid {
				t.Fatalf("agent %q beside a held lock: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, exitInvalid, stdout, stderr)
			}
			for _, w := range []string{"lock state dir " + state, "another gpupool agent uses this state directory",
				"held by process " + strconv.Itoa(os.Getpid()), "stop that agent", "another stateDir in its config", "--reset"} {
				if !strings.Contains(stderr, w) {
					t.Errorf("agent %q: stderr lacks %q:\n%s", args, w, stderr)
				}
			}
			if strings.Contains(stderr, "internal error") {
				t.Errorf("agent %q beside a held lock calls itself a bug:\n%s", args, stderr)
			}
		})
	}
}
