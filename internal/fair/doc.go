// Package fair allocates tasks (a tenant's replicas, each on one slice, or any vector of named
// resources) to tenants by weighted hierarchical Dominant Resource Fairness (Ghodsi et al.,
// NSDI 2011), with reservations, caps, a burst pool lent as leases, and preemption that never
// loops. docs/fairness.md is the long form of what follows.
//
// It is pure: configuration, events and a `now` go in, a Decision comes out. It does no IO, reads
// no clock and draws no random numbers; the same inputs give the same decisions, item for item.
// Preemptions and reclaims are planned, never executed: the caller stops the tasks a Decision
// names.
//
// # Model
//
// A Vector is an amount per named resource, held in millionths of a unit. Resources named
// BOARD/KIND (H100-SXM5-80GB/3g.40gb) count slices of one kind: capacity constraints that never
// enter a share, because a slice is charged for the SMs, memory and bandwidth it carries
// (SliceVector reads them from the board table, so a 3g.40gb and an MPS 50% share compare). Each
// tenant wants Demand tasks of one Task vector, sits at a Path in a hierarchy (org/team) with a
// weight at every level, and may have a Reservation (steady tasks served first and never preempted
// but by lost capacity), a Cap (hard maximum of steady tasks) and a MinRuntime (a steady task is
// not preempted before it has run that long).
//
// Capacity C splits into the steady pool S = C − ⌊C·BurstPoolPercent/100⌋ and the burst pool.
// Steady tasks fit S; steady tasks and leases together fit C. A node's weighted dominant share is
// max over shared resources of (use / C), divided by its weight; shares within a relative 1e-9 are
// equal and the smaller name goes first.
//
// # Filling
//
// Flat, unweighted, no reservations: repeatedly pick the tenant with the lowest dominant share and
// give it one task if it fits; if not, that tenant is done and the others go on (the skip rule);
// stop when no tenant can take a task. Weights divide shares. In a hierarchy the pick is made at
// every level, by the weighted share of each child's whole subtree, among children that hold a
// tenant wanting a task; with every tenant under the root this is the flat rule. Tenants below
// their reservation are served first; caps bound steady tasks.
//
// # Preemption
//
// Every tenant has a sharing-incentive floor: its demand-aware part of the steady pool in whole
// tasks. When some tenant's part holds none of its tasks, floors are filled instead by
// hierarchical progressive filling in whole tasks (up to max(part, 1) tasks each, first tasks
// before second ones among siblings, the larger task first among equals; quota tenants keep
// their part), so that a lumpy tenant is not starved. At every level a node that wants tasks gets its Deserved part (a quota, on any group or
// tenant) plus its weight's share of what its parent's part leaves after the deserved parts of the
// siblings that want tasks; without deserved parts that is weight over the summed weights.
// A waiting tenant below its reservation, then one below its floor, takes the newest eligible
// tasks of the tenants furthest above their share, each victim keeping its reservation (and, for a
// floor claim, its floor); the plan is trimmed to what the claimant needs. A share claim lets A
// take tasks of V when, at the level where their paths part, A's side does not end above V's side
// (within the tolerance) and both new shares lie strictly between the old ones; V keeps its
// reservation and floor; the victims ran their MinRuntime (capped by the operator's MaxMinRuntime
// of the pool and of every group on the path) and started before now; and no common ancestor's
// share falls. Each claim raises the potential (reservation shortfall, floor shortfall, sorted
// shares level by level), so between external events there are finitely many moves and no
// allocation comes back. Recompute runs claims to a fixed point: a Recompute right after it moves
// nothing. A victim granted again in the same step gets its stopped task back instead of a new one.
//
// # Usage history
//
// With Config.HistoryHalfLife set, each tenant keeps h, the tasks it held in the past decayed by
// half every half-life (h ← h·δ + n·(1 − δ), δ = 2^(−elapsed/halfLife), n the tasks held, at the
// first step at least halfLife/64 after the last update; the time is the step's now, the package
// reads no clock). Every
// share comparison counts a node's usage as its tasks' use plus h·task summed over its tenants, so
// a tenant that used much recently yields what lies above floors and reservations to one that used
// little; floors, reservations, caps, limits and capacity ignore history. At a fixed time the
// offsets are constants and the potential argument holds as without history; as time passes
// shares move, so a claim may become valid later. With history on, the step that updates h
// derives the indexes again (a pass over every tenant). Off (zero) by default.
//
// A group's Limit caps its steady use of every shared resource (filling and claims respect it;
// reservations and leases do not), and floors are capped by it; a tenant below its floor in a
// group at its limit takes, by a floor claim, from its siblings inside the group. A tenant's Classes rank its
// replicas: the least important eligible tasks are stopped first, and items name the class.
//
// # Leases
//
// After steady filling, unmet demand (capped or not) is lent any room left in C, by the same
// filling over all tasks' shares, for LeaseDuration. At its expiry a lease is renewed in place
// (same task) when no other tenant waits, and otherwise its room goes back to filling: what
// filling gives the same tenant again in that step is the same task (renewed, or turned steady),
// and only a lease whose room goes to another tenant ends. A
// lease also ends when its tenant wants fewer tasks, when capacity is lost, or when a steady grant
// within the steady pool needs its room; a lease whose tenant gets steady room becomes a steady
// task. A caller that rebuilt the allocator (a restarted control plane) gives a lease lent again
// the expiry it had before with RestoreLeaseExpiry, which only ever shortens a term.
//
// # Bounds
//
// Counts are at most 2^53, weights lie in [1e-6, 1e6], and Config.Limits (DefaultLimits where
// zero) bound the tenants, one tenant's demand and the total demand; New, Apply and SetDemand
// return errors naming the limit.
//
// # Decisions and events
//
// Every Item has a Kind and a Reason from the closed set in reasons.go; Reason.Retryable says
// whether retrying can help. Apply takes events (SetDemand, AddTenant, RemoveTenant,
// UpdateTenant, SetCapacity, SetGroup) and decides incrementally, examining the claims of tenants
// the events touched and those whose retry time came; Recompute examines everything and is what a
// control plane runs periodically. Both use the same code on the same indexes (heaps per node,
// tenants parked by task class), so a rebuilt Allocator decides exactly as an incremental one.
package fair
