package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"gpupool.dev/gpupool/internal/store"
)

// Store is the port the Loop persists through (store.Bolt implements it).
type Store interface {
	Load(ctx context.Context) (store.Snapshot, error)
	Commit(ctx context.Context, b store.Batch) (uint64, error)
}

// Clock is the port the Loop reads time from.
type Clock interface{ Now() time.Time }

// SystemClock reads the machine's clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// op is one command for the engine; it runs on the loop goroutine.
type op struct {
	run   func(e *Engine, now time.Time) (any, error)
	reply chan result
}

type result struct {
	val any
	err error
}

// Loop feeds the Engine from one goroutine. It applies queued commands in groups, writes each
// group's changes in one store commit (one fsync for the group) and only then answers the
// callers, so an answered write is on disk. Readers get the latest View without locks.
type Loop struct {
	store    Store
	clock    Clock
	log      *slog.Logger
	engine   *Engine
	ops      chan op
	view     atomic.Pointer[View]
	changed  atomic.Pointer[chan struct{}]
	tick     time.Duration
	maxGroup int
	onCommit func(group int, d time.Duration)
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	Engine EngineConfig
	// Tick is how often the engine's periodic step runs (default 1s).
	Tick time.Duration
	// OnCommit, when set, is told the size and duration of every group commit (for metrics).
	OnCommit func(group int, d time.Duration)
}

// ErrStopped is returned to commands sent after the loop ended.
var ErrStopped = errors.New("control loop stopped")

// NewLoop restores the engine from the store and persists what the restore decided.
func NewLoop(ctx context.Context, cfg LoopConfig, st Store, clock Clock, log *slog.Logger) (*Loop, error) {
	snap, err := st.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("start loop: %w", err)
	}
	state, err := stateFrom(snap)
	if err != nil {
		return nil, fmt.Errorf("start loop: %w", err)
	}
	e, err := restoreEngine(cfg.Engine, clock.Now(), state)
	if err != nil {
		return nil, fmt.Errorf("start loop: %w", err)
	}
	l := &Loop{store: st, clock: clock, log: log, engine: e, ops: make(chan op, 1024), tick: cfg.Tick,
		maxGroup: 256, onCommit: cfg.OnCommit}
	if l.tick <= 0 {
		l.tick = time.Second
	}
	rev, err := l.commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("start loop: %w", err)
	}
	if rev == 0 {
		rev = snap.Revision
	}
	ch := make(chan struct{})
	l.changed.Store(&ch)
	l.view.Store(e.View(rev))
	return l, nil
}

// View is the latest committed state.
func (l *Loop) View() *View { return l.view.Load() }

// Changed returns a channel closed at the next commit.
func (l *Loop) Changed() <-chan struct{} { return *l.changed.Load() }

// Do runs fn on the engine and returns once its changes are committed.
func (l *Loop) Do(ctx context.Context, fn func(e *Engine, now time.Time) (any, error)) (any, error) {
	o := op{run: fn, reply: make(chan result, 1)}
	select {
	case l.ops <- o:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-o.reply:
		return r.val, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stage is one applied group on its way to disk: its batch, the view it makes, its answers.
type stage struct {
	batch   store.Batch
	changed bool
	view    *View
	ops     []op
	replies []result
}

// Run processes commands until ctx ends or a commit fails. It is a two-step pipeline: this
// goroutine applies group N+1 to the engine while a committer writes group N, so the engine's
// work overlaps the fsync. Commits, publications and answers keep the groups' order, and a
// group is answered only after its own commit (and every earlier one) is on disk. A failed commit
// ends the loop with the error: the engine then holds state the store does not, and only a
// restart (which restores from the store) makes them agree again.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.tick)
	defer t.Stop()
	stages := make(chan *stage, 1)
	failed := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); l.committer(ctx, stages, failed) }()
	stop := func(err error) error {
		close(stages)
		<-done
		l.drain()
		return err
	}
	for {
		st := &stage{ops: make([]op, 0, 8)}
		select {
		case <-ctx.Done():
			return stop(nil)
		case err := <-failed:
			return stop(err)
		case <-t.C:
			st.ops = append(st.ops, op{run: func(e *Engine, now time.Time) (any, error) { return nil, e.Tick(now) }})
		case o := <-l.ops:
			st.ops = append(st.ops, o)
		}
	fill:
		for len(st.ops) < l.maxGroup {
			select {
			case o := <-l.ops:
				st.ops = append(st.ops, o)
			default:
				break fill
			}
		}
		for _, o := range st.ops {
			v, err := o.run(l.engine, l.clock.Now())
			st.replies = append(st.replies, result{v, err})
		}
		c := l.engine.Take()
		if !c.Empty() {
			b, err := l.engine.batchFor(c)
			if err != nil {
				l.answer(st, fmt.Errorf("commit changes: %w", err))
				return stop(err)
			}
			st.batch, st.changed, st.view = b, true, l.engine.View(0)
		}
		select {
		case stages <- st:
		case err := <-failed:
			l.answer(st, ErrStopped)
			return stop(err)
		}
	}
}

// committer writes stages in order, publishes their views, then answers their callers. After a
// failed commit it answers every later stage with ErrStopped.
func (l *Loop) committer(ctx context.Context, stages <-chan *stage, failed chan<- error) {
	var dead error
	for st := range stages {
		if dead != nil {
			l.answer(st, ErrStopped)
			continue
		}
		if st.changed {
			start := time.Now()
			rev, err := l.store.Commit(context.WithoutCancel(ctx), st.batch)
			if l.onCommit != nil {
				l.onCommit(len(st.ops), time.Since(start))
			}
			if err != nil {
				dead = fmt.Errorf("commit changes: %w", err)
				l.log.Error("control loop stops: commit failed", "err", dead)
				l.answer(st, dead)
				failed <- dead
				continue
			}
			// Publish before answering: a caller that got its answer reads its own write.
			st.view.Revision = rev
			l.publishView(st.view)
		}
		l.answer(st, nil)
	}
}

func (l *Loop) answer(st *stage, err error) {
	for i, o := range st.ops {
		if o.reply == nil {
			continue
		}
		if err != nil {
			o.reply <- result{nil, err}
		} else {
			o.reply <- st.replies[i]
		}
	}
}

func (l *Loop) drain() {
	for {
		select {
		case o := <-l.ops:
			o.reply <- result{nil, ErrStopped}
		default:
			return
		}
	}
}

// commit writes the engine's pending changes; it returns 0 when there was nothing to write.
func (l *Loop) commit(ctx context.Context) (uint64, error) {
	c := l.engine.Take()
	if c.Empty() {
		return 0, nil
	}
	b, err := l.engine.batchFor(c)
	if err != nil {
		return 0, fmt.Errorf("commit changes: %w", err)
	}
	rev, err := l.store.Commit(context.WithoutCancel(ctx), b)
	if err != nil {
		return 0, fmt.Errorf("commit changes: %w", err)
	}
	return rev, nil
}

func (l *Loop) publishView(v *View) {
	l.view.Store(v)
	ch := make(chan struct{})
	old := l.changed.Swap(&ch)
	close(*old)
}
