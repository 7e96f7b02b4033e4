package agent

import (
	"io"
	"log/slog"
	"testing"

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
		Slices: []DesiredSlice{{ID: "n/GPU-1/0", Grant: "g9", Standby: true}, {ID: "n/GPU-1/1", Grant: "g3"}}})
	if got := a.controlDesired(); len(got) != 1 {
		t.Fatalf("the retry is not submitted: %v", got)
	}
	if got := a.Report().Ready; len(got) != 1 || got[0] != "g9" {
		t.Fatalf("ready %v, want the standby g9", got)
	}
}
