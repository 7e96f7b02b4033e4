package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
)

// A failed attempt is not submitted again until the control plane sends a new attempt; the
// outcome is reported against the operation and attempt it belongs to.
func TestControlPlaneAttempts(t *testing.T) {
	a := &Agent{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	a.inventory = []GPUInfo{{Index: 0, UUID: "GPU-0", Board: "H100-SXM5-80GB", MIG: true, Instances: gpu.Layout{{Profile: "7g.80gb"}}}}
	a.SetDesired(DesiredLayout{Revision: 3, GPUs: []DesiredGPU{{UUID: "GPU-0", MIG: "3g.40gb@0 3g.40gb@4", Op: 7, Attempt: 1}}})
	if got := a.controlDesired(); len(got) != 1 {
		t.Fatalf("desired %v, want GPU-0", got)
	}
	a.NoteGate(gate.Note{GPU: "GPU-0", Code: gate.ReasonStarted})
	a.NoteGate(gate.Note{GPU: "GPU-9", Code: gate.ReasonRolledBack}) // no operation on it
	a.NoteGate(gate.Note{GPU: "GPU-0", Code: gate.ReasonRolledBack, Message: "smoke failed"})
	r := a.Report().GPUs
	if len(r) != 1 || r[0].Gate == nil || *r[0].Gate != (GateOutcome{Op: 7, Attempt: 1, Code: gate.ReasonRolledBack, Message: "smoke failed"}) {
		t.Fatalf("report %+v, want the rollback of op 7 attempt 1", r)
	}
	if r[0].MIG != "7g.80gb@0" || len(r[0].Slices) != 1 || r[0].Slices[0] != "7g.80gb" {
		t.Fatalf("report %+v, want one 7g.80gb slice", r[0])
	}
	if got := a.controlDesired(); len(got) != 0 {
		t.Fatalf("a failed attempt is submitted again: %v", got)
	}
	a.SetDesired(DesiredLayout{Revision: 4, GPUs: []DesiredGPU{{UUID: "GPU-0", MIG: "3g.40gb@0 3g.40gb@4", Op: 7, Attempt: 2}},
		Slices: []DesiredSlice{{Slice: v1.Slice{ID: "n/GPU-1/0"}, Grant: "g9", Standby: true}, {Slice: v1.Slice{ID: "n/GPU-1/1"}, Grant: "g3"}}})
	if got := a.controlDesired(); len(got) != 1 {
		t.Fatalf("the retry is not submitted: %v", got)
	}
	if got := a.Report().Ready; len(got) != 1 || got[0] != "g9" {
		t.Fatalf("ready %v, want the standby g9", got)
	}
}

// fencingCP is a control plane at epoch 2 for a node it declared lost: it refuses heartbeats and
// reports of any other epoch, and hands out a layout of epoch 2.
type fencingCP struct {
	mu       sync.Mutex
	reports  []uint64 // epochs of the reports it was sent
	accepted bool
}

func (f *fencingCP) Report(_ context.Context, r NodeReport) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, r.Epoch)
	if r.Epoch != 2 {
		return ErrFenced
	}
	f.accepted = true
	return nil
}

func (f *fencingCP) Heartbeat(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.accepted {
		return ErrFenced
	}
	return nil
}

func (f *fencingCP) Desired(ctx context.Context, after uint64, wait time.Duration) (DesiredLayout, error) {
	if after == 9 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return DesiredLayout{Revision: 9, Epoch: 2, Slices: []DesiredSlice{{Slice: v1.Slice{ID: "n/GPU-0/0"}, Grant: "g5", Standby: true}}}, nil
}

// TestLinkFencing: an agent that ran the layout of epoch 1 is refused (fenced) by a control plane
// at epoch 2; it takes the layout of epoch 2 (dropping the old epoch's standbys) and reports for
// epoch 2, which is accepted.
func TestLinkFencing(t *testing.T) {
	a := &Agent{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	a.inventory = []GPUInfo{{Index: 0, UUID: "GPU-0", Board: "H100-SXM5-80GB"}}
	a.SetDesired(DesiredLayout{Revision: 4, Epoch: 1, Slices: []DesiredSlice{{Slice: v1.Slice{ID: "n/GPU-0/0"}, Grant: "g1", Standby: true}}})
	cp := &fencingCP{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Link{CP: cp, Agent: a, Every: 5 * time.Millisecond, Heartbeat: 20 * time.Millisecond}).Run(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cp.mu.Lock()
		ok, reports := cp.accepted, slices.Clone(cp.reports)
		cp.mu.Unlock()
		if ok {
			if reports[0] != 1 || reports[len(reports)-1] != 2 {
				t.Errorf("reports for epochs %v, want 1 first (refused) and 2 last", reports)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never accepted; reports for epochs %v", reports)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if r := a.Report(); r.Epoch != 2 || len(r.Ready) != 1 || r.Ready[0] != "g5" {
		t.Fatalf("report %+v, want epoch 2 with only the new epoch's standby g5", r)
	}
}

// TestLinkRemovedNode: a control plane that answers 410 Gone (an operator removed the node) is
// read as ErrRemoved, and the link asks again once per heartbeat instead of at every tick
// (5 ms here); once the node is re-admitted, its report is taken.
func TestLinkRemovedNode(t *testing.T) {
	var mu sync.Mutex
	puts, gone := 0, true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == "PUT":
			puts++
			if gone {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusGone)
				io.WriteString(w, `{"status":410,"detail":"node n was removed by an operator; … gpupool node admit n"}`)
				return
			}
			w.Write([]byte("{}"))
		case r.Method == "GET":
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	cp := &HTTPControlPlane{Server: srv.URL, Token: "t", Node: "n"}
	if err := cp.Report(context.Background(), NodeReport{}); !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "gpupool node admit n") {
		t.Fatalf("report to a control plane that removed the node: %v, want ErrRemoved with its detail", err)
	}
	mu.Lock()
	puts = 0
	mu.Unlock()
	a := &Agent{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	a.inventory = []GPUInfo{{Index: 0, UUID: "GPU-0", Board: "H100-SXM5-80GB"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Link{CP: cp, Agent: a, Every: 5 * time.Millisecond, Heartbeat: 200 * time.Millisecond}).Run(ctx)
	}()
	time.Sleep(time.Second)
	mu.Lock()
	n := puts
	gone = false
	mu.Unlock()
	if n < 2 || n > 7 {
		t.Errorf("%d reports in 1 s to a control plane that removed the node, want about one per 200 ms heartbeat", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		m := puts
		mu.Unlock()
		if m > n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no report after the node was re-admitted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}
