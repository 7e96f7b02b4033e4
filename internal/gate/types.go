package gate

import (
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// Phase is where the active change is.
type Phase string

// Phases of a change, in order; rollback re-enters observe, apply and verify with Rollback set.
const (
	PhaseIdle     Phase = "idle"     // no change active
	PhaseCordon   Phase = "cordon"   // waiting for the node to be cordoned
	PhaseDrain    Phase = "drain"    // waiting for the replicas on the instances to destroy to leave
	PhaseObserve  Phase = "observe"  // reading the GPU's layout before applying
	PhaseApply    Phase = "apply"    // destroying and creating instances, one op at a time
	PhaseVerify   Phase = "verify"   // reading the layout back and comparing it with the target
	PhaseSmoke    Phase = "smoke"    // running the smoke check on the new instances
	PhaseUncordon Phase = "uncordon" // waiting for the node to be uncordoned
	PhaseFailed   Phase = "failed"   // rollback failed: node stays cordoned until EvReset
)

// Reason codes the gate records. They are closed: every note uses one of these.
const (
	ReasonStarted        = "GateStarted"        // a change started
	ReasonDone           = "GateDone"           // a change completed; the GPU has its new layout
	ReasonNoChange       = "GateNoChange"       // the desired layout equals the current one
	ReasonGateCooldown   = "GateCooldown"       // the GPU changed less than Policy.Cooldown ago
	ReasonGateRateLimit  = "GateRateLimit"      // the node started Policy.MaxChanges changes in Policy.Window
	ReasonCordonFailed   = "GateCordonFailed"   // cordon failed; the change was given up
	ReasonDrainFailed    = "GateDrainFailed"    // drain failed; uncordoned with the GPU untouched
	ReasonApplyFailed    = "GateApplyFailed"    // a destroy or create failed; rolling back
	ReasonVerifyMismatch = "GateVerifyMismatch" // the layout read back differs from the target
	ReasonSmokeFailed    = "GateSmokeFailed"    // the smoke check failed; rolling back
	ReasonRolledBack     = "GateRolledBack"     // the old layout is back; uncordoned
	ReasonRollbackFailed = "GateRollbackFailed" // the old layout could not be restored; left cordoned
	ReasonRecovered      = "GateRecovered"      // the executor restarted and the change resumed
	ReasonReset          = "GateReset"          // an operator cleared a failed change
	ReasonUncordonFailed = "GateUncordonFailed" // uncordon failed; retried after a backoff
	ReasonUncordonGaveUp = "GateUncordonGaveUp" // uncordon failed MaxUncordonAttempts times; left cordoned
)

// MaxRollbackAttempts is how many times a rollback is tried before the gate gives up.
const MaxRollbackAttempts = 3

// Uncordon retries (ADR 0073): a failed uncordon is tried again after a backoff, at most
// Policy.Uncordon's attempts in all; then the change fails (PhaseFailed) with the node cordoned
// and the last error in State.CordonReason, until EvReset. These are the defaults of
// UncordonPolicy's zero fields.
const (
	MaxUncordonAttempts = 8
	UncordonBackoff     = time.Second      // the wait after the first failure
	UncordonBackoffMax  = 30 * time.Second // the waits double up to this
)

// UncordonDelay is the default policy's wait, without jitter, before the next uncordon after the
// failures-th failed one (1 s, 2 s, 4 s … at most UncordonBackoffMax).
func UncordonDelay(failures int) time.Duration { return UncordonPolicy{}.Delay(failures, 0) }

// UncordonPolicy bounds and spreads the retries of a failed uncordon (ADR 0073, amended). A zero
// field takes its default: MaxUncordonAttempts, UncordonBackoffMax, no jitter.
type UncordonPolicy struct {
	// Attempts is how many uncordons are tried in all before the change fails.
	Attempts int `json:"attempts,omitzero"`
	// MaxDelay caps the wait, which starts at UncordonBackoff and doubles after each failure.
	MaxDelay time.Duration `json:"maxDelay,omitzero"`
	// Jitter, 0 to 1, is the share of each wait that is random: the wait is D·(1 − Jitter·draw),
	// D the doubled wait and draw the failed event's Event.Draw, so that nodes whose uncordons
	// fail together (an API server down) do not retry in lockstep. The wait never exceeds D.
	Jitter float64 `json:"jitter,omitzero"`
}

// Limit is the number of attempts in all (Attempts, or MaxUncordonAttempts when unset).
func (p UncordonPolicy) Limit() int {
	if p.Attempts > 0 {
		return p.Attempts
	}
	return MaxUncordonAttempts
}

// Cap is the longest wait (MaxDelay, or UncordonBackoffMax when unset).
func (p UncordonPolicy) Cap() time.Duration {
	if p.MaxDelay > 0 {
		return p.MaxDelay
	}
	return UncordonBackoffMax
}

// Delay is the wait before the next uncordon after the failures-th failed one, given the failed
// event's draw in [0, 1): UncordonBackoff doubled per earlier failure, at most Cap, less the
// Jitter share of it times draw, rounded to the millisecond. Jitter and draw outside 0..1 are
// taken as their nearest bound.
func (p UncordonPolicy) Delay(failures int, draw float64) time.Duration {
	limit := p.Cap()
	d := UncordonBackoff
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	spread := max(0, min(p.Jitter, 1)) * max(0, min(draw, 1))
	return (d - time.Duration(spread*float64(d))).Round(time.Millisecond)
}

// Policy is the node's reconfiguration policy.
type Policy struct {
	// Cooldown is the least time between two changes of one GPU.
	Cooldown time.Duration `json:"cooldown"`
	// MaxChanges is how many changes may start per Window on the node; 0 means no limit.
	MaxChanges int `json:"maxChanges"`
	// Window is the period MaxChanges counts over.
	Window time.Duration `json:"window"`
	// Uncordon bounds and spreads a failed uncordon's retries; the zero value is ADR 0073's.
	Uncordon UncordonPolicy `json:"uncordon,omitzero"`
}

// Desired asks for one GPU's layout.
type Desired struct {
	GPU    string     `json:"gpu"`   // GPU UUID
	Board  string     `json:"board"` // canonical board name
	Layout gpu.Layout `json:"layout"`
	// Current is the layout the GPU had when the desire was made; the gate reads it again
	// before applying.
	Current gpu.Layout `json:"current"`
}

// OpKind is a destroy or a create.
type OpKind string

// Op kinds.
const (
	OpDestroy OpKind = "destroy"
	OpCreate  OpKind = "create"
)

// Op is one instance to destroy or create.
type Op struct {
	Kind     OpKind       `json:"kind"`
	Instance gpu.Instance `json:"instance"`
}

// Change is the active reconfiguration of one GPU.
type Change struct {
	GPU   string     `json:"gpu"`
	Board string     `json:"board"`
	From  gpu.Layout `json:"from"` // the layout observed when the change started
	To    gpu.Layout `json:"to"`   // the desired layout
	Phase Phase      `json:"phase"`
	// Rollback is set while restoring From; Target then returns From.
	Rollback bool `json:"rollback,omitzero"`
	// Attempts counts rollback attempts.
	Attempts int `json:"attempts,omitzero"`
	// Ops are the remaining ops of the current apply.
	Ops []Op `json:"ops,omitzero"`
	// Touched is set once the first op was issued: From is no longer refreshed from observation.
	Touched bool `json:"touched,omitzero"`
	// Created are the instances this change created (the smoke check runs on them).
	Created gpu.Layout `json:"created,omitzero"`
	// Cause is the note that started the rollback, if any.
	Cause *Note     `json:"cause,omitzero"`
	Start time.Time `json:"start"`
}

// Target is the layout the change is driving the GPU to now.
func (c *Change) Target() gpu.Layout {
	if c.Rollback {
		return c.From
	}
	return c.To
}

// Note is a recorded decision: a closed code and a sentence with the numbers.
type Note struct {
	At      time.Time `json:"at"`
	GPU     string    `json:"gpu,omitzero"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
}

// State is everything the gate knows. It is a value: Step never changes the state it is given.
type State struct {
	Policy Policy `json:"policy"`
	// Seq numbers the actions; an outcome names the action it answers.
	Seq uint64 `json:"seq"`
	// Cordoned is set from the cordon's success until the uncordon's; CordonReason says why.
	Cordoned     bool    `json:"cordoned,omitzero"`
	CordonReason string  `json:"cordonReason,omitzero"`
	Active       *Change `json:"active,omitzero"`
	// Pending is the action whose outcome the gate waits for (at most one).
	Pending *Action   `json:"pending,omitzero"`
	Queue   []Desired `json:"queue,omitzero"`
	// LastChange is when each GPU last finished a change (or gave one up), by UUID.
	LastChange map[string]time.Time `json:"lastChange,omitzero"`
	// Recent are the start times of changes inside the rate window.
	Recent []time.Time `json:"recent,omitzero"`
	// UncordonFailures counts the failed uncordons of the pending retry (0 when none failed);
	// UncordonError is the last one's error. Both are journaled: a restart keeps the count.
	UncordonFailures int    `json:"uncordonFailures,omitzero"`
	UncordonError    string `json:"uncordonError,omitzero"`
	// Notes are the most recent decisions, newest last (at most MaxNotes).
	Notes []Note `json:"notes,omitzero"`
	// Counts counts every note ever recorded, by code (notes are capped; counts are not).
	Counts map[string]int `json:"counts,omitzero"`
}

// MaxNotes bounds State.Notes.
const MaxNotes = 64

// Phase returns the active change's phase, or idle.
func (s State) Phase() Phase {
	if s.Active == nil {
		return PhaseIdle
	}
	return s.Active.Phase
}

// ActionKind says what an action does.
type ActionKind string

// Action kinds.
const (
	ActCordon   ActionKind = "cordon"   // mark the node unschedulable, with Reason
	ActDrain    ActionKind = "drain"    // move the replicas off Instances of GPU
	ActObserve  ActionKind = "observe"  // read GPU's layout; answer with EvDone.Observed
	ActDestroy  ActionKind = "destroy"  // destroy Instance on GPU (compute instances, then the GPU instance)
	ActCreate   ActionKind = "create"   // create Instance on GPU (GPU instance, then a full compute instance)
	ActSmoke    ActionKind = "smoke"    // run the smoke check on Instances of GPU
	ActUncordon ActionKind = "uncordon" // mark the node schedulable again
)

// Action is one thing the executor must do, then answer with EvDone or EvFailed naming its ID.
type Action struct {
	ID        uint64       `json:"id"`
	Kind      ActionKind   `json:"kind"`
	GPU       string       `json:"gpu,omitzero"`
	Board     string       `json:"board,omitzero"`
	Instance  gpu.Instance `json:"instance,omitzero"`
	Instances gpu.Layout   `json:"instances,omitzero"`
	Reason    string       `json:"reason,omitzero"`
	// NotBefore, when set, is the earliest time to perform the action (a retry's backoff): the
	// executor waits until then.
	NotBefore time.Time `json:"notBefore,omitzero"`
}

// Observation is a GPU's layout as the device reports it.
type Observation struct {
	// Layout holds the complete instances (a GPU instance with its compute instance).
	Layout gpu.Layout `json:"layout"`
	// Partial holds GPU instances without a compute instance: left by a crash during a create.
	Partial gpu.Layout `json:"partial,omitzero"`
}

// EventKind says what happened.
type EventKind string

// Event kinds.
const (
	EvDesire  EventKind = "desire"  // Desired asks for a layout
	EvDone    EventKind = "done"    // the action ID succeeded (Observed set for observe)
	EvFailed  EventKind = "failed"  // the action ID failed with Error
	EvTick    EventKind = "tick"    // time passed: start a deferred change if now allowed
	EvRecover EventKind = "recover" // the executor restarted: re-issue or re-observe
	EvReset   EventKind = "reset"   // an operator clears a failed change
)

// Event is an input to Step.
type Event struct {
	Kind     EventKind    `json:"kind"`
	ID       uint64       `json:"id,omitzero"`
	Desired  Desired      `json:"desired,omitzero"`
	Observed *Observation `json:"observed,omitzero"`
	Error    string       `json:"error,omitzero"`
	// Draw, in [0, 1), is the executor's draw from its random source for a failed action: a
	// failed uncordon's retry waits less by Policy.Uncordon.Jitter times it. The gate draws
	// nothing itself; like now, randomness is its argument. Zero: no spread.
	Draw float64 `json:"draw,omitzero"`
}
