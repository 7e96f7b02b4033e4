package control

import (
	"fmt"

	v1 "gpupool.dev/gpupool/api/v1"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
)

// EngineConfig tunes the Engine.
type EngineConfig struct {
	// NodeTimeout is how long a node may stay silent before its slices leave the pool.
	NodeTimeout time.Duration
	// BurstPoolPercent of the slices is lent only as leases; LeaseDuration is how long a lease
	// lasts (0: no leases). A lease is kept across a restart: the allocator decides again, and a
	// lease it lends the same tenant takes over the stored one (same grant, slice and expiry).
	BurstPoolPercent float64
	LeaseDuration    time.Duration
	// EventsKept bounds the event history: it holds at least this many and at most twice.
	EventsKept int
	// Gate says which GPUs may change their MIG layout now.
	Gate GatePolicy
}

func (c EngineConfig) withDefaults() EngineConfig {
	if c.NodeTimeout <= 0 {
		c.NodeTimeout = 30 * time.Second
	}
	if c.EventsKept <= 0 {
		c.EventsKept = 1000
	}
	return c
}

// Engine owns the pool state. It is single-threaded and does no IO: every method takes the time
// as an argument, and what changed is collected for the caller to persist (Take).
type Engine struct {
	cfg        EngineConfig
	alloc      *allocator
	tenants    map[string]*Tenant
	nodes      map[string]*Node
	slices     map[string]Slice  // live slices (of nodes not lost or cordoned)
	sliceList  []Slice           // slices sorted by id; nil when they changed (views share it)
	costs      planCosts         // the applied plan's cost per tenant, computed once per plan
	sliceGrant map[string]string // slice → grant id
	grants     map[string]*Grant
	taskGrant  map[uint64]string
	hints      map[string][]*Grant // restored grants waiting to be matched, per tenant
	queued     map[string]int
	tokens     map[string]TokenRecord // token hash → principal (replaced, never mutated)
	events     []Event
	nextGrant  uint64
	nextEvent  uint64
	ch         Changes
	dirtyNodes map[string]bool
	plan       *v1.Plan // the last plan applied (in memory only), the base of the next re-plan
	pool       *v1.Pool // the Pool document of the last plan applied (in memory only)
	replan     Replan
	fenced     map[string]uint64 // node → the epoch a refused report was last recorded for
	// removed holds the nodes an operator removed: their agents' reports and heartbeats are
	// refused (ErrRemoved) until an operator re-admits them (AdmitNode).
	removed map[string]Removal
	// planned maps live slices to the applied plan's replicas (placement); nil when stale.
	planned map[string]plannedSlot
	// lora holds the applied plan's shared LoRA engines by name, adapterOf the engines of each
	// adapter tenant, loraShares each registered adapter tenant's parts of its engines (lora.go).
	lora       map[string]*loraEngine
	adapterOf  map[string][]string
	loraShares map[string][]LoRAShare
}

// Replan says whether the pool should be planned again: Wanted grows on every demand-rate or
// inventory change once a plan has been applied; Done is the Wanted a re-plan last answered.
type Replan struct {
	Wanted, Done uint64
	Why          string
}

// wantReplan asks for a re-plan when a plan is in force.
func (e *Engine) wantReplan(why string) {
	if e.pool == nil {
		return
	}
	e.replan.Wanted++
	e.replan.Why = why
}

// Changes is what a command changed: the records the caller must write (a name present in a map
// with false means deleted).
type Changes struct {
	Tenants map[string]bool
	Grants  map[string]bool
	Nodes   map[string]bool
	Tokens  map[string]bool
	Removed map[string]bool // removed nodes' tombstones (Removal)
	Events  []Event
	Dropped []uint64 // event sequence numbers that fell out of the history
	// Plan says the applied plan (and its Pool document) changed.
	Plan bool
}

func (c *Changes) reset() {
	*c = Changes{Tenants: map[string]bool{}, Grants: map[string]bool{}, Nodes: map[string]bool{}, Tokens: map[string]bool{}, Removed: map[string]bool{}}
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Tenants)+len(c.Grants)+len(c.Nodes)+len(c.Tokens)+len(c.Removed)+len(c.Events)+len(c.Dropped) == 0 && !c.Plan
}

// NewEngine returns an empty engine at now.
func NewEngine(cfg EngineConfig, now time.Time) (*Engine, error) {
	return restoreEngine(cfg, now, State{})
}

// State is what a store holds for an Engine.
type State struct {
	Tenants   []Tenant
	Nodes     []Node
	Grants    []Grant
	Tokens    map[string]TokenRecord
	Removed   map[string]Removal
	Events    []Event
	NextGrant uint64
	NextEvent uint64
	// Plan and Pool are the plan applied last and its Pool document (nil when none was).
	Plan *v1.Plan
	Pool *v1.Pool
}

// restoreEngine rebuilds an engine from stored state: nodes count as just seen (a lost node stays
// lost: it comes back only by a report for its epoch), the allocator
// decides again from what each tenant held (newAllocator), and each new task takes over a stored
// grant of its tenant where one is left (same id, same slice), so a restart moves nothing that
// need not move.
func restoreEngine(cfg EngineConfig, now time.Time, st State) (*Engine, error) {
	e := &Engine{cfg: cfg.withDefaults(), tenants: map[string]*Tenant{}, nodes: map[string]*Node{},
		slices: map[string]Slice{}, sliceGrant: map[string]string{}, grants: map[string]*Grant{},
		taskGrant: map[uint64]string{}, hints: map[string][]*Grant{}, queued: map[string]int{},
		tokens: maps.Clone(st.Tokens), dirtyNodes: map[string]bool{},
		nextGrant: st.NextGrant, nextEvent: st.NextEvent, plan: st.Plan, pool: st.Pool, removed: maps.Clone(st.Removed)}
	if e.tokens == nil {
		e.tokens = map[string]TokenRecord{}
	}
	e.ch.reset()
	e.events = append(e.events, st.Events...)
	for _, t := range st.Tenants {
		e.tenants[t.Name] = &t
	}
	for _, n := range st.Nodes {
		n.LastSeen = now
		e.nodes[n.Name] = &n
		if !n.Lost { // a lost node stays lost (fenced) until its agent reports for its epoch
			e.addSlices(&n)
		}
	}
	for _, g := range st.Grants {
		e.hints[g.Tenant] = append(e.hints[g.Tenant], &g)
	}
	for _, gs := range e.hints {
		sort.Slice(gs, func(i, j int) bool { return gs[i].ID < gs[j].ID })
	}
	e.lora, e.adapterOf = loraEnginesOf(e.plan)
	held := map[string]int{}
	for _, g := range st.Grants {
		if g.Replaces == "" { // a standby is its tenant's replica only once it takes over
			held[g.Tenant]++
		}
	}
	a, ds, err := newAllocator(now, e.cfg, e.allocTenants(), len(e.slices), held)
	if err != nil {
		return nil, fmt.Errorf("restore engine: %w", err)
	}
	e.alloc = a
	if err := e.refreshLoRAShares(now); err != nil {
		return nil, fmt.Errorf("restore engine: %w", err)
	}
	e.decide(now, ds)
	for _, gs := range e.hints { // stored grants no task took over
		for _, g := range gs {
			e.ch.Grants[g.ID] = false
			e.dirtyNodes[g.Node] = true
		}
	}
	e.hints = nil
	e.finish()
	return e, nil
}

// Take returns what changed since the last Take.
func (e *Engine) Take() Changes {
	c := e.ch
	e.ch.reset()
	return c
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

func checkTenant(t Tenant) error {
	inv := &InvalidError{}
	if !namePattern.MatchString(t.Name) {
		inv.add("name", "must be 1-63 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit (got %q)", t.Name)
	}
	if t.Weight < 0 || t.Weight > 1e6 || (t.Weight > 0 && t.Weight < 1e-6) {
		inv.add("weight", "must be 0 (meaning 1) or in [1e-6, 1e6] (got %g)", t.Weight)
	}
	for _, f := range []struct {
		path string
		v    int
	}{{"demand", t.Demand}, {"reservation", t.Reservation}, {"cap", t.Cap}} {
		if f.v < 0 || f.v > 100000 {
			inv.add(f.path, "must be in [0, 100000] (got %d)", f.v)
		}
	}
	if t.RatePerReplica < 0 || t.RatePerReplica > 1e9 {
		inv.add("ratePerReplica", "must be in [0, 1e9] (got %g)", t.RatePerReplica)
	}
	if t.Cap > 0 && t.Reservation > t.Cap {
		inv.add("reservation", "must not exceed cap %d (got %d)", t.Cap, t.Reservation)
	}
	if t.Path != "" {
		for seg := range strings.SplitSeq(t.Path, "/") {
			if seg == "" || strings.IndexFunc(seg, unicode.IsSpace) >= 0 {
				inv.add("path", "must be groups separated by '/', none empty or with a space (got %q)", t.Path)
				break
			}
		}
	}
	return inv.err()
}

// checkTree refuses a tenant whose place in the hierarchy collides with another tenant's: its
// own node (path/name) is a group holding other tenants, or a group on its path is another
// tenant. The error is a conflict with the stored tenants, with the field paths.
func (e *Engine) checkTree(t Tenant) error {
	leaf := t.Name
	if t.Path != "" {
		leaf = t.Path + "/" + t.Name
	}
	inv := &InvalidError{conflict: true}
	for _, name := range slices.Sorted(maps.Keys(e.tenants)) {
		o := e.tenants[name]
		if name == t.Name {
			continue
		}
		oleaf := o.Name
		if o.Path != "" {
			oleaf = o.Path + "/" + o.Name
		}
		switch {
		case o.Path == leaf || strings.HasPrefix(o.Path, leaf+"/"):
			inv.add("name", "%q is a group path: tenant %s is under it", leaf, name)
		case t.Path == oleaf || strings.HasPrefix(t.Path, oleaf+"/"):
			inv.add("path", "%q is under tenant %s, which is not a group", t.Path, name)
		}
	}
	return inv.err()
}

// PutTenant adds a tenant or updates one (its path cannot change).
func (e *Engine) PutTenant(now time.Time, t Tenant) (Tenant, error) {
	if err := checkTenant(t); err != nil {
		return Tenant{}, err
	}
	if err := e.checkTree(t); err != nil {
		return Tenant{}, err
	}
	old, ok := e.tenants[t.Name]
	var ds []decision
	var err error
	if ok {
		if old.Path != t.Path {
			return Tenant{}, &InvalidError{Fields: []FieldError{{Path: "path", Message: fmt.Sprintf("cannot change from %q to %q: remove the tenant and add it again", old.Path, t.Path)}}}
		}
		ds, err = e.alloc.updateTenant(now, e.fairTenant(t))
	} else {
		ds, err = e.alloc.addTenant(now, e.fairTenant(t))
	}
	if err != nil { // the allocator refuses what cannot hold (a reservation beyond the pool)
		return Tenant{}, fmt.Errorf("put tenant %s: %w", t.Name, refusal(err, nil))
	}
	code, msg := CodeTenantAdded, fmt.Sprintf("tenant %s added with demand %d, weight %g", t.Name, t.Demand, t.Weight)
	if ok {
		t.Version = old.Version
		code, msg = CodeTenantUpdated, fmt.Sprintf("tenant %s updated: demand %d, weight %g, reservation %d, cap %d", t.Name, t.Demand, t.Weight, t.Reservation, t.Cap)
	}
	t.Version++
	e.tenants[t.Name] = &t
	e.ch.Tenants[t.Name] = true
	e.event(now, Event{Code: code, Tenant: t.Name, Message: msg})
	e.decide(now, ds)
	if err := e.followLoRA(now, t.Name); err != nil {
		return Tenant{}, fmt.Errorf("put tenant %s: %w", t.Name, err)
	}
	e.finish()
	return t, nil
}

// DeleteTenant removes a tenant and releases its grants.
func (e *Engine) DeleteTenant(now time.Time, name string) error {
	if _, ok := e.tenants[name]; !ok {
		return fmt.Errorf("delete tenant %s: %w", name, ErrNotFound)
	}
	ds, err := e.alloc.removeTenant(now, name)
	if err != nil {
		return fmt.Errorf("delete tenant %s: %w", name, err)
	}
	delete(e.tenants, name)
	delete(e.queued, name)
	e.ch.Tenants[name] = false
	e.event(now, Event{Code: CodeTenantRemoved, Tenant: name, Message: fmt.Sprintf("tenant %s removed", name)})
	e.decide(now, ds)
	if err := e.followLoRA(now, name); err != nil {
		return fmt.Errorf("delete tenant %s: %w", name, err)
	}
	e.finish()
	return nil
}

// SetDemandRate sets a tenant's demand from a request rate: ceil(rate / ratePerReplica) replicas.
func (e *Engine) SetDemandRate(now time.Time, name string, rate float64) (Tenant, error) {
	t, ok := e.tenants[name]
	if !ok {
		return Tenant{}, fmt.Errorf("set demand of tenant %s: %w", name, ErrNotFound)
	}
	if t.RatePerReplica <= 0 {
		return Tenant{}, &InvalidError{Fields: []FieldError{{Path: "rate", Message: fmt.Sprintf("tenant %s has no ratePerReplica: give replicas, or set ratePerReplica first", name)}}}
	}
	if rate < 0 || rate > 1e9 || math.IsNaN(rate) {
		return Tenant{}, &InvalidError{Fields: []FieldError{{Path: "rate", Message: fmt.Sprintf("must be in [0, 1e9] (got %g)", rate)}}}
	}
	q := math.Ceil(rate/t.RatePerReplica - 1e-9)
	if q > 100000 {
		return Tenant{}, &InvalidError{Fields: []FieldError{{Path: "rate", Message: fmt.Sprintf("%g requests/s at %g per replica needs %g replicas, over 100000", rate, t.RatePerReplica, q)}}}
	}
	oldRate := t.Rate
	out, err := e.setDemand(now, name, int(max(q, 0)), "rate")
	if err == nil {
		t.Rate, out.Rate = rate, rate
		err = e.followLoRA(now, name)
	}
	if err == nil && oldRate != rate {
		e.wantReplan(fmt.Sprintf("tenant %s asks %g requests/s", name, rate))
	}
	return out, err
}

// SetDemand changes how many replicas a tenant wants and returns the stored tenant.
func (e *Engine) SetDemand(now time.Time, name string, demand int) (Tenant, error) {
	return e.setDemand(now, name, demand, "replicas")
}

// setDemand is SetDemand for a request whose field (replicas or rate) asked for demand.
func (e *Engine) setDemand(now time.Time, name string, demand int, field string) (Tenant, error) {
	t, ok := e.tenants[name]
	if !ok {
		return Tenant{}, fmt.Errorf("set demand of tenant %s: %w", name, ErrNotFound)
	}
	if demand < 0 || demand > 100000 {
		return Tenant{}, &InvalidError{Fields: []FieldError{{Path: field, Message: fmt.Sprintf("must be in [0, 100000] (got %d)", demand)}}}
	}
	var ds []decision
	if len(e.adapterOf[name]) == 0 { // an adapter tenant's demand goes to its engines (followLoRA)
		var err error
		if ds, err = e.alloc.setDemand(now, name, demand); err != nil {
			return Tenant{}, fmt.Errorf("set demand of tenant %s: %w", name, refusal(err, map[string]string{"demand": field}))
		}
	}
	old := t.Demand
	t.Demand, t.Rate = demand, 0
	t.Version++
	e.ch.Tenants[name] = true
	e.event(now, Event{Code: CodeDemandChanged, Tenant: name, Message: fmt.Sprintf("tenant %s demand %d → %d replicas", name, old, demand)})
	e.decide(now, ds)
	if err := e.followLoRA(now, name); err != nil {
		return Tenant{}, fmt.Errorf("set demand of tenant %s: %w", name, err)
	}
	e.finish()
	return *t, nil
}

// AddToken records a token hash for a principal, created at now.
func (e *Engine) AddToken(now time.Time, hash string, p Principal) {
	e.tokens = maps.Clone(e.tokens)
	e.tokens[hash] = TokenRecord{Principal: p, Created: now}
	e.ch.Tokens[hash] = true
	e.event(now, Event{Code: CodeTokenCreated, Tenant: p.Tenant, Node: p.Node,
		Message: fmt.Sprintf("%s token %q created (id %s)", p.Role, p.Name, TokenID(hash))})
}

// TokenID is the id a token is listed and revoked by: the first 16 hex digits of its hash. The
// hash of a 256-bit random secret gives nothing of the secret away, and 64 bits make two tokens
// with one id unlikely enough that such an id is refused rather than guessed between.
func TokenID(hash string) string { return hash[:min(len(hash), 16)] }

// tokenHash finds the hash of the token with this id.
func (e *Engine) tokenHash(id string) (string, error) {
	var found []string
	for hash := range e.tokens {
		if TokenID(hash) == id {
			found = append(found, hash)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("token %s: %w (list the tokens' ids with GET /v1/tokens)", id, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("token %s: %w: the id names %d tokens", id, ErrConflict, len(found))
}

// RevokeToken deletes the token with this id: the next request with its secret is refused.
// The deletion is persisted as every other change, so the token stays revoked after a restart.
func (e *Engine) RevokeToken(now time.Time, id string) (TokenInfo, error) {
	hash, err := e.tokenHash(id)
	if err != nil {
		return TokenInfo{}, fmt.Errorf("revoke %w", err)
	}
	t := e.tokens[hash]
	e.tokens = maps.Clone(e.tokens)
	delete(e.tokens, hash)
	e.ch.Tokens[hash] = false
	e.event(now, Event{Code: CodeTokenRevoked, Tenant: t.Tenant, Node: t.Node,
		Message: fmt.Sprintf("%s token %q revoked (id %s)", t.Role, t.Name, id)})
	return TokenInfo{ID: id, Principal: t.Principal, Created: t.Created}, nil
}

// Tick is the periodic step: nodes silent past the timeout leave the pool, and the allocator
// re-examines waiting claims.
func (e *Engine) Tick(now time.Time) error {
	lost := false
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		n := e.nodes[name]
		if !n.Lost && now.Sub(n.LastSeen) > e.cfg.NodeTimeout {
			n.Lost, lost = true, true
			n.Epoch++ // fence: what the node runs now is of an old epoch
			e.dirtyNodes[name] = true
			e.wantReplan("node " + name + " lost")
			e.removeSlices(n)
			e.ch.Nodes[name] = true
			msg := fmt.Sprintf("node %s silent for %s (timeout %s): %s the pool and its epoch becomes %d", name, now.Sub(n.LastSeen).Round(time.Millisecond), e.cfg.NodeTimeout, its(countSlices(n.Inventory), "leave", "leaves"), n.Epoch)
			for _, op := range n.Gates {
				if op.State != GateWaiting {
					msg += fmt.Sprintf("; gate operation %d on GPU %s (%s) no longer counts against maxUnavailable: the node's next report settles it, or removing the node drops it", op.ID, op.GPU, op.State)
				}
			}
			e.event(now, Event{Code: CodeNodeLost, Node: name, Message: msg})
		}
	}
	var ds []decision
	var err error
	if lost {
		ds, err = e.alloc.setCapacity(now, len(e.slices))
	} else {
		ds, err = e.alloc.tick(now)
	}
	if err != nil {
		return fmt.Errorf("tick: %w", err)
	}
	e.decide(now, ds)
	if err := e.schedule(now); err != nil {
		return fmt.Errorf("tick: %w", err)
	}
	e.finish()
	return nil
}

func (e *Engine) event(now time.Time, ev Event) {
	e.nextEvent++
	ev.Seq, ev.At = e.nextEvent, now
	e.events = append(e.events, ev)
	e.ch.Events = append(e.ch.Events, ev)
	// Trim in chunks: the history holds between EventsKept and twice that. Views share the
	// backing array (they never read past their own length), so trimming makes a new one.
	if len(e.events) > 2*e.cfg.EventsKept {
		over := len(e.events) - e.cfg.EventsKept
		for _, old := range e.events[:over] {
			e.ch.Dropped = append(e.ch.Dropped, old.Seq)
		}
		e.events = slices.Clone(e.events[over:])
	}
}

// finish bumps the layout revision of every node whose layout changed.
func (e *Engine) finish() {
	for name := range e.dirtyNodes {
		if n, ok := e.nodes[name]; ok {
			n.LayoutRevision++
			e.ch.Nodes[name] = true
		}
	}
	clear(e.dirtyNodes)
}

func countSlices(inv Inventory) int {
	n := 0
	for _, g := range inv.GPUs {
		n += len(g.Slices)
	}
	return n
}
