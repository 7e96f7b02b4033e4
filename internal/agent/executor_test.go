package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

type failingSmoker struct{}

func (failingSmoker) Smoke(context.Context, string, gpu.Layout) error { return errors.New("exit 1") }

// brokenMIG fails every destroy: the rollback cannot restore the old layout.
type brokenMIG struct{ MIG }

func (b brokenMIG) Destroy(string, string, gpu.Instance) error {
	return errors.New("In use by another client")
}

// TestFailedChangeStaysCordonedUntilReset: a change whose smoke fails and whose rollback cannot
// destroy leaves the node cordoned with the reason in the cordon file, across a restart, until
// Reset; then the node is uncordoned.
func TestFailedChangeStaysCordonedUntilReset(t *testing.T) {
	fake, _ := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	lib := nvml.New(fake.Interface(), nvml.Options{})
	u, board := fake.UUIDs()[0], fake.Board().Name
	to, _ := gpu.ParseLayout("7g.80gb@0")
	dir := t.TempDir()
	node := &LocalNode{Path: filepath.Join(dir, "cordon.json")}
	ctx := context.Background()
	j, rep, _ := OpenJournal(filepath.Join(dir, "j"))
	x, err := NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: brokenMIG{lib}, Node: node, Smoke: failingSmoker{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Submit(ctx, gate.Desired{GPU: u, Board: board, Layout: to, Current: gpu.Layout{}}); err != nil {
		t.Fatal(err)
	}
	if x.State().Phase() != gate.PhaseFailed {
		t.Fatalf("phase %s, want failed", x.State().Phase())
	}
	j.Close()
	// Restart: still failed, still cordoned with the reason on record.
	j, rep, _ = OpenJournal(filepath.Join(dir, "j"))
	defer j.Close()
	x, err = NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: lib, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := node.Read()
	if x.State().Phase() != gate.PhaseFailed || !st.Cordoned || !strings.Contains(st.Reason, "could not be restored") {
		t.Fatalf("after restart: phase %s, cordon %+v", x.State().Phase(), st)
	}
	if err := x.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := node.Read(); st.Cordoned || x.State().Phase() != gate.PhaseIdle {
		t.Fatalf("after reset: phase %s, cordon %+v", x.State().Phase(), st)
	}
}
