package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
)

// ControlPlane is the control plane's agent API as the agent uses it (HTTPControlPlane speaks it
// to `gpupool serve`).
type ControlPlane interface {
	// Report registers the node or reports its GPUs (and ready standbys) again.
	Report(ctx context.Context, r NodeReport) error
	// Heartbeat marks the node alive; ErrNotRegistered means Report first.
	Heartbeat(ctx context.Context) error
	// Desired returns the node's desired layout once its revision passes after, or after wait.
	Desired(ctx context.Context, after uint64, wait time.Duration) (DesiredLayout, error)
}

// ErrNotRegistered is a heartbeat the control plane does not know the node for.
var ErrNotRegistered = errors.New("node not registered")

// ErrFenced is a heartbeat or report the control plane refused because the node was declared
// lost and its epoch moved on: the agent takes the node's layout (which carries the new epoch),
// drops what it held for the old one and reports again.
var ErrFenced = errors.New("node fenced: its epoch moved on")

// ErrRemoved is a report or heartbeat the control plane refused because an operator removed the
// node (410 Gone): the agent reports again once per heartbeat, quietly, until an operator
// re-admits the node.
var ErrRemoved = errors.New("node removed by an operator")

// The wire types are api/v1's, shared with the control plane; these are their names here.
type (
	// NodeReport is what the agent reports: its GPUs, the standby replicas of its layout that
	// run and are ready (the control plane then stops the replicas they replace), and the epoch
	// of the layout it runs.
	NodeReport = v1.NodeReport
	// ReportedGPU is one GPU as the agent reports it: the slice kinds it is cut into now (MIG
	// instance profiles, or "exclusive" for a whole GPU), its MIG layout, and the outcome of the
	// last gate operation the control plane asked of it.
	ReportedGPU = v1.NodeGPU
	// GateOutcome is how the gate ended an attempt of a gate operation (a closed gate note code).
	GateOutcome = v1.GateReport
	// DesiredLayout is what the control plane wants of the node now: the replicas on its slices,
	// the MIG layouts of the GPUs with a gate operation handed to the agent, and the node's epoch.
	DesiredLayout = v1.NodeLayout
	// DesiredSlice is one slice of the node and the replica (grant) that should run on it.
	DesiredSlice = v1.LayoutSlice
	// DesiredGPU is one GPU's desired MIG layout and the operation it belongs to.
	DesiredGPU = v1.GPULayout
)

// outcomeCodes are the gate notes that end an attempt (or say it cannot start now).
var outcomeCodes = map[string]bool{gate.ReasonDone: true, gate.ReasonRolledBack: true,
	gate.ReasonRollbackFailed: true, gate.ReasonCordonFailed: true, gate.ReasonDrainFailed: true,
	gate.ReasonGateCooldown: true, gate.ReasonGateRateLimit: true}

// outcomeFailed reports whether an outcome ended the attempt without the new layout.
func outcomeFailed(o GateOutcome) bool {
	return o.Code != gate.ReasonDone && o.Code != gate.ReasonGateCooldown && o.Code != gate.ReasonGateRateLimit
}

// SetDesired replaces the layouts the control plane wants (GPUs not listed keep what they have)
// and the standby replicas to report ready. The agent does not start engines yet (they come from
// the config), so a standby counts as ready once the agent holds it in its layout.
func (a *Agent) SetDesired(d DesiredLayout) {
	m := map[string]DesiredGPU{}
	for _, g := range d.GPUs {
		m[g.UUID] = g
	}
	var ready []string
	for _, s := range d.Slices {
		if s.Standby && s.Grant != "" {
			ready = append(ready, s.Grant)
		}
	}
	slices.Sort(ready)
	a.mu.Lock()
	a.desired, a.ready, a.epoch, a.heard = m, ready, d.Epoch, true
	a.mu.Unlock()
}

// NoteGate records the gate's outcome notes against the control plane's operation on the GPU;
// the command wires it to the executor's OnNote.
func (a *Agent) NoteGate(n gate.Note) {
	if !outcomeCodes[n.Code] {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.desired[n.GPU]
	if !ok {
		return
	}
	if a.outcomes == nil {
		a.outcomes = map[string]GateOutcome{}
	}
	a.outcomes[n.GPU] = GateOutcome{Op: d.Op, Attempt: d.Attempt, Code: n.Code, Message: n.Message}
}

// Report returns the node's GPUs as of the last poll and its ready standbys, for the control
// plane (nil GPUs before the first poll).
func (a *Agent) Report() NodeReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inventory == nil {
		return NodeReport{}
	}
	out := []ReportedGPU{}
	for _, g := range a.inventory {
		r := ReportedGPU{UUID: g.UUID, Board: g.Board, Slices: []string{}}
		if g.MIG {
			l := g.Instances.Sorted()
			r.MIG = l.String()
			for _, in := range l {
				r.Slices = append(r.Slices, in.Profile)
			}
		} else {
			r.Slices = append(r.Slices, "exclusive")
		}
		if o, ok := a.outcomes[g.UUID]; ok {
			r.Gate = &o
		}
		out = append(out, r)
	}
	return NodeReport{GPUs: out, Ready: slices.Clone(a.ready), Epoch: a.epoch}
}

// controlDesired returns the control plane's desired layout for each GPU, leaving out an attempt
// the gate already ended without success (the control plane decides whether to retry).
func (a *Agent) controlDesired() map[string]gpu.Layout {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]gpu.Layout{}
	for uuid, d := range a.desired {
		if o, ok := a.outcomes[uuid]; ok && o.Op == d.Op && o.Attempt == d.Attempt && outcomeFailed(o) {
			continue
		}
		l, err := gpu.ParseLayout(d.MIG)
		if err != nil {
			a.Log.Warn("control plane layout", "gpu", uuid, "err", err)
			continue
		}
		out[uuid] = l
	}
	return out
}

// modesWanted returns the MIG mode the control plane wants of each GPU it names, for an attempt
// the gate has not ended without success: off for a GPU its plan runs whole (no instance,
// migOff), on for a GPU it cuts into instances; and off again for a GPU whose MIG mode this
// agent turned on for an operation whose attempt then failed.
func (a *Agent) modesWanted() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]bool{}
	for uuid, d := range a.desired {
		if o, ok := a.outcomes[uuid]; ok && o.Op == d.Op && o.Attempt == d.Attempt && outcomeFailed(o) {
			continue
		}
		switch {
		case d.MIG != "":
			out[uuid] = true
		case d.MIGOff:
			out[uuid] = false
		}
	}
	// A GPU whose MIG mode this agent turned on for an operation whose last attempt then ended
	// without its layout (rolled back to no instance) runs whole again, as before, unless the
	// control plane now asks something of it: whether it retries or gives the operation up (and
	// no longer lists the GPU), the mode is rolled back with the layout. The record outlives a
	// restart (migmode.json) where the attempt's outcome does not: a GPU the control plane no
	// longer lists, once it has been heard from, has its mode turned off too. SetMIGMode leaves
	// the mode while an instance is left or the gate is busy (a change resumed from the journal).
	a.loadModeOnLocked()
	for uuid, op := range a.modeOnFor {
		if _, asked := out[uuid]; asked {
			continue
		}
		o, ok := a.outcomes[uuid]
		_, listed := a.desired[uuid]
		if ok && o.Op == op && outcomeFailed(o) || !ok && !listed && a.heard {
			out[uuid] = false
		}
	}
	return out
}

// Link connects an Agent to the control plane: it registers with the GPUs of the agent's polls,
// reports them again when they change (a gate operation's outcome included), heartbeats, and
// follows the desired layout by long-poll. It retries through a restarted or unreachable server.
type Link struct {
	CP    ControlPlane
	Agent *Agent
	// Every is how often the inventory is compared with the last report (default 250ms);
	// Heartbeat how often the node says it is alive when nothing changed (DefaultHeartbeat).
	Every, Heartbeat time.Duration
	// OnLayout, when set, is told of every desired layout received.
	OnLayout func(DesiredLayout)
}

// DefaultHeartbeat is how often a Link heartbeats when nothing changed, unless told otherwise;
// the control plane's node timeout must leave room for more than one.
const DefaultHeartbeat = 5 * time.Second

// Run follows the control plane until ctx ends.
func (l *Link) Run(ctx context.Context) error {
	every, hb := l.Every, l.Heartbeat
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	if hb <= 0 {
		hb = DefaultHeartbeat
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	registered := make(chan struct{})
	wg.Go(func() { l.follow(ctx, registered, hb) })
	var last []byte
	var lastSent, removedAt time.Time // removedAt: when a report was last refused as removed
	once := sync.OnceFunc(func() { close(registered) })
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep := l.Agent.Report()
		raw, _ := json.Marshal(rep)
		switch {
		case rep.GPUs == nil: // no poll yet
		case !removedAt.IsZero() && time.Since(removedAt) < hb:
			// The node was removed: ask again once per heartbeat, not at every tick.
		case !bytes.Equal(raw, last):
			if err := l.CP.Report(ctx, rep); err != nil {
				if errors.Is(err, ErrRemoved) {
					if removedAt.IsZero() {
						l.Agent.Log.Error("the control plane refuses this node: an operator removed it; reporting again once per heartbeat until it is re-admitted", "err", err)
					}
					removedAt = time.Now()
					break
				}
				if errors.Is(err, ErrFenced) {
					// The node is known but fenced: follow its layout, whose new epoch the next
					// report carries.
					once()
				} else {
					l.Agent.Log.Warn("report to control plane", "err", err)
				}
				break
			}
			if !removedAt.IsZero() {
				l.Agent.Log.Info("the control plane takes this node's reports again (re-admitted)")
			}
			last, lastSent, removedAt = raw, time.Now(), time.Time{}
			once()
		case time.Since(lastSent) >= hb:
			err := l.CP.Heartbeat(ctx)
			if errors.Is(err, ErrNotRegistered) || errors.Is(err, ErrFenced) || errors.Is(err, ErrRemoved) {
				last = nil // report again (once fenced, for the epoch of the layout it takes next)
			} else if err != nil {
				l.Agent.Log.Warn("heartbeat", "err", err)
			} else {
				lastSent = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (l *Link) follow(ctx context.Context, registered <-chan struct{}, hb time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-registered:
	}
	var after uint64
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		d, err := l.CP.Desired(ctx, after, 2*hb)
		if err != nil {
			if ctx.Err() == nil {
				l.Agent.Log.Warn("desired layout", "err", err)
				after = 0 // a restarted server may count revisions anew
				sleepCtx(ctx, backoff)
				// Doubling up to a heartbeat: a removed node's layout is not found until it is
				// re-admitted, and a stopped server may be down a while.
				backoff = min(2*backoff, hb)
			}
			continue
		}
		backoff = 200 * time.Millisecond
		if d.Revision != after || after == 0 {
			l.Agent.SetDesired(d)
			if l.OnLayout != nil {
				l.OnLayout(d)
			}
		}
		after = d.Revision
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// HTTPControlPlane is the ControlPlane of `gpupool serve`'s agent API (/v1/nodes/{node}…), with
// an agent (or operator) bearer token.
type HTTPControlPlane struct {
	Server string // base URL, "http://127.0.0.1:8080"
	Token  string
	Node   string
	Client *http.Client // nil: a client with a 10 s timeout beyond the long-poll wait
}

func (h *HTTPControlPlane) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.Server+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+h.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && method == "POST" {
		return ErrNotRegistered
	}
	if resp.StatusCode == http.StatusGone && method != "GET" {
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&p)
		return fmt.Errorf("%s %s: %w: %s", method, path, ErrRemoved, p.Detail)
	}
	if resp.StatusCode == http.StatusConflict && method != "GET" { // a report or heartbeat fenced
		return fmt.Errorf("%s %s: %w", method, path, ErrFenced)
	}
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

func (h *HTTPControlPlane) nodePath() string { return "/v1/nodes/" + url.PathEscape(h.Node) }

// Report registers the node or reports its GPUs (PUT /v1/nodes/{node}).
func (h *HTTPControlPlane) Report(ctx context.Context, r NodeReport) error {
	return h.do(ctx, "PUT", h.nodePath(), r, nil)
}

// Heartbeat marks the node alive (POST /v1/nodes/{node}/heartbeat).
func (h *HTTPControlPlane) Heartbeat(ctx context.Context) error {
	return h.do(ctx, "POST", h.nodePath()+"/heartbeat", nil, nil)
}

// Desired long-polls the node's layout (GET /v1/nodes/{node}/layout?after=REV&wait=D); after 0
// answers at once.
func (h *HTTPControlPlane) Desired(ctx context.Context, after uint64, wait time.Duration) (DesiredLayout, error) {
	path := h.nodePath() + "/layout"
	if after > 0 {
		path += fmt.Sprintf("?after=%d&wait=%s", after, wait)
	}
	var d DesiredLayout
	err := h.do(ctx, "GET", path, nil, &d)
	return d, err
}
