package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/control"
)

func newServeCmd(e *env) *cobra.Command {
	var o control.Options
	var demo bool
	var seed uint64
	var simRequests int
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: the /v1 API, the allocator, the store and the browser console",
		Long: "serve runs the control plane with an embedded store in --data. The operator token is read\n" +
			"from --token-file (created when missing). With --demo it also runs two real node agents on mock\n" +
			"H100s (NVML fakes) whose MIG layouts change through the gate, a simulated MPS node, and tenants\n" +
			"that come and go, so the console has something to show.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSimRequests(simRequests); err != nil {
				return invalid(fmt.Errorf("serve: %w", err))
			}
			// A node agent heartbeats every agent.DefaultHeartbeat: a shorter node timeout would
			// declare live nodes lost between two heartbeats, over and over.
			if nt := o.Loop.Engine.NodeTimeout; nt < 2*agent.DefaultHeartbeat {
				return invalid(fmt.Errorf("serve: --node-timeout %s is shorter than two heartbeats of a node agent (%s each): live nodes would be declared lost between heartbeats; give %s or more",
					nt, agent.DefaultHeartbeat, 2*agent.DefaultHeartbeat))
			}
			o.Server.Planning = planning(simRequests)
			log := slog.New(slog.NewTextHandler(e.stderr, nil))
			if demo && !cmd.Flags().Changed("gate-cooldown") {
				o.Loop.Engine.Gate.Cooldown = 5 * time.Second
			}
			o.Ready = func(addr, secret string) {
				fmt.Fprintf(e.stdout, "gpupool serve: listening on http://%s\n", addr)
				if demo {
					fmt.Fprintf(e.stdout, "console: http://%s/#token=%s\n", addr, secret)
					go runDemo(cmd.Context(), "http://"+addr, secret, o.DataDir, seed, log)
				}
			}
			return control.Run(cmd.Context(), o, log)
		},
	}
	f := c.Flags()
	f.StringVar(&o.DataDir, "data", "gpupool-data", "directory for the store, the audit log and the operator token")
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.TokenFile, "token-file", "", "operator token file (default DATA/operator.token)")
	f.Float64Var(&o.Server.Rate, "rate", 1000, "requests per second allowed per token")
	f.IntVar(&o.Server.Burst, "burst", 2000, "burst of requests allowed per token")
	f.DurationVar(&o.Loop.Engine.NodeTimeout, "node-timeout", 30*time.Second, "silence after which a node's slices leave the pool (at least 10s: two heartbeats of a node agent)")
	f.Float64Var(&o.Loop.Engine.BurstPoolPercent, "burst-pool-percent", 0, "share of the slices lent only as burst leases")
	f.DurationVar(&o.Loop.Engine.LeaseDuration, "lease", 0, "how long a burst lease lasts (0: no leases)")
	f.IntVar(&o.Loop.Engine.Gate.MaxUnavailable, "max-unavailable", 1, "GPUs that may be out of the pool for a MIG change at once")
	f.DurationVar(&o.Loop.Engine.Gate.Cooldown, "gate-cooldown", 10*time.Minute, "least time between two MIG changes of one GPU, and before a retry")
	f.IntVar(&o.Loop.Engine.Gate.MaxAttempts, "gate-attempts", 2, "tries of a MIG change before it is given up")
	f.DurationVar(&o.Loop.Engine.Gate.DrainTimeout, "drain-timeout", 5*time.Minute, "how long a draining GPU waits for its replicas' standbys to be ready before the old replicas stop anyway")
	f.Var(&windowFlag{&o.Loop.Engine.Gate.Window}, "maintenance-window", "daily UTC window in which MIG changes may start, HH:MM-HH:MM (default always)")
	f.StringVar(&o.TLS.CertFile, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	f.StringVar(&o.TLS.KeyFile, "tls-key", "", "the certificate's private key (PEM)")
	f.StringVar(&o.TLS.ClientCAFile, "client-ca", "", "require client certificates signed by this CA (mutual TLS)")
	f.BoolVar(&demo, "demo", false, "also run node agents on mock GPUs and tenants that come and go")
	f.Uint64Var(&seed, "seed", 1, "seed of the demo's tenants")
	simRequestsFlag(f, &simRequests)
	return c
}

// demoMPSNode is the demo's simulated node: an H200 with MPS shares (MPS is not mocked).
var demoMPSNode = control.Inventory{GPUs: []control.GPU{{UUID: "GPU-c0", Board: "H200-141GB", Slices: []string{"mps-50", "mps-25", "mps-25"}}}}

// demoLayouts are the MIG layouts the demo's gate driver moves GPUs between.
var demoLayouts = []string{"3g.40gb@0 3g.40gb@4", "2g.20gb@0 2g.20gb@2 3g.40gb@4", "7g.80gb@0",
	"1g.10gb@0 1g.10gb@1 2g.20gb@2 3g.40gb@4"}

// runDemo runs two real agents on mock H100 nodes (4 GPUs each, one 7g.80gb instance per GPU at
// first), one simulated MPS node whose replicas are simulated vLLM processes (ready once their
// /health answers), a tenant driver, and a gate driver that asks a GPU for another MIG layout
// every 8 seconds (the first after 2), against the server at base.
func runDemo(ctx context.Context, base, operator, dataDir string, seed uint64, log *slog.Logger) {
	cl := &client{base: base, token: operator, http: http.DefaultClient}
	token := func(node string) (string, bool) {
		var tok control.TokenResponse
		if err := cl.call(ctx, "POST", "/v1/tokens", control.TokenRequest{Role: control.RoleAgent, Node: node, Name: "demo-" + node}, &tok); err != nil {
			log.Error("demo: create agent token", "node", node, "err", err)
			return "", false
		}
		return tok.Token, true
	}
	for _, name := range []string{"h100-a", "h100-b"} {
		tok, ok := token(name)
		if !ok {
			return
		}
		go func() {
			if err := runDemoAgent(ctx, base, tok, name, filepath.Join(dataDir, "demo-agents", name), log); err != nil && ctx.Err() == nil {
				log.Error("demo agent", "node", name, "err", err)
			}
		}()
	}
	if tok, ok := token("h200-c"); ok {
		// Its replicas are simulated vLLM processes: /health answers 200 after a 1-3 s start-up,
		// and a standby counts as ready only then.
		startup := func(s control.LayoutSlice) time.Duration {
			h := fnv.New32a()
			h.Write([]byte(s.Grant))
			return time.Second + time.Duration(h.Sum32()%2000)*time.Millisecond
		}
		// It stops its replicas when it has not reached the server for 20 s, before the server
		// (node timeout 30 s) moves them.
		go (&control.SimAgent{Server: base, Token: tok, Node: "h200-c", Inventory: demoMPSNode,
			Replicas: control.SimReplicas(startup), StartupBudget: 10 * time.Second, Lease: 20 * time.Second}).Run(ctx)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	go demoGates(ctx, cl, rand.New(rand.NewPCG(seed, 1)), log)
	tenants := []control.Tenant{{Name: "chat", Weight: 2, Demand: 4}, {Name: "search", Demand: 3, Reservation: 1},
		{Name: "batch", Weight: 0.5, Demand: 6}, {Name: "code", Demand: 2}}
	for _, t := range tenants {
		if err := cl.call(ctx, "PUT", "/v1/tenants/"+t.Name, t, nil); err != nil {
			log.Error("demo: create tenant", "tenant", t.Name, "err", err)
		}
	}
	for sleepCtx(ctx, 2*time.Second) {
		t := tenants[rng.IntN(len(tenants))]
		var err error
		if rng.IntN(6) == 0 {
			err = cl.call(ctx, "DELETE", "/v1/tenants/"+t.Name, nil, nil)
			if err == nil {
				sleepCtx(ctx, 2*time.Second)
				err = cl.call(ctx, "PUT", "/v1/tenants/"+t.Name, t, nil)
			}
		} else {
			err = cl.call(ctx, "PUT", "/v1/tenants/"+t.Name+"/demand", control.ReplicasDemand(rng.IntN(8)), nil)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("demo: tenant change", "tenant", t.Name, "err", err)
		}
	}
}

// runDemoAgent runs the real node agent on a mock H100 node, following the control plane.
func runDemoAgent(ctx context.Context, base, token, node, stateDir string, log *slog.Logger) error {
	cfg, set, err := agent.ParseConfig([]byte(fmt.Sprintf("node: %s\nstateDir: %q\nlisten: 127.0.0.1:0\npollInterval: 200ms\npolicy: {reconfigCooldown: 0s}\ngpus: []\n", node, stateDir)))
	if err != nil {
		return err
	}
	out := &logWriter{log: log.With("agent", node)}
	return runAgent(ctx, &env{ctx: ctx, stdout: out, stderr: out}, cfg, set, true, "h100", false,
		controlLink{server: base, token: token, heartbeat: time.Second, fakeGPUs: 4})
}

// demoGates asks a random GPU of the mock nodes for another MIG layout after 2 seconds, then
// every 8 seconds.
func demoGates(ctx context.Context, cl *client, rng *rand.Rand, log *slog.Logger) {
	for wait := 2 * time.Second; sleepCtx(ctx, wait); wait = 8 * time.Second {
		var ns []control.Node
		if err := cl.call(ctx, "GET", "/v1/nodes", nil, &ns); err != nil {
			continue
		}
		var gpus [][2]string
		for _, n := range ns {
			for _, g := range n.Inventory.GPUs {
				if g.MIG != "" {
					gpus = append(gpus, [2]string{n.Name, g.UUID})
				}
			}
		}
		if len(gpus) == 0 {
			continue
		}
		g := gpus[rng.IntN(len(gpus))]
		l := demoLayouts[rng.IntN(len(demoLayouts))]
		err := cl.call(ctx, "PUT", "/v1/nodes/"+g[0]+"/gpus/"+g[1]+"/layout", control.LayoutRequest{Layout: l}, nil)
		if err != nil && ctx.Err() == nil {
			log.Info("demo: gate request refused", "node", g[0], "gpu", g[1], "layout", l, "err", err)
		}
	}
}

// logWriter turns an agent's output lines into log records.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.log.Info(strings.TrimSpace(string(w.buf[:i])))
		w.buf = w.buf[i+1:]
	}
}

// windowFlag parses a daily maintenance window, "22:00-02:00" (UTC).
type windowFlag struct{ w *control.Window }

func (f *windowFlag) String() string {
	if f.w == nil || f.w.Length == 0 {
		return ""
	}
	end := (f.w.Start + f.w.Length) % (24 * time.Hour)
	return fmt.Sprintf("%02d:%02d-%02d:%02d", int(f.w.Start.Hours()), int(f.w.Start.Minutes())%60, int(end.Hours()), int(end.Minutes())%60)
}

func (f *windowFlag) Set(s string) error {
	a, b, ok := strings.Cut(s, "-")
	start, err1 := time.Parse("15:04", a)
	end, err2 := time.Parse("15:04", b)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("maintenance window %q: want HH:MM-HH:MM (UTC)", s)
	}
	day := 24 * time.Hour
	st := time.Duration(start.Hour())*time.Hour + time.Duration(start.Minute())*time.Minute
	en := time.Duration(end.Hour())*time.Hour + time.Duration(end.Minute())*time.Minute
	*f.w = control.Window{Start: st, Length: ((en-st)%day + day) % day}
	if f.w.Length == 0 {
		f.w.Length = day
	}
	return nil
}

func (f *windowFlag) Type() string { return "HH:MM-HH:MM" }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
