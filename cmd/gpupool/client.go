package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/control"
)

// client talks to a running `gpupool serve`.
type client struct {
	base, token string
	http        *http.Client
}

// apiError is a problem document returned by the server.
type apiError struct {
	Status int                  `json:"status"`
	Detail string               `json:"detail"`
	Errors []control.FieldError `json:"errors"`
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("server answered %d: %s", e.Status, e.Detail)
	return s
}

func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if raw, ok := body.([]byte); ok { // a document sent as it is
		rd = bytes.NewReader(raw)
	} else if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	token := c.token
	if token == "" {
		token = os.Getenv("GPUPOOL_TOKEN")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if _, doc := body.([]byte); body != nil && !doc {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("call %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		pe := &apiError{Status: resp.StatusCode}
		json.NewDecoder(resp.Body).Decode(pe)
		if resp.StatusCode == 400 || resp.StatusCode == 404 || resp.StatusCode == 403 || resp.StatusCode == 401 {
			return invalid(pe)
		}
		return pe
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
		}
	}
	return nil
}

// clientFlags adds --server and --token (defaults from GPUPOOL_SERVER and GPUPOOL_TOKEN). The
// token's default is read when a call is made, not shown as the flag's default: --help must not
// print the secret.
func clientFlags(c *cobra.Command) *client {
	cl := &client{http: newHTTPClient()}
	c.PersistentFlags().StringVar(&cl.base, "server", envOr("GPUPOOL_SERVER", "http://127.0.0.1:8080"), "control plane URL (env GPUPOOL_SERVER)")
	c.PersistentFlags().StringVar(&cl.token, "token", "", "bearer token (default: env GPUPOOL_TOKEN)")
	return cl
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTenantCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "tenant", Short: "List, show, change and remove tenants on a running control plane"}
	cl := clientFlags(c)
	var asJSON bool
	c.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON")
	list := &cobra.Command{Use: "list", Short: "List tenants with demand, grants, share and fair share", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ts []control.TenantStatus
			if err := cl.call(cmd.Context(), "GET", "/v1/tenants", nil, &ts); err != nil {
				return err
			}
			if asJSON {
				return printJSON(e.stdout, ts)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TENANT\tDEMAND\tGRANTED\tSHARE\tFAIR SHARE\tVERSION")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%.1f%%\t%d\n", t.Name, t.Demand, t.Granted, 100*t.DominantShare, 100*t.FairShare, t.Version)
			}
			return tw.Flush()
		}}
	get := &cobra.Command{Use: "get NAME", Short: "Show one tenant", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t control.TenantStatus
			if err := cl.call(cmd.Context(), "GET", "/v1/tenants/"+args[0], nil, &t); err != nil {
				return err
			}
			return printJSON(e.stdout, t)
		}}
	var rateArg float64
	demand := &cobra.Command{Use: "demand NAME (REPLICAS | --rate R)", Short: "Set how many replicas a tenant wants, or the request rate it must serve",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rateSet := cmd.Flags().Changed("rate")
			req := control.RateDemand(rateArg)
			if (len(args) == 2) == rateSet {
				return invalid(fmt.Errorf("set demand of tenant %s: give REPLICAS or --rate, exactly one", args[0]))
			}
			if len(args) == 2 {
				n, err := strconv.Atoi(args[1])
				if err != nil {
					return invalid(fmt.Errorf("parse replicas %q: %w", args[1], err))
				}
				req = control.ReplicasDemand(n)
			}
			var t control.Tenant
			if err := cl.call(cmd.Context(), "PUT", "/v1/tenants/"+args[0]+"/demand", req, &t); err != nil {
				return err
			}
			_, err := fmt.Fprintf(e.stdout, "tenant %s: demand %d (version %d)\n", t.Name, t.Demand, t.Version)
			return err
		}}
	demand.Flags().Float64Var(&rateArg, "rate", 0, "requests/s to serve; replicas = ceil(rate / ratePerReplica)")
	var weight float64
	var path string
	var reservation, capN int
	var perReplica float64
	set := &cobra.Command{Use: "set NAME REPLICAS", Short: "Add or update a tenant", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return invalid(fmt.Errorf("parse replicas %q: %w", args[1], err))
			}
			t := control.Tenant{Name: args[0], Path: path, Weight: weight, Demand: n, Reservation: reservation, Cap: capN, RatePerReplica: perReplica}
			if err := cl.call(cmd.Context(), "PUT", "/v1/tenants/"+args[0], t, &t); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "tenant %s: demand %d (version %d)\n", t.Name, t.Demand, t.Version)
			return err
		}}
	set.Flags().Float64Var(&weight, "weight", 0, "weight (0 means 1)")
	set.Flags().StringVar(&path, "path", "", "place in the hierarchy, e.g. org/team")
	set.Flags().IntVar(&reservation, "reservation", 0, "replicas guaranteed")
	set.Flags().IntVar(&capN, "cap", 0, "most steady replicas (0: no cap)")
	set.Flags().Float64Var(&perReplica, "rate-per-replica", 0, "requests/s one replica serves within its SLO (lets demand be a rate)")
	rm := &cobra.Command{Use: "rm NAME", Short: "Remove a tenant and release its grants", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cl.call(cmd.Context(), "DELETE", "/v1/tenants/"+args[0], nil, nil)
		}}
	c.AddCommand(list, get, demand, set, rm)
	return c
}

func newGrantsCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{Use: "grants", Short: "List the grants the caller may see (grant, tenant, slice, reason)", Args: cobra.NoArgs}
	cl := clientFlags(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		var gs []control.Grant
		if err := cl.call(cmd.Context(), "GET", "/v1/grants", nil, &gs); err != nil {
			return err
		}
		if asJSON {
			return printJSON(e.stdout, gs)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GRANT\tTENANT\tSLICE\tREASON")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.ID, g.Tenant, g.Slice, g.Reason)
		}
		return tw.Flush()
	}
	return c
}

func newTokenCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "token", Short: "Create, list and revoke bearer tokens (operator only)"}
	cl := clientFlags(c)
	create := &cobra.Command{Use: "create ROLE [TENANT|NODE]", Short: "Create a token: operator, tenant NAME or agent NODE; the secret is printed once",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := control.TokenRequest{Role: control.Role(args[0])}
			if len(args) == 2 {
				if r.Role == control.RoleAgent {
					r.Node = args[1]
				} else {
					r.Tenant = args[1]
				}
			}
			var out control.TokenResponse
			if err := cl.call(cmd.Context(), "POST", "/v1/tokens", r, &out); err != nil {
				return err
			}
			_, err := fmt.Fprintln(e.stdout, out.Token)
			return err
		}}
	var asJSON bool
	list := &cobra.Command{Use: "list", Short: "List tokens, oldest first: id, role, tenant or node, name, creation time (never a secret)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ts []control.TokenInfo
			if err := cl.call(cmd.Context(), "GET", "/v1/tokens", nil, &ts); err != nil {
				return err
			}
			if asJSON {
				return printJSON(e.stdout, ts)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tROLE\tTENANT/NODE\tNAME\tCREATED")
			for _, t := range ts {
				created := "-" // stored before creation times were kept
				if !t.Created.IsZero() {
					created = t.Created.UTC().Format(time.RFC3339)
				}
				name := t.Name
				if t.TokenFile {
					name += " (token file)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Role, orDash(t.Tenant+t.Node), orDash(name), created)
			}
			return tw.Flush()
		}}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a token by the id `token list` shows; its next request is refused",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t control.TokenInfo
			if err := cl.call(cmd.Context(), "DELETE", "/v1/tokens/"+url.PathEscape(args[0]), nil, &t); err != nil {
				var pe *apiError
				if errors.As(err, &pe) && pe.Status == http.StatusConflict { // the caller's own token, or the token file's
					return invalid(err)
				}
				return err
			}
			_, err := fmt.Fprintf(e.stdout, "token %s revoked (%s %s %q)\n", t.ID, t.Role, orDash(t.Tenant+t.Node), t.Name)
			return err
		}}
	c.AddCommand(create, list, revoke)
	return c
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newApplyCmd sends a Pool file's tenants to the control plane: name, path, weight, reservation,
// cap, and replicas as demand (1 when unset).
func newApplyCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "apply POOL", Short: "Add or update the tenants of a Pool file on a running control plane", Args: cobra.ExactArgs(1),
		Long: "apply adds or updates the Pool file's tenants. With --plan it also plans the pool on the server\n" +
			"(from the plan applied last) and turns the plan's MIG layouts into gate operations."}
	cl := clientFlags(c)
	withPlan := c.Flags().Bool("plan", false, "also plan the pool and hand its MIG layouts to the gate orchestration")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		raw, err := os.ReadFile(args[0])
		if err != nil {
			return invalid(fmt.Errorf("read pool: %w", err))
		}
		pool, err := v1.DecodePool(raw)
		if err != nil {
			return invalid(fmt.Errorf("decode pool %s: %w", args[0], err))
		}
		for _, t := range pool.Tenants {
			ct := control.Tenant{Name: strings.ToLower(t.Name), Path: t.Path, Reservation: t.Reservation, Demand: 1}
			if t.Weight != nil {
				ct.Weight = *t.Weight
			}
			if t.Cap != nil {
				ct.Cap = *t.Cap
			}
			if t.Replicas != nil {
				ct.Demand = *t.Replicas
			}
			if err := cl.call(cmd.Context(), "PUT", "/v1/tenants/"+ct.Name, ct, &ct); err != nil {
				return fmt.Errorf("apply tenant %s: %w", t.Name, err)
			}
			fmt.Fprintf(e.stdout, "tenant %s: demand %d (version %d)\n", ct.Name, ct.Demand, ct.Version)
		}
		if *withPlan {
			return applyPlan(cmd.Context(), e, cl, raw)
		}
		return nil
	}
	return c
}

// applyPlan has the server plan the Pool document and prints the gate operations it asked.
func applyPlan(ctx context.Context, e *env, cl *client, pool []byte) error {
	var out control.PlanApplied
	if err := cl.call(ctx, "POST", "/v1/plans/apply", pool, &out); err != nil {
		return fmt.Errorf("apply plan: %w", err)
	}
	fmt.Fprintf(e.stdout, "plan applied: %d gate operations\n", len(out.Gates))
	for _, g := range out.Gates {
		fmt.Fprintf(e.stdout, "  %d  GPU %s: %q → %q  %s %s\n", g.ID, g.GPU, g.From, g.Layout, g.State, g.Reason)
	}
	return nil
}

func newHTTPClient() *http.Client { return &http.Client{Timeout: 60 * time.Second} }

func newNodeCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "node", Short: "List nodes, cordon, uncordon and remove them (operator only)"}
	cl := clientFlags(c)
	list := &cobra.Command{Use: "list", Short: "Nodes with their slices, heartbeat and state", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ns []control.Node
			if err := cl.call(cmd.Context(), "GET", "/v1/nodes", nil, &ns); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tGPUS\tSLICES\tSTATE\tLAST SEEN\tLAYOUT")
			for _, n := range ns {
				state := "ready"
				switch {
				case n.Lost:
					state = "lost"
				case n.Cordoned:
					state = "cordoned"
				}
				slices := 0
				for _, g := range n.Inventory.GPUs {
					slices += len(g.Slices)
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\n", n.Name, len(n.Inventory.GPUs), slices, state, n.LastSeen.Format(time.RFC3339), n.LayoutRevision)
			}
			return tw.Flush()
		}}
	cordon := func(use string, on bool) *cobra.Command {
		return &cobra.Command{Use: use + " NODE", Short: map[bool]string{true: "Take a node's slices out of the pool; its replicas move elsewhere", false: "Return a node's slices to the pool"}[on],
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				var n control.Node
				if err := cl.call(cmd.Context(), "PUT", "/v1/nodes/"+args[0]+"/cordon", control.CordonRequest{Cordoned: on}, &n); err != nil {
					return err
				}
				_, err := fmt.Fprintf(e.stdout, "node %s: cordoned %v (layout revision %d)\n", n.Name, n.Cordoned, n.LayoutRevision)
				return err
			}}
	}
	rm := &cobra.Command{Use: "rm NODE", Short: "Remove a lost node, or a cordoned one whose replicas have moved, for good (its gate operations are given up)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cl.call(cmd.Context(), "DELETE", "/v1/nodes/"+args[0], nil, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(e.stdout, "node %s removed; its agent is refused until: gpupool node admit %s\n", args[0], args[0])
			return err
		}}
	admit := &cobra.Command{Use: "admit NODE", Short: "Re-admit a removed node: its agent's next report registers it as a new node",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cl.call(cmd.Context(), "POST", "/v1/nodes/"+args[0]+"/admit", nil, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(e.stdout, "node %s re-admitted\n", args[0])
			return err
		}}
	c.AddCommand(list, cordon("cordon", true), cordon("uncordon", false), rm, admit)
	return c
}

func newGateCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "gate", Short: "MIG layout changes of GPUs: list them, ask for one, cancel a waiting one (operator only)"}
	cl := clientFlags(c)
	list := &cobra.Command{Use: "list", Short: "Gate operations not finished (waiting or applying)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var gs []control.NodeGate
			if err := cl.call(cmd.Context(), "GET", "/v1/gates", nil, &gs); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNODE\tGPU\tFROM\tTO\tSTATE\tATTEMPTS\tREASON")
			for _, g := range gs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", g.ID, g.Node, g.GPU, g.From, g.Layout, g.State, g.Attempts, g.Reason)
			}
			return tw.Flush()
		}}
	var whole bool
	set := &cobra.Command{Use: "set NODE GPU-UUID (LAYOUT | --whole)", Short: `Ask for a GPU's MIG layout ("3g.40gb@0 3g.40gb@4"), or with --whole for no instance and MIG mode off; "" cancels a waiting request`,
		Args: func(cmd *cobra.Command, args []string) error {
			if whole {
				return cobra.ExactArgs(2)(cmd, args)
			}
			return cobra.ExactArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := control.LayoutRequest{MIGOff: whole}
			if !whole {
				req.Layout = args[2]
			}
			var g control.GateOp
			if err := cl.call(cmd.Context(), "PUT", "/v1/nodes/"+args[0]+"/gpus/"+args[1]+"/layout", req, &g); err != nil {
				return err
			}
			to := fmt.Sprintf("%q", g.Layout)
			if g.MIGOff {
				to = "no instance, MIG mode off"
			}
			_, err := fmt.Fprintf(e.stdout, "gate operation %d on GPU %s: %q → %s, %s %s\n", g.ID, g.GPU, g.From, to, g.State, g.Reason)
			return err
		}}
	set.Flags().BoolVar(&whole, "whole", false, "run the GPU whole: no MIG instance, MIG mode off (also for a GPU left in MIG mode with no instance)")
	c.AddCommand(list, set)
	return c
}
