package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// SimAgent is a simulated node agent: it speaks the agent API over HTTP exactly as a real agent
// would (register, heartbeat, long-poll the desired layout) but "applies" a layout by recording
// it: the replicas of its applied layout are the replicas it runs. It is for `serve --demo` and
// tests; the real agent drives NVML and MPS.
//
// It honours fencing: its reports carry the epoch of the layout it runs; a refused report
// (409, the node was lost and its epoch moved on) makes it read its layout, stop every replica of
// the old epoch and report again. With Lease set, it stops its replicas itself once it has not
// reached the server for that long, since the server will have moved them.
type SimAgent struct {
	Server    string // base URL
	Token     string
	Node      string
	Inventory Inventory
	Heartbeat time.Duration
	Client    *http.Client
	// Lease is how long the agent keeps its replicas without reaching the server (0: forever).
	Lease time.Duration
	// Replicas, when set, starts a replica process for every grant of the layout; the agent
	// reports a standby ready only once the replica's health endpoint answers 200, and failed
	// (Inventory.Failed) when it does not within StartupBudget (default 30s; the replica is
	// then stopped). Unset, a standby counts as ready as soon as the agent holds it.
	Replicas      ReplicaRunner
	StartupBudget time.Duration

	mu      sync.Mutex
	applied Layout
	contact time.Time // last answer from the server
	fenced  int       // times it stopped its replicas (lease run out or a newer epoch)
	procs   map[string]*replicaProc
	ctx     context.Context
}

// ReplicaRunner starts the replica of one granted slice and returns the URL of its health
// endpoint (vLLM's GET /health) and how to stop it.
type ReplicaRunner func(ctx context.Context, s LayoutSlice) (health string, stop func(), err error)

// Replica states of a SimAgent.
const (
	replicaStarting = iota
	replicaReady
	replicaFailed
)

type replicaProc struct {
	state   int
	stop    func()
	stopped bool
}

func (r *replicaProc) halt() {
	if !r.stopped && r.stop != nil {
		r.stop()
	}
	r.stopped = true
}

// reconcile starts a replica for every grant of l it does not run and stops those l no longer
// lists; a newer epoch stops them all first. Called with a.mu held.
func (a *SimAgent) reconcile(l Layout, newEpoch bool) {
	if a.Replicas == nil || a.ctx == nil {
		return
	}
	want := map[string]LayoutSlice{}
	for _, s := range l.Slices {
		if s.Grant != "" {
			want[s.Grant] = s
		}
	}
	for id, r := range a.procs {
		if _, ok := want[id]; !ok || newEpoch {
			r.halt()
			delete(a.procs, id)
		}
	}
	if a.procs == nil {
		a.procs = map[string]*replicaProc{}
	}
	for id, s := range want {
		if _, ok := a.procs[id]; !ok {
			r := &replicaProc{}
			a.procs[id] = r
			go a.startReplica(a.ctx, s, r)
		}
	}
}

// startReplica starts one replica and polls its health until it answers 200 (ready) or the
// startup budget runs out (failed, and stopped).
func (a *SimAgent) startReplica(ctx context.Context, s LayoutSlice, r *replicaProc) {
	budget := a.StartupBudget
	if budget <= 0 {
		budget = 30 * time.Second
	}
	deadline := time.Now().Add(budget)
	health, stop, err := a.Replicas(ctx, s)
	a.mu.Lock()
	r.stop = stop
	if r.stopped && stop != nil { // removed while it started
		stop()
	}
	if err != nil {
		r.state = replicaFailed
	}
	a.mu.Unlock()
	if err != nil {
		return
	}
	hc := &http.Client{Timeout: time.Second}
	for {
		a.mu.Lock()
		gone := r.stopped
		a.mu.Unlock()
		if gone || ctx.Err() != nil {
			return
		}
		if req, err := http.NewRequestWithContext(ctx, "GET", health, nil); err == nil {
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					a.mu.Lock()
					r.state = replicaReady
					a.mu.Unlock()
					return
				}
			}
		}
		if time.Now().After(deadline) {
			a.mu.Lock()
			r.state = replicaFailed
			r.halt()
			a.mu.Unlock()
			return
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// readiness returns the standbys of the applied layout whose replicas are healthy, and those
// whose replicas failed.
func (a *SimAgent) readiness() (ready, failed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.applied.Slices {
		if !s.Standby || s.Grant == "" {
			continue
		}
		if r, ok := a.procs[s.Grant]; ok {
			switch r.state {
			case replicaReady:
				ready = append(ready, s.Grant)
			case replicaFailed:
				failed = append(failed, s.Grant)
			}
		}
	}
	return ready, failed
}

// Running returns the grants whose replicas run and are healthy (with Replicas set).
func (a *SimAgent) Running() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id, r := range a.procs {
		if r.state == replicaReady && !r.stopped {
			out = append(out, id)
		}
	}
	return out
}

// Fenced returns how many times the agent stopped every replica it ran: its lease ran out, or a
// layout of a newer epoch arrived.
func (a *SimAgent) Fenced() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fenced
}

// apply makes l the layout the agent runs; a newer epoch stops every replica first.
func (a *SimAgent) apply(l Layout) {
	a.mu.Lock()
	defer a.mu.Unlock()
	newEpoch := l.Epoch > a.applied.Epoch
	if newEpoch && len(a.applied.Slices) > 0 {
		a.fenced++
	}
	a.applied = l
	a.reconcile(l, newEpoch)
}

// expire stops the replicas when the lease ran out without an answer from the server.
func (a *SimAgent) expire(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Lease > 0 && !a.contact.IsZero() && now.Sub(a.contact) > a.Lease && len(a.applied.Slices) > 0 {
		a.applied.Slices = nil
		a.fenced++
		for id, r := range a.procs {
			r.halt()
			delete(a.procs, id)
		}
	}
}

// statusError is an answer of the server other than success.
type statusError struct {
	method, path string
	status       int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: status %d", e.method, e.path, e.status)
}

// SetServer points the agent at another base URL (a restarted server on a new port).
func (a *SimAgent) SetServer(base string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Server = base
}

// Applied returns the last layout the agent applied.
func (a *SimAgent) Applied() Layout {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

func (a *SimAgent) call(ctx context.Context, method, path string, body, out any) error {
	var rd *bytes.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	} else {
		rd = bytes.NewReader(nil)
	}
	a.mu.Lock()
	base := a.Server
	a.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	a.mu.Lock()
	a.contact = time.Now()
	a.mu.Unlock()
	if resp.StatusCode >= 300 {
		return &statusError{method, path, resp.StatusCode}
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// Run registers, then heartbeats and follows the layout until ctx ends; it retries through
// server restarts (re-registering, since a restarted server may have lost nothing but the agent
// cannot know).
func (a *SimAgent) Run(ctx context.Context) {
	hb := a.Heartbeat
	if hb <= 0 {
		hb = time.Second
	}
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		for id, r := range a.procs {
			r.halt()
			delete(a.procs, id)
		}
		a.mu.Unlock()
	}()
	if a.Lease > 0 {
		go func() {
			for sleep(ctx, a.Lease/8) {
				a.expire(time.Now())
			}
		}()
	}
	for ctx.Err() == nil {
		if err := a.call(ctx, "PUT", "/v1/nodes/"+a.Node, a.report(nil), nil); err != nil {
			var se *statusError
			if errors.As(err, &se) && se.status == http.StatusConflict {
				// Fenced: take the node's layout (a newer epoch stops every replica), then
				// report again for that epoch.
				var l Layout
				if a.call(ctx, "GET", "/v1/nodes/"+a.Node+"/layout", nil, &l) == nil {
					a.apply(l)
					continue
				}
			}
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		a.follow(ctx, hb)
	}
}

// report is the agent's inventory for the epoch it runs, with ready and failed standbys.
func (a *SimAgent) report(ready []string, failed ...string) Inventory {
	a.mu.Lock()
	defer a.mu.Unlock()
	inv := a.Inventory
	inv.Ready, inv.Failed, inv.Epoch = ready, failed, a.applied.Epoch
	return inv
}

func (a *SimAgent) follow(ctx context.Context, hb time.Duration) {
	var wg sync.WaitGroup
	fctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		for sleep(fctx, hb) {
			if err := a.call(fctx, "POST", "/v1/nodes/"+a.Node+"/heartbeat", nil, nil); err != nil && fctx.Err() == nil {
				cancel()
				return
			}
		}
	})
	if a.Replicas != nil { // readiness comes from the replicas' health checks
		wg.Go(func() {
			last := ""
			for sleep(fctx, 50*time.Millisecond) {
				ready, failed := a.readiness()
				key := fmt.Sprint(ready, failed)
				if key == last || len(ready)+len(failed) == 0 {
					continue
				}
				if err := a.call(fctx, "PUT", "/v1/nodes/"+a.Node, a.report(ready, failed...), nil); err != nil {
					cancel()
					return
				}
				last = key
			}
		})
	}
	after := uint64(0)
	first := true
	for fctx.Err() == nil {
		path := fmt.Sprintf("/v1/nodes/%s/layout?after=%d&wait=%s", a.Node, after, 2*hb)
		if first {
			path = "/v1/nodes/" + a.Node + "/layout"
		}
		var l Layout
		if err := a.call(fctx, "GET", path, nil, &l); err != nil {
			return
		}
		first = false
		a.apply(l)
		after = l.Revision
		if a.Replicas != nil {
			continue
		}
		// Standbys "run" at once: report them ready so the replicas they replace can stop.
		var ready []string
		for _, s := range l.Slices {
			if s.Standby {
				ready = append(ready, s.Grant)
			}
		}
		if len(ready) > 0 {
			if err := a.call(fctx, "PUT", "/v1/nodes/"+a.Node, a.report(ready), nil); err != nil {
				return
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// SimReplicas is a ReplicaRunner for the demo and tests: each replica is a small HTTP server on
// loopback that answers GET /health with 503 until its startup time (startup(slice), like a
// vLLM engine loading its weights) has passed, then 200. A negative startup never becomes
// healthy.
func SimReplicas(startup func(LayoutSlice) time.Duration) ReplicaRunner {
	return func(_ context.Context, s LayoutSlice) (string, func(), error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, fmt.Errorf("start replica of grant %s: %w", s.Grant, err)
		}
		d := startup(s)
		up := time.Now().Add(d)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
			if d < 0 || time.Now().Before(up) {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
		go srv.Serve(ln)
		return "http://" + ln.Addr().String() + "/health", func() { srv.Close() }, nil
	}
}
