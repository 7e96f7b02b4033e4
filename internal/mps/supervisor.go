package mps

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultControl is the control daemon's executable name.
const DefaultControl = "nvidia-cuda-mps-control"

// Limits are the defaults a daemon gives every new client.
type Limits struct {
	// ActiveThreadPercent is the SM share, 1–100; 0 leaves MPS's default (100).
	ActiveThreadPercent int `json:"activeThreadPercent,omitzero"`
	// PinnedMemory is the device memory limit per client, in MPS's syntax ("20G", "512M"); empty
	// leaves it unset. It applies to device 0 of the daemon (its one visible GPU or instance).
	PinnedMemory string `json:"pinnedMemory,omitzero"`
}

// Daemon is one control daemon to run.
type Daemon struct {
	// UUID is the GPU or MIG instance ("GPU-…" or "MIG-…") the daemon serves.
	UUID   string
	Limits Limits
}

// Event is something a supervised daemon did.
type Event struct {
	UUID string
	Kind string // "started", "adopted", "exited", "restarted", "server-exited", "stopped"
	// Servers are the MPS server PIDs that ran under the daemon when it died: their clients died too.
	Servers []int
	Err     error
	At      time.Time
}

// Options configure a Supervisor.
type Options struct {
	// Control is the daemon executable; default DefaultControl (looked up in PATH).
	Control string
	// Dir holds one folder per daemon, by UUID, with pipe/ and log/ inside.
	Dir string
	// CommandTimeout bounds one control-pipe command; default 5 s.
	CommandTimeout time.Duration
	// Ready bounds the wait for a started daemon to answer; default 5 s.
	Ready time.Duration
	// BackoffMin and BackoffMax bound the restart backoff; defaults 100 ms and 2 s, so that a
	// killed daemon is back within BackoffMax plus its start-up, and a crash loop costs little.
	BackoffMin, BackoffMax time.Duration
	// StableAfter is how long a daemon must run for the backoff to return to BackoffMin; default 10 s.
	StableAfter time.Duration
	// Events, when set, receives every event (it must not block for long).
	Events func(Event)
	Log    *slog.Logger
}

// PipeDir is the pipe directory of the daemon for uuid under dir (Options.Dir): the daemon's
// CUDA_MPS_PIPE_DIRECTORY, and what each of its clients must set. Every name of it comes from here.
func PipeDir(dir, uuid string) string { return filepath.Join(dir, uuid, "pipe") }

// LogDir is the log directory (CUDA_MPS_LOG_DIRECTORY) of the daemon for uuid under dir.
func LogDir(dir, uuid string) string { return filepath.Join(dir, uuid, "log") }

// Supervisor runs and watches daemons.
type Supervisor struct {
	opt Options
	wg  sync.WaitGroup

	mu      sync.Mutex
	daemons map[string]*daemon
}

type daemon struct {
	cmdMu    sync.Mutex // the control daemon refuses concurrent control connections
	d        Daemon
	pipe     string
	log      string
	cancel   context.CancelFunc
	pid      int
	restarts int
	healthy  bool
	servers  map[int]bool
	done     chan struct{}
}

// New returns a supervisor; nothing runs until Start.
func New(opt Options) *Supervisor {
	if opt.Control == "" {
		opt.Control = DefaultControl
	}
	if opt.CommandTimeout <= 0 {
		opt.CommandTimeout = 5 * time.Second
	}
	if opt.Ready <= 0 {
		opt.Ready = 5 * time.Second
	}
	if opt.BackoffMin <= 0 {
		opt.BackoffMin = 100 * time.Millisecond
	}
	if opt.BackoffMax <= 0 {
		opt.BackoffMax = 2 * time.Second
	}
	if opt.StableAfter <= 0 {
		opt.StableAfter = 10 * time.Second
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{opt: opt, daemons: map[string]*daemon{}}
}

// Status is one daemon's state.
type Status struct {
	UUID     string
	PID      int
	Healthy  bool
	Restarts int
	Limits   Limits
}

// Status lists the daemons.
func (s *Supervisor) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.daemons))
	for _, d := range s.daemons {
		out = append(out, Status{UUID: d.d.UUID, PID: d.pid, Healthy: d.healthy, Restarts: d.restarts, Limits: d.d.Limits})
	}
	return out
}

// Start runs a daemon for d and keeps it running until Stop or ctx ends. It returns once the
// daemon answers with its limits applied, or with the error that prevented it.
func (s *Supervisor) Start(ctx context.Context, d Daemon) error {
	if d.UUID == "" || strings.ContainsAny(d.UUID, "/\\ ") {
		return fmt.Errorf("start mps daemon %q: bad uuid", d.UUID)
	}
	if d.Limits.ActiveThreadPercent < 0 || d.Limits.ActiveThreadPercent > 100 {
		return fmt.Errorf("start mps daemon %s: limits.activeThreadPercent %d outside 0..100", d.UUID, d.Limits.ActiveThreadPercent)
	}
	if d.Limits.PinnedMemory != "" && !memRe.MatchString(d.Limits.PinnedMemory) {
		return fmt.Errorf("start mps daemon %s: limits.pinnedMemory %q is not like 20G or 512M", d.UUID, d.Limits.PinnedMemory)
	}
	dm := &daemon{d: d, pipe: PipeDir(s.opt.Dir, d.UUID), log: LogDir(s.opt.Dir, d.UUID), servers: map[int]bool{}, done: make(chan struct{})}
	for _, dir := range []string{dm.pipe, dm.log} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("start mps daemon %s: %w", d.UUID, err)
		}
	}
	s.mu.Lock()
	if _, ok := s.daemons[d.UUID]; ok {
		s.mu.Unlock()
		return fmt.Errorf("start mps daemon %s: already running", d.UUID)
	}
	s.daemons[d.UUID] = dm
	s.mu.Unlock()
	ctx, dm.cancel = context.WithCancel(ctx)
	first := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(dm.done)
		s.run(ctx, dm, first)
	}()
	select {
	case err := <-first:
		if err != nil {
			dm.cancel()
			<-dm.done
			s.mu.Lock()
			delete(s.daemons, d.UUID)
			s.mu.Unlock()
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var memRe = regexp.MustCompile(`^[0-9]+[KMGT]?$`)

func (s *Supervisor) emit(e Event) {
	e.At = time.Now()
	level := slog.LevelInfo
	switch e.Kind {
	case "exited", "server-exited", "not-ready":
		// A daemon or server that died took its clients with it: an operator must see it in a
		// log that shows warnings only (the agent's).
		level = slog.LevelWarn
	}
	s.opt.Log.Log(context.Background(), level, "mps", "uuid", e.UUID, "event", e.Kind, "servers", e.Servers, "err", e.Err)
	if s.opt.Events != nil {
		s.opt.Events(e)
	}
}

// run starts the daemon (or, the first time, takes over the one a killed predecessor left
// running), applies limits, waits for it to exit and restarts it with backoff.
func (s *Supervisor) run(ctx context.Context, dm *daemon, first chan<- error) {
	backoff := s.opt.BackoffMin
	for attempt := 0; ; attempt++ {
		started := time.Now()
		var cmd *proc
		var err error
		adopted := false
		if attempt == 0 {
			cmd, adopted = s.adopt(dm)
		}
		if !adopted {
			cmd, err = s.launch(ctx, dm)
		}
		if err == nil {
			err = s.ready(ctx, dm)
		}
		if first != nil {
			first <- err
			if err != nil {
				if cmd != nil {
					_ = cmd.kill()
					<-cmd.exited
				}
				return
			}
			first = nil
		}
		if err != nil && cmd != nil { // started but not answering: kill it and try again
			s.emit(Event{UUID: dm.d.UUID, Kind: "not-ready", Err: err})
			_ = cmd.kill()
		}
		if err == nil {
			kind := "started"
			if attempt > 0 {
				kind = "restarted"
			} else if adopted {
				kind = "adopted"
			}
			s.emit(Event{UUID: dm.d.UUID, Kind: kind})
		}
		var werr error
		if cmd != nil {
			select {
			case werr = <-cmd.exited:
			case <-ctx.Done():
				s.stop(dm, cmd)
				s.emit(Event{UUID: dm.d.UUID, Kind: "stopped"})
				return
			}
		}
		s.mu.Lock()
		dm.healthy = false
		servers := keys(dm.servers)
		dm.servers = map[int]bool{}
		s.mu.Unlock()
		if werr == nil {
			werr = err
		}
		s.emit(Event{UUID: dm.d.UUID, Kind: "exited", Servers: servers, Err: werr})
		if time.Since(started) > s.opt.StableAfter {
			backoff = s.opt.BackoffMin
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.opt.BackoffMax)
		s.mu.Lock()
		dm.restarts++
		s.mu.Unlock()
	}
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (s *Supervisor) env(dm *daemon) []string {
	return append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+dm.pipe, "CUDA_MPS_LOG_DIRECTORY="+dm.log,
		"CUDA_VISIBLE_DEVICES="+dm.d.UUID)
}

// proc is a running daemon: one this supervisor started, or one it took over.
type proc struct {
	kill   func() error
	exited <-chan error
}

// launch starts the daemon in the foreground, its output copied to control.log and parsed, and
// writes its process id to daemon.pid.
func (s *Supervisor) launch(ctx context.Context, dm *daemon) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(dm.log, "control.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start mps daemon %s: %w", dm.d.UUID, err)
	}
	cmd := exec.Command(s.opt.Control, "-f")
	cmd.Env = s.env(dm)
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("start mps daemon %s: %w", dm.d.UUID, err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start mps daemon %s: %w", dm.d.UUID, err)
	}
	s.mu.Lock()
	dm.pid = cmd.Process.Pid
	s.mu.Unlock()
	// A SIGKILL loses nothing in the page cache, and a power loss ends the daemon too: no fsync.
	_ = os.WriteFile(filepath.Join(filepath.Dir(dm.pipe), pidFileName), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	exited := make(chan error, 1)
	go func() {
		s.follow(dm, io.TeeReader(out, logf))
		err := cmd.Wait()
		logf.Close()
		exited <- err
	}()
	return &proc{kill: cmd.Process.Kill, exited: exited}, nil
}

// pidFileName is the file, beside pipe/ and log/, with the process id of the daemon last started.
const pidFileName = "daemon.pid"

// adopt takes over the daemon a supervisor killed with SIGKILL (the agent's process) left
// running: the process daemon.pid names, if it is alive, runs the control executable and serves
// this daemon's pipe directory (its environment says so, which a reused process id would not).
// Without it the new daemon refuses to start ("An instance of this daemon is already running")
// and is restarted for ever, while the old one keeps serving its clients unwatched; killing the
// old one instead would kill those clients. Its exit is seen by polling, as it is not this
// process's child; the servers it starts are not followed (its output went to the old process).
func (s *Supervisor) adopt(dm *daemon) (*proc, bool) {
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(dm.pipe), pidFileName))
	if err != nil {
		return nil, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 || !alive(pid) {
		return nil, false
	}
	cmdline, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	environ, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err1 != nil || err2 != nil {
		return nil, false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	if filepath.Base(string(argv0)) != filepath.Base(s.opt.Control) ||
		!slices.Contains(strings.Split(string(environ), "\x00"), "CUDA_MPS_PIPE_DIRECTORY="+dm.pipe) {
		return nil, false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	dm.pid = pid
	s.mu.Unlock()
	exited := make(chan error, 1)
	go func() {
		for alive(pid) {
			time.Sleep(100 * time.Millisecond)
		}
		exited <- fmt.Errorf("adopted daemon %d exited", pid)
	}()
	return &proc{kill: p.Kill, exited: exited}, true
}

// alive reports whether process pid exists and is not a zombie (an orphan's parent may not reap).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

var (
	serverStart = regexp.MustCompile(`Starting new server (\d+)`)
	serverExit  = regexp.MustCompile(`Server (\d+) exited with status (-?\d+)`)
)

// logEvent is what one control-log line says about MPS servers.
type logEvent struct {
	kind   string // "server-started", "server-exited" or ""
	pid    int
	status string
}

// parseLogLine reads one control-log line: "Starting new server N for user U" or "Server N
// exited with status S".
func parseLogLine(line string) logEvent {
	if m := serverStart.FindStringSubmatch(line); m != nil {
		if pid, err := strconv.Atoi(m[1]); err == nil {
			return logEvent{kind: "server-started", pid: pid}
		}
	}
	if m := serverExit.FindStringSubmatch(line); m != nil {
		if pid, err := strconv.Atoi(m[1]); err == nil {
			return logEvent{kind: "server-exited", pid: pid, status: m[2]}
		}
	}
	return logEvent{}
}

// follow parses the control log as the daemon writes it.
func (s *Supervisor) follow(dm *daemon, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		switch e := parseLogLine(sc.Text()); e.kind {
		case "server-started":
			s.mu.Lock()
			dm.servers[e.pid] = true
			s.mu.Unlock()
		case "server-exited":
			s.mu.Lock()
			delete(dm.servers, e.pid)
			s.mu.Unlock()
			s.emit(Event{UUID: dm.d.UUID, Kind: "server-exited", Servers: []int{e.pid}, Err: fmt.Errorf("status %s", e.status)})
		}
	}
}

// ready waits until the daemon answers, then applies and reads back the limits.
func (s *Supervisor) ready(ctx context.Context, dm *daemon) error {
	deadline := time.Now().Add(s.opt.Ready)
	for {
		_, err := s.command(ctx, dm, "get_server_list")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start mps daemon %s: not answering after %s: %w", dm.d.UUID, s.opt.Ready, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := s.apply(ctx, dm); err != nil {
		return err
	}
	s.mu.Lock()
	dm.healthy = true
	s.mu.Unlock()
	return nil
}

// apply sets the limits and reads them back, until they read back right or CommandTimeout
// passes: with another client on the control pipe, the daemon has been seen to drop a set.
func (s *Supervisor) apply(ctx context.Context, dm *daemon) error {
	deadline := time.Now().Add(s.opt.CommandTimeout)
	for {
		err := s.applyOnce(ctx, dm)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Supervisor) applyOnce(ctx context.Context, dm *daemon) error {
	l := dm.d.Limits
	if l.ActiveThreadPercent > 0 {
		p := strconv.Itoa(l.ActiveThreadPercent)
		if _, err := s.command(ctx, dm, "set_default_active_thread_percentage "+p); err != nil {
			return fmt.Errorf("apply mps limits on %s: %w", dm.d.UUID, err)
		}
		got, err := s.command(ctx, dm, "get_default_active_thread_percentage")
		if v, perr := strconv.ParseFloat(got, 64); err != nil || perr != nil || int(v) != l.ActiveThreadPercent {
			return fmt.Errorf("apply mps limits on %s: active thread percentage reads %q, want %s (%v)", dm.d.UUID, got, p, err)
		}
	}
	if l.PinnedMemory != "" {
		if _, err := s.command(ctx, dm, "set_default_device_pinned_mem_limit 0 "+l.PinnedMemory); err != nil {
			return fmt.Errorf("apply mps limits on %s: %w", dm.d.UUID, err)
		}
		got, err := s.command(ctx, dm, "get_default_device_pinned_mem_limit 0")
		if err != nil || got != l.PinnedMemory {
			return fmt.Errorf("apply mps limits on %s: pinned memory limit reads %q, want %q (%v)", dm.d.UUID, got, l.PinnedMemory, err)
		}
	}
	return nil
}

// ErrNoDaemon is returned when the control pipe has no daemon behind it.
var ErrNoDaemon = errors.New("no mps control daemon")

// errBusy marks the daemon's refusal of a second control connection while one is open.
var errBusy = errors.New("control pipe busy")

// command sends one command through the control pipe and returns the reply. The control daemon
// refuses a connection while another is open ("Cannot send command to MPS control daemon
// process", about 45% of calls with four concurrent clients on this project's build machine), so
// commands to one daemon are serialised here and a refusal is retried until CommandTimeout.
func (s *Supervisor) command(ctx context.Context, dm *daemon, c string) (string, error) {
	dm.cmdMu.Lock()
	defer dm.cmdMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.opt.CommandTimeout)
	defer cancel()
	wait := 2 * time.Millisecond
	for {
		reply, err := s.once(ctx, dm, c)
		if !errors.Is(err, errBusy) {
			return reply, err
		}
		select {
		case <-ctx.Done():
			return reply, fmt.Errorf("mps command %q on %s: still refused after %s: %w", c, dm.d.UUID, s.opt.CommandTimeout, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func (s *Supervisor) once(ctx context.Context, dm *daemon, c string) (string, error) {
	cmd := exec.CommandContext(ctx, s.opt.Control)
	cmd.Env = s.env(dm)
	cmd.Stdin = strings.NewReader(c + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	reply := strings.TrimSpace(out.String())
	switch {
	case strings.Contains(reply, "Cannot find MPS control daemon"):
		return reply, fmt.Errorf("mps command %q on %s: %w", c, dm.d.UUID, ErrNoDaemon)
	case strings.Contains(reply, "Cannot send command") || (reply == "" && (err != nil || strings.HasPrefix(c, "get_default_"))):
		// Refused, or (seen with a second client on the pipe) a query answered with nothing.
		return reply, errBusy
	case strings.HasPrefix(reply, "Unknown command"):
		return reply, fmt.Errorf("mps command %q on %s: %s", c, dm.d.UUID, reply)
	case err != nil:
		return reply, fmt.Errorf("mps command %q on %s: %w: %s", c, dm.d.UUID, err, reply)
	}
	return reply, nil
}

// Command sends one control-pipe command to the daemon of uuid.
func (s *Supervisor) Command(ctx context.Context, uuid, c string) (string, error) {
	s.mu.Lock()
	dm, ok := s.daemons[uuid]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("mps command %q on %s: %w", c, uuid, ErrNoDaemon)
	}
	return s.command(ctx, dm, c)
}

// Health asks the daemon for its server list.
func (s *Supervisor) Health(ctx context.Context, uuid string) error {
	_, err := s.Command(ctx, uuid, "get_server_list")
	return err
}

// stop sends quit and waits; it kills the daemon after the command timeout.
func (s *Supervisor) stop(dm *daemon, p *proc) {
	_, _ = s.command(context.Background(), dm, "quit")
	select {
	case <-p.exited:
	case <-time.After(s.opt.CommandTimeout):
		_ = p.kill()
		<-p.exited
	}
}

// Stop stops the daemon of uuid.
func (s *Supervisor) Stop(uuid string) {
	s.mu.Lock()
	dm, ok := s.daemons[uuid]
	delete(s.daemons, uuid)
	s.mu.Unlock()
	if ok {
		dm.cancel()
		<-dm.done
	}
}

// Close stops every daemon.
func (s *Supervisor) Close() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.daemons))
	for id := range s.daemons {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.Stop(id)
	}
	s.wg.Wait()
}
