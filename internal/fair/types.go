package fair

import (
	"fmt"
	"time"
)

// Group sets the weight of one interior node of the tenant hierarchy ("org", "org/team").
// Interior nodes without a Group have weight 1.
type Group struct {
	Path   string  `json:"path"`
	Weight float64 `json:"weight"`
	// MaxMinRuntime caps the minimum runtime of every tenant below the group (0: no cap). It is
	// the operator's bound: a tenant's own MinRuntime cannot protect its tasks for longer.
	MaxMinRuntime time.Duration `json:"maxMinRuntime,omitempty"`
	// Deserved is the group's guaranteed part of the steady pool, as a dominant share in [0, 1]:
	// lent to others while the group wants less, reclaimed by floor claims when it wants it. What
	// is left of the parent's part after every deserved part is split by Weight (the over-quota
	// weight).
	Deserved float64 `json:"deserved,omitempty"`
	// Limit is a hard cap on the group's steady tasks, as a part of the whole pool in [0, 1]
	// (0: none), per resource: no tenant below the group gets a steady task, by filling or by a
	// claim, that would take the group's steady use of a shared resource above Limit × capacity.
	// Reservations are served before limits; leases may go beyond them, as beyond a tenant's Cap.
	Limit float64 `json:"limit,omitempty"`
}

// Tenant is one unit of fairness: a leaf of the hierarchy that wants Demand tasks of one shape.
type Tenant struct {
	Name string `json:"name"`
	// Path is the tenant's place in the hierarchy, without its own name ("org/team"); empty puts
	// the tenant directly under the root.
	Path string `json:"path,omitempty"`
	// Weight scales the tenant's share among its siblings; 0 means 1. It is also the over-quota
	// weight that splits what its parent's part leaves after every Deserved part.
	Weight float64 `json:"weight,omitempty"`
	// Deserved is the tenant's guaranteed part of the steady pool (a dominant share in [0, 1]),
	// as for a Group.
	Deserved float64 `json:"deserved,omitempty"`
	// Task is what one task (one replica) uses.
	Task Vector `json:"task"`
	// Demand is how many tasks the tenant wants now.
	Demand int `json:"demand"`
	// Reservation is a guaranteed number of steady tasks: granted before fair filling and never
	// preempted (only lost capacity can take them).
	Reservation int `json:"reservation,omitempty"`
	// Cap is a hard maximum of steady tasks; 0 means no cap. Burst leases may go beyond it.
	Cap int `json:"cap,omitempty"`
	// Classes rank the tenant's replicas, most important first: the first Replicas steady tasks
	// belong to the first class, and so on; tasks beyond every count form an unnamed last class.
	// A new steady task takes the most important class not full; preemption, lost capacity and a
	// lower demand or cap take the least important eligible tasks first (newest first within a
	// class). Decision items about a task name its class.
	Classes []ReplicaClass `json:"classes,omitempty"`
	// MinRuntime protects a steady task from preemption until it has run this long, capped by
	// Config.MaxMinRuntime and the MaxMinRuntime of every group on the tenant's path.
	MinRuntime time.Duration `json:"minRuntime,omitempty"`
}

// ReplicaClass is one priority class of a tenant's replicas.
type ReplicaClass struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

// Config is everything New needs.
type Config struct {
	// Capacity is the whole pool.
	Capacity Vector
	// BurstPoolPercent of every resource is withheld from steady shares and only lent as leases.
	BurstPoolPercent float64
	// LeaseDuration is how long a lease lasts; 0 disables leases altogether.
	LeaseDuration time.Duration
	// MaxMinRuntime caps every tenant's MinRuntime (0: no cap); groups may cap lower.
	MaxMinRuntime time.Duration
	Groups        []Group
	Tenants       []Tenant
	// Limits bound the configuration (zero fields take DefaultLimits' values).
	Limits Limits
	// HistoryHalfLife turns usage history on (0: off): shares are compared over the tasks held
	// now plus the tasks held in the past, decayed by half every HistoryHalfLife
	// (docs/fairness.md §2). Floors, reservations, caps and limits ignore history.
	HistoryHalfLife time.Duration
}

// Limits bound what a configuration and its events may ask for, so that a mistaken or hostile
// input is refused with an error instead of exhausting memory.
type Limits struct {
	// MaxTenants bounds the number of tenants.
	MaxTenants int
	// MaxDemand bounds one tenant's demand, reservation and cap.
	MaxDemand int
	// MaxTotalDemand bounds the sum of every tenant's demand.
	MaxTotalDemand int
}

// DefaultLimits are the limits in force where Config.Limits leaves a field at zero.
var DefaultLimits = Limits{MaxTenants: 200_000, MaxDemand: 1 << 20, MaxTotalDemand: 1 << 22}

func (l Limits) withDefaults() Limits {
	if l.MaxTenants <= 0 {
		l.MaxTenants = DefaultLimits.MaxTenants
	}
	if l.MaxDemand <= 0 {
		l.MaxDemand = DefaultLimits.MaxDemand
	}
	if l.MaxTotalDemand <= 0 {
		l.MaxTotalDemand = DefaultLimits.MaxTotalDemand
	}
	return l
}

// Event is one change Apply takes. The set is closed: SetDemand, AddTenant, RemoveTenant,
// UpdateTenant, SetCapacity and SetGroup.
type Event interface{ event() }

// SetDemand changes how many tasks a tenant wants.
type SetDemand struct {
	Tenant string
	Demand int
}

// AddTenant brings a new tenant in.
type AddTenant struct{ Tenant Tenant }

// RemoveTenant releases all of a tenant's tasks and forgets it.
type RemoveTenant struct{ Tenant string }

// UpdateTenant changes a tenant's weight, demand, reservation, cap or minimum runtime. Its path
// and task cannot change: remove it and add it again.
type UpdateTenant struct{ Tenant Tenant }

// SetCapacity replaces the pool capacity. Resources left out become zero.
type SetCapacity struct{ Capacity Vector }

// SetGroup sets the weight of an interior node.
type SetGroup struct{ Group Group }

func (SetDemand) event()    {}
func (AddTenant) event()    {}
func (RemoveTenant) event() {}
func (UpdateTenant) event() {}
func (SetCapacity) event()  {}
func (SetGroup) event()     {}

// Item is one decision: what happens to whom, and why.
type Item struct {
	Kind   Kind   `json:"kind"`
	Tenant string `json:"tenant"`
	// Task numbers the task the item is about (unique within an Allocator); 0 for queue items.
	Task uint64 `json:"task,omitempty"`
	// Class is the replica class of the task (Tenant.Classes), "" for the unnamed last class.
	Class string `json:"class,omitempty"`
	// Count is how many tasks a queue item waits for.
	Count  int    `json:"count,omitempty"`
	Reason Reason `json:"reason"`
	// Retry says whether retrying can help (Reason.Retryable).
	Retry bool `json:"retry"`
	// By names the tenant a preemption or reclaim makes room for.
	By string `json:"by,omitempty"`
	// Level is the group under which a share preemption compared shares ("" for the root).
	Level string `json:"level,omitempty"`
	// ByShare and Share are, for a share preemption, the claimant's and the victim's weighted
	// dominant shares at Level after the move: ByShare ≤ Share (within the tie tolerance).
	ByShare float64 `json:"byShare,omitempty"`
	Share   float64 `json:"share,omitempty"`
	// Expires is when a lease ends.
	Expires time.Time `json:"expires,omitzero"`
	// RetryAt is when a waiting preemption becomes possible.
	RetryAt time.Time `json:"retryAt,omitzero"`
}

func (it Item) String() string {
	s := fmt.Sprintf("%s %s", it.Kind, it.Tenant)
	if it.Task != 0 {
		s += fmt.Sprintf("#%d", it.Task)
	}
	if it.Count != 0 {
		s += fmt.Sprintf(" x%d", it.Count)
	}
	s += " " + it.Reason.String()
	if it.Class != "" {
		s += " class=" + it.Class
	}
	if it.By != "" {
		s += " by=" + it.By
	}
	if it.Kind == KindPreempt && it.Reason == ReasonOverShare {
		s += fmt.Sprintf(" level=%q shares=%.6g<=%.6g", it.Level, it.ByShare, it.Share)
	}
	return s
}

// Decision is what one Apply or Recompute decided, in the order it was decided. Its Items alias
// a buffer the Allocator reuses on the next call: Clone it to keep it.
type Decision struct {
	At    time.Time `json:"at"`
	Items []Item    `json:"items"`
}

// Clone returns a copy that does not alias the Allocator's buffer.
func (d Decision) Clone() Decision {
	d.Items = append([]Item(nil), d.Items...)
	return d
}

// TenantState is one tenant's standing after a step.
type TenantState struct {
	Name        string `json:"name"`
	Path        string `json:"path,omitempty"`
	Demand      int    `json:"demand"`
	Tasks       int    `json:"tasks"`
	Steady      int    `json:"steady"`
	Leased      int    `json:"leased"`
	Reservation int    `json:"reservation,omitempty"`
	Cap         int    `json:"cap,omitempty"`
	// DominantShare is max over shared resources of (all the tenant's tasks' use / capacity).
	DominantShare float64 `json:"dominantShare"`
	// WeightedShare is DominantShare divided by the tenant's own weight.
	WeightedShare float64 `json:"weightedShare"`
	// History is the tenant's usage history, its decayed task count (Config.HistoryHalfLife):
	// the tasks it held, weighted by 2^(−age/halfLife); 0 without history.
	History float64 `json:"history,omitempty"`
}
