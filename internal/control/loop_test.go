package control

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/store"
)

// flakyStore is an in-memory Store whose commits fail once failAfter commits have succeeded.
type flakyStore struct {
	mu        sync.Mutex
	commits   int
	failAfter int
	batches   []store.Batch
}

func (f *flakyStore) Load(context.Context) (store.Snapshot, error) {
	return store.Snapshot{Records: map[string]map[string][]byte{}}, nil
}

func (f *flakyStore) Commit(_ context.Context, b store.Batch) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.commits >= f.failAfter {
		return 0, errors.New("disk full")
	}
	f.commits++
	f.batches = append(f.batches, b)
	return uint64(f.commits), nil
}

// TestLoopStopsOnFailedCommit: a change whose commit fails is answered with the error (never
// as a success), the loop ends with it, and later commands are refused.
func TestLoopStopsOnFailedCommit(t *testing.T) {
	st := &flakyStore{failAfter: 2}
	l, err := NewLoop(context.Background(), LoopConfig{Tick: time.Hour}, st, SystemClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	put := func(name string) error {
		_, err := l.Do(context.Background(), func(e *Engine, now time.Time) (any, error) { return e.PutTenant(now, Tenant{Name: name, Demand: 1}) })
		return err
	}
	if err := put("a"); err != nil {
		t.Fatal(err)
	}
	if err := put("b"); err != nil {
		t.Fatal(err)
	}
	if err := put("c"); err == nil || !errors.Is(err, ErrStopped) && err.Error() != "commit changes: disk full" {
		t.Fatalf("third change: %v, want the commit's failure", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("loop ended without the error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("loop still runs after a failed commit")
	}
	if v := l.View(); len(v.Tenants) != 2 {
		t.Fatalf("view shows %d tenants, want the 2 committed ones", len(v.Tenants))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := l.Do(ctx, func(e *Engine, now time.Time) (any, error) { return nil, nil }); err == nil {
		t.Fatal("a command after the loop ended succeeded")
	}
}

// TestLoopPipelineKeepsOrder: many concurrent writers; every answer's version is on disk in an
// earlier or the same commit, and versions per tenant are answered in increasing order.
func TestLoopPipelineKeepsOrder(t *testing.T) {
	st := &flakyStore{failAfter: 1 << 30}
	l, err := NewLoop(context.Background(), LoopConfig{Tick: time.Hour}, st, SystemClock{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, n := range []string{"a", "b", "c", "d"} {
		if _, err := l.Do(ctx, func(e *Engine, now time.Time) (any, error) { return e.PutTenant(now, Tenant{Name: n}) }); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, n := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			last := uint64(0)
			for i := range 100 {
				v, err := l.Do(ctx, func(e *Engine, now time.Time) (any, error) { return e.SetDemand(now, n, i%3) })
				if err != nil {
					t.Error(err)
					return
				}
				tn := v.(Tenant)
				if tn.Version <= last {
					t.Errorf("tenant %s: version %d answered after %d", n, tn.Version, last)
				}
				last = tn.Version
				if got := l.View(); viewVersion(got, n) < tn.Version {
					t.Errorf("tenant %s: answered version %d, view at %d", n, tn.Version, viewVersion(got, n))
				}
			}
		})
	}
	wg.Wait()
}

func viewVersion(v *View, name string) uint64 {
	for _, t := range v.Tenants {
		if t.Name == name {
			return t.Version
		}
	}
	return 0
}
