package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// SimAgent is a simulated node agent: it speaks the agent API over HTTP exactly as a real agent
// would (register, heartbeat, long-poll the desired layout) but "applies" a layout by recording
// it. It is for `serve --demo` and tests; the real agent drives NVML and MPS.
type SimAgent struct {
	Server    string // base URL
	Token     string
	Node      string
	Inventory Inventory
	Heartbeat time.Duration
	Client    *http.Client

	mu      sync.Mutex
	applied Layout
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
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: status %d", method, path, resp.StatusCode)
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
	for ctx.Err() == nil {
		if err := a.call(ctx, "PUT", "/v1/nodes/"+a.Node, a.Inventory, nil); err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		a.follow(ctx, hb)
	}
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
		a.mu.Lock()
		a.applied = l
		a.mu.Unlock()
		after = l.Revision
		// Standbys "run" at once: report them ready so the replicas they replace can stop.
		var ready []string
		for _, s := range l.Slices {
			if s.Standby {
				ready = append(ready, s.Grant)
			}
		}
		if len(ready) > 0 {
			inv := a.Inventory
			inv.Ready = ready
			if err := a.call(fctx, "PUT", "/v1/nodes/"+a.Node, inv, nil); err != nil {
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
