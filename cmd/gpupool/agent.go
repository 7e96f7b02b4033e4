package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/metrics"
	"gpupool.dev/gpupool/internal/mps"
	"gpupool.dev/gpupool/internal/nvml"
)

func newAgentCmd(e *env) *cobra.Command {
	var cfgPath, fakeModel, listen, node string
	var fake, once, reset bool
	var cp controlLink
	cmd := &cobra.Command{
		Use:   "agent --config FILE",
		Short: "Run the node agent: apply MIG layouts through the gate, supervise MPS, serve /metrics and /healthz",
		Long: "agent runs on a GPU node. It reads the GPUs over NVML, drives each GPU listed in the config to its\n" +
			"MIG layout through the gate (cordon, drain, apply only the instances that differ, verify, smoke,\n" +
			"uncordon; journaled, rolled back on failure, rate-limited), keeps MPS daemons up with their limits,\n" +
			"and serves per-tenant memory, SM share, tokens, joules and latency on /metrics, and /healthz.\n" +
			"--fake runs the same agent on go-nvml's mock of 8 GPUs (state kept in stateDir) and a fake clock\n" +
			"that moves one poll interval per poll. --once polls once and exits.\n" +
			"--server and --token connect the agent to gpupool serve: it registers the node with its GPUs,\n" +
			"heartbeats, reports changes, and applies the MIG layouts of the control plane's gate operations\n" +
			"(the config's layouts still apply to the GPUs the control plane does not name).",
		Example: "  gpupool agent --fake --config examples/agent-fake.yaml --once\n" +
			"  gpupool agent --config /etc/gpupool/agent.yaml\n" +
			"  gpupool agent --config /etc/gpupool/agent.yaml --node \"$NODE_NAME\"\n" +
			"  gpupool agent --config /etc/gpupool/agent.yaml --server https://pool:8080 --token \"$(cat agent.token)\"",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := os.ReadFile(cfgPath)
			if err != nil {
				return invalid(fmt.Errorf("read agent config: %w", err))
			}
			cfg, err := agent.DecodeConfig(data)
			if err != nil {
				return invalid(fmt.Errorf("%s: %w", cfgPath, err))
			}
			if node != "" {
				cfg.Node = node // before validation: a plan needs the node
			}
			set, err := cfg.Validate()
			if err != nil {
				return invalid(fmt.Errorf("%s: %w", cfgPath, err))
			}
			if listen != "" {
				cfg.Listen = listen
			}
			if cfg.Plan != "" {
				path := cfg.Plan
				if !filepath.IsAbs(path) {
					path = filepath.Join(filepath.Dir(cfgPath), path)
				}
				data, err := os.ReadFile(path)
				if err != nil {
					return invalid(fmt.Errorf("read plan: %w", err))
				}
				p, err := v1.DecodePlan(data)
				if err != nil {
					return invalid(fmt.Errorf("%s: %w", path, err))
				}
				n, err := agent.ApplyPlan(&cfg, &set, p)
				if err != nil {
					return invalid(err)
				}
				if n == 0 {
					return invalid(fmt.Errorf("%s: the plan has no GPU on node %q", path, cfg.Node))
				}
			}
			var bad []error
			if cp.server != "" && cfg.Node == "" {
				bad = append(bad, fmt.Errorf("%s: node: required with --server (the node's name in the pool)", cfgPath))
			}
			if (cp.server == "") != (cp.token == "") {
				bad = append(bad, errors.New("--server and --token go together"))
			}
			if cp.server != "" && (once || reset) {
				bad = append(bad, errors.New("--once and --reset run without the control plane: leave out --server"))
			}
			if (cp.cert == "") != (cp.key == "") {
				bad = append(bad, errors.New("--client-cert and --client-key go together"))
			}
			if len(bad) > 0 {
				return invalid(errors.Join(bad...))
			}
			if reset {
				return resetGate(cmd.Context(), e, cfg, set, fake, fakeModel)
			}
			return runAgent(cmd.Context(), e, cfg, set, fake, fakeModel, once, cp)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "agent configuration file (YAML)")
	cmd.Flags().BoolVar(&fake, "fake", false, "run on a mock of 8 GPUs and a fake clock (no GPU needed)")
	cmd.Flags().StringVar(&fakeModel, "fake-model", "h100", "with --fake: a100, h100 or h200")
	cmd.Flags().BoolVar(&once, "once", false, "poll once, print what the gate did, and exit")
	cmd.Flags().BoolVar(&reset, "reset", false, "clear a failed change (the node stays cordoned until then), uncordon, and exit; with the agent running, the agent does it (stateDir/agent.sock)")
	cmd.Flags().StringVar(&listen, "listen", "", "address for /metrics and /healthz (overrides the config's listen)")
	cmd.Flags().StringVar(&node, "node", "", "the node's name (overrides the config's node; a DaemonSet passes its node's name, so one config serves every node)")
	cmd.Flags().StringVar(&cp.server, "server", "", "control plane URL (gpupool serve): take gate operations from it and report the node to it")
	cmd.Flags().StringVar(&cp.token, "token", "", "the node's agent token for --server")
	cmd.Flags().StringVar(&cp.ca, "server-ca", "", "with an https --server: trust server certificates signed by this CA (PEM) instead of the system's")
	cmd.Flags().StringVar(&cp.cert, "client-cert", "", "with an https --server: present this client certificate (PEM; mutual TLS)")
	cmd.Flags().StringVar(&cp.key, "client-key", "", "the client certificate's private key (PEM)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// controlLink names the control plane an agent follows (empty server: config file only).
type controlLink struct {
	server, token string
	// ca, cert and key are PEM files for TLS: the CA to trust, the client certificate and key.
	ca, cert, key string
	// heartbeat overrides the link's default (tests, the demo).
	heartbeat time.Duration
	// fakeGPUs is how many mock GPUs --fake makes (default 8).
	fakeGPUs int
}

func runAgent(ctx context.Context, e *env, cfg agent.Config, set agent.Settings, fake bool, model string, once bool, cp controlLink) error {
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Every start-up failure below is the operator's to fix (a path, a permission, the driver, a
	// port, a certificate): each exits 1 saying what to do, never 3, which says "a bug".
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return invalid(fmt.Errorf("create state dir %s: %w; check the config's stateDir (a directory, or a path where "+
			"one can be made: no file in its place or above it) and that the agent's user may create and write it", cfg.StateDir, err))
	}
	unlock, err := agent.LockStateDir(cfg.StateDir)
	if errors.Is(err, agent.ErrStateDirLocked) {
		// Another agent runs on this state directory: an operator's situation, not a bug (exit 1).
		return invalid(fmt.Errorf("%w; stop that agent (or wait for it to exit), or give this one another stateDir "+
			"in its config; to clear a failed change beside it, use --reset", err))
	}
	if err != nil {
		return invalid(fmt.Errorf("%w; the lock is the file %s: check that it is a regular file (or absent) and that "+
			"the agent's user may create and write it in the state directory, or give the agent another stateDir",
			err, filepath.Join(cfg.StateDir, agent.LockFileName)))
	}
	defer unlock()
	var lib *nvml.Lib
	var fk *nvml.Fake
	now := time.Now
	advance := func() {}
	if fake {
		var err error
		if fk, err = newFakeNode(cfg, model, cp.server != "", cp.fakeGPUs); err != nil {
			return err
		}
		lib = nvml.New(fk.Interface(), nvml.Options{})
		defer func() { _ = lib.Close() }()
		// The fake clock moves one second per reading (so each gate step takes a second) and one
		// poll interval per poll; the fake GPUs' energy counters move with it.
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		now = func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock }
		advance = func() { mu.Lock(); clock = clock.Add(set.Poll); mu.Unlock(); fk.Advance(set.Poll) }
	} else {
		lib = nvml.NewReal(nvml.Options{Timeout: 10 * time.Second})
		if err := lib.Init(); err != nil {
			return invalid(fmt.Errorf("init nvml: %w; run the agent on a GPU node where the NVIDIA driver is loaded "+
				"(nvidia-smi works; in a container, one started with the NVIDIA runtime), or with --fake to run without a GPU", err))
		}
		defer func() { _ = lib.Close() }()
	}
	j, rep, err := agent.OpenJournal(filepath.Join(cfg.StateDir, "gate.journal"))
	if err != nil {
		return journalDamaged(err, cfg)
	}
	defer j.Close()
	var smoke agent.Smoker
	// A smoke command that a killed agent left running is ended before the journal resumes
	// (and runs the smoke step again).
	smokeGroup := filepath.Join(cfg.StateDir, "smoke.group")
	if k, err := agent.ReapSmokeLeftover(smokeGroup); err != nil {
		log.Warn("smoke command left by a previous run", "err", err)
	} else if k > 0 {
		log.Warn("ended the smoke command a previous run left running", "processes", k)
	}
	if len(cfg.Smoke.Command) > 0 {
		smoke = agent.CommandSmoker{Command: cfg.Smoke.Command, Timeout: set.SmokeTimeout, GroupFile: smokeGroup}
	}
	policy := gate.Policy{Cooldown: set.Cooldown, MaxChanges: cfg.Policy.MaxChanges, Window: set.Window, Uncordon: set.Uncordon}
	var noteTo atomic.Pointer[agent.Agent] // set once the agent exists
	x, err := agent.NewExecutor(ctx, j, rep, gate.State{Policy: policy}, agent.Deps{
		MIG: lib, Node: &agent.LocalNode{Path: filepath.Join(cfg.StateDir, "cordon.json")}, Smoke: smoke, Now: now, Log: log,
		Rand:     jitterSource(cfg.Node),
		OnAction: func(a gate.Action, at time.Time, err error) { printAction(e.stdout, a, at, err) },
		OnNote: func(n gate.Note) {
			fmt.Fprintf(e.stdout, "%s  %-20s %s\n", n.At.Format(time.TimeOnly), n.Code, n.Message)
			if a := noteTo.Load(); a != nil {
				a.NoteGate(n)
			}
			if n.Code == gate.ReasonReset && resetPause != nil {
				resetPause("journaled") // the reset's state is on disk, its uncordon not yet performed
			}
		}})
	if err != nil {
		return err
	}
	a := &agent.Agent{Config: cfg, Settings: set, Tel: telemetry{lib}, Exec: x, Now: now, Log: log, Clocks: lib,
		Scraper: httpScraper{&http.Client{Timeout: 2 * time.Second}}}
	noteTo.Store(a)
	if fake {
		a.Scraper = &fakeScraper{tokens: map[string]float64{}}
	}
	if inv, err := lib.Inventory(); err == nil {
		uuids := make([]string, len(inv))
		for i, d := range inv {
			uuids[i] = d.UUID
		}
		if ev, err := lib.WatchXID(uuids); err == nil {
			defer func() { _ = ev.Close() }()
			a.XIDs = xidAdapter{ev}
		} else {
			log.Warn("xid events not watched", "err", err)
		}
	}
	if _, err := exec.LookPath(mps.DefaultControl); err == nil {
		sup := mps.New(mps.Options{Dir: filepath.Join(cfg.StateDir, "mps"), Log: log})
		defer sup.Close()
		a.MPS = mpsAdapter{sup}
	} else {
		log.Warn("mps: " + mps.DefaultControl + " not found; MPS daemons are not started")
	}
	if once {
		err := a.Poll(ctx)
		st := x.State()
		fmt.Fprintf(e.stdout, "gate: phase %s, cordoned %t, %d queued\n", st.Phase(), st.Cordoned, len(st.Queue))
		return err
	}
	srv, addr, err := serveAgent(cfg.Listen, a, log)
	if err != nil {
		return invalid(fmt.Errorf("%w; give the agent a free address with --listen or the config's listen "+
			"(another process may hold this port: another agent, or a node exporter)", err))
	}
	defer srv.Close()
	// `gpupool agent --reset` beside this agent asks it through its reset socket (docs/adr/0066).
	if stopReset, err := serveReset(ctx, cfg.StateDir, x, log, socketPeerUID); err != nil {
		log.Warn("--reset beside this agent is not available", "err", err)
	} else {
		defer stopReset()
	}
	fmt.Fprintf(e.stdout, "gpupool agent on node %q: /metrics and /healthz at http://%s\n", cfg.Node, addr)
	if cp.server != "" {
		tcfg, err := cp.tlsConfig()
		if err != nil {
			return invalid(fmt.Errorf("%w; check the files given to --server-ca, --client-cert and --client-key", err))
		}
		link := &agent.Link{Agent: a, Heartbeat: cp.heartbeat, Every: min(set.Poll, 250*time.Millisecond),
			CP: &agent.HTTPControlPlane{Server: strings.TrimRight(cp.server, "/"), Token: cp.token, Node: cfg.Node,
				Client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tcfg, Proxy: http.ProxyFromEnvironment}}},
			OnLayout: func(d agent.DesiredLayout) {
				fmt.Fprintf(e.stdout, "control plane: layout revision %d, %d GPU changes\n", d.Revision, len(d.GPUs))
			}}
		lctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = link.Run(lctx) }()
		defer func() { stop(); <-done }()
		fmt.Fprintf(e.stdout, "following the control plane at %s\n", cp.server)
	}
	t := time.NewTicker(set.Poll)
	defer t.Stop()
	for {
		if err := a.Poll(ctx); err != nil {
			log.Warn("poll", "err", err)
		}
		advance()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// jitterSource is the executor's random source for the uncordon retries' jitter: a generator of
// this process alone, seeded from the time, the process id and the node's name, so that the
// nodes of a fleet whose uncordons fail together draw differently.
func jitterSource(node string) func() float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), h.Sum64()^uint64(os.Getpid())))
	return r.Float64
}

// tlsConfig is the agent's TLS client configuration for the control plane.
func (cp controlLink) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cp.ca != "" {
		pem, err := os.ReadFile(cp.ca)
		if err != nil {
			return nil, fmt.Errorf("read server CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read server CA %s: no PEM certificate found", cp.ca)
		}
		cfg.RootCAs = pool
	}
	if cp.cert != "" {
		c, err := tls.LoadX509KeyPair(cp.cert, cp.key)
		if err != nil {
			return nil, fmt.Errorf("load client certificate %s: %w", cp.cert, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// journalDamaged adds to a damaged journal's error what the operator can do about it.
func journalDamaged(err error, cfg agent.Config) error {
	if !errors.Is(err, agent.ErrCorrupt) {
		return err
	}
	return invalid(fmt.Errorf("%w\nThe gate's last good state is unknown: a change of a GPU may have stopped half way and the "+
		"node may be cordoned (%s). Check each GPU's MIG instances (nvidia-smi mig -lgi; nvidia-smi mig -lci) and "+
		"fix any half-made layout, then run `gpupool agent --reset --config FILE` with the agent stopped: it keeps "+
		"the damaged journal as %s.damaged-TIME, starts a new one and uncordons the node (docs/agent.md)",
		err, filepath.Join(cfg.StateDir, "cordon.json"), filepath.Join(cfg.StateDir, "gate.journal")))
}

// resetGate is the operator's answer to a failed change: the gate uncordons and forgets it.
// Every failure the operator can meet here (the state directory, the GPU driver, the journal, the
// running agent's socket and answer, a reset that leaves the node cordoned: resetLeftCordoned) is
// marked with what to do and exits 1 (resetFailure); an error no step marked is a bug (exit 3).
func resetGate(ctx context.Context, e *env, cfg agent.Config, set agent.Settings, fake bool, model string) error {
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		if denied := resetDenied(fmt.Errorf("create state dir: %w", err), cfg.StateDir); denied != nil {
			return denied
		}
		return resetFailure(fmt.Errorf("create state dir: %w", err),
			"check the config's stateDir and that this user may write there (run --reset as the agent's user)")
	}
	// A running agent holds the lock: a reset beside it would append to its journal, so the
	// running agent is asked to reset its own gate through its reset socket.
	unlock, err := agent.LockStateDir(cfg.StateDir)
	if errors.Is(err, agent.ErrStateDirLocked) {
		return resetRunning(ctx, e, cfg.StateDir, cfg.Node, err)
	}
	if err != nil {
		// Whether an agent runs there is unknown: only the lock file tells.
		if denied := resetDenied(err, cfg.StateDir); denied != nil {
			return denied
		}
		return resetFailure(err, "check that this user may write the state directory (run --reset as the agent's user)")
	}
	defer unlock()
	var lib *nvml.Lib
	if fake {
		fk, err := newFakeNode(cfg, model, false, 0)
		if err != nil {
			if denied := resetDenied(err, cfg.StateDir); denied != nil {
				return denied
			}
			return resetFailure(err, "check --fake-model and the state directory")
		}
		lib = nvml.New(fk.Interface(), nvml.Options{})
	} else {
		lib = nvml.NewReal(nvml.Options{Timeout: 10 * time.Second})
		if err := lib.Init(); err != nil {
			return resetFailure(fmt.Errorf("init nvml: %w", err),
				"run --reset on the GPU node, where the NVIDIA driver is loaded (nvidia-smi works), or with --fake for an agent run with --fake")
		}
	}
	defer func() { _ = lib.Close() }()
	// A damaged journal is set aside (kept, renamed) and a new one started: its last good state is
	// unknown, and the operator running --reset has checked the node's MIG state (docs/agent.md).
	jpath := filepath.Join(cfg.StateDir, "gate.journal")
	cordon := filepath.Join(cfg.StateDir, "cordon.json")
	node := &agent.LocalNode{Path: cordon}
	j, rep, err := agent.OpenJournal(jpath)
	damaged := ""
	if errors.Is(err, agent.ErrCorrupt) {
		if damaged, err = agent.SetAsideJournal(jpath, time.Now()); err != nil {
			if denied := resetDenied(err, cfg.StateDir); denied != nil {
				return denied
			}
			return resetFailure(err, "the damaged journal is left in place; check that this user may write the state "+
				"directory (its owner and mode, the disk), then run --reset again")
		}
		fmt.Fprintf(e.stdout, "gate: damaged journal kept as %s; a new journal is started\n", damaged)
		j, rep, err = agent.OpenJournal(jpath)
	}
	if err != nil {
		if denied := resetDenied(err, cfg.StateDir); denied != nil {
			return denied
		}
		return resetFailure(err, fmt.Sprintf("nothing was reset; check that %s is a file this user may read and write "+
			"(its owner and mode, the state directory, the disk), then run --reset again", jpath))
	}
	defer j.Close()
	policy := gate.Policy{Cooldown: set.Cooldown, MaxChanges: cfg.Policy.MaxChanges, Window: set.Window, Uncordon: set.Uncordon}
	x, err := agent.NewExecutor(ctx, j, rep, gate.State{Policy: policy}, agent.Deps{MIG: lib,
		Node:     node,
		Rand:     jitterSource(cfg.Node),
		OnAction: func(a gate.Action, at time.Time, err error) { printAction(e.stdout, a, at, err) },
		OnNote: func(n gate.Note) {
			fmt.Fprintf(e.stdout, "%s  %-20s %s\n", n.At.Format(time.TimeOnly), n.Code, n.Message)
		}})
	if err != nil {
		return resetFailure(err, fmt.Sprintf("nothing was reset; the gate could not resume from %s: check the journal's "+
			"file and disk (a damaged journal is set aside by --reset), then run --reset again", jpath))
	}
	if damaged != "" {
		// The new journal knows of no change; the cordon the damaged one left is lifted here.
		if err := node.Uncordon(ctx); err != nil {
			return resetFailure(err, fmt.Sprintf("the new journal is started but the node is still cordoned, and a second "+
				"--reset finds nothing to reset: fix what stops writing %s (the state directory's owner and mode, the "+
				"disk), then remove that file (no cordon file: not cordoned)", cordon))
		}
		fmt.Fprintf(e.stdout, "gate: phase %s, cordoned false\n", x.State().Phase())
		return nil
	}
	ans, err := resetFailed(ctx, x)
	if err != nil {
		return resetFailure(fmt.Errorf("reset the gate: %w", err), fmt.Sprintf("the gate's state is the journal's "+
			"last record (%s); check the journal's file and disk, then run --reset again (with nothing failed it "+
			"changes nothing)", jpath))
	}
	printReset(e.stdout, ans)
	return resetLeftCordoned(ans, cfg.Node, cordon, "the output above")
}

// printAction prints one gate action as the executor performed it.
func printAction(w io.Writer, a gate.Action, at time.Time, err error) {
	what := string(a.Kind)
	switch {
	case a.Instance.Profile != "":
		what += " " + a.Instance.String()
	case len(a.Instances) > 0:
		what += " " + a.Instances.String()
	case a.Kind == gate.ActDrain || a.Kind == gate.ActSmoke:
		what += " (no instances)"
	}
	result := "ok"
	if err != nil {
		result = "failed: " + err.Error()
	}
	fmt.Fprintf(w, "%s    %-40s %s\n", at.Format(time.TimeOnly), what, result)
}

// serveAgent serves /metrics (the agent's collector, plus Go and process metrics) and /healthz.
func serveAgent(listen string, a *agent.Agent, log *slog.Logger) (*http.Server, string, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(a), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// newFakeNode builds the mock node; on its first start every GPU listed in the config (every GPU
// with all) gets one full-GPU instance, so the config's layouts make the gate re-partition.
func newFakeNode(cfg agent.Config, model string, all bool, gpus int) (*nvml.Fake, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	path := filepath.Join(cfg.StateDir, "fake-gpus.json")
	_, statErr := os.Stat(path)
	opt := nvml.FakeOptions{Model: model, StatePath: path, GPUs: gpus}
	if all { // one of the control plane's nodes: GPU UUIDs distinct across the pool
		opt.Node = cfg.Node
	}
	fk, err := nvml.NewFake(opt)
	if err != nil {
		return nil, err
	}
	lib := nvml.New(fk.Interface(), nvml.Options{})
	b := fk.Board()
	full := b.Profiles[len(b.Profiles)-1]
	for _, p := range b.Profiles {
		if p.ComputeSlices == b.ComputeSlices && !p.MediaExtension {
			full = p
		}
	}
	for i, u := range fk.UUIDs() {
		fk.SetPower(u, b.TDPWatts*0.6)
		if !errors.Is(statErr, os.ErrNotExist) {
			continue
		}
		if all {
			if err := lib.Create(u, b.Name, gpu.Instance{Profile: full.Name, Start: 0}); err != nil {
				return nil, fmt.Errorf("lay out fake GPU %d: %w", i, err)
			}
		}
		for _, g := range cfg.GPUs {
			if g.Index == i && !all {
				if err := lib.Create(u, b.Name, gpu.Instance{Profile: full.Name, Start: 0}); err != nil {
					return nil, fmt.Errorf("lay out fake GPU %d: %w", i, err)
				}
			}
		}
	}
	return fk, nil
}

// telemetry adapts nvml.Lib to the agent's Telemetry port.
type telemetry struct{ l *nvml.Lib }

func (t telemetry) Inventory() ([]agent.GPUInfo, error) {
	devs, err := t.l.Inventory()
	if err != nil {
		return nil, err
	}
	out := make([]agent.GPUInfo, len(devs))
	for i, d := range devs {
		out[i] = agent.GPUInfo{Index: d.Index, UUID: d.UUID, Board: d.Board, MIG: d.MIG, Instances: d.Instances}
	}
	return out, nil
}

func (t telemetry) EnergyMilliJoules(uuid string) (uint64, error) { return t.l.EnergyMilliJoules(uuid) }

// InstanceActivity gives the agent each MIG instance's GPM activity (agent.InstanceActivity).
func (t telemetry) InstanceActivity(uuid, board string) (map[gpu.Instance]float64, error) {
	return t.l.InstanceActivity(uuid, board)
}

func (t telemetry) Processes(uuid string) ([]agent.Proc, error) {
	ps, err := t.l.Processes(uuid)
	if err != nil {
		return nil, err
	}
	us, _ := t.l.ProcessUtilization(uuid, 0)
	sm := map[uint32]uint32{}
	for _, u := range us {
		sm[u.PID] = u.SMPercent
	}
	out := make([]agent.Proc, len(ps))
	for i, p := range ps {
		out[i] = agent.Proc{PID: p.PID, UsedBytes: p.UsedBytes, SMPercent: sm[p.PID]}
	}
	return out, nil
}

// mpsAdapter adapts the MPS supervisor to the agent's MPS port.
type mpsAdapter struct{ s *mps.Supervisor }

func (m mpsAdapter) Ensure(ctx context.Context, uuid string, l agent.MPSConfig) error {
	for _, st := range m.s.Status() {
		if st.UUID == uuid {
			return nil
		}
	}
	return m.s.Start(ctx, mps.Daemon{UUID: uuid, Limits: mps.Limits{ActiveThreadPercent: l.ActiveThreadPercent, PinnedMemory: l.PinnedMemory}})
}

func (m mpsAdapter) Status() []metrics.MPSDaemon {
	var out []metrics.MPSDaemon
	for _, st := range m.s.Status() {
		out = append(out, metrics.MPSDaemon{UUID: st.UUID, Restarts: st.Restarts, Healthy: st.Healthy})
	}
	return out
}

// xidAdapter adapts nvml.Events to the agent's XIDs port (no wait: events already queued).
type xidAdapter struct{ ev *nvml.Events }

func (x xidAdapter) Next() (string, uint64, bool, error) {
	e, ok, err := x.ev.Wait(0)
	return e.GPU, e.Code, ok, err
}

type httpScraper struct{ c *http.Client }

func (h httpScraper) Scrape(ctx context.Context, url string) (metrics.Engine, error) {
	return metrics.Scrape(ctx, h.c, url)
}

// fakeScraper stands in for vLLM under --fake: every engine generates 1000 tokens per poll.
type fakeScraper struct {
	mu     sync.Mutex
	tokens map[string]float64
}

func (f *fakeScraper) Scrape(_ context.Context, url string) (metrics.Engine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[url] += 1000
	return metrics.Engine{GenerationTokens: f.tokens[url]}, nil
}
