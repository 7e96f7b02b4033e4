package gate

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// Step applies one event to the state and returns the next state and the actions to perform now
// (at most one: the gate waits for each outcome). It never changes s; now is the event's time.
func Step(s State, ev Event, now time.Time) (State, []Action) {
	n := s.clone()
	switch ev.Kind {
	case EvDesire:
		n.enqueue(ev.Desired)
	case EvDone, EvFailed:
		if n.Pending == nil || n.Pending.ID != ev.ID {
			return s, nil // a stale or duplicate outcome: ignored
		}
		act := *n.Pending
		n.Pending = nil
		if ev.Kind == EvDone {
			n.done(act, ev.Observed, now)
		} else {
			n.failed(act, ev.Error, ev.Draw, now)
		}
	case EvRecover:
		n.recover(now)
	case EvReset:
		if n.Active != nil && n.Active.Phase == PhaseFailed {
			n.note(now, n.Active.GPU, ReasonReset, "operator reset the failed change of GPU %s; the node is uncordoned", n.Active.GPU)
			n.finish(now)
			n.UncordonFailures, n.UncordonError = 0, "" // an operator's reset gets a fresh count
			n.issue(Action{Kind: ActUncordon})
		}
	case EvTick:
	}
	n.tryStart(now)
	if n.Pending == nil || (s.Pending != nil && s.Pending.ID == n.Pending.ID) {
		return n, nil // nothing new to do: the pending action, if any, was issued before
	}
	return n, []Action{*n.Pending}
}

func (s State) clone() State {
	n := s
	if s.Active != nil {
		c := *s.Active
		c.Ops = slices.Clone(c.Ops)
		c.Created = slices.Clone(c.Created)
		n.Active = &c
	}
	if s.Pending != nil {
		p := *s.Pending
		n.Pending = &p
	}
	n.Queue = slices.Clone(s.Queue)
	n.LastChange = maps.Clone(s.LastChange)
	n.Recent = slices.Clone(s.Recent)
	n.Notes = slices.Clone(s.Notes)
	n.Counts = maps.Clone(s.Counts)
	return n
}

func (s *State) note(now time.Time, gpuID, code, format string, args ...any) {
	s.Notes = append(s.Notes, Note{At: now, GPU: gpuID, Code: code, Message: fmt.Sprintf(format, args...)})
	if s.Counts == nil {
		s.Counts = map[string]int{}
	}
	s.Counts[code]++
	if len(s.Notes) > MaxNotes {
		s.Notes = slices.Clone(s.Notes[len(s.Notes)-MaxNotes:])
	}
}

// enqueue queues d, replacing an older desire for the same GPU.
func (s *State) enqueue(d Desired) {
	for i := range s.Queue {
		if s.Queue[i].GPU == d.GPU {
			s.Queue[i] = d
			return
		}
	}
	s.Queue = append(s.Queue, d)
}

// issue makes a the pending action, numbering it.
func (s *State) issue(a Action) {
	s.Seq++
	a.ID = s.Seq
	if s.Active != nil && a.GPU == "" && a.Kind != ActCordon && a.Kind != ActUncordon {
		a.GPU, a.Board = s.Active.GPU, s.Active.Board
	}
	s.Pending = &a
}

// tryStart starts the first queued change that policy allows, when none is active.
func (s *State) tryStart(now time.Time) {
	if s.Active != nil || s.Pending != nil {
		return
	}
	s.Recent = slices.DeleteFunc(s.Recent, func(t time.Time) bool { return !t.After(now.Add(-s.Policy.Window)) })
	for i := 0; i < len(s.Queue); i++ {
		d := s.Queue[i]
		if last, ok := s.LastChange[d.GPU]; ok && now.Sub(last) < s.Policy.Cooldown {
			wait := s.Policy.Cooldown - now.Sub(last)
			s.noteOnce(now, d.GPU, ReasonGateCooldown, "GPU %s changed %s ago; cooldown is %s, retry in %s",
				d.GPU, now.Sub(last), s.Policy.Cooldown, wait)
			continue
		}
		if s.Policy.MaxChanges > 0 && len(s.Recent) >= s.Policy.MaxChanges {
			s.noteOnce(now, d.GPU, ReasonGateRateLimit, "%d changes started in the last %s, the most allowed is %d; GPU %s waits",
				len(s.Recent), s.Policy.Window, s.Policy.MaxChanges, d.GPU)
			return
		}
		s.Queue = slices.Delete(s.Queue, i, i+1)
		from, to := slices.Clone(d.Current).Sorted(), slices.Clone(d.Layout).Sorted()
		if slices.Equal(from, to) {
			s.note(now, d.GPU, ReasonNoChange, "GPU %s already has %q", d.GPU, to.String())
			i--
			continue
		}
		if from == nil {
			from = gpu.Layout{}
		}
		s.Recent = append(s.Recent, now)
		s.Active = &Change{GPU: d.GPU, Board: d.Board, From: from, To: to, Phase: PhaseCordon, Start: now}
		reason := fmt.Sprintf("gpupool gate: re-partitioning GPU %s to %q", d.GPU, d.Layout.String())
		s.note(now, d.GPU, ReasonStarted, "re-partitioning GPU %s to %q (%d instances)", d.GPU, d.Layout.String(), len(d.Layout))
		s.issue(Action{Kind: ActCordon, Reason: reason})
		return
	}
}

// noteOnce records a deferral unless the newest note for the GPU already has the same code.
func (s *State) noteOnce(now time.Time, gpuID, code, format string, args ...any) {
	for i := len(s.Notes) - 1; i >= 0; i-- {
		if s.Notes[i].GPU == gpuID {
			if s.Notes[i].Code == code {
				return
			}
			break
		}
	}
	s.note(now, gpuID, code, format, args...)
}

// finish ends the active change and starts the GPU's cooldown.
func (s *State) finish(now time.Time) {
	if s.LastChange == nil {
		s.LastChange = map[string]time.Time{}
	}
	s.LastChange[s.Active.GPU] = now
	s.Active.Phase = PhaseUncordon
}

func (s *State) done(a Action, obs *Observation, now time.Time) {
	c := s.Active
	switch a.Kind {
	case ActCordon:
		s.Cordoned, s.CordonReason = true, a.Reason
		if c.Phase == PhaseFailed {
			return // the failure's reason is now on the node; wait for EvReset
		}
		c.Phase = PhaseDrain
		s.issue(Action{Kind: ActDrain, Instances: s.toDrain()})
	case ActDrain:
		c.Phase = PhaseObserve
		s.issue(Action{Kind: ActObserve})
	case ActObserve:
		s.observed(obs, now)
	case ActDestroy, ActCreate:
		if a.Kind == ActCreate && !c.Rollback {
			c.Created = append(c.Created, a.Instance)
		}
		c.Ops = c.Ops[1:]
		s.nextOp()
	case ActSmoke:
		s.note(now, c.GPU, ReasonDone, "GPU %s re-partitioned from %q to %q in %s", c.GPU, c.From.String(), c.To.String(), took(c, now))
		s.finish(now)
		s.issue(Action{Kind: ActUncordon})
	case ActUncordon:
		s.Cordoned, s.CordonReason = false, ""
		s.UncordonFailures, s.UncordonError = 0, ""
		s.Active = nil
	}
}

// toDrain lists the instances that the change destroys: those of From not in To. Replicas on the
// other instances keep running.
func (s *State) toDrain() gpu.Layout {
	c := s.Active
	var out gpu.Layout
	for _, op := range diff(c.From, c.Target(), nil, c.Board) {
		if op.Kind == OpDestroy {
			out = append(out, op.Instance)
		}
	}
	return out
}

func (s *State) observed(obs *Observation, now time.Time) {
	c := s.Active
	if obs == nil {
		obs = &Observation{}
	}
	switch c.Phase {
	case PhaseObserve:
		if !c.Touched && !c.Rollback {
			// Nothing applied yet: what the device reports is the layout to roll back to.
			c.From = append(gpu.Layout{}, slices.Clone(obs.Layout).Sorted()...)
		}
		c.Ops = diff(obs.Layout, c.Target(), obs.Partial, c.Board)
		c.Phase = PhaseApply
		s.nextOp()
	case PhaseVerify:
		want, got := c.Target().Sorted(), slices.Clone(obs.Layout).Sorted()
		if slices.Equal(want, got) && len(obs.Partial) == 0 {
			s.verified(now)
			return
		}
		msg := fmt.Sprintf("GPU %s reads back %q (%d partial), want %q", c.GPU, got.String(), len(obs.Partial), want.String())
		s.fail(now, ReasonVerifyMismatch, msg)
	}
}

func (s *State) verified(now time.Time) {
	c := s.Active
	if c.Rollback {
		s.note(now, c.GPU, ReasonRolledBack, "GPU %s is back at %q; uncordoning (%s)", c.GPU, c.From.String(), causeOf(c))
		s.finish(now)
		s.issue(Action{Kind: ActUncordon})
		return
	}
	c.Phase = PhaseSmoke
	s.issue(Action{Kind: ActSmoke, Instances: slices.Clone(c.Created)})
}

func causeOf(c *Change) string {
	if c.Cause == nil {
		return "no cause recorded"
	}
	return c.Cause.Code + ": " + c.Cause.Message
}

// nextOp issues the next op, or the verify when none is left.
func (s *State) nextOp() {
	c := s.Active
	if len(c.Ops) == 0 {
		c.Phase = PhaseVerify
		s.issue(Action{Kind: ActObserve})
		return
	}
	op := c.Ops[0]
	c.Touched = true
	kind := ActCreate
	if op.Kind == OpDestroy {
		kind = ActDestroy
	}
	s.issue(Action{Kind: kind, Instance: op.Instance})
}

func (s *State) failed(a Action, errText string, draw float64, now time.Time) {
	c := s.Active
	switch {
	case a.Kind == ActCordon && c.Phase == PhaseFailed:
		// The node is still cordoned with the change's reason; the failure's is in the journal.
		s.note(now, c.GPU, ReasonCordonFailed, "re-cordon with the failure's reason failed: %s", errText)
	case a.Kind == ActCordon:
		s.note(now, c.GPU, ReasonCordonFailed, "cordon for GPU %s failed: %s; change given up", c.GPU, errText)
		s.finish(now)
		s.Active = nil
	case a.Kind == ActDrain:
		s.note(now, c.GPU, ReasonDrainFailed, "drain of GPU %s failed: %s; GPU untouched, uncordoning", c.GPU, errText)
		s.finish(now)
		s.issue(Action{Kind: ActUncordon})
	case a.Kind == ActUncordon:
		s.uncordonFailed(now, errText, draw)
	case a.Kind == ActSmoke:
		s.fail(now, ReasonSmokeFailed, fmt.Sprintf("smoke check on GPU %s instances %q failed: %s", c.GPU, a.Instances.String(), errText))
	default: // observe, destroy, create
		what := string(a.Kind)
		if a.Instance.Profile != "" {
			what += " " + a.Instance.String()
		}
		s.fail(now, ReasonApplyFailed, fmt.Sprintf("%s on GPU %s failed: %s", what, c.GPU, errText))
	}
}

// uncordonFailed retries the uncordon after Policy.Uncordon.Delay (spread by the event's draw),
// or, after Policy.Uncordon.Limit failures, fails the change: the node stays cordoned, with the
// attempts and the last error as its reason, until EvReset. (An uncordon retried at once, without
// limit, spun as fast as the journal's fsync.)
func (s *State) uncordonFailed(now time.Time, errText string, draw float64) {
	s.UncordonFailures++
	s.UncordonError = errText
	gpuID := ""
	if s.Active != nil {
		gpuID = s.Active.GPU
	}
	// (Every uncordon ends a change, so Active is set; without one there is no change to fail.)
	limit := s.Policy.Uncordon.Limit()
	if s.UncordonFailures < limit || s.Active == nil {
		wait := s.Policy.Uncordon.Delay(s.UncordonFailures, draw)
		s.note(now, gpuID, ReasonUncordonFailed, "uncordon attempt %d of %d failed: %s; retrying in %s",
			s.UncordonFailures, limit, errText, wait)
		s.issue(Action{Kind: ActUncordon, NotBefore: now.Add(wait)})
		return
	}
	c := s.Active
	c.Phase = PhaseFailed
	c.Ops = nil
	s.CordonReason = fmt.Sprintf("gpupool gate: uncordon failed %d times, the last with: %s; the node stays cordoned; operator reset needed",
		s.UncordonFailures, errText)
	s.note(now, gpuID, ReasonUncordonGaveUp, "%s", s.CordonReason)
	// Cordon again with this reason, so that the node itself says why it stays cordoned (when the
	// node can be written at all; a failure of this cordon is noted and changes nothing).
	s.issue(Action{Kind: ActCordon, Reason: s.CordonReason})
}

// fail starts (or retries) the rollback, or gives up after MaxRollbackAttempts.
func (s *State) fail(now time.Time, code, msg string) {
	c := s.Active
	if !c.Rollback && !c.Touched {
		// Nothing was destroyed or created yet: the GPU is as it was; give the change up.
		s.note(now, c.GPU, code, "%s; nothing was changed on the GPU, uncordoning", msg)
		s.finish(now)
		s.issue(Action{Kind: ActUncordon})
		return
	}
	if !c.Rollback {
		s.note(now, c.GPU, code, "%s; rolling back to %q", msg, c.From.String())
		c.Cause = &s.Notes[len(s.Notes)-1]
		c.Rollback = true
	} else {
		s.note(now, c.GPU, code, "rollback attempt %d: %s", c.Attempts, msg)
	}
	c.Attempts++
	if c.Attempts > MaxRollbackAttempts {
		c.Phase = PhaseFailed
		c.Ops = nil
		s.CordonReason = fmt.Sprintf("gpupool gate: GPU %s could not be restored to %q after %d attempt%s (%s); operator reset needed",
			c.GPU, c.From.String(), c.Attempts-1, plural(c.Attempts-1), causeOf(c))
		s.note(now, c.GPU, ReasonRollbackFailed, "%s", s.CordonReason)
		// Cordon again with this reason, so that the node itself says why it stays cordoned.
		s.issue(Action{Kind: ActCordon, Reason: s.CordonReason})
		return
	}
	c.Phase = PhaseObserve
	c.Ops = nil
	s.issue(Action{Kind: ActObserve})
}

// recover re-issues the pending action after a restart; destroy and create, whose effect is
// unknown, become a fresh observation.
func (s *State) recover(now time.Time) {
	if s.Pending == nil {
		return
	}
	p := *s.Pending
	s.Pending = nil
	gpuID := ""
	if s.Active != nil {
		gpuID = s.Active.GPU
	}
	s.note(now, gpuID, ReasonRecovered, "restarted with %s action %d pending in phase %s; resuming", p.Kind, p.ID, s.Phase())
	switch p.Kind {
	case ActDestroy, ActCreate, ActObserve:
		c := s.Active
		if c.Phase == PhaseApply {
			c.Phase = PhaseObserve
		}
		c.Ops = nil
		s.issue(Action{Kind: ActObserve})
	default:
		p.ID = 0
		if !p.NotBefore.IsZero() {
			// A retry's backoff resumes from the journaled time, but never waits longer than the
			// longest backoff (a clock that starts over, or stepped back, would otherwise stall it).
			if limit := now.Add(s.Policy.Uncordon.Cap()); p.NotBefore.After(limit) {
				p.NotBefore = limit
			}
		}
		s.issue(p)
	}
}

// Ops returns the ops that take a GPU of the board from layout have (plus partial instances)
// to want: destroy what is not wanted (and every partial instance), then create what is missing,
// largest first. Instances in both are untouched.
func Ops(board string, have, want, partial gpu.Layout) []Op { return diff(have, want, partial, board) }

func diff(have, want, partial gpu.Layout, board string) []Op {
	count := map[gpu.Instance]int{}
	for _, in := range want {
		count[in]++
	}
	var ops []Op
	for _, in := range slices.Clone(have).Sorted() {
		if count[in] > 0 {
			count[in]--
			continue
		}
		ops = append(ops, Op{Kind: OpDestroy, Instance: in})
	}
	for _, in := range slices.Clone(partial).Sorted() {
		ops = append(ops, Op{Kind: OpDestroy, Instance: in})
	}
	var create gpu.Layout
	for _, in := range want {
		if count[in] > 0 {
			count[in]--
			create = append(create, in)
		}
	}
	if b, err := gpu.Lookup(board); err == nil {
		create = b.CreationOrder(create)
	} else {
		create = create.Sorted()
	}
	for _, in := range create {
		ops = append(ops, Op{Kind: OpCreate, Instance: in})
	}
	return ops
}

// took is how long the change has run, in words. A clock behind the change's start (the
// executor restarted with a clock that starts over, or the clock stepped back) gives no
// negative duration: it says the time is unknown.
func took(c *Change, now time.Time) string {
	d := now.Sub(c.Start)
	if d < 0 {
		return fmt.Sprintf("an unknown time (the clock is %s behind the change's start, %s)", -d, c.Start.Format(time.RFC3339))
	}
	return d.String()
}

// plural is the "s" of a count's noun: "" for one.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
