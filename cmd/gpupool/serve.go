package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/control"
)

func newServeCmd(e *env) *cobra.Command {
	var o control.Options
	var demo bool
	var seed uint64
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: the /v1 API, the allocator, the store and the browser console",
		Long: "serve runs the control plane with an embedded store in --data. The operator token is read\n" +
			"from --token-file (created when missing). With --demo it also runs simulated node agents and\n" +
			"tenants that come and go, so the console has something to show.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(e.stderr, nil))
			o.Ready = func(addr, secret string) {
				fmt.Fprintf(e.stdout, "gpupool serve: listening on http://%s\n", addr)
				if demo {
					fmt.Fprintf(e.stdout, "console: http://%s/#token=%s\n", addr, secret)
					go runDemo(cmd.Context(), "http://"+addr, secret, seed, log)
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
	f.DurationVar(&o.Loop.Engine.NodeTimeout, "node-timeout", 30*time.Second, "silence after which a node's slices leave the pool")
	f.Float64Var(&o.Loop.Engine.BurstPoolPercent, "burst-pool-percent", 0, "share of the slices lent only as burst leases")
	f.DurationVar(&o.Loop.Engine.LeaseDuration, "lease", 0, "how long a burst lease lasts (0: no leases)")
	f.StringVar(&o.TLS.CertFile, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	f.StringVar(&o.TLS.KeyFile, "tls-key", "", "the certificate's private key (PEM)")
	f.StringVar(&o.TLS.ClientCAFile, "client-ca", "", "require client certificates signed by this CA (mutual TLS)")
	f.BoolVar(&demo, "demo", false, "also run simulated agents and tenants")
	f.Uint64Var(&seed, "seed", 1, "seed of the demo's tenants")
	return c
}

// demoNodes: two H100 nodes cut into MIG slices and one H200 node with MPS shares.
var demoNodes = map[string]control.Inventory{
	"h100-a": {GPUs: []control.GPU{{UUID: "GPU-a0", Board: "H100-SXM5-80GB", Slices: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
		{UUID: "GPU-a1", Board: "H100-SXM5-80GB", Slices: []string{"4g.40gb", "3g.40gb"}}}},
	"h100-b": {GPUs: []control.GPU{{UUID: "GPU-b0", Board: "H100-SXM5-80GB", Slices: []string{"7g.80gb"}},
		{UUID: "GPU-b1", Board: "H100-SXM5-80GB", Slices: []string{"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"}}}},
	"h200-c": {GPUs: []control.GPU{{UUID: "GPU-c0", Board: "H200-SXM5-141GB", Slices: []string{"mps-50", "mps-25", "mps-25"}}}},
}

// runDemo runs the simulated agents and a tenant driver against the server at base.
func runDemo(ctx context.Context, base, operator string, seed uint64, log *slog.Logger) {
	cl := &client{base: base, token: operator, http: http.DefaultClient}
	for name, inv := range demoNodes {
		var tok control.TokenResponse
		if err := cl.call(ctx, "POST", "/v1/tokens", control.TokenRequest{Role: control.RoleAgent, Node: name, Name: "demo-" + name}, &tok); err != nil {
			log.Error("demo: create agent token", "node", name, "err", err)
			return
		}
		a := &control.SimAgent{Server: base, Token: tok.Token, Node: name, Inventory: inv}
		go a.Run(ctx)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
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
			err = cl.call(ctx, "PUT", "/v1/tenants/"+t.Name+"/demand", control.DemandRequest{Replicas: rng.IntN(8)}, nil)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("demo: tenant change", "tenant", t.Name, "err", err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
