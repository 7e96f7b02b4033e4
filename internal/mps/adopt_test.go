package mps

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// supervisorChildEnv makes the test binary a child process that runs a supervisor with one daemon
// in the folder it names, prints the daemon's process id and waits to be killed: the agent's
// process, as far as the daemons are concerned.
const supervisorChildEnv = "GPUPOOL_TEST_MPS_DIR"

var killedDaemon = Daemon{UUID: "GPU-adopt", Limits: Limits{ActiveThreadPercent: 35, PinnedMemory: "4G"}}

func TestMain(m *testing.M) {
	if dir := os.Getenv(supervisorChildEnv); dir != "" {
		s := New(Options{Dir: dir})
		if err := s.Start(context.Background(), killedDaemon); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("daemon %d\n", s.Status()[0].PID)
		select {}
	}
	os.Exit(m.Run())
}

// TestDaemonOutlivesKilledSupervisor: the supervisor's process (the agent) is SIGKILLed; its
// control daemon, and the clients on it, live on. A supervisor started again on the same folder
// takes that daemon over: healthy at once, no restart, its limits applied, and stopped by quit on
// Close. Before, the new supervisor's daemon exited at once ("An instance of this daemon is
// already running") and was restarted every 2 s for ever, unhealthy, while the old daemon ran on
// unwatched.
func TestDaemonOutlivesKilledSupervisor(t *testing.T) {
	needDaemon(t)
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), supervisorChildEnv+"="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	var orphan int
	select {
	case l := <-line:
		if orphan, err = strconv.Atoi(strings.TrimPrefix(l, "daemon ")); err != nil || orphan <= 0 {
			t.Fatalf("child said %q", l)
		}
	case <-time.After(20 * time.Second):
		_ = child.Process.Kill()
		t.Fatal("the child's daemon did not start within 20 s")
	}
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := child.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL", err)
	}
	if !alive(orphan) {
		t.Fatalf("the daemon %d died with its supervisor", orphan)
	}
	rec := &recorder{}
	s := New(Options{Dir: dir, Events: rec.add})
	if err := s.Start(context.Background(), killedDaemon); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // before: the new daemon exited and was restarted 4 times by now
	st := s.Status()[0]
	if st.PID != orphan || !st.Healthy || st.Restarts != 0 || rec.count("adopted") != 1 || rec.count("exited") != 0 {
		t.Fatalf("after the restart: pid %d (the old daemon is %d), healthy %t, %d restarts, %d adopted, %d exited; want the old daemon taken over",
			st.PID, orphan, st.Healthy, st.Restarts, rec.count("adopted"), rec.count("exited"))
	}
	if got, err := s.Command(context.Background(), killedDaemon.UUID, "get_default_device_pinned_mem_limit 0"); err != nil || got != "4G" {
		t.Fatalf("pinned limit of the adopted daemon: %q, %v", got, err)
	}
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for alive(orphan) {
		if time.Now().After(deadline) {
			t.Fatalf("the adopted daemon %d still runs 5 s after Close", orphan)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
