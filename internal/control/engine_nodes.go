package control

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

func checkInventory(node string, inv Inventory) error {
	bad := &InvalidError{}
	if !namePattern.MatchString(node) {
		bad.add("node", "must be 1-63 lower-case letters, digits, '.', '_' or '-' (got %q)", node)
	}
	if len(inv.GPUs) > 64 {
		bad.add("inventory.gpus", "at most 64 GPUs per node (got %d)", len(inv.GPUs))
	}
	seen := map[string]bool{}
	for i, g := range inv.GPUs {
		p := fmt.Sprintf("inventory.gpus[%d]", i)
		if g.UUID == "" || len(g.UUID) > 128 {
			bad.add(p+".uuid", "must be 1-128 characters (got %d)", len(g.UUID))
		} else if seen[g.UUID] {
			bad.add(p+".uuid", "duplicate %q", g.UUID)
		}
		seen[g.UUID] = true
		if len(g.Slices) > 64 {
			bad.add(p+".slices", "at most 64 slices per GPU (got %d)", len(g.Slices))
		}
		for j, k := range g.Slices {
			if k == "" || len(k) > 64 {
				bad.add(fmt.Sprintf("%s.slices[%d]", p, j), "must be 1-64 characters")
			}
		}
	}
	return bad.err()
}

// Register records a node's inventory (a first registration or a new report) and marks it seen.
func (e *Engine) Register(now time.Time, node string, inv Inventory) (Node, error) {
	if err := checkInventory(node, inv); err != nil {
		return Node{}, err
	}
	dup := &InvalidError{conflict: true}
	for i, g := range inv.GPUs {
		if other, ok := e.uuidElsewhere(node, g.UUID); ok {
			dup.add(fmt.Sprintf("inventory.gpus[%d].uuid", i), "GPU %s is reported by node %s (a node that is lost keeps its GPUs until it is removed: gpupool node rm %s)", g.UUID, other, other)
		}
	}
	if err := dup.err(); err != nil {
		return Node{}, fmt.Errorf("register node %s: %w", node, err)
	}
	if r, gone := e.removed[node]; gone {
		return Node{}, fmt.Errorf("register node %s: %w: %s", node, ErrRemoved, r.refusal(node))
	}
	n, ok := e.nodes[node]
	if ok && inv.Epoch != n.Epoch {
		if e.fenced == nil {
			e.fenced = map[string]uint64{}
		}
		if e.fenced[node] != n.Epoch { // one event per node and epoch, however often it reports
			e.fenced[node] = n.Epoch
			e.event(now, Event{Code: CodeNodeFenced, Node: node, Message: fmt.Sprintf("node %s reported for epoch %d, but it is at epoch %d: refused until its agent stops the replicas of the old epoch", node, inv.Epoch, n.Epoch)})
		}
		return Node{}, fmt.Errorf("register node %s: %w: it reports epoch %d, the node is at epoch %d: stop every replica, read the node's layout and report its epoch", node, ErrFenced, inv.Epoch, n.Epoch)
	}
	if !ok {
		n = &Node{Name: node}
		e.nodes[node] = n
		e.event(now, Event{Code: CodeNodeRegistered, Node: node, Message: fmt.Sprintf("node %s registered with %s and %s", node, count(len(inv.GPUs), "GPU"), count(countSlices(inv), "slice"))})
	} else if n.Lost {
		e.event(now, Event{Code: CodeNodeBack, Node: node, Message: fmt.Sprintf("node %s is back with %s", node, count(countSlices(inv), "slice"))})
	}
	if !n.Lost {
		e.removeSlices(n)
	}
	ready, failed := inv.Ready, inv.Failed
	inv.Ready, inv.Failed, inv.Epoch = nil, nil, 0 // a report, not state
	if !ok || n.Lost || fleetOf(n.Inventory) != fleetOf(inv) {
		e.wantReplan(fmt.Sprintf("node %s reports %d GPUs (%s)", node, len(inv.GPUs), fleetOf(inv)))
	}
	n.Inventory, n.LastSeen, n.Lost = inv, now, false
	e.settleGates(now, n)
	e.addSlices(n)
	e.ch.Nodes[node] = true
	e.dirtyNodes[node] = true
	ds, err := e.alloc.setCapacity(now, len(e.slices))
	if err != nil {
		return Node{}, fmt.Errorf("register node %s: %w", node, err)
	}
	e.decide(now, ds)
	for _, id := range failed {
		if sb, ok := e.grants[id]; ok && sb.Replaces != "" && sb.Node == node {
			e.dropGrant(sb)
			e.event(now, Event{Code: CodeStandbyFailed, Tenant: sb.Tenant, Node: node, Grant: id,
				Message: fmt.Sprintf("standby %s of tenant %s on slice %s did not become healthy within node %s's startup budget: stopped; grant %s keeps running and a new standby starts", id, sb.Tenant, sb.Slice, node, sb.Replaces)})
		}
	}
	e.advanceDrains(now, ready)
	if err := e.schedule(now); err != nil {
		return Node{}, fmt.Errorf("register node %s: %w", node, err)
	}
	e.finish()
	return *n, nil
}

// Heartbeat marks a node seen. A lost node's heartbeat is refused (ErrFenced): the node comes
// back by a report for its new epoch, once its agent stopped the replicas of the old one.
func (e *Engine) Heartbeat(now time.Time, node string) error {
	n, ok := e.nodes[node]
	if r, gone := e.removed[node]; !ok && gone {
		return fmt.Errorf("heartbeat of node %s: %w: %s", node, ErrRemoved, r.refusal(node))
	}
	if !ok {
		return fmt.Errorf("heartbeat of node %s: %w: register first", node, ErrNotFound)
	}
	if n.Lost {
		return fmt.Errorf("heartbeat of node %s: %w: the node was lost and is at epoch %d: stop every replica, read the node's layout and report its epoch", node, ErrFenced, n.Epoch)
	}
	n.LastSeen = now
	return nil
}

// fleetOf is a node's GPUs as the planner sees them: boards in order.
func fleetOf(inv Inventory) string {
	var b []byte
	for i, g := range inv.GPUs {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, g.Board...)
	}
	return string(b)
}

func sliceID(node, gpu string, i int) string { return node + "/" + gpu + "/" + strconv.Itoa(i) }

func (e *Engine) addSlices(n *Node) {
	if n.Cordoned {
		return
	}
	e.sliceList, e.planned = nil, nil
	for _, g := range n.Inventory.GPUs {
		if applying(n, g.UUID) { // out of the pool while its gate changes it
			continue
		}
		for i, k := range g.Slices {
			id := sliceID(n.Name, g.UUID, i)
			e.slices[id] = Slice{ID: id, Node: n.Name, GPU: g.UUID, Board: g.Board, Kind: k}
		}
	}
}

func (e *Engine) removeSlices(n *Node) {
	e.sliceList, e.planned = nil, nil
	for _, g := range n.Inventory.GPUs {
		for i := range g.Slices {
			delete(e.slices, sliceID(n.Name, g.UUID, i))
		}
	}
}

// decide maps allocator decisions onto slices, then moves grants whose slice left the pool.
func (e *Engine) decide(now time.Time, ds []decision) {
	for _, d := range ds {
		switch d.kind {
		case decStop:
			gid, ok := e.taskGrant[d.task]
			if !ok {
				continue
			}
			g := e.grants[gid]
			e.dropGrant(g)
			if sb := e.standbyOf(g.ID); sb != nil {
				e.dropGrant(sb)
			}
			delete(e.taskGrant, d.task)
			msg := fmt.Sprintf("grant %s of tenant %s on slice %s stopped: %s (%s)", g.ID, g.Tenant, g.Slice, d.reason, d.text)
			if d.by != "" {
				msg += "; made room for tenant " + d.by
			}
			e.event(now, Event{Code: d.code, Tenant: g.Tenant, Node: g.Node, Grant: g.ID, Message: msg})
		case decGrant:
			if gid, ok := e.taskGrant[d.task]; ok { // a lease renewed or turned steady: nothing moves
				if g := e.grants[gid]; g != nil {
					g.Reason, g.Expires = d.reason, d.expiry // zero when steady
					e.ch.Grants[gid] = true
				}
				continue
			}
			e.grant(now, d)
		case decQueue:
			if e.queued[d.tenant] != d.count {
				e.queued[d.tenant] = d.count
				e.event(now, Event{Code: CodeQueued, Tenant: d.tenant, Message: fmt.Sprintf("tenant %s waits for %d more replicas: %s (%s)", d.tenant, d.count, d.reason, d.text)})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.queued)) {
		if t, ok := e.tenants[name]; ok && (e.granted(name) >= t.Demand || len(e.adapterOf[name]) > 0) {
			delete(e.queued, name)
		} else if want, engine := e.loraDemand(name); !ok && (!engine || !want || e.granted(name) >= 1) {
			delete(e.queued, name)
		}
	}
	e.moveOrphans(now)
}

func (e *Engine) granted(tenant string) int {
	n := 0
	for _, g := range e.grants {
		if g.Tenant == tenant && g.Replaces == "" {
			n++
		}
	}
	return n
}

func (e *Engine) dropGrant(g *Grant) {
	if e.sliceGrant[g.Slice] == g.ID {
		delete(e.sliceGrant, g.Slice)
	}
	delete(e.grants, g.ID)
	e.ch.Grants[g.ID] = false
	e.dirtyNodes[g.Node] = true
}

func (e *Engine) grant(now time.Time, d decision) {
	var g *Grant
	if hs := e.hints[d.tenant]; len(hs) > 0 { // restore: take over a stored grant
		// A lease takes over a stored lease, a steady grant a steady one, where one is left;
		// else any.
		pick := -1
		for i, h := range hs {
			if _, live := e.slices[h.Slice]; live && e.sliceGrant[h.Slice] == "" {
				if pick < 0 || h.Expires.IsZero() == d.expiry.IsZero() && hs[pick].Expires.IsZero() != d.expiry.IsZero() {
					pick = i
				}
			}
		}
		if pick >= 0 {
			g = hs[pick]
			g.Replaces = "" // a standby taken over at restart is the replica now
			e.hints[d.tenant] = slices.Delete(hs, pick, pick+1)
			switch {
			case d.expiry.IsZero(): // steady now
				g.Expires, g.Reason = time.Time{}, d.reason
			case !g.Expires.IsZero() && g.Expires.Before(d.expiry):
				// The lease keeps its term: the rebuilt allocator's fresh one would extend it.
				e.alloc.a.RestoreLeaseExpiry(d.tenant, d.task, g.Expires)
			default:
				g.Expires, g.Reason = d.expiry, d.reason
			}
		}
	}
	if g == nil {
		sl, ok := e.freeSlice(d.tenant)
		if !ok {
			return // cannot happen: the allocator never grants beyond capacity
		}
		e.nextGrant++
		g = &Grant{ID: fmt.Sprintf("g%d", e.nextGrant), Tenant: d.tenant, Slice: sl.ID, Node: sl.Node, Since: now, Reason: d.reason, Expires: d.expiry,
			Limits: e.limitsFor(d.tenant, sl.ID)}
		e.event(now, Event{Code: CodeGranted, Tenant: d.tenant, Node: sl.Node, Grant: g.ID,
			Message: fmt.Sprintf("tenant %s granted slice %s (%s on %s) as %s: %s (%s)", d.tenant, sl.ID, sl.Kind, sl.Board, g.ID, d.reason, d.text)})
	}
	e.grants[g.ID] = g
	e.sliceGrant[g.Slice] = g.ID
	e.taskGrant[d.task] = g.ID
	e.ch.Grants[g.ID] = true
	e.dirtyNodes[g.Node] = true
}

// freeSlice picks a free slice. With a plan applied: one the plan places a replica of the tenant
// on (its node, GPU and slice kind) first, then one the plan leaves to nobody, then any. Among
// equals: on a node where the tenant already runs if possible, else the first free one by id, so
// choices are deterministic.
func (e *Engine) freeSlice(tenant string) (Slice, bool) {
	return e.freeSliceWhere(tenant, nil)
}

// freeSliceWhere is freeSlice among the slices ok accepts (all when ok is nil).
func (e *Engine) freeSliceWhere(tenant string, ok func(Slice) bool) (Slice, bool) {
	onNode := map[string]bool{}
	for _, g := range e.grants {
		if g.Tenant == tenant {
			onNode[g.Node] = true
		}
	}
	var planned map[string]plannedSlot
	if e.plan != nil {
		planned = e.placement()
	}
	rank := func(id string) int { // 0 planned for the tenant, 1 planned for nobody, 2 for another
		p, ok := planned[id]
		switch {
		case !ok:
			return 1
		case p.tenant == tenant:
			return 0
		}
		return 2
	}
	var best Slice
	found, bestLocal, bestRank := false, false, 3
	for id, s := range e.slices {
		if e.sliceGrant[id] != "" || ok != nil && !ok(s) {
			continue
		}
		local, r := onNode[s.Node], rank(id)
		if !found || r < bestRank || r == bestRank && ((local && !bestLocal) || (local == bestLocal && id < best.ID)) {
			best, found, bestLocal, bestRank = s, true, local, r
		}
	}
	return best, found
}

// moveOrphans puts grants whose slice left the pool onto free slices.
func (e *Engine) moveOrphans(now time.Time) {
	var orphans []string
	for id, g := range e.grants {
		if _, ok := e.slices[g.Slice]; !ok && (g.Replaces != "" || !e.drainingSlice(g.Slice)) {
			orphans = append(orphans, id) // a draining GPU's replicas wait for their standbys
		}
	}
	slices.Sort(orphans) // deterministic moves
	for _, id := range orphans {
		g := e.grants[id]
		if _, ok := e.slices[g.Slice]; ok {
			continue
		}
		if sb := e.standbyOf(id); sb != nil && g.Replaces == "" {
			// Its standby already runs elsewhere (a drain that cannot finish now: the node was
			// lost): the standby is the replica from now on.
			e.promote(now, sb, "slice "+g.Slice+" left the pool before the standby was ready")
			continue
		}
		sl, ok := e.freeSlice(g.Tenant)
		if !ok {
			continue
		}
		if e.sliceGrant[g.Slice] == g.ID {
			delete(e.sliceGrant, g.Slice)
		}
		e.dirtyNodes[g.Node] = true
		e.event(now, Event{Code: CodeMoved, Tenant: g.Tenant, Node: sl.Node, Grant: g.ID,
			Message: fmt.Sprintf("grant %s of tenant %s moved from slice %s (gone) to %s", g.ID, g.Tenant, g.Slice, sl.ID)})
		g.Slice, g.Node, g.Limits = sl.ID, sl.Node, e.limitsFor(g.Tenant, sl.ID)
		e.sliceGrant[sl.ID] = g.ID
		e.ch.Grants[g.ID] = true
		e.dirtyNodes[g.Node] = true
	}
}

// Cordon takes a node's slices out of the pool (on) or brings them back (off). Its replicas move
// to free slices elsewhere, or the allocator trims them when the pool is too small.
func (e *Engine) Cordon(now time.Time, node string, on bool) (Node, error) {
	n, ok := e.nodes[node]
	if !ok {
		return Node{}, fmt.Errorf("cordon node %s: %w", node, ErrNotFound)
	}
	if n.Cordoned == on {
		return *n, nil
	}
	if on {
		if !n.Lost {
			e.removeSlices(n)
		}
		n.Cordoned, n.CordonedSince = true, now
		e.event(now, Event{Code: CodeNodeCordoned, Node: node, Message: fmt.Sprintf("node %s cordoned: %s the pool; its replicas run until their standbys elsewhere are ready", node, its(countSlices(n.Inventory), "leave", "leaves"))})
	} else {
		n.Cordoned, n.CordonedSince = false, time.Time{}
		if !n.Lost {
			e.addSlices(n)
		}
		e.event(now, Event{Code: CodeNodeUncordoned, Node: node, Message: fmt.Sprintf("node %s uncordoned: %s to the pool", node, its(countSlices(n.Inventory), "return", "returns"))})
	}
	e.ch.Nodes[node] = true
	e.dirtyNodes[node] = true
	ds, err := e.alloc.setCapacity(now, len(e.slices))
	if err != nil {
		return Node{}, fmt.Errorf("cordon node %s: %w", node, err)
	}
	e.decide(now, ds)
	e.dropStaleStandbys(now)
	if err := e.schedule(now); err != nil {
		return Node{}, fmt.Errorf("cordon node %s: %w", node, err)
	}
	e.finish()
	return *n, nil
}

// RemoveNode forgets a node for good: its record, its gate operations (given up) and its
// given-up targets. A node that may still run replicas is refused (a conflict): it must be lost,
// or cordoned, and no grant (replica or standby) may be left on it; a cordoned node's replicas
// leave once their standbys elsewhere are ready. It leaves a tombstone (Removal): its agent's
// reports and heartbeats are refused (ErrRemoved) until AdmitNode; tokens are not touched.
func (e *Engine) RemoveNode(now time.Time, node string) error {
	n, ok := e.nodes[node]
	if !ok {
		return fmt.Errorf("remove node %s: %w", node, ErrNotFound)
	}
	if !n.Lost && !n.Cordoned {
		return fmt.Errorf("remove node %s: %w", node, &InvalidError{conflict: true, Fields: []FieldError{{Path: "node",
			Message: fmt.Sprintf("node %s is live and not cordoned: cordon it first (its replicas move), or wait until it is lost", node)}}})
	}
	var left []string
	for _, id := range slices.Sorted(maps.Keys(e.grants)) {
		if e.grants[id].Node == node {
			left = append(left, id)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("remove node %s: %w", node, &InvalidError{conflict: true, Fields: []FieldError{{Path: "node",
			Message: fmt.Sprintf("grants %v still run on node %s: wait until they have moved (their standbys become ready, or the drain timeout passes)", left, node)}}})
	}
	if !n.Lost {
		e.removeSlices(n)
	}
	for _, op := range n.Gates {
		e.event(now, Event{Code: CodeGateGaveUp, Node: node, Message: fmt.Sprintf("gate operation %d on GPU %s (%s) given up: node %s was removed", op.ID, op.GPU, op.State, node)})
	}
	delete(e.nodes, node)
	if e.removed == nil {
		e.removed = map[string]Removal{}
	}
	e.removed[node] = Removal{At: now, GPUs: len(n.Inventory.GPUs)}
	e.ch.Removed[node] = true
	delete(e.fenced, node)
	delete(e.dirtyNodes, node)
	e.ch.Nodes[node] = false
	e.wantReplan("node " + node + " removed")
	state := "cordoned"
	if n.Lost {
		state = "lost"
	}
	e.event(now, Event{Code: CodeNodeRemoved, Node: node, Message: fmt.Sprintf("node %s (%s, %d GPUs, %d gate operations) removed by an operator; its agent's reports are refused (410) until an operator re-admits it (gpupool node admit %s)", node, state, len(n.Inventory.GPUs), len(n.Gates), node)})
	ds, err := e.alloc.setCapacity(now, len(e.slices))
	if err != nil {
		return fmt.Errorf("remove node %s: %w", node, err)
	}
	e.decide(now, ds)
	if err := e.schedule(now); err != nil {
		return fmt.Errorf("remove node %s: %w", node, err)
	}
	e.finish()
	return nil
}

// Removal is the tombstone of a node an operator removed: when, and how many GPUs it had.
type Removal struct {
	At   time.Time `json:"at"`
	GPUs int       `json:"gpus"`
}

func (r Removal) refusal(node string) string {
	return fmt.Sprintf("node %s was removed by an operator at %s; its agent is refused until an operator re-admits the node (POST /v1/nodes/%s/admit, gpupool node admit %s)",
		node, r.At.UTC().Format(time.RFC3339), node, node)
}

// AdmitNode lifts a removed node's tombstone: its agent's next report registers it as a new node
// (epoch 0, re-planned as any new node). A node that was not removed is not found.
func (e *Engine) AdmitNode(now time.Time, node string) error {
	r, ok := e.removed[node]
	if !ok {
		return fmt.Errorf("admit node %s: %w: it was not removed", node, ErrNotFound)
	}
	delete(e.removed, node)
	e.ch.Removed[node] = false
	e.event(now, Event{Code: CodeNodeAdmitted, Node: node, Message: fmt.Sprintf("node %s (removed at %s) re-admitted by an operator: its agent's next report registers it as a new node", node, r.At.UTC().Format(time.RFC3339))})
	e.finish()
	return nil
}

// checkReport checks what an agent reports about its GPUs against the catalog, and makes each
// board name canonical: a board the catalog knows (by name, alias or NVML product name), a MIG
// layout that parses and is legal on the board, slices that are the layout's instances (a GPU
// in MIG mode) or whole-GPU kinds ("exclusive", "mps", "mps-N" with N in 1..100, "timeslice"; a
// GPU reported without a layout may also list the board's MIG profiles). The Kubernetes
// admission path registers devices in its own engine and maps their product label to a catalog
// board itself (internal/k8s productBoard).
func checkReport(inv *Inventory) error {
	bad := &InvalidError{}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		p := fmt.Sprintf("inventory.gpus[%d]", i)
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			names := []string{}
			for _, b := range gpu.Boards() {
				names = append(names, b.Name)
			}
			bad.add(p+".board", "unknown board %q: give a catalog name, alias or NVML product name (one of %s)", g.Board, strings.Join(names, ", "))
			continue
		}
		g.Board = b.Name
		var layout gpu.Layout
		if g.MIG != "" {
			l, err := gpu.ParseLayout(g.MIG)
			switch {
			case err != nil:
				bad.add(p+".mig", "%v", err)
				continue
			case !b.MIGCapable():
				bad.add(p+".mig", "board %s has no MIG profiles, but a layout %q is reported", b.Name, g.MIG)
				continue
			}
			if err := b.Validate(l); err != nil {
				bad.add(p+".mig", "%v", err)
				continue
			}
			layout = l
		}
		if layout != nil {
			want := map[string]int{}
			for _, in := range layout {
				want[in.Profile]++
			}
			got := map[string]int{}
			for _, k := range g.Slices {
				got[k]++
			}
			if !maps.Equal(want, got) {
				bad.add(p+".slices", "must be the instances of layout %q, one slice each (got %q)", g.MIG, g.Slices)
			}
			continue
		}
		for j, k := range g.Slices {
			if !wholeKind(k) && !(b.MIGCapable() && slices.Contains(b.ProfileNames(), k)) {
				bad.add(fmt.Sprintf("%s.slices[%d]", p, j), "unknown slice kind %q on board %s: exclusive, mps, mps-N (N in 1..100), timeslice, or one of the board's MIG profiles", k, b.Name)
			}
		}
	}
	return bad.err()
}

func wholeKind(k string) bool {
	switch k {
	case "exclusive", "mps", "timeslice":
		return true
	}
	if n, ok := strings.CutPrefix(k, "mps-"); ok {
		v, err := strconv.Atoi(n)
		return err == nil && v >= 1 && v <= 100 && strconv.Itoa(v) == n
	}
	return false
}

// uuidElsewhere returns the node, other than node, that reports a GPU UUID.
func (e *Engine) uuidElsewhere(node, uuid string) (string, bool) {
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		if name == node {
			continue
		}
		for _, g := range e.nodes[name].Inventory.GPUs {
			if g.UUID == uuid {
				return name, true
			}
		}
	}
	return "", false
}
