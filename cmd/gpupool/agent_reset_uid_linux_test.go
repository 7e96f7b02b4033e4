package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/gate"
)

// otherUID is the user `gpupool agent --reset` runs as in TestAgentResetOtherUser: nobody, neither
// the agent's user (root, the test's) nor root.
const otherUID = 65534

// otherUserBinary makes a directory of mode 0755 that uid otherUID can reach, copies the test
// binary into it, and checks that the copy runs as that uid (`gpupool version`). The test is
// skipped when it does not run as root (only root can start a process as another uid) or when
// the copy cannot run as that uid (a temporary directory it cannot reach, a noexec mount).
func otherUserBinary(t *testing.T) (dir, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("running --reset as uid %d needs the test to run as root (it runs as uid %d)", otherUID, os.Geteuid())
	}
	dir, err := os.MkdirTemp("", "gpupool-uid-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	must(t, err)
	src, err := os.Open(self)
	must(t, err)
	defer src.Close()
	bin = filepath.Join(dir, "gpupool.test")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	must(t, err)
	_, err = io.Copy(dst, src)
	must(t, errors.Join(err, dst.Close()))
	code, stdout, stderr := runAsOther(t, dir, bin, "version")
	if code != 0 || !strings.Contains(stdout, "gpupool") {
		t.Skipf("the test binary copied to %s does not run as uid %d (exit %d): %s%s", dir, otherUID, code, stdout, stderr)
	}
	return dir, bin
}

// runAsOther runs `gpupool ARGS` (bin, the copied test binary, through main) as uid and gid
// otherUID in dir and returns its exit status and output; a child still running after a minute
// is killed.
func runAsOther(t *testing.T, dir, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{childEnv + "=1", "PATH=/usr/bin:/bin", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("run %q as uid %d: %v", args, otherUID, err)
	}
	return code, out.String(), errOut.String()
}

// stateFiles is what a --reset refused must leave as it was: the gate journal, the cordon file and
// the fake GPUs' state, by content.
func stateFiles(t *testing.T, state string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, name := range []string{"gate.journal", "cordon.json", "fake-gpus.json"} {
		b, err := os.ReadFile(filepath.Join(state, name))
		if err != nil {
			t.Fatalf("state file: %v", err)
		}
		got[name] = string(b)
	}
	return got
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestAgentResetOtherUser: an operator who is neither the agent's user nor root runs `gpupool
// agent --reset` on the agent's config (here as uid 65534 beside an agent run as root, with a
// failed change), with the agent running and stopped. Each exits 1, naming the path it could not
// use, saying permission denied, that nothing was reset, and to run --reset as the agent's user or
// root; the gate stays failed and cordoned (journal, cordon file, /healthz), and nothing in the
// state directory changes. The state directory as the agent makes it (0755, its lock and journal
// 0600, the socket 0600) stops such a user at the lock file. The cases where an operator opened the
// lock file to all go further: the reset socket then refuses the connection (permission denied,
// said at once, not after the 5 s a starting agent is given), or, opened to all too, the agent
// refuses the peer by its uid (SO_PEERCRED, the real check: TestAgentResetPeerUID injects the uid);
// with the agent stopped, the journal cannot be opened.
func TestAgentResetOtherUser(t *testing.T) {
	shared, bin := otherUserBinary(t)
	for _, tc := range []struct {
		name     string
		running  bool
		chmod    map[string]os.FileMode // in the state directory, before --reset
		want     []string               // in stderr; "STATE" is the state directory
		fast     bool                   // fails without waiting for a socket to appear
		sameDir  bool                   // the state directory's names are the same after
		sameLock bool                   // the lock file's content is the same after
	}{
		{name: "running", running: true, fast: true, sameDir: true, sameLock: true,
			want: []string{"STATE/lock", "permission denied", "uid 65534", "nothing was reset",
				"run --reset as the agent's user or root"}},
		{name: "stopped", fast: true, sameDir: true, sameLock: true,
			want: []string{"STATE/lock", "permission denied", "uid 65534", "nothing was reset",
				"run --reset as the agent's user or root"}},
		{name: "stopped, state dir private", chmod: map[string]os.FileMode{".": 0o700}, fast: true, sameDir: true, sameLock: true,
			want: []string{"STATE/lock", "permission denied", "nothing was reset", "run --reset as the agent's user or root"}},
		{name: "running, lock open to all", running: true, chmod: map[string]os.FileMode{"lock": 0o666}, fast: true,
			sameDir: true, sameLock: true,
			want: []string{"STATE/agent.sock", "permission denied", "uid 65534", "nothing was reset",
				"run --reset as the agent's user or root"}},
		{name: "running, lock and socket open to all", running: true,
			chmod: map[string]os.FileMode{"lock": 0o666, "agent.sock": 0o666}, fast: true, sameDir: true, sameLock: true,
			want: []string{"STATE/agent.sock", "refused: the connecting process runs as uid 65534",
				"the agent (uid 0) takes a reset only from its own user or root"}},
		// The lock is taken (its content is then the holder's pid): the fake GPUs' state, or the
		// journal, is what stops it.
		{name: "stopped, lock open to all", chmod: map[string]os.FileMode{"lock": 0o666}, fast: true, sameDir: true,
			want: []string{"STATE/fake-gpus.json", "permission denied", "uid 65534", "nothing was reset",
				"run --reset as the agent's user or root"}},
		{name: "stopped, lock and fake GPUs open to all", chmod: map[string]os.FileMode{"lock": 0o666, "fake-gpus.json": 0o666},
			fast: true, sameDir: true,
			want: []string{"STATE/gate.journal", "permission denied", "uid 65534", "nothing was reset",
				"run --reset as the agent's user or root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(shared, strings.NewReplacer(" ", "-", ",", "").Replace(tc.name))
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.Chmod(dir, 0o755))
			cfg, state := failedAgentStateIn(t, dir)
			must(t, os.Chmod(cfg, 0o644))
			var health string
			if tc.running {
				_, health = startAgentChild(t, cfg)
				waitHealth(t, health, http.StatusServiceUnavailable, "gate failed")
			} else {
				// As a stopped agent leaves it: the lock file is there.
				unlock, err := agent.LockStateDir(state)
				must(t, err)
				must(t, unlock())
			}
			for name, mode := range tc.chmod {
				must(t, os.Chmod(filepath.Join(state, name), mode))
			}
			before, names := stateFiles(t, state), dirNames(t, state)
			lock, err := os.ReadFile(filepath.Join(state, "lock"))
			must(t, err)
			start := time.Now()
			code, stdout, stderr := runAsOther(t, dir, bin, "agent", "--fake", "--config", cfg, "--reset")
			took := time.Since(start)
			t.Logf("--reset as uid %d: exit %d\n%s%s", otherUID, code, stdout, stderr)
			if code != exitInvalid {
				t.Fatalf("--reset as uid %d: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", otherUID, code, exitInvalid, stdout, stderr)
			}
			for _, w := range tc.want {
				w = strings.ReplaceAll(w, "STATE", state)
				if !strings.Contains(stderr, w) {
					t.Errorf("--reset as uid %d: stderr lacks %q:\n%s", otherUID, w, stderr)
				}
			}
			if strings.Contains(stderr, "internal error") || strings.Contains(stderr, "panic") {
				t.Errorf("--reset as uid %d calls itself a bug:\n%s", otherUID, stderr)
			}
			if tc.fast && took > 4*time.Second {
				t.Errorf("--reset as uid %d took %v: it waited for a socket it may not use", otherUID, took)
			}
			for name := range tc.chmod {
				must(t, os.Chmod(filepath.Join(state, name), 0o600))
			}
			must(t, os.Chmod(state, 0o755))
			if after := stateFiles(t, state); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("--reset as uid %d changed the state directory:\nbefore %q\nafter  %q", otherUID, before, after)
			}
			if after := dirNames(t, state); tc.sameDir && after != names {
				t.Errorf("--reset as uid %d changed the state directory's names: %s, then %s", otherUID, names, after)
			}
			if after, err := os.ReadFile(filepath.Join(state, "lock")); tc.sameLock && (err != nil || string(after) != string(lock)) {
				t.Errorf("--reset as uid %d changed the lock file: %q, then %q (%v)", otherUID, lock, after, err)
			}
			if st := lastGateState(t, state); st.Phase() != gate.PhaseFailed || !st.Cordoned || hasNote(st, gate.ReasonReset) {
				t.Fatalf("journal after --reset as uid %d: phase %s, cordoned %t, reset on record %t; want failed, cordoned, no reset",
					otherUID, st.Phase(), st.Cordoned, hasNote(st, gate.ReasonReset))
			}
			if tc.running {
				waitHealth(t, health, http.StatusServiceUnavailable, "gate failed")
			}
		})
	}
}
