package plan

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// f-mpsadd1 against a-mps0's plan (testdata/review8): new-1 and new-2 start on n2/0 beside its
// eight MPS clients, with no GPU change, and the node's device-plugin MPS setting goes from 8
// references a GPU to 10; the migration lists that node's config change, the eight running
// clients keeping their limits. A plan against itself changes no node's setting.
func TestMigrationListsDevicePluginChange(t *testing.T) {
	first, pool := loadReplan(t, "../../testdata/review8/a-mps0-pool.yaml", "../../testdata/review8/f-mpsadd1-pool.yaml")
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if g := gpuChanges(Migration(first, pl, 1)); len(g) != 0 {
		t.Fatalf("setup: GPU changes %+v, want none", g)
	}
	got := DevicePluginChanges(pool, first, pl)
	want := []DevicePluginChange{{Node: "n2", From: "mps 8", To: "mps 10", Running: 8}}
	if !slices.Equal(got, want) {
		t.Errorf("device-plugin changes %+v, want %+v", got, want)
	}
	if got := DevicePluginChanges(pool, pl, pl); len(got) != 0 {
		t.Errorf("a plan against itself: %+v, want none", got)
	}
	dra := *pool
	dra.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	if got := DevicePluginChanges(&dra, first, pl); len(got) != 0 {
		t.Errorf("DRA path: %+v, want none (no device-plugin config)", got)
	}
}

// A time-sliced GPU's references are its replicas' timeSliceReplicas (at least 1 each), as the
// rendered config counts them; a node that starts sharing goes from none.
func TestDevicePluginChangesTimeSlicing(t *testing.T) {
	gpuOf := func(node string, mode v1.Mode, ts ...int) v1.PlanGPU {
		g := v1.PlanGPU{Node: node, Board: "H100", Mode: mode, Role: v1.RolePool}
		for i, n := range ts {
			g.Replicas = append(g.Replicas, v1.PlanReplica{Tenant: fmt.Sprintf("t%d", i), Limits: v1.Limits{TimeSliceReplicas: n}})
		}
		return g
	}
	cur := &v1.Plan{GPUs: []v1.PlanGPU{gpuOf("n1", v1.ModeTimeSlice, 2, 0), gpuOf("n2", v1.ModeExclusive)}}
	next := &v1.Plan{GPUs: []v1.PlanGPU{gpuOf("n1", v1.ModeTimeSlice, 2, 0, 3), gpuOf("n2", v1.ModeTimeSlice, 1)}}
	got := DevicePluginChanges(&v1.Pool{}, cur, next)
	want := []DevicePluginChange{{Node: "n1", From: "time-slicing 3", To: "time-slicing 6", Running: 2}, {Node: "n2", From: "none", To: "time-slicing 1"}}
	if !slices.Equal(got, want) {
		t.Errorf("device-plugin changes %+v, want %+v", got, want)
	}
}
