// Package gate owns the MIG reconfiguration state machine of one node: the only way gpupool
// changes a GPU's MIG geometry. It is pure: Step(state, event, now) returns the next state and
// the actions to perform; it reads no clock, touches no device and does no IO. An executor
// outside the core (internal/agent) performs each action, journals every state before acting,
// and feeds the outcome back as an event.
//
// # The sequence
//
// One change (one GPU, from one layout to another) runs at a time:
//
//	cordon → drain → observe → apply (destroy, create …) → verify → smoke → uncordon
//
// Apply is incremental: Ops diffs the observed layout against the target and destroys only the
// instances not in the target (plus any half-made instance, a GPU instance without its compute
// instance), then creates only the instances missing, largest first (gpu.Board.CreationOrder).
// Replicas on untouched instances keep running; drain only names the instances being destroyed.
//
// Before applying, and again to verify, the gate asks for the GPU's layout as the device reports
// it (ActObserve) rather than trusting what it believes: after a crash, or after a failed create
// whose effect is unknown, the next ops are computed from what is really there. That is what
// makes resuming after kill -9 safe: an executor that restarts re-reads its last journaled state,
// sends EvRecover, and the gate re-issues the pending action (cordon, drain, smoke and uncordon
// are idempotent) or observes again (destroy, create, observe).
//
// # Failure and rollback
//
// A failed cordon gives up the change and records why. A failed drain, or a failure before
// the first destroy or create, uncordons with the GPU untouched. A failed destroy, create, verify or smoke rolls back: the target becomes the old
// layout, applied the same way (observe, ops, verify), then the node is uncordoned with the
// reason on record (ReasonRolledBack). A rollback that fails MaxRollbackAttempts times leaves the
// node cordoned, phase failed, with the reason in State.CordonReason, until an operator sends
// EvReset: the node is never left cordoned without a reason on record. A failed uncordon is
// retried no earlier than Action.NotBefore, Policy.Uncordon.Delay after the failure (1 s doubling
// to its cap, 30 s by default), counted in State.UncordonFailures; after Policy.Uncordon.Limit
// attempts (8 by default) the change fails the same way, with the count and the last error as the
// reason (ADR 0073). Policy.Uncordon.Jitter makes a share of each wait random, so that nodes whose
// uncordons fail together do not retry in lockstep; the randomness is an argument like the time:
// the failed event carries the executor's draw (Event.Draw), and the gate, drawing nothing itself,
// turns it into the retry's NotBefore.
//
// # Rate
//
// A GPU is re-partitioned at most once per Policy.Cooldown (api/v1 Policy.ReconfigCooldown), and
// the node starts at most Policy.MaxChanges changes per Policy.Window. A deferred change stays
// queued with a note (ReasonGateCooldown, ReasonGateRateLimit) and starts on a later event
// (EvTick) once allowed. A newer desired layout for a queued GPU replaces the older one.
//
// Every note carries a closed reason code and a sentence with the numbers behind it.
package gate
