package control

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// GatePolicy says which GPUs may change their MIG layout now.
type GatePolicy struct {
	// MaxUnavailable is how many GPUs of the pool may be out of it for a change at once
	// (default 1).
	MaxUnavailable int
	// Cooldown is the least time between two changes of one GPU, and the wait before a retry.
	Cooldown time.Duration
	// MaxAttempts is how often a failed change is tried in all before it is given up (default 2).
	MaxAttempts int
	// Window, when its Length is set, is the daily maintenance window (UTC) in which changes may
	// start.
	Window Window
	// DrainTimeout bounds how long a draining GPU waits for its replicas' standbys to be ready;
	// past it, the old replicas stop anyway (default 5 min).
	DrainTimeout time.Duration
}

// Window is a daily time window: Start after midnight UTC, for Length.
type Window struct {
	Start, Length time.Duration
}

// Open reports whether t is inside the window (a zero Length is always open).
func (w Window) Open(t time.Time) bool {
	if w.Length <= 0 || w.Length >= 24*time.Hour {
		return true
	}
	t = t.UTC()
	since := t.Sub(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC))
	off := (since - w.Start + 24*time.Hour) % (24 * time.Hour)
	return off < w.Length
}

func (p GatePolicy) withDefaults() GatePolicy {
	if p.MaxUnavailable <= 0 {
		p.MaxUnavailable = 1
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 2
	}
	if p.DrainTimeout <= 0 {
		p.DrainTimeout = 5 * time.Minute
	}
	return p
}

// gate outcome codes an agent reports that end an attempt without the new layout.
var gateFailures = map[string]bool{"GateRolledBack": true, "GateRollbackFailed": true,
	"GateCordonFailed": true, "GateDrainFailed": true}

// The reasons a gate operation waits.
const (
	waitMaxUnavailable = "GateMaxUnavailable"
	waitCooldown       = "GateCooldown"
	waitWindow         = "GateWindow"
	waitNode           = "GateNodeUnavailable"
)

// normLayout parses a layout and returns its canonical sorted text.
func normLayout(s string) (string, error) {
	l, err := gpu.ParseLayout(s)
	if err != nil {
		return "", err
	}
	return l.Sorted().String(), nil
}

// RequestLayout asks for a GPU's MIG layout to change (a gate operation). It waits until the gate
// policy lets it start; a waiting operation on the same GPU is replaced, an applying one is a
// conflict. An empty layout cancels a waiting operation.
func (e *Engine) RequestLayout(now time.Time, node, gpuID, layout string) (GateOp, error) {
	return e.requestLayout(now, node, gpuID, layout, false)
}

// RequestWhole asks for a GPU run whole (a gate operation with migOff): no MIG instance and MIG
// mode off, for a GPU with instances or one left in MIG mode with none (which no plan's layout
// tells apart from a whole GPU). It waits, replaces and conflicts as RequestLayout does.
func (e *Engine) RequestWhole(now time.Time, node, gpuID string) (GateOp, error) {
	return e.requestLayout(now, node, gpuID, "", true)
}

func (e *Engine) requestLayout(now time.Time, node, gpuID, layout string, migOff bool) (GateOp, error) {
	n, ok := e.nodes[node]
	if !ok {
		return GateOp{}, fmt.Errorf("gate on node %s: %w", node, ErrNotFound)
	}
	var g *GPU
	for i := range n.Inventory.GPUs {
		if n.Inventory.GPUs[i].UUID == gpuID {
			g = &n.Inventory.GPUs[i]
		}
	}
	if g == nil {
		return GateOp{}, fmt.Errorf("gate on node %s: GPU %s: %w", node, gpuID, ErrNotFound)
	}
	i := slices.IndexFunc(n.Gates, func(op GateOp) bool { return op.GPU == gpuID })
	if i >= 0 && n.Gates[i].State != GateWaiting {
		return GateOp{}, fmt.Errorf("gate on GPU %s of node %s: %w", gpuID, node, &InvalidError{conflict: true,
			Fields: []FieldError{{Path: "layout", Message: fmt.Sprintf("operation %d on GPU %s is being applied: wait until it ends", n.Gates[i].ID, gpuID)}}})
	}
	if migOff {
		if g.MIG == "" && len(g.Slices) > 0 {
			return GateOp{}, &InvalidError{Fields: []FieldError{{Path: "migOff", Message: fmt.Sprintf("GPU %s already runs whole (MIG mode off)", gpuID)}}}
		}
		op := e.addGateOp(now, n, *g, "", true, "an operator asks for it")
		return e.scheduled(now, n, op)
	}
	if layout == "" {
		if i < 0 {
			return GateOp{}, fmt.Errorf("cancel gate on GPU %s of node %s: %w: no operation waits", gpuID, node, ErrNotFound)
		}
		op := n.Gates[i]
		n.Gates = slices.Delete(slices.Clone(n.Gates), i, i+1)
		e.ch.Nodes[node] = true
		e.event(now, Event{Code: CodeGateCancelled, Node: node, Message: fmt.Sprintf("gate operation %d on GPU %s cancelled before it started", op.ID, gpuID)})
		return op, nil
	}
	inv := &InvalidError{}
	want, err := normLayout(layout)
	if err != nil {
		inv.add("layout", "%v", err)
	} else if b, err := gpu.Lookup(g.Board); err != nil {
		inv.add("layout", "GPU %s has board %q, which has no MIG profile table: %v", gpuID, g.Board, err)
	} else if l, _ := gpu.ParseLayout(want); b.Validate(l) != nil {
		inv.add("layout", "%v", b.Validate(l))
	}
	if err := inv.err(); err != nil {
		return GateOp{}, err
	}
	if cur, _ := normLayout(g.MIG); cur == want {
		return GateOp{}, &InvalidError{Fields: []FieldError{{Path: "layout", Message: fmt.Sprintf("GPU %s already has layout %q", gpuID, want)}}}
	}
	return e.scheduled(now, n, e.addGateOp(now, n, *g, want, false, ""))
}

// scheduled runs the gate policy after an operator's request and returns the operation as it
// then stands (started, or waiting and why).
func (e *Engine) scheduled(now time.Time, n *Node, op GateOp) (GateOp, error) {
	if err := e.schedule(now); err != nil {
		return GateOp{}, err
	}
	e.finish()
	for _, o := range n.Gates {
		if o.ID == op.ID {
			return o, nil
		}
	}
	return op, nil
}

// addGateOp records a waiting gate operation (replacing a waiting one on the same GPU); migOff
// asks for a GPU run whole (want is then empty).
func (e *Engine) addGateOp(now time.Time, n *Node, g GPU, want string, migOff bool, why string) GateOp {
	msg := fmt.Sprintf("GPU %s of node %s asked to change from %q to %q", g.UUID, n.Name, g.MIG, want)
	if migOff {
		if why == "" {
			why = "the plan runs it whole"
		}
		msg = fmt.Sprintf("GPU %s of node %s asked to change from %q to no MIG instance and MIG mode off: %s", g.UUID, n.Name, g.MIG, why)
	}
	e.event(now, Event{Code: CodeGateRequested, Node: n.Name, Message: msg})
	op := GateOp{ID: e.nextEvent, GPU: g.UUID, Board: g.Board, From: g.MIG, Layout: want, MIGOff: migOff, State: GateWaiting, Since: now}
	gates := slices.Clone(n.Gates)
	if i := slices.IndexFunc(gates, func(o GateOp) bool { return o.GPU == g.UUID }); i >= 0 {
		gates[i] = op
	} else {
		gates = append(gates, op)
	}
	n.Gates = gates
	e.ch.Nodes[n.Name] = true
	return op
}

// ApplyPlan makes the MIG layouts of a plan's GPUs the desired layouts of the nodes: every mig GPU
// whose layout differs from what its agent reports gets a gate operation (the plan's GPU index i
// is the i-th GPU the node's agent reports, in NVML order). A GPU the plan runs whole, and one it
// leaves idle (role idle), whose agent reports MIG instances, or MIG mode on with no instance (no
// slice), gets an operation to no instance with MIG mode off; a canary or burst GPU the plan runs
// nothing on keeps what it has. Nothing
// changes unless every such GPU
// is known, of the plan's board, and not being changed already; the problems are returned at
// once with the plan's field paths (a conflict when every one is a GPU being changed). A GPU
// whose operation already asks for the plan's layout keeps that operation (the same apply again
// answers the same operations; an operator's apply only, not a re-plan). The plan and its pool are kept for the next re-plan.
func (e *Engine) ApplyPlan(now time.Time, pool *v1.Pool, p *v1.Plan) ([]GateOp, error) {
	ops, _, err := e.applyPlan(now, pool, p, false)
	return ops, err
}

// applyPlan is ApplyPlan; a re-plan (replan) leaves out a GPU whose change to the same target
// was given up (Node.GaveUp) and says how many it left out, where an operator's apply asks
// for it again.
func (e *Engine) applyPlan(now time.Time, pool *v1.Pool, p *v1.Plan, replan bool) ([]GateOp, int, error) {
	bad := &InvalidError{}
	type change struct {
		n      *Node
		g      GPU
		want   string
		migOff bool
		idle   bool // the plan leaves the GPU idle: its old instances go, so it is clean and whole
	}
	var cs []change
	type keptOp struct {
		node string
		id   uint64
	}
	var kept []keptOp
	busy, skipped := 0, 0
	for i, pg := range p.GPUs {
		whole := pg.Mode != v1.ModeMIG
		idle := whole && len(pg.Replicas) == 0 && pg.LoRAEngine == ""
		if idle && pg.Role != v1.RoleIdle {
			continue // a canary or burst GPU the plan runs nothing on keeps what it has
		}
		path := fmt.Sprintf("gpus[%d]", i)
		n, ok := e.nodes[pg.Node]
		if !ok {
			bad.add(path+".node", "node %s is not registered", pg.Node)
			continue
		}
		if pg.Index < 0 || pg.Index >= len(n.Inventory.GPUs) {
			bad.add(path+".index", "node %s reports %d GPUs, no GPU %d", pg.Node, len(n.Inventory.GPUs), pg.Index)
			continue
		}
		g := n.Inventory.GPUs[pg.Index]
		if b, err := gpu.Lookup(g.Board); err != nil || b.Name != pg.Board {
			bad.add(path+".board", "node %s reports board %q for GPU %d, the plan has %q", pg.Node, g.Board, pg.Index, pg.Board)
			continue
		}
		l := gpu.Layout{}
		for _, in := range pg.Instances {
			l = append(l, gpu.Instance{Profile: in.Profile, Start: in.Start})
		}
		want := l.Sorted().String() // a GPU run whole: "", no instance left
		// A GPU run whole that reports no instance and no slice is in MIG mode with no instance
		// (a failed change that turned the mode on, a reset): its layout matches, its mode does
		// not, and it gets the operation that turns the mode off.
		if cur, _ := normLayout(g.MIG); cur == want && !(whole && len(g.Slices) == 0) {
			continue
		}
		if i := slices.IndexFunc(n.Gates, func(o GateOp) bool {
			return o.GPU == g.UUID && o.Layout == want && o.MIGOff == whole
		}); i >= 0 && !replan {
			// Already asked for, waiting or under way: the same apply again (a client's retry of
			// an apply whose answer it lost) keeps that operation, its id and its attempts. A
			// re-plan still fails on a GPU being changed, and tries again later.
			kept = append(kept, keptOp{n.Name, n.Gates[i].ID})
			continue
		}
		if applying(n, g.UUID) {
			bad.add(path, "GPU %d of node %s is being changed by another gate operation", pg.Index, pg.Node)
			busy++
			continue
		}
		if k, ok := n.GaveUp[g.UUID]; replan && ok && k == gaveUpKey(want, whole) {
			skipped++ // given up: asked again by an operator, not by every re-plan
			continue
		}
		cs = append(cs, change{n, g, want, whole, idle})
	}
	// A plan whose only problem is a GPU in another gate operation is well-formed but collides
	// with what runs: a conflict (409), as when an operator asks that GPU for a layout.
	bad.conflict = busy > 0 && busy == len(bad.Fields)
	if err := bad.err(); err != nil {
		return nil, 0, err
	}
	var ids []uint64
	for _, c := range cs {
		why := ""
		if c.idle {
			why = "the plan leaves it idle, so its old instances go and it is left whole and clean"
		}
		ids = append(ids, e.addGateOp(now, c.n, c.g, c.want, c.migOff, why).ID)
	}
	e.plan, e.pool, e.planned = p, pool, nil
	e.ch.Plan = true
	ds, err := e.syncLoRA(now)
	if err != nil {
		return nil, 0, err
	}
	e.decide(now, ds)
	if err := e.schedule(now); err != nil {
		return nil, 0, err
	}
	e.finish()
	out := []GateOp{}
	for _, k := range kept { // as it is now (schedule may have started it)
		for _, o := range e.nodes[k.node].Gates {
			if o.ID == k.id {
				out = append(out, o)
			}
		}
	}
	for i, c := range cs { // each operation once, though a node has several
		for _, o := range c.n.Gates {
			if o.ID == ids[i] {
				out = append(out, o)
			}
		}
	}
	return out, skipped, nil
}

// target is what a gate operation asks of its GPU, for events: its layout quoted, or no
// instance with MIG mode off.
func target(op GateOp) string {
	if op.MIGOff {
		return "no MIG instance and MIG mode off"
	}
	return fmt.Sprintf("%q", op.Layout)
}

// gaveUpKey names the target of a gate operation in Node.GaveUp: its layout, or "migOff".
func gaveUpKey(layout string, migOff bool) string {
	if migOff {
		return "migOff"
	}
	return layout
}

// setGaveUp records (key != "") or forgets (key == "") a GPU's given-up target.
func setGaveUp(n *Node, gpuID, key string) {
	if _, ok := n.GaveUp[gpuID]; !ok && key == "" {
		return
	}
	m := maps.Clone(n.GaveUp) // views may hold the old map
	if m == nil {
		m = map[string]string{}
	}
	if key == "" {
		delete(m, gpuID)
	} else {
		m[gpuID] = key
	}
	if len(m) == 0 {
		m = nil
	}
	n.GaveUp = m
}

// Gates returns every unfinished gate operation by node.
func (e *Engine) Gates() map[string][]GateOp {
	out := map[string][]GateOp{}
	for name, n := range e.nodes {
		if len(n.Gates) > 0 {
			out[name] = n.Gates
		}
	}
	return out
}

// applying reports whether a GPU of the node is draining or being changed (its slices are out
// of the pool).
func applying(n *Node, gpuID string) bool {
	for _, op := range n.Gates {
		if op.GPU == gpuID && op.State != GateWaiting {
			return true
		}
	}
	return false
}

// draining reports whether a slice id is on a GPU of the node that drains.
func (e *Engine) drainingSlice(sliceID string) bool {
	node, rest, _ := strings.Cut(sliceID, "/")
	gpuID, _, _ := strings.Cut(rest, "/")
	n, ok := e.nodes[node]
	if !ok {
		return false
	}
	if n.Cordoned && !n.Lost { // a cordoned node's replicas run until their standbys are ready
		return true
	}
	for _, op := range n.Gates {
		if op.GPU == gpuID && op.State == GateDraining {
			return true
		}
	}
	return false
}

// startStandbys starts a standby replica on a free slice for every grant on a draining GPU that
// has none. The allocator counts the old grant, not the standby, and the draining GPU's slices
// are out of its capacity, so a free slice is there for each.
func (e *Engine) startStandbys(now time.Time) {
	has := map[string]bool{}
	for _, g := range e.grants {
		if g.Replaces != "" {
			has[g.Replaces] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(e.grants)) {
		g := e.grants[id]
		if g.Replaces != "" || has[id] || !e.drainingSlice(g.Slice) {
			continue
		}
		// Not onto a GPU whose own change waits, where another free slice exists: the replica
		// would move again when that change starts.
		sl, ok := e.freeSliceWhere(g.Tenant, func(s Slice) bool { return !e.changePending(s) })
		if !ok {
			sl, ok = e.freeSlice(g.Tenant)
		}
		if !ok {
			continue // cannot happen (see above); the drain timeout stops the old one
		}
		e.nextGrant++
		sb := &Grant{ID: fmt.Sprintf("g%d", e.nextGrant), Tenant: g.Tenant, Slice: sl.ID, Node: sl.Node, Since: now, Reason: g.Reason, Replaces: g.ID,
			Limits: e.limitsFor(g.Tenant, sl.ID)}
		e.grants[sb.ID] = sb
		e.sliceGrant[sl.ID] = sb.ID
		e.ch.Grants[sb.ID] = true
		e.dirtyNodes[sl.Node] = true
		e.event(now, Event{Code: CodeMoveStarted, Tenant: g.Tenant, Node: sl.Node, Grant: sb.ID,
			Message: fmt.Sprintf("grant %s of tenant %s leaves draining slice %s: standby %s starts on %s (%s); %s stops once %s is ready", g.ID, g.Tenant, g.Slice, sb.ID, sl.ID, sl.Kind, g.ID, sb.ID)})
	}
}

// promote makes a ready standby the tenant's replica and stops the grant it replaces.
func (e *Engine) promote(now time.Time, sb *Grant, why string) {
	old, ok := e.grants[sb.Replaces]
	sb.Replaces = ""
	e.ch.Grants[sb.ID] = true
	e.dirtyNodes[sb.Node] = true
	if !ok {
		return
	}
	for task, gid := range e.taskGrant {
		if gid == old.ID {
			e.taskGrant[task] = sb.ID
		}
	}
	e.dropGrant(old)
	e.event(now, Event{Code: CodeMoved, Tenant: sb.Tenant, Node: sb.Node, Grant: sb.ID,
		Message: fmt.Sprintf("grant %s of tenant %s moved from slice %s to %s as %s: %s", old.ID, old.Tenant, old.Slice, sb.Slice, sb.ID, why)})
}

// advanceDrains promotes the standbys the node reports ready (and, past the drain timeout, those
// not ready), and hands every draining GPU with no replica left to its agent.
func (e *Engine) advanceDrains(now time.Time, ready []string) {
	p := e.cfg.Gate.withDefaults()
	for _, id := range ready {
		if sb, ok := e.grants[id]; ok && sb.Replaces != "" {
			e.promote(now, sb, "standby reported ready")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		if n.Cordoned && !n.Lost && now.Sub(n.CordonedSince) >= p.DrainTimeout {
			for _, id := range slices.Sorted(maps.Keys(e.grants)) {
				if g := e.grants[id]; g.Replaces == "" && g.Node == name {
					if sb := e.standbyOf(id); sb != nil {
						e.promote(now, sb, fmt.Sprintf("standby not ready %s after node %s was cordoned (the drain timeout)", p.DrainTimeout, name))
					}
				}
			}
		}
		for i := range n.Gates {
			op := n.Gates[i]
			if op.State != GateDraining {
				continue
			}
			left := 0
			for _, id := range slices.Sorted(maps.Keys(e.grants)) {
				g := e.grants[id]
				if g.Replaces == "" && strings.HasPrefix(g.Slice, name+"/"+op.GPU+"/") {
					if now.Sub(op.Since) >= p.DrainTimeout {
						if sb := e.standbyOf(id); sb != nil {
							e.promote(now, sb, fmt.Sprintf("standby not ready after the drain timeout %s", p.DrainTimeout))
							continue
						}
					}
					left++
				}
			}
			if left > 0 {
				continue
			}
			gates := slices.Clone(n.Gates)
			gates[i].State, gates[i].Since = GateApplying, now
			n.Gates = gates
			e.ch.Nodes[name] = true
			e.dirtyNodes[name] = true
			e.event(now, Event{Code: CodeGateStarted, Node: name, Message: fmt.Sprintf("gate operation %d: GPU %s is drained; node %s's agent applies %s (was %q)", op.ID, op.GPU, name, target(op), op.From)})
		}
	}
}

// dropStaleStandbys stops the standbys whose grant no longer drains (its node was uncordoned, or
// its slice is live again): the grant stays where it runs.
func (e *Engine) dropStaleStandbys(now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(e.grants)) {
		sb := e.grants[id]
		if sb.Replaces == "" {
			continue
		}
		old, ok := e.grants[sb.Replaces]
		if !ok {
			continue
		}
		if _, live := e.slices[old.Slice]; live && !e.drainingSlice(old.Slice) {
			e.dropGrant(sb)
			e.event(now, Event{Code: CodeReleased, Tenant: sb.Tenant, Node: sb.Node, Grant: sb.ID,
				Message: fmt.Sprintf("standby %s of grant %s stopped: slice %s is in the pool again, so %s stays", sb.ID, old.ID, old.Slice, old.ID)})
		}
	}
}

func (e *Engine) standbyOf(id string) *Grant {
	for _, g := range e.grants {
		if g.Replaces == id {
			return g
		}
	}
	return nil
}

// schedule starts the waiting gate operations the policy allows, oldest first. Starting one takes
// its GPU's slices out of the pool, so the replicas on them move to free slices elsewhere (or the
// allocator trims them) in the same step, before the node's agent receives the new layout.
func (e *Engine) schedule(now time.Time) error {
	p := e.cfg.Gate.withDefaults()
	busy := 0
	var waiting []*GateOp
	owner := map[*GateOp]*Node{}
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		if len(n.Gates) == 0 {
			continue
		}
		n.Gates = slices.Clone(n.Gates) // views may hold the old slice
		for i := range n.Gates {
			op := &n.Gates[i]
			if op.State != GateWaiting { // draining or applying
				// A lost node's GPUs are out of the pool whatever its operations do: they do not
				// hold the budget. Its agent's report settles them when the node is back.
				if !n.Lost {
					busy++
				}
			} else {
				waiting = append(waiting, op)
				owner[op] = n
			}
		}
	}
	slices.SortFunc(waiting, func(a, b *GateOp) int { return int(a.ID) - int(b.ID) })
	started := false
	for _, op := range waiting {
		n := owner[op]
		why := ""
		switch {
		case n.Lost || n.Cordoned:
			why = waitNode
		case now.Before(op.NotBefore) || now.Sub(n.Changed[op.GPU]) < p.Cooldown && !n.Changed[op.GPU].IsZero():
			why = waitCooldown
		case !p.Window.Open(now):
			why = waitWindow
		case busy >= p.MaxUnavailable:
			why = waitMaxUnavailable
		}
		if why != "" {
			if op.Reason != why {
				op.Reason = why
				e.ch.Nodes[n.Name] = true
				e.event(now, Event{Code: CodeGateWaiting, Node: n.Name, Message: fmt.Sprintf("gate operation %d on GPU %s waits: %s (%d of %d GPUs changing, cooldown %s)", op.ID, op.GPU, why, busy, p.MaxUnavailable, p.Cooldown)})
			}
			continue
		}
		busy++
		started = true
		op.State, op.Reason, op.Attempts, op.Since = GateDraining, "", op.Attempts+1, now
		e.removeSlices(n)
		e.addSlices(n)
		e.ch.Nodes[n.Name] = true
		e.dirtyNodes[n.Name] = true
		e.event(now, Event{Code: CodeGateDraining, Node: n.Name, Message: fmt.Sprintf("gate operation %d (attempt %d of %d) drains GPU %s of node %s: it leaves the pool, its replicas' standbys start elsewhere, then its agent applies %s", op.ID, op.Attempts, p.MaxAttempts, op.GPU, n.Name, target(*op))})
	}
	if started {
		ds, err := e.alloc.setCapacity(now, len(e.slices))
		if err != nil {
			return fmt.Errorf("start gate operations: %w", err)
		}
		e.decide(now, ds)
	}
	e.startStandbys(now)
	e.advanceDrains(now, nil)
	return nil
}

// settleGates ends the node's applying operations that its new inventory answers: the GPU shows
// the target layout (done), or the agent reports a failed attempt for the operation (retried after
// the cooldown, or given up after MaxAttempts; the agent's gate has rolled the GPU back).
func (e *Engine) settleGates(now time.Time, n *Node) {
	if len(n.Gates) == 0 {
		return
	}
	p := e.cfg.Gate.withDefaults()
	byUUID := map[string]GPU{}
	for _, g := range n.Inventory.GPUs {
		byUUID[g.UUID] = g
	}
	var keep []GateOp
	for _, op := range n.Gates {
		g, present := byUUID[op.GPU]
		if op.State != GateApplying {
			keep = append(keep, op)
			continue
		}
		cur, _ := normLayout(g.MIG)
		switch {
		case !present:
			e.event(now, Event{Code: CodeGateGaveUp, Node: n.Name, Message: fmt.Sprintf("gate operation %d given up: GPU %s is no longer reported by node %s", op.ID, op.GPU, n.Name)})
		case cur == op.Layout:
			if n.Changed == nil {
				n.Changed = map[string]time.Time{}
			} else {
				n.Changed = maps.Clone(n.Changed)
			}
			n.Changed[op.GPU] = now
			setGaveUp(n, op.GPU, "")
			to := fmt.Sprintf("%q", op.Layout)
			switch {
			case op.MIGOff && len(g.Slices) > 0:
				to = "no MIG instance, MIG mode off"
			case op.MIGOff:
				to = "no MIG instance, MIG mode still on (the agent could not turn it off; a GPU reset may be needed)"
			}
			e.event(now, Event{Code: CodeGateDone, Node: n.Name, Message: fmt.Sprintf("gate operation %d done: GPU %s changed from %q to %s in %s (attempt %d); %s the pool", op.ID, op.GPU, op.From, to, now.Sub(op.Since).Round(time.Millisecond), op.Attempts, its(len(g.Slices), "rejoin", "rejoins"))})
		case g.Gate != nil && g.Gate.Op == op.ID && g.Gate.Attempt == op.Attempts && gateFailures[g.Gate.Code]:
			e.event(now, Event{Code: CodeGateFailed, Node: n.Name, Message: fmt.Sprintf("gate operation %d attempt %d of %d failed on GPU %s: %s: %s; the GPU keeps %q", op.ID, op.Attempts, p.MaxAttempts, op.GPU, g.Gate.Code, g.Gate.Message, g.MIG)})
			if op.Attempts >= p.MaxAttempts || g.Gate.Code == "GateRollbackFailed" {
				e.event(now, Event{Code: CodeGateGaveUp, Node: n.Name, Message: fmt.Sprintf("gate operation %d given up after %s (%s); ask again once the cause is fixed (a re-plan does not)", op.ID, count(op.Attempts, "attempt"), g.Gate.Code)})
				setGaveUp(n, op.GPU, gaveUpKey(op.Layout, op.MIGOff))
				continue
			}
			op.State, op.Reason, op.NotBefore = GateWaiting, g.Gate.Code, now.Add(p.Cooldown)
			keep = append(keep, op)
		default:
			keep = append(keep, op)
		}
	}
	if len(keep) != len(n.Gates) || !slices.Equal(keep, n.Gates) {
		n.Gates = keep
		e.ch.Nodes[n.Name] = true
		e.dirtyNodes[n.Name] = true
	}
}

// Replanned applies a re-plan made for Replan.Wanted gen (by the loop's planner, off the engine's
// goroutine), or records why it failed, and says whether it applied it. A re-plan the engine
// refuses (it names GPUs gone meanwhile, or a GPU another gate operation is changing) is asked
// again.
func (e *Engine) Replanned(now time.Time, gen uint64, pool *v1.Pool, p *v1.Plan, planErr error) (applied bool) {
	e.replan.Done = max(e.replan.Done, gen)
	why := e.replan.Why
	if planErr == nil {
		ops, skipped, err := e.applyPlan(now, pool, p, true)
		if err == nil {
			msg := fmt.Sprintf("pool %s planned again (%s): %d GPUs, %d gate operations", pool.Metadata.Name, why, len(p.GPUs), len(ops))
			if skipped > 0 {
				msg += fmt.Sprintf(" (%d changes given up before not asked again: an operator asks)", skipped)
			}
			e.event(now, Event{Code: CodeReplanned, Message: msg})
			return true
		}
		planErr = err
		e.replan.Wanted++ // the fleet moved under the planner: try again
	}
	e.event(now, Event{Code: CodeReplanFailed, Message: fmt.Sprintf("re-plan of pool %s (%s) failed: %v", pool.Metadata.Name, why, planErr)})
	e.finish()
	return false
}

// changePending reports whether a slice's GPU has a gate operation that waits to start.
func (e *Engine) changePending(s Slice) bool {
	n, ok := e.nodes[s.Node]
	if !ok {
		return false
	}
	for _, op := range n.Gates {
		if op.GPU == s.GPU && op.State == GateWaiting {
			return true
		}
	}
	return false
}

// count says n of a thing in words: "1 attempt", "3 attempts".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// its says what happens to a node's slices: its(2, "leave", "leaves") is "its 2 slices leave",
// its(1, …) "its one slice leaves", its(0, …) "no slice leaves".
func its(n int, verb, verbOne string) string {
	switch n {
	case 0:
		return "no slice " + verbOne
	case 1:
		return "its one slice " + verbOne
	}
	return fmt.Sprintf("its %d slices %s", n, verb)
}
