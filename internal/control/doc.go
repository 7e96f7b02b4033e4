// Package control is the control plane behind `gpupool serve`: it holds the pool's tenants and
// their demand, grants slices to tenant replicas through the fair allocator (internal/fair), keeps
// the inventories agents report, and hands every node its desired layout.
//
// Three layers:
//
//   - Engine: single-threaded and IO-free. Every method takes the time as an argument and
//     returns decisions; what changed is collected (Take) for the caller to persist. A grant is a
//     tenant replica placed on one concrete slice (NODE/GPU/INDEX); the allocator decides how many
//     each tenant gets (weighted hierarchical DRF, one resource "slices"), the Engine decides which
//     slice (engine_place.go: the one the applied plan placed a replica of the tenant on, by node,
//     GPU and slice kind, with the plan's sharing limits; else one the plan leaves free; among
//     equals a node where the tenant already runs, else the lowest free id) and moves grants whose
//     slice left the pool. Every change is an Event with a closed Code and a sentence with numbers.
//   - Loop: the one goroutine that owns the Engine. It takes commands in groups and applies them;
//     a committer writes each group's changes through the Store port in one commit (one fsync),
//     publishes the group's immutable View (readers use it without locks) and then answers the
//     callers, while the engine already applies the next group. A write is acknowledged only
//     after it is on disk; a failed commit stops the loop (a restart restores from the store).
//     On start the Engine is rebuilt from the store: the allocator decides again and each task
//     takes over a stored grant of its tenant (same id and slice), so a restart moves nothing.
//   - Server: HTTP/JSON under /v1 (openapi.json is the reference, kept equal to the route table
//     by a test), RFC 9457 problem details with field paths, bearer tokens stored as SHA-256
//     hashes with roles operator, tenant and agent (listed and revoked by an id, the first 16
//     hex digits of the hash, never by secret), per-token rate limits, a body size limit, an
//     audit record per change, Prometheus /metrics (collectors here until a shared metrics
//     package exists), the embedded browser console at /, and optional (mutual) TLS.
//
// Gate operations (engine_gate.go) change a GPU's MIG layout across the pool: asked by an operator
// or by applying a plan (planadapter.go, the one file that speaks to internal/plan; it re-plans
// from the plan applied last, which is stored), they wait for GatePolicy (maxUnavailable, cooldown, a maintenance
// window), then take the GPU's slices out of the pool and drain it (a standby replica starts
// elsewhere for each replica on it; the old one stops once the standby's agent reports it ready,
// or after DrainTimeout), then put the target into the node's layout; the agent's report settles them (done, or failed and
// retried after the cooldown up to MaxAttempts, then given up). A lost node's started operations
// do not count against maxUnavailable; its report settles them when it is back, and an operator
// may remove a lost node, or a cordoned one with no grant left (Engine.RemoveNode).
//
// A node's report is checked against the catalog (board, MIG layout, slice kinds) on the HTTP
// path (checkReport), and a GPU UUID another node reports is refused in Engine.Register.
//
// Ports declared here: Store (Load, Commit; internal/store's Bolt implements it) and Clock (Now).
// The node side talks to the Server over HTTP (register and report, heartbeat, layout by
// long-poll): internal/agent's Link is the real agent's side; SimAgent is a simulated agent for
// the demo's MPS node and tests.
//
// Once a plan is applied, a tenant's demand rate or a fleet change asks for a re-plan (Replan in
// the View); the Replanner goroutine plans again from the plan in force and feeds the result back
// as a command (Engine.Replanned), so the engine's goroutine never runs the planner; after a
// re-plan the engine refused it waits longer each time (Replanner.MaxBackoff). Every plan is
// made with Planning: `gpupool serve` passes the project's simulator (internal/plansim, through
// cmd/gpupool), so the control plane confirms plans as `gpupool plan` does without importing
// the simulator itself.
//
// A plan's shared LoRA engines (lora.go) are planned with plan.BuildWithLoRA; each is one replica
// on one whole GPU, granted once under its own allocator name (loraKey) on the GPU the plan gives
// it, while the adapter tenants it serves hold no slices of their own and split the engine by
// weight, demand and reservation (fair.Split), which their status reports (LoRAShare).
//
// Nodes are fenced by epoch: a node declared lost moves to a new epoch, and its agent's reports
// for an older one are refused (ErrFenced) until it has stopped the old epoch's replicas. A
// cordoned node's replicas move standby first, like a draining GPU's. A restart allocates from
// what each tenant held (demands cut to its stored replicas, then raised; ADR 0068), not from a
// fresh filling that breaks ties by name; burst leases keep their grant and expiry across it
// (fair.Allocator.RestoreLeaseExpiry).
//
// Not yet here: placement by rule (a planned slice that is taken or gone falls back to any free
// slice) and standbys for moves off a lost node (its replicas are presumed stopped by fencing).
package control
