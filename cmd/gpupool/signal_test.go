package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// childEnv makes the test binary run main() instead of the tests, so that a test can start the
// real program as a child process and signal it.
const childEnv = "GPUPOOL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
	}
	// The control plane's SIGKILL test starts the server this way (serve_kill_test.go).
	if os.Getenv("GPUPOOL_TEST_CHILD") == "1" {
		installResetPause() // TestAgentResetKilledMidway
		err := run(context.Background(), strings.Fields(os.Getenv("GPUPOOL_TEST_ARGS")), os.Stdout, os.Stderr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gpupool: "+err.Error())
		}
		os.Exit(exitCode(err))
	}
	os.Exit(m.Run())
}

// interrupt starts gpupool args as a child process, sends it SIGINT after wait and returns its
// exit code, output and how long it took to stop after the signal. It fails the test when the
// child ended before the signal (the input was too small to be interrupted).
func interrupt(t *testing.T, wait time.Duration, args ...string) (code int, stdout, stderr string, stop time.Duration) {
	t.Helper()
	// The stop time is wall time on a machine that may be busy with other work, where the child
	// can wait for a core longer than the bar. A slow stop is tried again, twice at most: a
	// command that never stops in time still fails, one unlucky schedule does not.
	for attempt := 1; ; attempt++ {
		code, stdout, stderr, stop = interruptOnce(t, wait, args...)
		if stop <= stopBar() || attempt == 3 {
			return code, stdout, stderr, stop
		}
		t.Logf("attempt %d stopped %v after SIGINT, over %v: trying again", attempt, stop, stopBar())
	}
}

// stopBar is how soon a command must stop after SIGINT: 1 s; under the race detector, which
// slows the child several times over (and its 45 MB parse far more), 3 s.
func stopBar() time.Duration {
	if raceEnabled {
		return 3 * time.Second
	}
	return time.Second
}

func interruptOnce(t *testing.T, wait time.Duration, args ...string) (code int, stdout, stderr string, stop time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The child gets the signal once it has run for wait on a CPU, not after wait of wall time:
	// on a busy machine a child may not even have installed its signal handler after wait of
	// wall time, and would die of the signal instead of stopping.
	started := time.Now()
	for ready := false; !ready; {
		select {
		case err := <-exited:
			t.Fatalf("gpupool %s ended before the signal (%v): the input is too small to interrupt\n%s", strings.Join(args, " "), err, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
		cpu, ok := cpuTime(cmd.Process.Pid)
		ready = (ok && cpu >= wait) || (!ok && time.Since(started) >= wait) || time.Since(started) > 20*wait
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("gpupool %s did not stop within 10 s of SIGINT", args[0])
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String(), time.Since(sent)
}

// checkInterrupted asserts the contract: exit 130 within a second of the signal, nothing on
// stdout, and the output directory (when given) not created.
func checkInterrupted(t *testing.T, outDir string, code int, stdout, stderr string, stop time.Duration) {
	t.Helper()
	t.Logf("stopped %v after SIGINT, exit %d", stop, code)
	if code != exitInterrupted || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exit %d, want %d with a message saying so; stderr:\n%s", code, exitInterrupted, stderr)
	}
	if bar := stopBar(); stop > bar {
		t.Errorf("stopped %v after SIGINT, want within %v", stop, bar)
	}
	if stdout != "" {
		t.Errorf("wrote %d bytes to stdout, want nothing", len(stdout))
	}
	if outDir != "" {
		if _, err := os.Lstat(outDir); err == nil {
			t.Errorf("%s was created", outDir)
		}
		if l := leftovers(t, filepath.Dir(outDir)); len(l) > 0 {
			t.Errorf("temporary directories left: %v", l)
		}
	}
}

func TestInterruptPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process that plans a large pool")
	}
	pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 5000, GPUs: 5000}, rand.New(rand.NewPCG(1, 2)))
	data, err := v1.EncodeYAML(pool)
	if err != nil {
		t.Fatal(err)
	}
	poolFile := writeTemp(t, "pool.yaml", string(data))
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr, stop := interrupt(t, 700*time.Millisecond, "plan", poolFile, "--out", out)
	checkInterrupted(t, out, code, stdout, stderr, stop)
}

func TestInterruptSimulate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process that simulates")
	}
	// The example's tenants offer 4 req/s each; a day is within the request limit for 2 tenants
	// and takes far longer than the wait.
	pool := filepath.Join("..", "..", "examples", "h100-7b-sharing.yaml")
	plots := filepath.Join(t.TempDir(), "plots")
	code, stdout, stderr, stop := interrupt(t, 700*time.Millisecond, "simulate", pool, "--strategy", "mps", "--duration", "24h", "--plot", plots)
	checkInterrupted(t, plots, code, stdout, stderr, stop)
}

// fit first parses the model directory's index; a large one (a million tensors, 45 MB, within
// the size limit) takes long enough to be interrupted.
func TestInterruptFit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process that reads a large model directory")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), `{"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
"max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
"num_key_value_heads": 2, "torch_dtype": "bfloat16", "vocab_size": 128}`)
	var idx strings.Builder
	idx.WriteString(`{"weight_map": {`)
	for i := range 1_000_000 {
		if i > 0 {
			idx.WriteString(",")
		}
		fmt.Fprintf(&idx, `"model.layers.%d.weight": "model-00001-of-00001.safetensors"`, i)
	}
	idx.WriteString("}}")
	writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), idx.String())
	code, stdout, stderr, stop := interrupt(t, 300*time.Millisecond, "fit", "--model-dir", dir, "-o", "json")
	checkInterrupted(t, "", code, stdout, stderr, stop)
}

// fair replays a scenario step by step; a thousand tenants asking for a thousand tasks each
// take long enough to be interrupted.
func TestInterruptFair(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process that replays a large fairness scenario")
	}
	var sb strings.Builder
	sb.WriteString("capacity: {cpu: 1000000, mem: 2000000}\ntenants:\n")
	for i := range 1000 {
		fmt.Fprintf(&sb, "  - {name: t%d, task: {cpu: %d, mem: %d}, demand: 1000}\n", i, 1+i%3, 1+i%5)
	}
	sb.WriteString("steps:\n")
	for k := 1; k < 20; k++ {
		fmt.Fprintf(&sb, "  - {at: %ds, demand: {t%d: %d}, recompute: true}\n", k, k, k%7)
	}
	scenario := writeTemp(t, "scenario.yaml", sb.String())
	code, stdout, stderr, stop := interrupt(t, 500*time.Millisecond, "fair", scenario, "-o", "json")
	checkInterrupted(t, "", code, stdout, stderr, stop)
}

// cpuTime is the CPU time (user and system) process pid has used, from /proc/PID/stat; false
// where that cannot be read.
func cpuTime(pid int) (time.Duration, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces; fields 14 and 15, utime
	// and stime in clock ticks, follow its closing parenthesis as the 12th and 13th fields.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, false
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ, 100 on every Linux ABI Go supports
	return time.Duration(ut+st) * time.Second / ticks, true
}
