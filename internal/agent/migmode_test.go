package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/nvml"
	"gpupool.dev/gpupool/internal/testbin"
)

// TestFailedChangeRestoresMIGModeOff: a GPU out of MIG mode (run whole) that the control plane
// asks for instances has its mode turned on by the agent; when the smoke check fails and the gate
// rolls back to no instance, the agent turns MIG mode off again, so the GPU is reported whole (one
// exclusive slice) as before, with the failed attempt. Before, it stayed in MIG mode with no
// instance: no slice at all, and nothing asked for MIG mode off again. The control plane gives the
// operation up here (its last attempt), so the GPU is no longer in the node's layout when the
// agent next polls.
func TestFailedChangeRestoresMIGModeOff(t *testing.T) {
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	u, board := fake.UUIDs()[0], fake.Board().Name
	if err := lib.SetMIGMode(u, false); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j, rep, err := OpenJournal(filepath.Join(dir, "j"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	var a atomic.Pointer[Agent]
	x, err := NewExecutor(context.Background(), j, rep, gate.State{Policy: gate.Policy{Cooldown: time.Second}},
		Deps{MIG: lib, Node: &LocalNode{Path: filepath.Join(dir, "cordon.json")}, Smoke: failingSmoker{},
			OnNote: func(n gate.Note) {
				if ag := a.Load(); ag != nil {
					ag.NoteGate(n)
				}
			}})
	if err != nil {
		t.Fatal(err)
	}
	ag := &Agent{Config: Config{StateDir: dir}, Settings: Settings{Poll: time.Second}, Tel: fakeTel{lib}, Exec: x, Now: time.Now,
		Log: slog.New(slog.DiscardHandler)}
	a.Store(ag)
	ag.SetDesired(DesiredLayout{Revision: 1, GPUs: []DesiredGPU{{UUID: u, Board: board, MIG: "3g.40gb@0 3g.40gb@4", Op: 7, Attempt: 1}}})
	for range 20 {
		if err := ag.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := ag.Report().GPUs; len(r) == 1 && r[0].Gate != nil {
			break // the rollback's outcome, before the agent's next poll
		}
	}
	// The control plane gives the operation up at once (its last attempt) and no longer lists
	// the GPU in the node's layout.
	ag.SetDesired(DesiredLayout{Revision: 2})
	for range 5 {
		if err := ag.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r := ag.Report().GPUs
	if len(r) != 1 || r[0].Gate == nil || r[0].Gate.Op != 7 || r[0].Gate.Code != gate.ReasonRolledBack {
		t.Fatalf("report %+v, want op 7's attempt rolled back", r)
	}
	if r[0].MIG != "" || len(r[0].Slices) != 1 || r[0].Slices[0] != "exclusive" {
		t.Fatalf("after the rollback the GPU reports MIG %q, slices %q; want it whole again: one exclusive slice", r[0].MIG, r[0].Slices)
	}
	devs, err := lib.Inventory()
	if err != nil || devs[0].MIG || len(devs[0].Instances) != 0 {
		t.Fatalf("the GPU reads MIG mode %t with %v (%v), want MIG mode off, no instance", devs[0].MIG, devs[0].Instances, err)
	}
	// The control plane's retry turns the mode on again for the new attempt.
	ag.SetDesired(DesiredLayout{Revision: 3, GPUs: []DesiredGPU{{UUID: u, Board: board, MIG: "3g.40gb@0 3g.40gb@4", Op: 7, Attempt: 2}}})
	if err := ag.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if devs, _ := lib.Inventory(); !devs[0].MIG {
		t.Fatal("the retry did not turn MIG mode on")
	}
}

// TestModeOffSurvivesSIGKILL: the agent process (testdata/migmodechild) turns MIG mode on for a
// change of a GPU that ran whole, the smoke check fails, the gate rolls back to no instance, and
// the process is SIGKILLed before its next poll turns the mode off again. Started again on the
// same state directory, with the control plane having given the operation up, it turns the mode
// off: its record of having turned the mode on is in StateDir/migmode.json. Before, the record
// lived only in memory, and the restarted agent left the GPU in MIG mode with no instance and no
// slice.
func TestModeOffSurvivesSIGKILL(t *testing.T) {
	bin := testbin.Build(t, "./testdata/migmodechild", "migmodechild")
	dir := t.TempDir()
	child := func(env ...string) (bool, string) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), append([]string{"DIR=" + dir}, env...)...)
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				return true, string(b)
			}
		}
		if err != nil {
			t.Fatalf("child %v: %v\n%s", env, err, b)
		}
		return false, string(b)
	}
	child("INIT=1")
	if killed, out := child("KILL=1"); !killed {
		t.Fatalf("the child was not killed at the rollback: %s", out)
	}
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1, StatePath: filepath.Join(dir, "mig.json")})
	if err != nil {
		t.Fatal(err)
	}
	if devs, err := nvml.New(fake.Interface(), nvml.Options{}).Inventory(); err != nil || !devs[0].MIG || len(devs[0].Instances) != 0 {
		t.Fatalf("after the kill the GPU reads MIG %t with %v (%v); want the point under test: MIG mode on, no instance", devs[0].MIG, devs[0].Instances, err)
	}
	_, out := child()
	if want := "mig=false instances=0 slices=[\"exclusive\"]\n"; out != want {
		t.Fatalf("the restarted agent ends with %q, want %q: the GPU whole again", out, want)
	}
	// The record is gone once the mode is off again.
	if raw, err := os.ReadFile(filepath.Join(dir, modeFileName)); err != nil || string(raw) != "{}" {
		t.Fatalf("%s holds %q (%v), want {}", modeFileName, raw, err)
	}
}
