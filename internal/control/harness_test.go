package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/store"
)

// harness is a Loop over a real bbolt store with an httptest server and one token per role.
type harness struct {
	t      testing.TB
	loop   *Loop
	srv    *httptest.Server
	tokens map[string]string // label → secret
	stop   func()
	audit  *syncBuffer
	// planning is the server's (cfg.Planning), which startReplanner's Replanner also uses.
	planning Planning
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t testing.TB, cfg ServerConfig) *harness {
	t.Helper()
	return newHarnessLoop(t, cfg, LoopConfig{Tick: 50 * time.Millisecond})
}

// startReplanner runs a Replanner on h's loop every 20 ms until the test ends.
func (h *harness) startReplanner(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Replanner{Loop: h.loop, Every: 20 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Planning: h.planning}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// newHarnessLoop is newHarness with the loop's (and the engine's) configuration.
func newHarnessLoop(t testing.TB, cfg ServerConfig, lcfg LoopConfig) *harness {
	t.Helper()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	loop, err := NewLoop(context.Background(), lcfg, st, SystemClock{}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { loop.Run(ctx); close(done) }()
	h := &harness{t: t, loop: loop, tokens: map[string]string{}, audit: &syncBuffer{}, planning: cfg.Planning}
	h.srv = httptest.NewServer(NewServer(loop, cfg, log, slog.New(slog.NewJSONHandler(h.audit, nil))))
	h.stop = func() { h.srv.Close(); cancel(); <-done; st.Close() }
	t.Cleanup(h.stop)
	// Tokens are seeded straight into the engine (the bootstrap path serve uses).
	seed := map[string]Principal{
		"operator": {Role: RoleOperator, Name: "op"},
		"alice":    {Role: RoleTenant, Tenant: "alice", Name: "alice"},
		"bob":      {Role: RoleTenant, Tenant: "bob", Name: "bob"},
		"agent-n1": {Role: RoleAgent, Node: "n1", Name: "n1"},
		"agent-n2": {Role: RoleAgent, Node: "n2", Name: "n2"},
	}
	for label, p := range seed {
		secret := NewSecret()
		h.tokens[label] = secret
		if _, err := loop.Do(context.Background(), func(e *Engine, now time.Time) (any, error) {
			e.AddToken(now, HashToken(secret), p)
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *harness) do(who, method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		if raw, ok := body.([]byte); ok {
			rd = bytes.NewReader(raw)
		} else {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
	}
	req, _ := http.NewRequest(method, h.srv.URL+path, rd)
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+h.tokens[who])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (h *harness) must(who, method, path string, body any, want int) []byte {
	h.t.Helper()
	code, out := h.do(who, method, path, body)
	if code != want {
		h.t.Fatalf("%s %s as %s: %d %s, want %d", method, path, who, code, out, want)
	}
	return out
}

// seedPool: nodes n1 and n2 with 4 slices each, tenants alice (demand 2) and bob (demand 3).
func (h *harness) seedPool() {
	for _, n := range []string{"n1", "n2"} {
		h.must("agent-"+n, "PUT", "/v1/nodes/"+n, inv(2, 2, n), 200)
	}
	h.must("operator", "POST", "/v1/tenants", Tenant{Name: "alice", Demand: 2}, 200)
	h.must("operator", "POST", "/v1/tenants", Tenant{Name: "bob", Demand: 3}, 200)
}

// simAgent runs a simulated agent for node n (4 slices: 2 GPUs × 2) with the node's agent token
// until the test ends; set adjusts it before it starts.
func (h *harness) simAgent(t *testing.T, n string, set func(*SimAgent)) *SimAgent {
	t.Helper()
	a := &SimAgent{Server: h.srv.URL, Token: h.tokens["agent-"+n], Node: n, Inventory: inv(2, 2, n),
		Heartbeat: 100 * time.Millisecond, Client: &http.Client{Timeout: time.Second}}
	if set != nil {
		set(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) // before the harness stops: cleanups run last first
	return a
}

// settleGates stands in for the nodes' agents until the test ends: every 20 ms, each gate
// operation handed to an agent is answered by the node reporting its GPU in the target layout
// (one "exclusive" slice for a GPU run whole), as an agent's gate would.
func (h *harness) settleGates(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = h.loop.Do(ctx, func(e *Engine, now time.Time) (any, error) {
				for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
					n := e.nodes[name]
					inv, changed := n.Inventory, false
					inv.GPUs = slices.Clone(inv.GPUs)
					for _, op := range n.Gates {
						i := slices.IndexFunc(inv.GPUs, func(g GPU) bool { return g.UUID == op.GPU })
						if op.State != GateApplying || i < 0 {
							continue
						}
						l, _ := gpu.ParseLayout(op.Layout)
						g := &inv.GPUs[i]
						g.MIG, g.Slices, changed = op.Layout, []string{}, true
						for _, in := range l {
							g.Slices = append(g.Slices, in.Profile)
						}
						if op.MIGOff {
							g.Slices = []string{"exclusive"}
						}
					}
					if changed {
						if _, err := e.Register(now, name, inv); err != nil {
							return nil, err
						}
					}
				}
				return nil, nil
			})
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}
