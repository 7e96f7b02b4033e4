package control

import (
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

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

// TokenRecord is what the store holds for a token, keyed by the hex SHA-256 of its secret: the
// principal it acts for and when it was created (zero for a token stored before creation times
// were kept: its record is the principal alone, which decodes into this as it is).
type TokenRecord struct {
	Principal
	Created time.Time `json:"created,omitzero"`
}

// TokenInfo is a token as GET /v1/tokens lists it: its id and principal, never its secret or
// its hash.
type TokenInfo struct {
	// ID names the token for DELETE /v1/tokens/{id}: the first 16 hex digits of its hash
	// (TokenID), the same for as long as the token lives.
	ID string `json:"id"`
	Principal
	Created time.Time `json:"created,omitzero"`
	// TokenFile marks the operator token of the server's token file, which the server stores
	// again at every start and which cannot be revoked.
	TokenFile bool `json:"tokenFile,omitempty"`
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
	// Rate is the request rate last given as demand (requests/s); 0 when demand was given as
	// replicas. A re-plan sizes the tenant from it.
	Rate float64 `json:"rate,omitempty"`
	// Version grows by one on every change of the tenant; clients read it back to know their
	// write is the one stored.
	Version uint64 `json:"version"`
}

// TenantStatus is a tenant with its standing.
type TenantStatus struct {
	Tenant
	Granted       int     `json:"granted"`
	DominantShare float64 `json:"dominantShare"`
	// FairShare is the tenant's weighted max-min (water-filling) share of the slices: its weight's
	// part of what the tenants whose demand (or cap, when lower) is met leave, at most its own
	// demand's share, and at most its cap's (steady tasks never exceed a cap).
	FairShare float64 `json:"fairShare"`
	// Cost is the tenant's cost per hour in the applied plan (planned basis, docs/cost.md); nil
	// without an applied plan, a policy.cost in its Pool or the tenant in the plan.
	Cost *TenantCost `json:"cost,omitempty"`
	// LoRAEngines are an adapter tenant's parts of the shared LoRA engines of the applied plan
	// that serve it (by engine name); such a tenant has no slices of its own (Granted 0), and
	// its engines are granted under their own names ("lora:ENGINE").
	LoRAEngines []LoRAShare `json:"loraEngines,omitempty"`
}

// TenantCost is one tenant's line of the applied plan's bill, per hour. Money is absent when the
// policy lacks a board's price or the energy price, carbon when it lacks that intensity.
type TenantCost struct {
	Basis             string   `json:"basis"` // "planned"
	Currency          string   `json:"currency,omitempty"`
	ReservedGPUs      float64  `json:"reservedGpus"`
	ITEnergyKWh       float64  `json:"itEnergyKWhPerHour"`
	ChargebackPerHour *float64 `json:"chargebackPerHour,omitempty"`
	ShowbackPerHour   *float64 `json:"showbackPerHour,omitempty"`
	GCO2eLocation     *float64 `json:"gCO2ePerHourLocationBased,omitempty"`
	GCO2eMarket       *float64 `json:"gCO2ePerHourMarketBased,omitempty"`
}

// GateOp is one MIG layout change asked of one GPU: it waits until the orchestration lets it
// start (maxUnavailable, cooldown, maintenance window), then its GPU's slices leave the pool (the
// replicas on them move first) and the node's agent receives the new layout, which its gate
// applies; the agent's next inventory report ends it (done, or failed and retried or given up).
type GateOp struct {
	ID     uint64 `json:"id"`
	GPU    string `json:"gpu"`
	Board  string `json:"board"`
	From   string `json:"from"`
	Layout string `json:"layout"`
	// MIGOff says the plan runs the GPU whole (exclusive, MPS or time-sliced): Layout is empty
	// (every instance goes) and the agent is asked to turn MIG mode off afterwards.
	MIGOff bool `json:"migOff,omitempty"`
	// State is "waiting" (not started), "draining" (the GPU is out of the pool and its replicas'
	// standbys start elsewhere) or "applying" (handed to the agent).
	State GateState `json:"state"`
	// Reason says why a waiting operation waits (GateMaxUnavailable, GateCooldown, GateWindow,
	// GateNodeUnavailable) or, after a failure, what failed.
	Reason   string    `json:"reason,omitempty"`
	Attempts int       `json:"attempts"`
	Since    time.Time `json:"since"`
	// NotBefore is the earliest start (a retry waits for the cooldown).
	NotBefore time.Time `json:"notBefore,omitzero"`
}

// The node wire types live in api/v1, shared with the node agent; these names are theirs here.
type (
	// Inventory is what an agent reports about its node.
	Inventory = v1.NodeReport
	// GPU is one GPU an agent reports, with the slices it is cut into now.
	GPU = v1.NodeGPU
	// GateReport is what an agent says about a gate operation it ran.
	GateReport = v1.GateReport
	// Slice is one unit a replica runs on.
	Slice = v1.Slice
	// LayoutSlice is one slice of a node's desired layout and who should run on it.
	LayoutSlice = v1.LayoutSlice
	// Layout is what a node's agent should make true.
	Layout = v1.NodeLayout
	// GPULayout is a GPU's desired MIG layout and the gate operation it belongs to.
	GPULayout = v1.GPULayout
)

// GateState is a gate operation's state.
type GateState string

// The gate operation states.
const (
	GateWaiting  GateState = "waiting"
	GateDraining GateState = "draining"
	GateApplying GateState = "applying"
)

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
	// CordonedSince is when the node was cordoned: its replicas keep running until their
	// standbys elsewhere are ready, or the drain timeout (GatePolicy.DrainTimeout) from then.
	CordonedSince time.Time `json:"cordonedSince,omitzero"`
	// LayoutRevision grows whenever the node's desired layout changes.
	LayoutRevision uint64 `json:"layoutRevision"`
	// Epoch is the node's fencing token: it grows each time the node is declared lost (its
	// grants then move to other nodes). The agent must stop every replica of an older epoch
	// before the node may come back, so the replicas that moved never run twice.
	Epoch uint64 `json:"epoch,omitempty"`
	// Gates are the MIG changes asked of the node's GPUs and not finished (replaced, never
	// changed in place: views share them).
	Gates []GateOp `json:"gates,omitempty"`
	// Changed is when each GPU (by UUID) last finished a MIG change, for the cooldown.
	Changed map[string]time.Time `json:"changed,omitempty"`
	// GaveUp is, by GPU UUID, the target of its last gate operation that was given up after its
	// attempts (gaveUpKey): a re-plan does not ask for it again; an operator's request or plan
	// apply does, and a finished change of the GPU forgets it (replaced, never changed in place).
	GaveUp map[string]string `json:"gaveUp,omitempty"`
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
	// Replaces names the grant this one stands in for while that grant's GPU drains for a MIG
	// change: the standby starts first, and the old grant stops once the standby's agent reports
	// it ready; then this grant is the tenant's replica.
	Replaces string `json:"replaces,omitempty"`
	// Limits are the sharing limits the applied plan gives the replica on this slice (MPS
	// active-thread percentage and pinned memory); nil when the plan places no replica of the
	// tenant here or sets none.
	Limits *v1.Limits `json:"limits,omitempty"`
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
	CodeNodeFenced     Code = "NodeFenced"
	CodeNodeCordoned   Code = "NodeCordoned"
	CodeNodeUncordoned Code = "NodeUncordoned"
	CodeNodeRemoved    Code = "NodeRemoved"
	CodeNodeAdmitted   Code = "NodeAdmitted"
	CodeTokenCreated   Code = "TokenCreated"
	CodeTokenRevoked   Code = "TokenRevoked"
	CodeGateRequested  Code = "GateRequested"
	CodeGateWaiting    Code = "GateWaiting"
	CodeGateDraining   Code = "GateDraining"
	CodeGateStarted    Code = "GateStarted"
	CodeGateDone       Code = "GateDone"
	CodeGateFailed     Code = "GateFailed"
	CodeGateGaveUp     Code = "GateGaveUp"
	CodeGateCancelled  Code = "GateCancelled"
	CodeMoveStarted    Code = "MoveStarted"
	CodeStandbyFailed  Code = "StandbyFailed"
	CodeReplanned      Code = "Replanned"
	CodeReplanFailed   Code = "ReplanFailed"
)

// Codes lists every event code.
var Codes = []Code{CodeTenantAdded, CodeTenantUpdated, CodeTenantRemoved, CodeDemandChanged,
	CodeGranted, CodeReleased, CodePreempted, CodeQueued, CodeMoved, CodeNodeRegistered,
	CodeNodeLost, CodeNodeBack, CodeNodeFenced, CodeNodeCordoned, CodeNodeUncordoned, CodeNodeRemoved, CodeNodeAdmitted, CodeTokenCreated, CodeTokenRevoked,
	CodeGateRequested, CodeGateWaiting, CodeGateDraining, CodeGateStarted, CodeGateDone, CodeGateFailed, CodeGateGaveUp,
	CodeGateCancelled, CodeMoveStarted, CodeStandbyFailed, CodeReplanned, CodeReplanFailed}
