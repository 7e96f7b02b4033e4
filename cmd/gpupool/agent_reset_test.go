package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	dir := t.TempDir()
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
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUPOOL_TEST_CHILD=1", "GPUPOOL_TEST_ARGS=agent --fake --config "+cfg)
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
	// A stale socket is left by the kill; the next agent replaces it.
	_, health = startAgentChild(t, cfg)
	waitHealth(t, health, http.StatusOK, "ok")
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
