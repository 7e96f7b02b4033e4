package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	mu      sync.Mutex
	applied Layout
	contact time.Time // last answer from the server
	fenced  int       // times it stopped its replicas (lease run out or a newer epoch)
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
	if l.Epoch > a.applied.Epoch && len(a.applied.Slices) > 0 {
		a.fenced++
	}
	a.applied = l
}

// expire stops the replicas when the lease ran out without an answer from the server.
func (a *SimAgent) expire(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Lease > 0 && !a.contact.IsZero() && now.Sub(a.contact) > a.Lease && len(a.applied.Slices) > 0 {
		a.applied.Slices = nil
		a.fenced++
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

// report is the agent's inventory for the epoch it runs, with ready standbys.
func (a *SimAgent) report(ready []string) Inventory {
	a.mu.Lock()
	defer a.mu.Unlock()
	inv := a.Inventory
	inv.Ready, inv.Epoch = ready, a.applied.Epoch
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
