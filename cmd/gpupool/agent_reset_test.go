package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

type failSmoke struct{}

func (failSmoke) Smoke(context.Context, string, gpu.Layout) error { return errors.New("exit 1") }

// noDestroy fails every destroy: a rollback cannot restore the old layout.
type noDestroy struct{ agent.MIG }

func (noDestroy) Destroy(string, string, gpu.Instance) error {
	return errors.New("In use by another client")
}

// failedAgentState writes an agent configuration (no GPU layouts of its own) and leaves its state
// directory as a change that could not be rolled back leaves it: the gate journal's last state
// failed, the node cordoned, GPU 0 of the fake node holding the new instance. The change runs
// through the executor with a smoke check that fails and destroys that fail.
func failedAgentState(t *testing.T) (cfgPath, state string) {
	t.Helper()
	return failedAgentStateIn(t, t.TempDir())
}

// failedAgentStateIn is failedAgentState with the configuration and state directory in dir.
func failedAgentStateIn(t *testing.T, dir string) (cfgPath, state string) {
	t.Helper()
	state = filepath.Join(dir, "state")
	cfgPath = filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf("node: n1\nstateDir: %s\nlisten: 127.0.0.1:0\npollInterval: 100ms\ngpus: []\n", state)), 0o644))
	cfg, err := agent.DecodeConfig([]byte(fmt.Sprintf("node: n1\nstateDir: %s\n", state)))
	must(t, err)
	fk, err := newFakeNode(cfg, "h100", false, 0)
	must(t, err)
	lib := nvml.New(fk.Interface(), nvml.Options{})
	defer lib.Close()
	j, rep, err := agent.OpenJournal(filepath.Join(state, "gate.journal"))
	must(t, err)
	defer j.Close()
	ctx := context.Background()
	x, err := agent.NewExecutor(ctx, j, rep, gate.State{}, agent.Deps{MIG: noDestroy{lib}, Smoke: failSmoke{},
		Node: &agent.LocalNode{Path: filepath.Join(state, "cordon.json")}})
	must(t, err)
	to, err := gpu.ParseLayout("7g.80gb@0")
	must(t, err)
	must(t, x.Submit(ctx, gate.Desired{GPU: fk.UUIDs()[0], Board: fk.Board().Name, Layout: to, Current: gpu.Layout{}}))
	if x.State().Phase() != gate.PhaseFailed {
		t.Fatalf("seeded gate in phase %s, want failed", x.State().Phase())
	}
	return cfgPath, state
}

// startAgentChild runs `gpupool agent --fake --config cfg` as a child process (so that it can be
// SIGKILLed) and returns it with its /healthz URL.
func startAgentChild(t *testing.T, cfg string) (*exec.Cmd, string) {
	t.Helper()
	return startAgentChildEnv(t, cfg)
}

// startedAgentChild starts cmd, an agent child process, and returns it with its /healthz URL.
func startedAgentChild(t *testing.T, cmd *exec.Cmd) (*exec.Cmd, string) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = io.Discard
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)`)
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := re.FindStringSubmatch(lines.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		for lines.Scan() {
		}
	}()
	select {
	case a := <-addr:
		return cmd, "http://" + a + "/healthz"
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not start within 30s")
	}
	return nil, ""
}

// waitHealth waits until /healthz answers code with a body that holds want.
func waitHealth(t *testing.T, url string, code int, want string) {
	t.Helper()
	var got int
	var body string
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got, body = resp.StatusCode, string(b)
			if got == code && strings.Contains(body, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz = %d %q, want %d %q", got, body, code, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastGateState reads the gate journal's last record as it is on disk.
func lastGateState(t *testing.T, state string) gate.State {
	t.Helper()
	f, err := os.Open(filepath.Join(state, "gate.journal"))
	must(t, err)
	defer f.Close()
	rep, _, err := agent.ReadJournal(f)
	must(t, err)
	if rep.Last == nil {
		t.Fatal("gate journal is empty")
	}
	return *rep.Last
}

func hasNote(st gate.State, code string) bool {
	for _, n := range st.Notes {
		if n.Code == code {
			return true
		}
	}
	return false
}

// TestAgentResetRunning: `gpupool agent --reset` beside a running agent whose change failed is
// taken by that agent, through its reset socket: the answer says the gate is idle and the node
// uncordoned, the journal's last record (read as soon as the command returned) is the reset, the
// cordon file is lifted and /healthz turns from 503 to 200 without a restart. A second --reset
// says there is nothing to reset. Before, --reset beside a running agent was refused ("stop the
// agent before --reset"), which under the Kubernetes DaemonSet left no way to clear a failed change
// but keeping the agent's pod off the node.
func TestAgentResetRunning(t *testing.T) {
	cfg, state := failedAgentState(t)
	_, health := startAgentChild(t, cfg)
	waitHealth(t, health, http.StatusServiceUnavailable, "gate failed")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("--reset beside the running agent: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "gate: the running agent answered on "+filepath.Join(state, "agent.sock")) ||
		!strings.Contains(out.String(), "gate: phase idle, cordoned false") {
		t.Fatalf("--reset output:\n%s", out.String())
	}
	if st := lastGateState(t, state); st.Phase() != gate.PhaseIdle || st.Cordoned || !hasNote(st, gate.ReasonReset) {
		t.Fatalf("journal right after --reset: phase %s, cordoned %t, GateReset noted %t", st.Phase(), st.Cordoned, hasNote(st, gate.ReasonReset))
	}
	if c, err := (&agent.LocalNode{Path: filepath.Join(state, "cordon.json")}).Read(); err != nil || c.Cordoned {
		t.Fatalf("cordon right after --reset: %+v, %v", c, err)
	}
	waitHealth(t, health, http.StatusOK, "ok")
	if fi, err := os.Stat(filepath.Join(state, "agent.sock")); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("reset socket: %v, %v; want a socket of mode 0600", fi.Mode(), err)
	}
	// The socket was bound in a private directory and renamed into place; none is left.
	if left, _ := filepath.Glob(filepath.Join(state, resetTmpPrefix+"*")); len(left) > 0 {
		t.Fatalf("private socket directories left: %v", left)
	}
	out.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("second --reset: %v", err)
	}
	if !strings.Contains(out.String(), "gate: phase idle, nothing to reset") {
		t.Fatalf("second --reset output:\n%s", out.String())
	}
}

// TestAgentResetSurvivesKill: the running agent is SIGKILLed as soon as its answer to --reset has
// arrived; the agent started again on the state directory is not failed (idle, uncordoned, /healthz
// 200): a reset the command reported was on disk before its answer.
func TestAgentResetSurvivesKill(t *testing.T) {
	cfg, state := failedAgentState(t)
	cmd, health := startAgentChild(t, cfg)
	waitHealth(t, health, http.StatusServiceUnavailable, "gate failed")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("--reset beside the running agent: %v\n%s", err, out.String())
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	if !strings.Contains(out.String(), "gate: phase idle, cordoned false") {
		t.Fatalf("--reset output:\n%s", out.String())
	}
	// A stale socket is left by the kill; the next agent replaces it. So is the private directory
	// of an agent killed between binding its socket and renaming it into place: removed too.
	stale := filepath.Join(state, resetTmpPrefix+"123")
	must(t, os.Mkdir(stale, 0o700))
	must(t, os.WriteFile(filepath.Join(stale, "s"), nil, 0o600))
	_, health = startAgentChild(t, cfg)
	waitHealth(t, health, http.StatusOK, "ok")
	if left, _ := filepath.Glob(filepath.Join(state, resetTmpPrefix+"*")); len(left) > 0 {
		t.Fatalf("private socket directories left after the restart: %v", left)
	}
	if st := lastGateState(t, state); st.Phase() != gate.PhaseIdle || st.Cordoned {
		t.Fatalf("journal after the kill and restart: phase %s, cordoned %t", st.Phase(), st.Cordoned)
	}
	out.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("--reset beside the restarted agent: %v", err)
	}
	if !strings.Contains(out.String(), "gate: phase idle, nothing to reset") {
		t.Fatalf("--reset beside the restarted agent:\n%s", out.String())
	}
}

// --reset while the state directory's lock is held by a process with no reset socket (here this
// test, as an `agent --once` would) says so, names the socket and the way out.
func TestAgentResetLockedNoSocket(t *testing.T) {
	cfg, state := failedAgentState(t)
	unlock, err := agent.LockStateDir(state)
	must(t, err)
	defer unlock()
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut)
	if !errors.Is(err, agent.ErrStateDirLocked) {
		t.Fatalf("--reset with the lock held and no socket: %v, want ErrStateDirLocked", err)
	}
	for _, want := range []string{filepath.Join(state, "agent.sock"), "takes no reset", "stop the agent and run --reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// resetPauseEnv, "POINT:FILE", makes an agent child process stop a reset from its socket at POINT
// (resetPause): it creates FILE and waits there for ever, to be SIGKILLed.
const resetPauseEnv = "GPUPOOL_TEST_RESET_PAUSE"

func installResetPause() {
	point, file, ok := strings.Cut(os.Getenv(resetPauseEnv), ":")
	if !ok {
		return
	}
	resetPause = func(at string) {
		if at != point {
			return
		}
		if err := os.WriteFile(file, []byte(at), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "reset pause:", err)
			return
		}
		select {}
	}
}

// startAgentChildEnv is startAgentChild with extra environment for the child.
func startAgentChildEnv(t *testing.T, cfg string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "GPUPOOL_TEST_CHILD=1", "GPUPOOL_TEST_ARGS=agent --fake --config "+cfg), env...)
	return startedAgentChild(t, cmd)
}

// TestAgentResetKilledMidway: the running agent is SIGKILLed while it handles a --reset, at each
// point of it: with the request read and nothing done, with the reset's state journaled and its
// uncordon not yet performed, and with the reset done and the answer not yet written. The
// --reset command then fails saying that there was no answer and to run it again; the journal as
// the kill left it holds either no reset at all (still failed, cordoned) or the reset's record
// (the change forgotten); the agent started again on the directory resumes, and a second --reset
// finishes the reset or finds nothing to do. Either way the node ends idle, uncordoned, the reset
// on record, /healthz 200.
func TestAgentResetKilledMidway(t *testing.T) {
	for _, tc := range []struct {
		point string
		done  bool // the reset's record is in the journal at the kill
		// The journal's last state at the kill: the failed change; the reset with its uncordon
		// pending (the next start performs it); the reset done.
		phase    gate.Phase
		cordoned bool
	}{
		{"request", false, gate.PhaseFailed, true},
		{"journaled", true, gate.PhaseUncordon, true},
		{"answer", true, gate.PhaseIdle, false},
	} {
		t.Run(tc.point, func(t *testing.T) {
			cfg, state := failedAgentState(t)
			marker := filepath.Join(t.TempDir(), "paused")
			cmd, health := startAgentChildEnv(t, cfg, resetPauseEnv+"="+tc.point+":"+marker)
			waitHealth(t, health, http.StatusServiceUnavailable, "gate failed")
			got := make(chan error, 1)
			var out, errOut bytes.Buffer
			go func() {
				got <- run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut)
			}()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the agent did not reach %q within 20s", tc.point)
				}
			}
			must(t, cmd.Process.Signal(syscall.SIGKILL))
			_ = cmd.Wait()
			var err error
			select {
			case err = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("--reset did not return within 20s of the agent's kill")
			}
			if err == nil || !strings.Contains(err.Error(), "no answer") || !strings.Contains(err.Error(), "run --reset again") {
				t.Fatalf("--reset whose agent was killed at %q: %v, want an error saying no answer came and to run it again\n%s", tc.point, err, out.String())
			}
			st := lastGateState(t, state)
			if reset := hasNote(st, gate.ReasonReset); reset != tc.done {
				t.Fatalf("journal after the kill at %q: reset on record %t, want %t (phase %s)", tc.point, reset, tc.done, st.Phase())
			}
			if st.Phase() != tc.phase || st.Cordoned != tc.cordoned {
				t.Fatalf("journal after the kill at %q: phase %s, cordoned %t; want %s, cordoned %t", tc.point, st.Phase(), st.Cordoned, tc.phase, tc.cordoned)
			}
			_, health = startAgentChild(t, cfg)
			out.Reset()
			if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
				t.Fatalf("second --reset: %v\n%s", err, out.String())
			}
			want := "gate: phase idle, nothing to reset"
			if !tc.done {
				want = "gate: phase idle, cordoned false"
			}
			if !strings.Contains(out.String(), want) {
				t.Fatalf("second --reset after the kill at %q:\n%s\nwant %q", tc.point, out.String(), want)
			}
			waitHealth(t, health, http.StatusOK, "ok")
			if st := lastGateState(t, state); st.Phase() != gate.PhaseIdle || st.Cordoned || !hasNote(st, gate.ReasonReset) {
				t.Fatalf("journal at the end: phase %s, cordoned %t, reset on record %t", st.Phase(), st.Cordoned, hasNote(st, gate.ReasonReset))
			}
			if c, err := (&agent.LocalNode{Path: filepath.Join(state, "cordon.json")}).Read(); err != nil || c.Cordoned {
				t.Fatalf("cordon at the end: %+v, %v", c, err)
			}
		})
	}
}

// failedExecutor opens the gate of a state directory left by failedAgentState as the agent does,
// holding the directory's lock, and returns its executor.
func failedExecutor(t *testing.T, cfgPath, state string) *agent.Executor {
	t.Helper()
	unlock, err := agent.LockStateDir(state)
	must(t, err)
	t.Cleanup(func() { _ = unlock() })
	cfg, err := agent.DecodeConfig([]byte(fmt.Sprintf("node: n1\nstateDir: %s\n", state)))
	must(t, err)
	fk, err := newFakeNode(cfg, "h100", false, 0)
	must(t, err)
	lib := nvml.New(fk.Interface(), nvml.Options{})
	t.Cleanup(func() { _ = lib.Close() })
	j, rep, err := agent.OpenJournal(filepath.Join(state, "gate.journal"))
	must(t, err)
	t.Cleanup(func() { _ = j.Close() })
	x, err := agent.NewExecutor(context.Background(), j, rep, gate.State{}, agent.Deps{MIG: lib,
		Node: &agent.LocalNode{Path: filepath.Join(state, "cordon.json")}})
	must(t, err)
	if x.State().Phase() != gate.PhaseFailed {
		t.Fatalf("gate in phase %s, want failed", x.State().Phase())
	}
	return x
}

// TestAgentResetPeerUID: the reset socket answers only a peer running as the agent's user or
// root. The test cannot connect as another user, so the peer's uid comes from an injected
// function: a peer of uid 4242 (and one whose uid cannot be read) is refused with an error naming
// that uid, the refusal is logged, and the gate stays failed and cordoned, in memory and in the
// journal; a peer of uid 0 is answered and the reset done. The real SO_PEERCRED check is what the
// agent child processes of the other TestAgentReset tests pass (TestSocketPeerUID).
func TestAgentResetPeerUID(t *testing.T) {
	cfg, state := failedAgentState(t)
	x := failedExecutor(t, cfg, state)
	self := os.Getuid()
	for _, tc := range []struct {
		name     string
		uid      int
		credErr  error
		want     []string // in the error of --reset and the log
		accepted bool
	}{
		{name: "other user", uid: 4242, want: []string{"refused", "uid 4242", fmt.Sprintf("uid %d", self), "its own user or root"}},
		{name: "unknown uid", credErr: errors.New("getsockopt: bad file descriptor"), want: []string{"refused", "uid is unknown", "bad file descriptor"}},
		{name: "root", uid: 0, accepted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			peer := func(*net.UnixConn) (int, error) { return tc.uid, tc.credErr }
			stop, err := serveReset(context.Background(), state, x, log, peer)
			must(t, err)
			defer stop()
			var out, errOut bytes.Buffer
			err = run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut)
			if tc.accepted {
				if err != nil || !strings.Contains(out.String(), "gate: phase idle, cordoned false") {
					t.Fatalf("--reset from uid 0: %v\n%s", err, out.String())
				}
				if st := lastGateState(t, state); st.Phase() != gate.PhaseIdle || st.Cordoned || !hasNote(st, gate.ReasonReset) {
					t.Fatalf("journal after the reset from uid 0: phase %s, cordoned %t", st.Phase(), st.Cordoned)
				}
				return
			}
			if err == nil || exitCode(err) != exitInvalid {
				t.Fatalf("--reset from %s: %v (exit %d), want a refusal, exit 1\n%s", tc.name, err, exitCode(err), out.String())
			}
			for _, w := range append(tc.want, filepath.Join(state, "agent.sock")) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if !strings.Contains(logBuf.String(), "reset socket: refused a connection") {
				t.Errorf("the refusal is not logged:\n%s", logBuf.String())
			}
			if tc.uid != 0 && !strings.Contains(logBuf.String(), fmt.Sprintf("uid=%d", tc.uid)) && tc.credErr == nil {
				t.Errorf("the log does not name uid %d:\n%s", tc.uid, logBuf.String())
			}
			if x.State().Phase() != gate.PhaseFailed || !x.State().Cordoned {
				t.Fatalf("gate after a refused reset: phase %s, cordoned %t, want failed and cordoned", x.State().Phase(), x.State().Cordoned)
			}
			if st := lastGateState(t, state); st.Phase() != gate.PhaseFailed || hasNote(st, gate.ReasonReset) {
				t.Fatalf("journal after a refused reset: phase %s, reset on record %t", st.Phase(), hasNote(st, gate.ReasonReset))
			}
		})
	}
}

// TestSocketPeerUID: the peer uid read from a real connection is this process's own, and the
// agent's check takes it (and root) and refuses another.
func TestSocketPeerUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	must(t, err)
	defer ln.Close()
	c, err := net.Dial("unix", path)
	must(t, err)
	defer c.Close()
	s, err := ln.AcceptUnix()
	must(t, err)
	defer s.Close()
	uid, err := socketPeerUID(s)
	if runtime.GOOS != "linux" {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("socketPeerUID outside Linux: %d, %v, want ErrUnsupported", uid, err)
		}
		return
	}
	if err != nil || uid != os.Getuid() {
		t.Fatalf("socketPeerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
	if allowPeer(uid, os.Getuid()) != nil || allowPeer(0, os.Getuid()) != nil {
		t.Fatal("allowPeer refuses the agent's own uid or root")
	}
	if err := allowPeer(os.Getuid()+1, os.Getuid()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("uid %d", os.Getuid()+1)) {
		t.Fatalf("allowPeer of another uid: %v", err)
	}
}

// TestAgentResetSocketBoundPrivately: between its bind (which makes it with the umask's mode) and
// its chmod to 0600, the reset socket lies in a directory of mode 0700 of the agent's own, not
// at its place in the state directory, so no other user can connect to it then; once served it
// is stateDir/agent.sock of mode 0600, replacing a stale one, and the private directory is gone.
// (Before, the socket was bound at its place and changed to 0600 afterwards.)
func TestAgentResetSocketBoundPrivately(t *testing.T) {
	cfg, state := failedAgentState(t)
	x := failedExecutor(t, cfg, state)
	path := filepath.Join(state, resetSocketName)
	must(t, os.WriteFile(path, []byte("stale"), 0o644)) // what a killed agent's socket stands for
	var seen []string
	resetPause = func(at string) {
		if at != "bound" {
			return
		}
		socks, _ := filepath.Glob(filepath.Join(state, resetTmpPrefix+"*", "s"))
		if len(socks) != 1 {
			seen = append(seen, fmt.Sprintf("bound sockets in private directories: %v, want 1", socks))
			return
		}
		fi, err := os.Stat(filepath.Dir(socks[0]))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			seen = append(seen, fmt.Sprintf("private directory: %v, %v; want a directory of mode 0700", fi.Mode(), err))
		}
		if fi, err := os.Lstat(socks[0]); err != nil || fi.Mode()&os.ModeSocket == 0 {
			seen = append(seen, fmt.Sprintf("bound socket: %v, %v", fi.Mode(), err))
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "stale" {
			seen = append(seen, fmt.Sprintf("%s changed before the chmod: %q, %v", path, b, err))
		}
		seen = append(seen, "bound")
	}
	defer func() { resetPause = nil }()
	stop, err := serveReset(context.Background(), state, x, slog.New(slog.DiscardHandler), socketPeerUID)
	must(t, err)
	defer stop()
	if len(seen) != 1 || seen[0] != "bound" {
		t.Fatalf("at the bind: %v", seen)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v; want a socket of mode 0600", path, fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(state, resetTmpPrefix+"*")); len(left) > 0 {
		t.Fatalf("private socket directories left: %v", left)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil ||
		!strings.Contains(out.String(), "gate: phase idle, cordoned false") {
		t.Fatalf("--reset through the renamed socket: %v\n%s", err, out.String())
	}
	stop()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after the stop: %v, want it removed", path, err)
	}
}
