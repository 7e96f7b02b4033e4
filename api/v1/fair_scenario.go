package v1

// KindFairScenario is the kind of a fair-share scenario document.
const KindFairScenario = "FairScenario"

// FairScenario is what `gpupool fair` replays: a pool (capacity and/or slices), tenants and
// timed steps. apiVersion and kind may be left out (then the document is read as
// gpupool.dev/v1 FairScenario); when given they must be exactly these. Names of tenants,
// resources and paths are kept as written: `yes`, `y` and `007` are names, not a boolean or a
// number. Durations are Go durations ("90s", "5m"); counts are integers at most 2^53.
type FairScenario struct {
	APIVersion string `json:"apiVersion,omitempty" yaml:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty" yaml:"kind,omitempty"`
	// Start is the clock of the first step (RFC 3339); default 2025-01-01T00:00:00Z.
	Start string `json:"start,omitempty" yaml:"start,omitempty"`
	// Capacity is the pool as resource → amount; Slices adds slice kinds (BOARD/KIND → count)
	// through the board table.
	Capacity         map[string]float64 `json:"capacity,omitempty" yaml:"capacity,omitempty"`
	Slices           map[string]int64   `json:"slices,omitempty" yaml:"slices,omitempty"`
	BurstPoolPercent float64            `json:"burstPoolPercent,omitempty" yaml:"burstPoolPercent,omitempty"`
	LeaseDuration    string             `json:"leaseDuration,omitempty" yaml:"leaseDuration,omitempty"`
	// MaxMinRuntime caps every tenant's minRuntime (the operator's bound).
	MaxMinRuntime string `json:"maxMinRuntime,omitempty" yaml:"maxMinRuntime,omitempty"`
	// HistoryHalfLife turns usage history on: shares are compared over the tasks held now plus
	// the tasks held before, decayed by half every HistoryHalfLife (unset: no history).
	HistoryHalfLife string       `json:"historyHalfLife,omitempty" yaml:"historyHalfLife,omitempty"`
	Limits          *FairLimits  `json:"limits,omitempty" yaml:"limits,omitempty"`
	Groups          []FairGroup  `json:"groups,omitempty" yaml:"groups,omitempty"`
	Tenants         []FairTenant `json:"tenants,omitempty" yaml:"tenants,omitempty"`
	Steps           []FairStep   `json:"steps,omitempty" yaml:"steps,omitempty"`
}

// FairLimits override the allocator's input limits (0 keeps its default).
type FairLimits struct {
	MaxTenants     int64 `json:"maxTenants,omitempty" yaml:"maxTenants,omitempty"`
	MaxDemand      int64 `json:"maxDemand,omitempty" yaml:"maxDemand,omitempty"`
	MaxTotalDemand int64 `json:"maxTotalDemand,omitempty" yaml:"maxTotalDemand,omitempty"`
}

// FairGroup sets the weight and minimum-runtime cap of an interior node ("org", "org/team").
type FairGroup struct {
	Path          string  `json:"path" yaml:"path"`
	Weight        float64 `json:"weight" yaml:"weight"`
	MaxMinRuntime string  `json:"maxMinRuntime,omitempty" yaml:"maxMinRuntime,omitempty"`
	// Deserved is the group's guaranteed part of the steady pool, a dominant share in [0, 1].
	Deserved float64 `json:"deserved,omitempty" yaml:"deserved,omitempty"`
	// Limit caps the group's steady use of every shared resource at this part of the pool
	// (0: none).
	Limit float64 `json:"limit,omitempty" yaml:"limit,omitempty"`
}

// FairTenant is one tenant. Exactly one of Task (resource → amount) and Slice (a slice kind)
// gives the task shape.
type FairTenant struct {
	Name        string             `json:"name" yaml:"name"`
	Path        string             `json:"path,omitempty" yaml:"path,omitempty"`
	Weight      float64            `json:"weight,omitempty" yaml:"weight,omitempty"`
	Deserved    float64            `json:"deserved,omitempty" yaml:"deserved,omitempty"`
	Task        map[string]float64 `json:"task,omitempty" yaml:"task,omitempty"`
	Slice       string             `json:"slice,omitempty" yaml:"slice,omitempty"`
	Demand      int64              `json:"demand" yaml:"demand"`
	Reservation int64              `json:"reservation,omitempty" yaml:"reservation,omitempty"`
	Cap         int64              `json:"cap,omitempty" yaml:"cap,omitempty"`
	MinRuntime  string             `json:"minRuntime,omitempty" yaml:"minRuntime,omitempty"`
	// Classes rank the tenant's replicas, most important first (see internal/fair).
	Classes []FairReplicaClass `json:"classes,omitempty" yaml:"classes,omitempty"`
}

// FairReplicaClass is one priority class of a tenant's replicas: its first Replicas go to it.
type FairReplicaClass struct {
	Name     string `json:"name" yaml:"name"`
	Replicas int64  `json:"replicas" yaml:"replicas"`
}

// FairStep happens At (a duration after start): demand changes, arrivals, departures, a new
// capacity; with none of them it is a tick. Recompute runs the full reconciliation.
type FairStep struct {
	At        string             `json:"at" yaml:"at"`
	Demand    map[string]int64   `json:"demand,omitempty" yaml:"demand,omitempty"`
	Add       []FairTenant       `json:"add,omitempty" yaml:"add,omitempty"`
	Remove    []string           `json:"remove,omitempty" yaml:"remove,omitempty"`
	Capacity  map[string]float64 `json:"capacity,omitempty" yaml:"capacity,omitempty"`
	Slices    map[string]int64   `json:"slices,omitempty" yaml:"slices,omitempty"`
	Recompute bool               `json:"recompute,omitempty" yaml:"recompute,omitempty"`
}
