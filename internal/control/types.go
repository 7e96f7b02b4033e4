package control

import "time"

// Role is what a bearer token may do.
type Role string

// The roles. An operator sees and changes everything; a tenant sees and changes only its own
// tenant (demand, grants, events); an agent speaks for one node.
const (
	RoleOperator Role = "operator"
	RoleTenant   Role = "tenant"
	RoleAgent    Role = "agent"
)

// Principal is who a request acts for.
type Principal struct {
	Role   Role   `json:"role"`
	Tenant string `json:"tenant,omitempty"` // RoleTenant only
	Node   string `json:"node,omitempty"`   // RoleAgent only
	Name   string `json:"name,omitempty"`   // a label for the audit log
}

// Tenant is one tenant of the pool as the control plane holds it.
type Tenant struct {
	Name string `json:"name"`
	// Path is the tenant's place in the hierarchy ("org/team"); empty puts it under the root.
	Path   string  `json:"path,omitempty"`
	Weight float64 `json:"weight,omitempty"`
	// Demand is how many replicas (one slice each) the tenant wants.
	Demand      int `json:"demand"`
	Reservation int `json:"reservation,omitempty"`
	Cap         int `json:"cap,omitempty"`
	// RatePerReplica is the request rate (requests/s) one replica serves within its SLO, e.g. the
	// maximum rate `gpupool perf` reports; it lets demand be given as a rate.
	RatePerReplica float64 `json:"ratePerReplica,omitempty"`
	// Version grows by one on every change of the tenant; clients read it back to know their
	// write is the one stored.
	Version uint64 `json:"version"`
}

// TenantStatus is a tenant with its standing.
type TenantStatus struct {
	Tenant
	Granted       int     `json:"granted"`
	DominantShare float64 `json:"dominantShare"`
	// FairShare is the share the tenant would get if every tenant wanted everything: its weight
	// over the sum of the weights of tenants with demand, capped by its own demand's share.
	FairShare float64 `json:"fairShare"`
}

// GPU is one GPU an agent reports, with the slices it is cut into now.
type GPU struct {
	UUID   string   `json:"uuid"`
	Board  string   `json:"board"`
	Slices []string `json:"slices"` // slice kinds, e.g. "3g.40gb", "mps-50", "exclusive"
}

// Inventory is what an agent reports about its node.
type Inventory struct {
	GPUs []GPU `json:"gpus"`
}

// Node is one registered node.
type Node struct {
	Name      string    `json:"name"`
	Inventory Inventory `json:"inventory"`
	// LastSeen is the last register, heartbeat or report.
	LastSeen time.Time `json:"lastSeen"`
	// Lost says the node missed heartbeats for longer than the node timeout: its slices are out
	// of the pool until it speaks again.
	Lost bool `json:"lost,omitempty"`
	// Cordoned nodes keep running what they run until the allocator moves it: their slices are
	// out of the pool, so their replicas move to free slices elsewhere (or are trimmed).
	Cordoned bool `json:"cordoned,omitempty"`
	// LayoutRevision grows whenever the node's desired layout changes.
	LayoutRevision uint64 `json:"layoutRevision"`
}

// Slice is one unit a replica runs on.
type Slice struct {
	ID    string `json:"id"` // NODE/GPU-UUID/INDEX
	Node  string `json:"node"`
	GPU   string `json:"gpu"`
	Board string `json:"board"`
	Kind  string `json:"kind"`
}

// Grant places one tenant replica on one slice.
type Grant struct {
	ID     string    `json:"id"`
	Tenant string    `json:"tenant"`
	Slice  string    `json:"slice"`
	Node   string    `json:"node"`
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
	// Expires is when a burst lease ends (zero for a steady grant).
	Expires time.Time `json:"expires,omitzero"`
}

// LayoutSlice is one slice of a node's desired layout and who should run on it.
type LayoutSlice struct {
	Slice
	Tenant string `json:"tenant,omitempty"`
	Grant  string `json:"grant,omitempty"`
}

// Layout is what a node's agent should make true.
type Layout struct {
	Node     string        `json:"node"`
	Revision uint64        `json:"revision"`
	Slices   []LayoutSlice `json:"slices"`
}

// Event is one thing that happened, with a closed reason code and a sentence with numbers.
type Event struct {
	Seq     uint64    `json:"seq"`
	At      time.Time `json:"at"`
	Code    Code      `json:"code"`
	Tenant  string    `json:"tenant,omitempty"`
	Node    string    `json:"node,omitempty"`
	Grant   string    `json:"grant,omitempty"`
	Message string    `json:"message"`
}

// Code is an event's reason. The set is closed (see Codes).
type Code string

// The event codes.
const (
	CodeTenantAdded    Code = "TenantAdded"
	CodeTenantUpdated  Code = "TenantUpdated"
	CodeTenantRemoved  Code = "TenantRemoved"
	CodeDemandChanged  Code = "DemandChanged"
	CodeGranted        Code = "Granted"
	CodeReleased       Code = "Released"
	CodePreempted      Code = "Preempted"
	CodeQueued         Code = "Queued"
	CodeMoved          Code = "Moved"
	CodeNodeRegistered Code = "NodeRegistered"
	CodeNodeLost       Code = "NodeLost"
	CodeNodeBack       Code = "NodeBack"
	CodeNodeCordoned   Code = "NodeCordoned"
	CodeNodeUncordoned Code = "NodeUncordoned"
	CodeTokenCreated   Code = "TokenCreated"
)

// Codes lists every event code.
var Codes = []Code{CodeTenantAdded, CodeTenantUpdated, CodeTenantRemoved, CodeDemandChanged,
	CodeGranted, CodeReleased, CodePreempted, CodeQueued, CodeMoved, CodeNodeRegistered,
	CodeNodeLost, CodeNodeBack, CodeNodeCordoned, CodeNodeUncordoned, CodeTokenCreated}
