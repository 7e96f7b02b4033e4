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

// A restart with an uncordon retry pending keeps its due time and its count, but a clock now far
// behind that time (a clock that starts over, or stepped back) waits at most UncordonBackoffMax.
func TestRecoverClampsUncordonBackoff(t *testing.T) {
	due := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	s := State{Seq: 4, Cordoned: true, UncordonFailures: 3, UncordonError: "boom",
		Active:  &Change{GPU: "GPU-0", Phase: PhaseUncordon},
		Pending: &Action{ID: 4, Kind: ActUncordon, NotBefore: due}}
	for _, c := range []struct {
		now, want time.Time
	}{
		{due.Add(-3 * time.Second), due},                                   // resumes the journaled wait
		{due.Add(-time.Hour), due.Add(-time.Hour).Add(UncordonBackoffMax)}, // clock far behind: bounded
	} {
		n, acts := Step(s, Event{Kind: EvRecover}, c.now)
		if len(acts) != 1 || acts[0].Kind != ActUncordon || !acts[0].NotBefore.Equal(c.want) || n.UncordonFailures != 3 {
			t.Errorf("recover at %s: actions %+v failures %d, want one uncordon not before %s, 3 failures", c.now, acts, n.UncordonFailures, c.want)
		}
	}
}

func TestUncordonDelay(t *testing.T) {
	var got []time.Duration
	for k := 1; k < MaxUncordonAttempts; k++ {
		got = append(got, UncordonDelay(k))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", got, want)
		}
	}
}
