// Command migmodechild is a child process of internal/agent's TestModeOffSurvivesSIGKILL: an
// agent on a 1-GPU fake H100 node whose MIG state is kept in DIR, the GPU out of MIG mode (run
// whole). With KILL=1 the control plane asks it for "3g.40gb@0 3g.40gb@4": the agent turns MIG
// mode on, the gate creates the instances, the smoke check fails and the gate rolls back to no
// instance, and the process SIGKILLs itself at the rollback's note, before the agent's next poll
// turns the mode off again. Without KILL it starts again on the same directory, is told that the
// control plane gave the operation up (the GPU no longer listed), polls, and prints what NVML
// reads.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

func main() { os.Exit(run()) }

func run() int {
	dir := os.Getenv("DIR")
	kill := os.Getenv("KILL") != ""
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1, StatePath: filepath.Join(dir, "mig.json")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	u, board := fake.UUIDs()[0], fake.Board().Name
	if os.Getenv("INIT") != "" {
		if err := lib.SetMIGMode(u, false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return 0
	}
	j, rep, err := agent.OpenJournal(filepath.Join(dir, "gate.journal"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var ag atomic.Pointer[agent.Agent]
	x, err := agent.NewExecutor(context.Background(), j, rep, gate.State{Policy: gate.Policy{Cooldown: time.Second}},
		agent.Deps{MIG: lib, Node: &agent.LocalNode{Path: filepath.Join(dir, "cordon.json")}, Smoke: failSmoker{},
			OnNote: func(n gate.Note) {
				if a := ag.Load(); a != nil {
					a.NoteGate(n)
				}
				if kill && n.Code == gate.ReasonRolledBack {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {} // the signal is on its way
				}
			}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	a := &agent.Agent{Config: agent.Config{StateDir: dir}, Settings: agent.Settings{Poll: time.Second}, Tel: tel{lib}, Exec: x,
		Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	ag.Store(a)
	if kill {
		a.SetDesired(agent.DesiredLayout{Revision: 1, GPUs: []agent.DesiredGPU{{UUID: u, Board: board, MIG: "3g.40gb@0 3g.40gb@4", Op: 7, Attempt: 1}}})
	} else {
		a.SetDesired(agent.DesiredLayout{Revision: 2}) // given up: the GPU is no longer listed
	}
	for range 10 {
		if err := a.Poll(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "poll:", err)
		}
	}
	devs, err := lib.Inventory()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	r := a.Report().GPUs
	fmt.Printf("mig=%t instances=%d slices=%q\n", devs[0].MIG, len(devs[0].Instances), r[0].Slices)
	return 0
}

type tel struct{ l *nvml.Lib }

func (t tel) Inventory() ([]agent.GPUInfo, error) {
	devs, err := t.l.Inventory()
	out := make([]agent.GPUInfo, len(devs))
	for i, d := range devs {
		out[i] = agent.GPUInfo{Index: d.Index, UUID: d.UUID, Board: d.Board, MIG: d.MIG, Instances: d.Instances}
	}
	return out, err
}
func (t tel) EnergyMilliJoules(u string) (uint64, error) { return t.l.EnergyMilliJoules(u) }
func (t tel) Processes(string) ([]agent.Proc, error)     { return nil, nil }

type failSmoker struct{}

func (failSmoker) Smoke(context.Context, string, gpu.Layout) error {
	return errors.New("smoke: CUDA program exited 1")
}
