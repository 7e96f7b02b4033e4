package sim

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A cancelled context stops Run within a few thousand events, with the context's error and no
// result.
func TestRunCancelled(t *testing.T) {
	in := Input{Pool: loadPool(t, "pool-small.yaml"), Plan: loadPlan(t, "plan-small.yaml")}
	s, err := New(in, Config{Duration: 24 * time.Hour, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := s.Run(ctx)
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run(cancelled) = %v, %v; want no result and context.Canceled", res, err)
	}
	if s.events > 0x1000 {
		t.Errorf("Run went on for %d events after the cancellation, want at most 4096", s.events)
	}
}
