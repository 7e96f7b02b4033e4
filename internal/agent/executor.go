package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"gpupool.dev/gpupool/internal/gate"
)

// Executor performs the gate's actions. Every state the gate returns is journaled (written and
// fsynced) before its action is performed, so a process killed at any instant restarts from a
// state that names the action in flight, and the gate re-issues or re-observes it.
type Executor struct {
	Journal *Journal
	Deps

	mu    sync.Mutex
	state gate.State
}

// Deps are what the executor acts through.
type Deps struct {
	MIG   MIG
	Node  Node
	Smoke Smoker
	// Now is the clock (a fake clock under --fake and in tests).
	Now func() time.Time
	// Sleep waits d or until ctx ends (then it returns ctx's error): the wait before a retry whose
	// time the gate set (gate.Action.NotBefore). Nil means a timer; tests pass a fake clock's.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand, when set, draws uniformly from [0, 1) for every failed action's event (gate.Event.Draw),
	// which spreads a failed uncordon's retry by the policy's jitter (gate.UncordonPolicy): give
	// each node its own seeded source, so that nodes failing together do not retry in lockstep.
	// Nil draws 0: no spread. It is called with the executor's lock held, never concurrently.
	Rand func() float64
	// ActionTimeout bounds one action (drain and smoke are the long ones); 0 means 10 min.
	ActionTimeout time.Duration
	Log           *slog.Logger
	// OnAction, when set, is told of every action performed and its outcome (the CLI prints them).
	OnAction func(a gate.Action, at time.Time, err error)
	// OnNote, when set, is told of every note the gate records, as it records it.
	OnNote func(n gate.Note)
}

// NewExecutor resumes from the journal's last state (or starts from init) and re-issues the
// action that was in flight when the process stopped.
func NewExecutor(ctx context.Context, j *Journal, rep Replay, init gate.State, d Deps) (*Executor, error) {
	x := &Executor{Journal: j, Deps: d}
	if x.Now == nil {
		x.Now = time.Now
	}
	if x.ActionTimeout <= 0 {
		x.ActionTimeout = 10 * time.Minute
	}
	if x.Log == nil {
		x.Log = slog.New(slog.DiscardHandler)
	}
	if x.Sleep == nil {
		x.Sleep = sleep
	}
	x.state = init
	if rep.Last != nil {
		x.state = *rep.Last
		x.state.Policy = init.Policy // policy comes from the configuration, not the journal
	}
	if err := x.step(ctx, gate.Event{Kind: gate.EvRecover}); err != nil {
		return nil, fmt.Errorf("resume gate: %w", err)
	}
	return x, nil
}

// State returns a copy of the gate's state.
func (x *Executor) State() gate.State {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.state
}

// Submit asks for a GPU layout and runs the gate until it waits for nothing.
func (x *Executor) Submit(ctx context.Context, d gate.Desired) error {
	return x.step(ctx, gate.Event{Kind: gate.EvDesire, Desired: d})
}

// Tick lets deferred changes start once policy allows.
func (x *Executor) Tick(ctx context.Context) error { return x.step(ctx, gate.Event{Kind: gate.EvTick}) }

// SetMIGMode turns the GPU's MIG mode on or off when the gate is idle and the node is not
// cordoned (off only once the gate has removed every instance), and says whether it did. Setting a
// mode is idempotent, so it is not journaled: after a crash the GPU still reads its old mode and
// the next call sets it again. Without a MIGMode port it does nothing; where the new mode waits
// for a GPU reset the port returns an error and the mode stays.
func (x *Executor) SetMIGMode(g GPUInfo, on bool) (bool, error) {
	mm, ok := x.MIG.(MIGMode)
	if !ok || g.MIG == on || !on && len(g.Instances) > 0 {
		return false, nil
	}
	if st := x.State(); st.Phase() != gate.PhaseIdle || st.Cordoned {
		return false, nil
	}
	if err := mm.SetMIGMode(g.UUID, on); err != nil {
		return false, fmt.Errorf("MIG mode %s on GPU %s: %w", onOff(on), g.UUID, err)
	}
	return true, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// Reset clears a failed change (an operator's decision).
func (x *Executor) Reset(ctx context.Context) error {
	return x.step(ctx, gate.Event{Kind: gate.EvReset})
}

// step feeds one event, journals the result, and performs the actions, feeding their outcomes
// back until the gate has nothing to do. An action the gate wants no earlier than a time (a
// retry's backoff) is waited for without the lock, so that State (the agent's /healthz and
// metrics) and the other callers are answered meanwhile; those find the action already issued and
// leave it to this call. A context that ends during the wait leaves the action journaled, due at
// its time: the next start performs it with the journaled attempt count.
func (x *Executor) step(ctx context.Context, ev gate.Event) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for {
		next, acts := gate.Step(x.state, ev, x.Now())
		if len(acts) == 0 && reflect.DeepEqual(next, x.state) {
			return nil // nothing changed (an idle tick): nothing to make durable
		}
		if err := x.Journal.Append(next); err != nil {
			return fmt.Errorf("journal gate step %s: %w", ev.Kind, err)
		}
		if x.OnNote != nil {
			k := min(total(next.Counts)-total(x.state.Counts), len(next.Notes))
			for _, n := range next.Notes[len(next.Notes)-max(k, 0):] {
				x.OnNote(n)
			}
		}
		x.state = next
		if len(acts) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err // the pending action is journaled: the next start performs it
		}
		a := acts[0]
		if !a.NotBefore.IsZero() {
			if d := a.NotBefore.Sub(x.Now()); d > 0 {
				x.Log.Info("gate action waits", "id", a.ID, "kind", a.Kind, "for", d, "failures", x.state.UncordonFailures)
				x.mu.Unlock()
				err := x.Sleep(ctx, d)
				x.mu.Lock()
				if err != nil {
					return err
				}
				if x.state.Pending == nil || x.state.Pending.ID != a.ID {
					return nil // no longer the gate's pending action
				}
			}
		}
		ev = x.perform(ctx, a)
	}
}

// sleep waits d on a timer, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// perform runs one action and returns its outcome as an event.
func (x *Executor) perform(ctx context.Context, a gate.Action) gate.Event {
	ctx, cancel := context.WithTimeout(ctx, x.ActionTimeout)
	defer cancel()
	ev := gate.Event{Kind: gate.EvDone, ID: a.ID}
	var err error
	switch a.Kind {
	case gate.ActCordon:
		err = x.Node.Cordon(ctx, a.Reason)
	case gate.ActUncordon:
		err = x.Node.Uncordon(ctx)
	case gate.ActDrain:
		err = x.Node.Drain(ctx, a.GPU, a.Instances)
	case gate.ActObserve:
		var obs gate.Observation
		obs.Layout, obs.Partial, err = x.MIG.Observe(a.GPU, a.Board)
		ev.Observed = &obs
	case gate.ActCreate:
		err = x.MIG.Create(a.GPU, a.Board, a.Instance)
	case gate.ActDestroy:
		err = x.MIG.Destroy(a.GPU, a.Board, a.Instance)
	case gate.ActSmoke:
		if x.Smoke != nil {
			err = x.Smoke.Smoke(ctx, a.GPU, a.Instances)
		}
	default:
		err = errors.New("unknown action")
	}
	x.Log.Info("gate action", "id", a.ID, "kind", a.Kind, "gpu", a.GPU, "instance", a.Instance.String(), "err", err)
	if x.OnAction != nil {
		x.OnAction(a, x.Now(), err)
	}
	if err != nil {
		failed := gate.Event{Kind: gate.EvFailed, ID: a.ID, Error: err.Error()}
		if x.Rand != nil {
			failed.Draw = x.Rand()
		}
		return failed
	}
	return ev
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
