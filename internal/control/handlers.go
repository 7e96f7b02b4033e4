package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	anyRole      = []Role{RoleOperator, RoleTenant, RoleAgent}
	operatorOnly = []Role{RoleOperator}
	opOrTenant   = []Role{RoleOperator, RoleTenant}
	opOrAgent    = []Role{RoleOperator, RoleAgent}
)

// routes is every authenticated endpoint. Visibility inside a route: an operator sees all; a
// tenant sees only its own tenant's objects (others' are "not found"); an agent only its node's.
var routes = []route{
	{"GET", "/v1/whoami", anyRole, false, hWhoami},
	{"GET", "/v1/pool", anyRole, false, hPool},
	{"GET", "/v1/tenants", opOrTenant, false, hListTenants},
	{"POST", "/v1/tenants", operatorOnly, true, hPutTenant},
	{"GET", "/v1/tenants/{name}", opOrTenant, false, hGetTenant},
	{"PUT", "/v1/tenants/{name}", operatorOnly, true, hPutTenant},
	{"DELETE", "/v1/tenants/{name}", operatorOnly, true, hDeleteTenant},
	{"PUT", "/v1/tenants/{name}/demand", opOrTenant, true, hSetDemand},
	{"GET", "/v1/grants", anyRole, false, hGrants},
	{"GET", "/v1/events", anyRole, false, hEvents},
	{"GET", "/v1/tokens", operatorOnly, false, hListTokens},
	{"POST", "/v1/tokens", operatorOnly, true, hCreateToken},
	{"DELETE", "/v1/tokens/{id}", operatorOnly, true, hRevokeToken},
	{"GET", "/v1/nodes", operatorOnly, false, hNodes},
	{"PUT", "/v1/nodes/{node}", opOrAgent, true, hRegister},
	{"DELETE", "/v1/nodes/{node}", operatorOnly, true, hRemoveNode},
	{"POST", "/v1/nodes/{node}/admit", operatorOnly, true, hAdmitNode},
	{"POST", "/v1/nodes/{node}/heartbeat", opOrAgent, false, hHeartbeat},
	{"GET", "/v1/nodes/{node}/layout", opOrAgent, false, hLayout},
	{"PUT", "/v1/nodes/{node}/cordon", operatorOnly, true, hCordon},
	{"PUT", "/v1/nodes/{node}/gpus/{gpu}/layout", operatorOnly, true, hRequestLayout},
	{"GET", "/v1/gates", operatorOnly, false, hGates},
	{"POST", "/v1/plans/dry-run", operatorOnly, false, hPlanDryRun},
	{"POST", "/v1/plans/apply", operatorOnly, true, hPlanApply},
}

func hWhoami(_ *Server, w http.ResponseWriter, _ *http.Request, p Principal) error {
	return writeJSON(w, 200, p)
}

// PoolSlice is one slice as a principal may see it: another tenant's slice shows as occupied
// without its name.
type PoolSlice struct {
	Slice
	Tenant   string `json:"tenant,omitempty"`
	Occupied bool   `json:"occupied"`
}

// PoolView is the pool map.
type PoolView struct {
	Revision uint64         `json:"revision"`
	Capacity int            `json:"capacity"`
	Slices   []PoolSlice    `json:"slices"`
	Tenants  []TenantStatus `json:"tenants"`
}

func hPool(_ *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	v := r.Context().Value(viewKey{}).(*View)
	owner := map[string]string{}
	for _, g := range v.Grants {
		owner[g.Slice] = g.Tenant
	}
	out := PoolView{Revision: v.Revision, Capacity: v.Capacity, Slices: []PoolSlice{}, Tenants: visibleTenants(v, p)}
	for _, s := range v.Slices {
		if p.Role == RoleAgent && s.Node != p.Node {
			continue
		}
		ps := PoolSlice{Slice: s, Occupied: owner[s.ID] != ""}
		if p.Role != RoleTenant || owner[s.ID] == p.Tenant {
			ps.Tenant = owner[s.ID]
		}
		out.Slices = append(out.Slices, ps)
	}
	return writeJSON(w, 200, out)
}

type viewKey struct{}

func visibleTenants(v *View, p Principal) []TenantStatus {
	out := []TenantStatus{}
	for _, t := range v.Tenants {
		if p.Role == RoleOperator || (p.Role == RoleTenant && t.Name == p.Tenant) {
			out = append(out, t)
		}
	}
	return out
}

func hListTenants(_ *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	v := r.Context().Value(viewKey{}).(*View)
	return writeJSON(w, 200, visibleTenants(v, p))
}

func canSeeTenant(p Principal, name string) bool {
	return p.Role == RoleOperator || (p.Role == RoleTenant && p.Tenant == name)
}

func hGetTenant(_ *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	name := r.PathValue("name")
	if canSeeTenant(p, name) {
		for _, t := range r.Context().Value(viewKey{}).(*View).Tenants {
			if t.Name == name {
				return writeJSON(w, 200, t)
			}
		}
	}
	return errStatus(http.StatusNotFound, "tenant %s not found", name)
}

func hPutTenant(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	var t Tenant
	inv, err := decodeFields(r, &t)
	if err != nil {
		return err
	}
	if name := r.PathValue("name"); name != "" && t.Name != name {
		if t.Name != "" {
			inv.add("name", "must equal the path's tenant %s", strconv.Quote(name))
		}
		t.Name = name
	}
	if err := inv.merge(checkTenant(t)); err != nil {
		return err
	}
	// A version given is a precondition (optimistic concurrency): the write applies only to the
	// tenant at that version; absent or 0 writes whatever is stored.
	want := t.Version
	t.Version = 0
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) {
		if want != 0 {
			var have uint64
			if old, ok := e.tenants[t.Name]; ok {
				have = old.Version
			}
			if have != want {
				return nil, &InvalidError{conflict: true, Fields: []FieldError{{Path: "version",
					Message: fmt.Sprintf("tenant %s is at version %d, not %d: read it again, or leave version out to overwrite", t.Name, have, want)}}}
			}
		}
		return e.PutTenant(now, t)
	})
	if err != nil {
		return err
	}
	return writeJSON(w, 200, v)
}

func hDeleteTenant(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	name := r.PathValue("name")
	_, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return nil, e.DeleteTenant(now, name) })
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// DemandRequest is the body of PUT /v1/tenants/{name}/demand.
// Give exactly one of replicas or a rate (requests/s, turned into replicas by the tenant's
// ratePerReplica). Both are pointers so that 0 is sent when set (0 replicas stops every replica
// of the tenant): a body with neither is refused, never taken as 0.
type DemandRequest struct {
	Replicas *int     `json:"replicas,omitempty"`
	Rate     *float64 `json:"rate,omitempty"`
}

// ReplicasDemand is the body asking for n replicas.
func ReplicasDemand(n int) DemandRequest { return DemandRequest{Replicas: &n} }

// RateDemand is the body asking for the replicas a request rate (requests/s) needs.
func RateDemand(rate float64) DemandRequest { return DemandRequest{Rate: &rate} }

func hSetDemand(s *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	name := r.PathValue("name")
	if !canSeeTenant(p, name) {
		return errStatus(http.StatusNotFound, "tenant %s not found", name)
	}
	var d DemandRequest
	inv, err := decodeFields(r, &d)
	if err != nil {
		return err
	}
	switch {
	case d.Rate != nil && d.Replicas != nil:
		inv.add("rate", "give replicas or rate, not both")
	case d.Rate == nil && d.Replicas == nil && !inv.has("replicas") && !inv.has("rate"):
		inv.add("replicas", "give replicas (0 stops every replica) or rate; an empty body changes nothing")
	}
	if err := inv.err(); err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) {
		if d.Rate != nil {
			return e.SetDemandRate(now, name, *d.Rate)
		}
		return e.SetDemand(now, name, *d.Replicas)
	})
	if err != nil {
		return err
	}
	return writeJSON(w, 200, v)
}

func hGrants(_ *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	out := []Grant{}
	for _, g := range r.Context().Value(viewKey{}).(*View).Grants {
		if p.Role == RoleOperator || (p.Role == RoleTenant && g.Tenant == p.Tenant) || (p.Role == RoleAgent && g.Node == p.Node) {
			out = append(out, g)
		}
	}
	return writeJSON(w, 200, out)
}

// hEvents lists events after ?after=SEQ. A tenant sees its own tenant's events; an agent its node's
// events that name no tenant.
func hEvents(_ *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	after, err := queryAfter(r)
	if err != nil {
		return err
	}
	out := []Event{}
	for _, ev := range r.Context().Value(viewKey{}).(*View).Events {
		if ev.Seq <= after {
			continue
		}
		if p.Role == RoleOperator || (p.Role == RoleTenant && ev.Tenant == p.Tenant) ||
			(p.Role == RoleAgent && ev.Node == p.Node && ev.Tenant == "") {
			out = append(out, ev)
		}
	}
	return writeJSON(w, 200, out)
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	Role   Role   `json:"role"`
	Tenant string `json:"tenant,omitempty"`
	Node   string `json:"node,omitempty"`
	Name   string `json:"name,omitempty"`
}

// TokenResponse carries the secret, shown once, and the id the token is listed and revoked by.
type TokenResponse struct {
	ID string `json:"id"`
	Principal
	Token string `json:"token"`
}

// NewSecret returns a random token secret.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "gp_" + hex.EncodeToString(b)
}

func checkTokenRequest(t TokenRequest) error {
	bad := &InvalidError{}
	name := func(path, what, v string) {
		switch {
		case v == "":
			bad.add(path, "a %s token needs a %s name", t.Role, what)
		case !namePattern.MatchString(v):
			bad.add(path, "must be 1-63 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit (got %q)", v)
		}
	}
	switch t.Role {
	case RoleOperator:
	case RoleTenant:
		name("tenant", "tenant", t.Tenant)
	case RoleAgent:
		name("node", "node", t.Node)
	default:
		bad.add("role", "must be operator, tenant or agent (got %q)", t.Role)
	}
	// A token names only what its role acts for: a tenant's token no node, an agent's no tenant.
	if t.Tenant != "" && (t.Role == RoleOperator || t.Role == RoleAgent) {
		bad.add("tenant", "only a tenant token names a tenant (role %s)", t.Role)
	}
	if t.Node != "" && (t.Role == RoleOperator || t.Role == RoleTenant) {
		bad.add("node", "only an agent token names a node (role %s)", t.Role)
	}
	if len(t.Name) > 128 {
		bad.add("name", "at most 128 characters (got %d)", len(t.Name))
	}
	return bad.err()
}

func hCreateToken(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	var t TokenRequest
	inv, err := decodeFields(r, &t)
	if err != nil {
		return err
	}
	if err := inv.merge(checkTokenRequest(t)); err != nil {
		return err
	}
	secret := NewSecret()
	hash := HashToken(secret)
	p := Principal{Role: t.Role, Tenant: t.Tenant, Node: t.Node, Name: t.Name}
	if _, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) {
		e.AddToken(now, hash, p)
		return nil, nil
	}); err != nil {
		return err
	}
	return writeJSON(w, 201, TokenResponse{ID: TokenID(hash), Principal: p, Token: secret})
}

// hListTokens lists every token, oldest first: id, principal, creation time; never a secret or
// a hash.
func hListTokens(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	v := r.Context().Value(viewKey{}).(*View)
	out := make([]TokenInfo, 0, len(v.Tokens))
	for hash, t := range v.Tokens {
		out = append(out, TokenInfo{ID: TokenID(hash), Principal: t.Principal, Created: t.Created, TokenFile: hash == s.tokenFile})
	}
	slices.SortFunc(out, func(a, b TokenInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return writeJSON(w, 200, out)
}

// hRevokeToken revokes a token by its id and answers what it revoked. It refuses (409) the
// token the request itself is authenticated with, so that an operator does not shut itself out
// by mistake, and the token of the server's token file, which the server would store again at
// its next start.
func hRevokeToken(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	id := r.PathValue("id")
	own := HashToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	var hash string
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) {
		var err error
		if hash, err = e.tokenHash(id); err != nil {
			return nil, fmt.Errorf("revoke %w", err)
		}
		switch hash {
		case own:
			return nil, fmt.Errorf("revoke token %s: %w: it is the token this request is authenticated with; revoke it with another operator token", id, ErrConflict)
		case s.tokenFile:
			return nil, fmt.Errorf("revoke token %s: %w: it is the operator token of the server's token file, which the server stores again at every start; "+
				"write a new secret to that file (or give another --token-file), restart the server, then revoke this one", id, ErrConflict)
		}
		return e.RevokeToken(now, id)
	})
	if err != nil {
		return err
	}
	s.forget(hash)
	return writeJSON(w, 200, v)
}

func hNodes(_ *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	ns := r.Context().Value(viewKey{}).(*View).Nodes
	if ns == nil {
		ns = []Node{} // an empty list, not null, once the last node is removed
	}
	return writeJSON(w, 200, ns)
}

func ownNode(p Principal, node string) error {
	if p.Role == RoleAgent && p.Node != node {
		return errStatus(http.StatusNotFound, "node %s not found", node)
	}
	return nil
}

func hRegister(s *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	node := r.PathValue("node")
	if err := ownNode(p, node); err != nil {
		return err
	}
	var in Inventory
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	if err := checkReport(&in); err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return e.Register(now, node, in) })
	if err != nil {
		return err
	}
	return writeJSON(w, 200, v)
}

func hRemoveNode(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	node := r.PathValue("node")
	if _, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return nil, e.RemoveNode(now, node) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func hAdmitNode(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	node := r.PathValue("node")
	if _, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return nil, e.AdmitNode(now, node) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func hHeartbeat(s *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	node := r.PathValue("node")
	if err := ownNode(p, node); err != nil {
		return err
	}
	if _, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return nil, e.Heartbeat(now, node) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// hLayout returns the node's desired layout; with ?after=REV it waits (up to ?wait=, bounded by
// the server's long-poll limit) until the layout's revision is past REV.
func hLayout(s *Server, w http.ResponseWriter, r *http.Request, p Principal) error {
	node := r.PathValue("node")
	if err := ownNode(p, node); err != nil {
		return err
	}
	after, err := queryAfter(r)
	if err != nil {
		return err
	}
	wait := s.cfg.LongPoll
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 {
			return &InvalidError{Fields: []FieldError{{Path: "wait", Message: fmt.Sprintf("must be a duration of 0 or more, e.g. 10s (got %q)", q)}}}
		}
		wait = min(wait, d)
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for {
		changed := s.loop.Changed()
		l, ok := s.loop.View().Layout(node)
		if !ok {
			return errStatus(http.StatusNotFound, "node %s not found", node)
		}
		if l.Revision > after || r.URL.Query().Get("after") == "" {
			return writeJSON(w, 200, l)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return writeJSON(w, 200, l)
		}
	}
}

// CordonRequest is the body of PUT /v1/nodes/{node}/cordon.
type CordonRequest struct {
	Cordoned bool `json:"cordoned"`
}

func hCordon(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	node := r.PathValue("node")
	var c CordonRequest
	if err := decodeBody(r, &c); err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return e.Cordon(now, node, c.Cordoned) })
	if err != nil {
		return err
	}
	return writeJSON(w, 200, v)
}

// LayoutRequest is the body of PUT /v1/nodes/{node}/gpus/{gpu}/layout: the GPU's new MIG layout
// ("3g.40gb@0 3g.40gb@4"); empty cancels a waiting gate operation. MIGOff, with no layout, asks
// for the GPU run whole: no instance, MIG mode off (also for a GPU left in MIG mode with none).
type LayoutRequest struct {
	Layout string `json:"layout"`
	MIGOff bool   `json:"migOff,omitempty"`
}

func hRequestLayout(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	node, gpuID := r.PathValue("node"), r.PathValue("gpu")
	var lr LayoutRequest
	if err := decodeBody(r, &lr); err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) {
		if lr.MIGOff {
			if lr.Layout != "" {
				return GateOp{}, &InvalidError{Fields: []FieldError{{Path: "migOff", Message: fmt.Sprintf("asks for no MIG instance; layout %q asks for instances: give one or the other", lr.Layout)}}}
			}
			return e.RequestWhole(now, node, gpuID)
		}
		return e.RequestLayout(now, node, gpuID, lr.Layout)
	})
	if err != nil {
		return err
	}
	return writeJSON(w, 200, v)
}

// NodeGate is a gate operation with its node.
type NodeGate struct {
	Node string `json:"node"`
	GateOp
}

func hGates(_ *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	out := []NodeGate{}
	for _, n := range r.Context().Value(viewKey{}).(*View).Nodes {
		for _, op := range n.Gates {
			out = append(out, NodeGate{Node: n.Name, GateOp: op})
		}
	}
	return writeJSON(w, 200, out)
}

// queryAfter is the ?after= sequence or revision of a request: 0 when absent, a 400 naming
// "after" when it is not a number.
func queryAfter(r *http.Request) (uint64, error) {
	q := r.URL.Query().Get("after")
	if q == "" {
		return 0, nil
	}
	after, err := strconv.ParseUint(q, 10, 64)
	if err != nil {
		return 0, &InvalidError{Fields: []FieldError{{Path: "after", Message: fmt.Sprintf("must be a whole number of 0 or more (got %q)", q)}}}
	}
	return after, nil
}
