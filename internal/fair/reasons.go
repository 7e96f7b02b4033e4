package fair

import "fmt"

// Kind is what a decision item does. The set is closed.
type Kind uint8

const (
	// KindGrant starts a steady task for a tenant (or turns one of its leases into a steady task).
	KindGrant Kind = iota + 1
	// KindLease starts a burst task that ends at Item.Expires unless it is converted first.
	KindLease
	// KindPreempt stops a steady task of one tenant so that another may run (planned, not executed).
	KindPreempt
	// KindReclaim ends a lease before or at its expiry.
	KindReclaim
	// KindRelease stops a task because its own tenant asked for fewer, lowered its cap or left.
	KindRelease
	// KindQueue reports that a tenant still waits for Item.Count tasks, and why.
	KindQueue
)

var kindNames = [...]string{KindGrant: "grant", KindLease: "lease", KindPreempt: "preempt",
	KindReclaim: "reclaim", KindRelease: "release", KindQueue: "queue"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Reason is why a decision item was made. The set is closed; every reason says whether retrying
// can help (Retryable) and which kinds it goes with.
type Reason uint8

const (
	// ReasonReservation: granted because the tenant is below its reservation.
	ReasonReservation Reason = iota + 1
	// ReasonFairShare: granted by progressive filling (the tenant had the lowest weighted share).
	ReasonFairShare
	// ReasonLeaseConverted: the tenant's oldest lease became a steady task; nothing restarts.
	ReasonLeaseConverted
	// ReasonBurst: lent from idle or burst-pool capacity for LeaseDuration.
	ReasonBurst
	// ReasonLeaseRenewed: a lease of this tenant reached its expiry in this step and was lent
	// again to it, the same task with a new expiry.
	ReasonLeaseRenewed
	// ReasonOverShare: preempted for a tenant whose share after the move stays below the victim's.
	ReasonOverShare
	// ReasonReservationClaim: preempted (above the victim's reservation) for a tenant below its own.
	ReasonReservationClaim
	// ReasonCapacityLost: capacity shrank below use; the task cannot keep running.
	ReasonCapacityLost
	// ReasonLeaseExpired: the lease reached its expiry.
	ReasonLeaseExpired
	// ReasonNeededBySteady: the lease sat on steady-pool room that a tenant within its share needs.
	ReasonNeededBySteady
	// ReasonDemandDropped: the tenant asked for fewer tasks (leases go first, then newest tasks).
	ReasonDemandDropped
	// ReasonCapLowered: the tenant's cap fell below its steady tasks.
	ReasonCapLowered
	// ReasonTenantRemoved: the tenant left.
	ReasonTenantRemoved
	// ReasonPoolFull: no room in the steady pool and no running task may be preempted for it.
	ReasonPoolFull
	// ReasonWaitingForMinRuntime: a preemption becomes possible at Item.RetryAt, when the
	// victims' minimum runtime has passed.
	ReasonWaitingForMinRuntime
	// ReasonWaitingForBurst: at its cap, beyond the steady pool or at a group limit; waits for burst
	// capacity.
	ReasonWaitingForBurst
	// ReasonReservationWaiting: below its reservation; the tasks that must give way are still
	// inside their minimum runtime.
	ReasonReservationWaiting
	// ReasonOverCap: at its cap and leases are disabled.
	ReasonOverCap
	// ReasonExceedsSteadyPool: one task is larger than the steady pool and leases are disabled.
	ReasonExceedsSteadyPool
	// ReasonExceedsCapacity: one task is larger than the whole pool in some resource.
	ReasonExceedsCapacity
	// ReasonReservationUnsatisfiable: the reservations no longer fit the (shrunken) steady pool.
	ReasonReservationUnsatisfiable
	// ReasonBelowFloor: preempted (above the victim's own reservation and sharing-incentive
	// floor) for a tenant below its sharing-incentive floor.
	ReasonBelowFloor
	// ReasonSteadyToLease: a steady task a claim displaced keeps running as a lease (same task
	// number) instead of stopping.
	ReasonSteadyToLease
	// ReasonGroupLimit: one more steady task would take a group of the tenant above its limit.
	ReasonGroupLimit
	reasonEnd
)

type reasonInfo struct {
	name  string
	kinds []Kind
	retry bool
	doc   string
}

var reasons = [reasonEnd]reasonInfo{
	ReasonReservation:              {"Reservation", []Kind{KindGrant}, false, "granted to meet the tenant's reservation"},
	ReasonFairShare:                {"FairShare", []Kind{KindGrant}, false, "granted by progressive filling: lowest weighted dominant share"},
	ReasonLeaseConverted:           {"LeaseConverted", []Kind{KindGrant}, false, "the tenant's oldest lease became a steady task"},
	ReasonBurst:                    {"Burst", []Kind{KindLease}, false, "lent from idle or burst-pool capacity"},
	ReasonLeaseRenewed:             {"LeaseRenewed", []Kind{KindLease}, false, "a lease expired and was lent again to the same tenant (same task)"},
	ReasonOverShare:                {"OverShare", []Kind{KindPreempt}, true, "victim stays above the claimant's share after the move"},
	ReasonReservationClaim:         {"ReservationClaim", []Kind{KindPreempt}, true, "a tenant below its reservation needs the room"},
	ReasonCapacityLost:             {"CapacityLost", []Kind{KindPreempt, KindReclaim}, true, "capacity shrank below use"},
	ReasonLeaseExpired:             {"LeaseExpired", []Kind{KindReclaim}, true, "the lease reached its expiry"},
	ReasonNeededBySteady:           {"NeededBySteady", []Kind{KindReclaim}, true, "a tenant within its fair share needs the room"},
	ReasonDemandDropped:            {"DemandDropped", []Kind{KindRelease}, false, "the tenant asked for fewer tasks"},
	ReasonCapLowered:               {"CapLowered", []Kind{KindRelease}, false, "the tenant's cap fell below its steady tasks"},
	ReasonTenantRemoved:            {"TenantRemoved", []Kind{KindRelease}, false, "the tenant left"},
	ReasonPoolFull:                 {"PoolFull", []Kind{KindQueue}, true, "no room and no task may be preempted for it now"},
	ReasonWaitingForMinRuntime:     {"WaitingForMinRuntime", []Kind{KindQueue}, true, "a preemption becomes possible at retryAt"},
	ReasonWaitingForBurst:          {"WaitingForBurst", []Kind{KindQueue}, true, "beyond its cap or the steady pool; waits for burst room"},
	ReasonReservationWaiting:       {"ReservationWaiting", []Kind{KindQueue}, true, "below its reservation; victims are inside their minimum runtime"},
	ReasonOverCap:                  {"OverCap", []Kind{KindQueue}, false, "at its cap and leases are disabled"},
	ReasonExceedsSteadyPool:        {"ExceedsSteadyPool", []Kind{KindQueue}, false, "one task is larger than the steady pool and leases are disabled"},
	ReasonExceedsCapacity:          {"ExceedsCapacity", []Kind{KindQueue}, false, "one task is larger than the whole pool"},
	ReasonReservationUnsatisfiable: {"ReservationUnsatisfiable", []Kind{KindQueue}, false, "reservations no longer fit the steady pool"},
	ReasonBelowFloor:               {"BelowFloor", []Kind{KindPreempt}, true, "a tenant below its sharing-incentive floor needs the room"},
	ReasonSteadyToLease:            {"SteadyToLease", []Kind{KindLease}, false, "a steady task displaced by a claim keeps running as a lease"},
	ReasonGroupLimit:               {"GroupLimit", []Kind{KindQueue}, true, "one more steady task would take a group above its limit"},
}

// Reasons lists every reason, in declaration order.
func Reasons() []Reason {
	out := make([]Reason, 0, reasonEnd-1)
	for r := ReasonReservation; r < reasonEnd; r++ {
		out = append(out, r)
	}
	return out
}

func (r Reason) valid() bool { return r > 0 && r < reasonEnd }

func (r Reason) String() string {
	if r.valid() {
		return reasons[r].name
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// MarshalText writes the reason's name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Retryable reports whether the same request can succeed later without the tenant or the pool's
// configuration changing (others' demand, leases and minimum runtimes move on their own). For
// grants and leases it is false: there is nothing to retry.
func (r Reason) Retryable() bool { return r.valid() && reasons[r].retry }

// Describe is a one-line explanation.
func (r Reason) Describe() string {
	if r.valid() {
		return reasons[r].doc
	}
	return ""
}

// Kinds lists the decision kinds the reason goes with.
func (r Reason) Kinds() []Kind {
	if r.valid() {
		return append([]Kind(nil), reasons[r].kinds...)
	}
	return nil
}
