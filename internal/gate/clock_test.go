package gate

import (
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// A change finished by an executor whose clock is behind the change's start (a fake clock that
// starts over at every run, or a clock stepped back) reports no negative duration.
func TestDoneWithClockBehindStart(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC)
	to := gpu.Layout{{Profile: "3g.40gb", Start: 0}, {Profile: "3g.40gb", Start: 4}}
	s := State{Seq: 7, Active: &Change{GPU: "GPU-0", Board: "H100-SXM5-80GB", From: gpu.Layout{{Profile: "7g.80gb"}}, To: to,
		Phase: PhaseSmoke, Touched: true, Created: to, Start: start},
		Pending: &Action{ID: 7, Kind: ActSmoke, GPU: "GPU-0", Instances: to}}
	for _, c := range []struct {
		now  time.Time
		want string
	}{
		{start.Add(-3 * time.Minute), "in an unknown time (the clock is 3m0s behind"},
		{start.Add(90 * time.Second), "in 1m30s"},
	} {
		n, _ := Step(s, Event{Kind: EvDone, ID: 7}, c.now)
		var msg string
		for _, note := range n.Notes {
			if note.Code == ReasonDone {
				msg = note.Message
			}
		}
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "in -") {
			t.Errorf("GateDone at %s: %q, want %q", c.now, msg, c.want)
		}
	}
}
