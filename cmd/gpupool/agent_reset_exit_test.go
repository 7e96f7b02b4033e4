package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/agent"
)

// resetExit runs `gpupool agent --fake --config cfg --reset` as a child process through main, so
// that the exit status is the one an operator sees, and returns it with the process's output.
func resetExit(t *testing.T, cfg string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "agent", "--fake", "--config", cfg, "--reset")
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
		t.Fatalf("run --reset: %v", err)
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
			if strings.Contains(stderr, "internal error") {
				t.Errorf("--reset (%s) calls itself a bug:\n%s", tc.name, stderr)
			}
		})
	}
}
