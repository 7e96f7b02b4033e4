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
// A waiting tenant A takes tasks of V only if, at the level where their paths part, A's side's
// weighted share after the move stays below V's side's after the move (beyond the tolerance); V
// keeps its reservation; the victims ran MinRuntime and started before now; and no common
// ancestor's share falls. Victims are the fewest newest eligible tasks of one tenant, from the
// subtree furthest above its share. Each move raises, level by level from the root, the sorted
// vector of shares in lexicographic order, and grants only raise shares: between external events
// there are finitely many moves and no allocation comes back. A tenant below its reservation may
// take tasks above other tenants' reservations regardless of shares.
//
// # Leases
//
// After steady filling, unmet demand (capped or not) is lent any room left in C, by the same
// filling over all tasks' shares, for LeaseDuration. A lease ends at expiry, when its tenant wants
// fewer tasks, when capacity is lost, or when a steady grant within the steady pool needs its room;
// a lease whose tenant gets steady room becomes a steady task.
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
