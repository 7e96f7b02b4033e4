package gate

import (
	"math/rand/v2"
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
	// A policy's own longest wait bounds it instead.
	s.Policy.Uncordon.MaxDelay = 5 * time.Second
	now := due.Add(-time.Hour)
	if _, acts := Step(s, Event{Kind: EvRecover}, now); len(acts) != 1 || !acts[0].NotBefore.Equal(now.Add(5*time.Second)) {
		t.Errorf("recover with a 5s longest wait, an hour early: %+v, want the uncordon not before %s", acts, now.Add(5*time.Second))
	}
}

// The wait after the k-th failed uncordon is D·(1 − jitter·draw), D doubling from 1s to the
// policy's cap: never above D, never below D·(1 − jitter), a draw of 0 or no jitter the full D, and
// jitter or draw outside 0..1 taken as their nearest bound.
func TestUncordonPolicyDelay(t *testing.T) {
	for _, p := range []UncordonPolicy{{}, {Jitter: 0.5}, {Jitter: 1, MaxDelay: 10 * time.Second}, {Jitter: 0.2, MaxDelay: 2 * time.Minute}} {
		for k := 1; k <= 12; k++ {
			full := min(time.Second<<(k-1), p.Cap())
			if got := p.Delay(k, 0); got != full {
				t.Errorf("%+v failure %d, draw 0: %s, want %s", p, k, got, full)
			}
			for _, draw := range []float64{0.001, 0.25, 0.5, 0.75, 0.999} {
				got := p.Delay(k, draw)
				want := (full - time.Duration(p.Jitter*draw*float64(full))).Round(time.Millisecond)
				if got != want || got > full || got < time.Duration((1-p.Jitter)*float64(full))-time.Millisecond {
					t.Errorf("%+v failure %d, draw %v: %s, want %s (within %s·(1−%v)..%s)", p, k, draw, got, want, full, p.Jitter, full)
				}
			}
		}
	}
	for _, c := range []struct {
		p    UncordonPolicy
		draw float64
		want time.Duration
	}{
		{UncordonPolicy{Jitter: 2}, 0.5, 2 * time.Second},               // jitter 1: half of 4s
		{UncordonPolicy{Jitter: -1}, 0.5, 4 * time.Second},              // jitter 0
		{UncordonPolicy{Jitter: 0.5}, 7, 2 * time.Second},               // draw 1
		{UncordonPolicy{Jitter: 0.5}, -3, 4 * time.Second},              // draw 0
		{UncordonPolicy{MaxDelay: 3 * time.Second}, 0, 3 * time.Second}, // capped
	} {
		if got := c.p.Delay(3, c.draw); got != c.want {
			t.Errorf("%+v failure 3, draw %v: %s, want %s", c.p, c.draw, got, c.want)
		}
	}
	if (UncordonPolicy{}).Limit() != MaxUncordonAttempts || (UncordonPolicy{Attempts: 3}).Limit() != 3 {
		t.Errorf("limits: default %d, set 3 gives %d", (UncordonPolicy{}).Limit(), (UncordonPolicy{Attempts: 3}).Limit())
	}
}

// A fleet of nodes whose uncordons fail at the same instant (an API server down) retries at one
// instant without jitter, and spread over the wait's random share with it: each node's executor
// draws from its own source, and the gate turns the draw into the retry's time.
func TestUncordonJitterSpreadsFleet(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failing := func(jitter float64) State {
		return State{Policy: Policy{Uncordon: UncordonPolicy{Jitter: jitter}}, Seq: 9, Cordoned: true, UncordonFailures: 4,
			Active:  &Change{GPU: "GPU-0", Phase: PhaseUncordon},
			Pending: &Action{ID: 9, Kind: ActUncordon}}
	}
	for _, jitter := range []float64{0, 0.5} {
		src := rand.New(rand.NewPCG(1, 2))
		times := map[time.Time]int{}
		var first, last time.Time
		for node := range 200 {
			_, acts := Step(failing(jitter), Event{Kind: EvFailed, ID: 9, Error: "apiserver down", Draw: src.Float64()}, at)
			if len(acts) != 1 || acts[0].Kind != ActUncordon {
				t.Fatalf("node %d: actions %+v, want one uncordon retry", node, acts)
			}
			nb := acts[0].NotBefore
			times[nb]++
			if first.IsZero() || nb.Before(first) {
				first = nb
			}
			if nb.After(last) {
				last = nb
			}
		}
		// The 5th failure waits 16s at most (D); with jitter 0.5 at least 8s.
		switch {
		case jitter == 0 && (len(times) != 1 || !first.Equal(at.Add(16*time.Second))):
			t.Errorf("no jitter: %d distinct retry times from %s, want all at +16s", len(times), first.Sub(at))
		case jitter > 0 && (len(times) < 190 || first.Sub(at) < 8*time.Second || last.Sub(at) > 16*time.Second || last.Sub(first) < 7*time.Second):
			t.Errorf("jitter %v: %d distinct retry times of 200, from +%s to +%s; want nearly all distinct, spread over 8s..16s",
				jitter, len(times), first.Sub(at), last.Sub(at))
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
