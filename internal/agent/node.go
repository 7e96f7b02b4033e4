package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gpupool.dev/gpupool/internal/gpu"
)

// LocalNode is the Node of a bare machine: the cordon is a file (so a restarted agent, and an
// operator, can read it), and drain waits for Busy to report no process on the instances.
type LocalNode struct {
	Path string
	// Busy reports whether a replica still runs on any of the instances; nil means never.
	Busy func(gpu string, instances gpu.Layout) (bool, error)
	// Hook, when set, is called before and after each file change (crash tests).
	Hook func(point string)
}

// CordonState is what the cordon file holds.
type CordonState struct {
	Cordoned bool   `json:"cordoned"`
	Reason   string `json:"reason,omitzero"`
}

func (n *LocalNode) hook(p string) {
	if n.Hook != nil {
		n.Hook(p)
	}
}

// Read returns the cordon state; a missing file is uncordoned.
func (n *LocalNode) Read() (CordonState, error) {
	var st CordonState
	data, err := os.ReadFile(n.Path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read cordon %s: %w", n.Path, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("read cordon %s: %w", n.Path, err)
	}
	return st, nil
}

func (n *LocalNode) write(st CordonState) error {
	data, _ := json.Marshal(st)
	tmp := n.Path + ".tmp"
	n.hook("before cordon-write")
	if err := writeSync(tmp, data); err != nil {
		return fmt.Errorf("write cordon %s: %w", n.Path, err)
	}
	if err := os.Rename(tmp, n.Path); err != nil {
		return fmt.Errorf("write cordon %s: %w", n.Path, err)
	}
	if err := syncDir(filepath.Dir(n.Path)); err != nil {
		return fmt.Errorf("write cordon %s: %w", n.Path, err)
	}
	n.hook("after cordon-write")
	return nil
}

// Cordon marks the node unschedulable with the reason.
func (n *LocalNode) Cordon(_ context.Context, reason string) error {
	return n.write(CordonState{Cordoned: true, Reason: reason})
}

// Uncordon marks the node schedulable.
func (n *LocalNode) Uncordon(context.Context) error { return n.write(CordonState{}) }

// Drain waits until Busy reports the instances free, or the context ends.
func (n *LocalNode) Drain(ctx context.Context, gpuID string, instances gpu.Layout) error {
	if n.Busy == nil || len(instances) == 0 {
		return nil
	}
	for {
		busy, err := n.Busy(gpuID, instances)
		if err != nil {
			return fmt.Errorf("drain %s %q: %w", gpuID, instances, err)
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain %s %q: replicas still running: %w", gpuID, instances, ctx.Err())
		case <-sleepCh():
		}
	}
}
