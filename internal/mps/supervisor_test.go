package mps

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// needDaemon skips when NVIDIA's control daemon is not installed, except in CI (CI=true), where
// scripts/install-test-components.sh must have installed it.
func needDaemon(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(DefaultControl); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found in CI: scripts/install-test-components.sh must install Debian's nvidia-cuda-mps", DefaultControl)
		}
		t.Skipf("%s not installed (Debian non-free: nvidia-cuda-mps; run scripts/install-test-components.sh as root)", DefaultControl)
	}
}

type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }
func (r *recorder) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func TestStartLimitsStop(t *testing.T) {
	needDaemon(t)
	dir := t.TempDir()
	s := New(Options{Dir: dir})
	ctx := context.Background()
	a := Daemon{UUID: "GPU-aaaa", Limits: Limits{ActiveThreadPercent: 40, PinnedMemory: "2G"}}
	b := Daemon{UUID: "MIG-bbbb", Limits: Limits{ActiveThreadPercent: 25}}
	for _, d := range []Daemon{a, b} {
		if err := s.Start(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// Each daemon has its own pipe directory and its own limits.
	for _, c := range []struct{ uuid, cmd, want string }{
		{"GPU-aaaa", "get_default_active_thread_percentage", "40.0"},
		{"GPU-aaaa", "get_default_device_pinned_mem_limit 0", "2G"},
		{"MIG-bbbb", "get_default_active_thread_percentage", "25.0"},
	} {
		if got, err := s.Command(ctx, c.uuid, c.cmd); err != nil || got != c.want {
			t.Errorf("%s %s = %q, %v; want %q", c.uuid, c.cmd, got, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "GPU-aaaa", "pipe", "control")); err != nil {
		t.Errorf("control socket not in the daemon's own pipe directory: %v", err)
	}
	if err := s.Health(ctx, "GPU-aaaa"); err != nil {
		t.Fatal(err)
	}
	pid := s.Status()[0].PID
	s.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("daemon %d still alive after Close", pid)
	}
	if err := s.Health(ctx, "GPU-aaaa"); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("health after stop: %v, want ErrNoDaemon", err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "GPU-aaaa", "log", "control.log"))
	if !strings.Contains(string(log), "Cmd:set_default_active_thread_percentage 40") {
		t.Fatalf("control.log lacks the limit command:\n%s", log)
	}
}

func TestBadLimits(t *testing.T) {
	s := New(Options{Dir: t.TempDir(), Control: "/nonexistent"})
	for _, d := range []Daemon{
		{UUID: "GPU-x", Limits: Limits{ActiveThreadPercent: 101}},
		{UUID: "GPU-x", Limits: Limits{PinnedMemory: "2 GB"}},
		{UUID: "../x"},
	} {
		if err := s.Start(context.Background(), d); err == nil {
			t.Errorf("%+v accepted", d)
		}
	}
	if err := s.Start(context.Background(), Daemon{UUID: "GPU-x"}); err == nil || !strings.Contains(err.Error(), "GPU-x") {
		t.Errorf("missing executable: err %v, want one naming the uuid", err)
	}
}

// TestServerExitParsed: a server started through the control pipe exits at once without a GPU;
// the supervisor reads that from the control log.
func TestServerExitParsed(t *testing.T) {
	needDaemon(t)
	rec := &recorder{}
	s := New(Options{Dir: t.TempDir(), Events: rec.add})
	defer s.Close()
	ctx := context.Background()
	if err := s.Start(ctx, Daemon{UUID: "GPU-srv"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Command(ctx, "GPU-srv", "start_server -uid "+strconv.Itoa(os.Getuid())); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rec.count("server-exited") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no server-exited event within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwentyKills SIGKILLs the daemon 20 times while four clients keep sending control-pipe
// commands: each time it is back, healthy, with its limits read back, within 5 s.
func TestTwentyKills(t *testing.T) {
	needDaemon(t)
	rec := &recorder{}
	// StableAfter short: each kill comes 300 ms after the previous recovery, so the backoff is
	// back at its minimum; with the defaults a crash loop waits at most BackoffMax (2 s) + start-up.
	s := New(Options{Dir: t.TempDir(), Events: rec.add, StableAfter: 250 * time.Millisecond})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := Daemon{UUID: "GPU-kill", Limits: Limits{ActiveThreadPercent: 30, PinnedMemory: "8G"}}
	if err := s.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for range 4 { // load: clients talking to the control pipe throughout
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := s.Command(ctx, d.UUID, "get_server_list"); err == nil {
					ok.Add(1)
				} else {
					refused.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var worst time.Duration
	for i := range 20 {
		old := s.Status()[0].PID
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		killed := time.Now()
		for {
			st := s.Status()[0]
			if st.PID != old && st.Healthy {
				break
			}
			if time.Since(killed) > 5*time.Second {
				t.Fatalf("kill %d: not back within 5 s (pid %d healthy %t)", i, st.PID, st.Healthy)
			}
			time.Sleep(5 * time.Millisecond)
		}
		back := time.Since(killed)
		worst = max(worst, back)
		if got, err := s.Command(ctx, d.UUID, "get_default_active_thread_percentage"); err != nil || got != "30.0" {
			t.Fatalf("kill %d: limit after restart %q, %v", i, got, err)
		}
		if got, err := s.Command(ctx, d.UUID, "get_default_device_pinned_mem_limit 0"); err != nil || got != "8G" {
			t.Fatalf("kill %d: pinned limit after restart %q, %v", i, got, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if n := rec.count("restarted"); n != 20 {
		t.Fatalf("%d restarted events, want 20", n)
	}
	if st := s.Status()[0]; st.Restarts != 20 {
		rec.mu.Lock()
		for _, e := range rec.events {
			if e.Kind == "not-ready" {
				t.Logf("exited: %v", e.Err)
			}
		}
		rec.mu.Unlock()
		t.Fatalf("restarts = %d, want 20", st.Restarts)
	}
	t.Logf("20 kills: slowest restart %s; load: %d commands answered, %d refused while down", worst.Round(time.Millisecond), ok.Load(), refused.Load())
}

// TestRefusalRetried: the control daemon refuses a connection while another is open; with a
// client outside the supervisor hammering the pipe, every supervisor command still gets through.
func TestRefusalRetried(t *testing.T) {
	needDaemon(t)
	s := New(Options{Dir: t.TempDir()})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx, Daemon{UUID: "GPU-busy"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			c := exec.Command(DefaultControl)
			c.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+PipeDir(s.opt.Dir, "GPU-busy"))
			c.Stdin = strings.NewReader("get_server_list\n")
			_ = c.Run()
		}
	}()
	for i := range 50 {
		if _, err := s.Command(ctx, "GPU-busy", "get_server_list"); err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
}
