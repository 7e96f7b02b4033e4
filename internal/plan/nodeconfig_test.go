package plan

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// f-mpsadd1 against a-mps0's plan (testdata/review8): n2's MPS setting goes from 8 to 10 for
// new-1 and new-2, which start on n2/0 beside its eight clients. The node-config step comes in a
// wave of its own before those starts, and, the MPS control daemon restarting with the config,
// the eight running clients restart in place in that wave (more than maxUnavailable: the daemon
// is the node's).
func TestOrderDevicePluginChangesMPSRestartsClients(t *testing.T) {
	first, pool := loadReplan(t, "../../testdata/review8/a-mps0-pool.yaml", "../../testdata/review8/f-mpsadd1-pool.yaml")
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	steps, nodes := OrderDevicePluginChanges(first, pl, Migration(first, pl, 2), DevicePluginChanges(pool, first, pl), 2)
	var got []string
	for _, s := range steps {
		got = append(got, stepText(s))
	}
	want := []string{"1 node-config n2/0 - mps 8>mps 10"}
	for _, t := range []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"} {
		want = append(want, "1 restart n2/0 "+t+" n2/0>n2/0")
	}
	want = append(want, "2 start n2/0 new-1 none>n2/0", "2 start n2/0 new-2 none>n2/0")
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(nodes) != 1 || nodes[0].Wave != 1 || nodes[0].Restarts != 8 || nodes[0].Running != 8 {
		t.Fatalf("changes %+v, want n2 in wave 1 with 8 restarts", nodes)
	}
	for _, w := range []string{"MPS control daemon restarts", "more than maxUnavailable (2)"} {
		if !strings.Contains(nodes[0].Reason, w) {
			t.Errorf("reason %q lacks %q", nodes[0].Reason, w)
		}
	}
	if n := Reconfigurations(steps); n != 8 {
		t.Errorf("in place %d, want the 8 restarts", n)
	}
	if n := CountMoves(steps); n != 0 {
		t.Errorf("moves %d, want 0", n)
	}
	if n := NodeConfigSteps(steps); n != 1 {
		t.Errorf("node-config steps %d, want 1", n)
	}
}

func stepText(s Step) string {
	t := s.Tenant
	if t == "" {
		t = "-"
	}
	return strings.Join([]string{strconv.Itoa(s.Wave), s.Kind, s.GPU.String(), t, s.From + ">" + s.To}, " ")
}

// sharedGPU is a whole GPU of node shared in mode by tenants (one replica each).
func sharedGPU(node string, idx int, mode v1.Mode, tenants ...string) v1.PlanGPU {
	g := v1.PlanGPU{Node: node, Index: idx, Board: "H100", Mode: mode, Role: v1.RolePool}
	for _, t := range tenants {
		g.Replicas = append(g.Replicas, v1.PlanReplica{Tenant: t})
	}
	return g
}

// Fewer references a GPU (time-slicing 3 to 2 on n1): the node-config step comes after the
// stop that takes the third replica off, not before it (the plugin would advertise fewer
// replicas than are allocated), and restarts nobody (time-slicing has no daemon).
func TestOrderDevicePluginChangesFewerAfterStops(t *testing.T) {
	cur := &v1.Plan{GPUs: []v1.PlanGPU{sharedGPU("n1", 0, v1.ModeTimeSlice, "a", "b", "c"), sharedGPU("n2", 0, v1.ModeExclusive)}}
	next := &v1.Plan{GPUs: []v1.PlanGPU{sharedGPU("n1", 0, v1.ModeTimeSlice, "a", "b"), sharedGPU("n2", 0, v1.ModeExclusive, "d")}}
	changes := DevicePluginChanges(&v1.Pool{}, cur, next)
	steps, nodes := OrderDevicePluginChanges(cur, next, Migration(cur, next, 1), changes, 1)
	var got []string
	for _, s := range steps {
		got = append(got, stepText(s))
	}
	want := []string{"1 start n2/0 d none>n2/0", "2 stop n1/0 c n1/0>none", "3 node-config n1/0 - time-slicing 3>time-slicing 2"}
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(nodes) != 1 || nodes[0].Wave != 3 || nodes[0].Restarts != 0 || !strings.Contains(nodes[0].Reason, "time-slicing has no daemon") {
		t.Errorf("changes %+v, want n1 in wave 3, no restarts", nodes)
	}
}

// MPS 3 to 2 on n1 (c stops off n1/0, a and b keep running there) while e and f start on n2/0
// (none to MPS 2): n1's node-config step follows the stop and the two clients running then
// restart; n2's comes before its first start and restarts nobody (no daemon ran).
func TestOrderDevicePluginChangesMPSFewerAndNew(t *testing.T) {
	cur := &v1.Plan{GPUs: []v1.PlanGPU{
		sharedGPU("n1", 0, v1.ModeMPS, "a", "b", "c"), sharedGPU("n1", 1, v1.ModeMPS),
		sharedGPU("n2", 0, v1.ModeMPS),
	}}
	next := &v1.Plan{GPUs: []v1.PlanGPU{
		sharedGPU("n1", 0, v1.ModeMPS, "a", "b"), sharedGPU("n1", 1, v1.ModeMPS),
		sharedGPU("n2", 0, v1.ModeMPS, "e", "f"),
	}}
	changes := DevicePluginChanges(&v1.Pool{}, cur, next)
	steps, nodes := OrderDevicePluginChanges(cur, next, Migration(cur, next, 4), changes, 4)
	var got []string
	for _, s := range steps {
		got = append(got, stepText(s))
	}
	want := []string{
		"1 node-config n2/0 - none>mps 2",
		"2 start n2/0 e none>n2/0", "2 start n2/0 f none>n2/0",
		"3 stop n1/0 c n1/0>none",
		"4 node-config n1/0 - mps 3>mps 2", "4 restart n1/0 a n1/0>n1/0", "4 restart n1/0 b n1/0>n1/0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(nodes) != 2 || nodes[0].Node != "n1" || nodes[0].Wave != 4 || nodes[0].Restarts != 2 || nodes[1].Node != "n2" || nodes[1].Wave != 1 || nodes[1].Restarts != 0 {
		t.Errorf("changes %+v", nodes)
	}
	if strings.Contains(nodes[0].Reason, "more than maxUnavailable") {
		t.Errorf("n1's 2 restarts are within maxUnavailable 4: %q", nodes[0].Reason)
	}
}

// MPS 3 to 4 on n1 (d, e, f, g start on n1/1; c leaves n1/0, a and b stay): the node-config
// step comes before the starts; a and b restart in its wave, and c, which would have stopped last
// (stops come last), stops in that wave instead of restarting only to stop later. The empty wave
// its stop leaves is numbered away.
func TestOrderDevicePluginChangesBringsStopsForward(t *testing.T) {
	cur := &v1.Plan{GPUs: []v1.PlanGPU{sharedGPU("n1", 0, v1.ModeMPS, "a", "b", "c"), sharedGPU("n1", 1, v1.ModeMPS)}}
	next := &v1.Plan{GPUs: []v1.PlanGPU{sharedGPU("n1", 0, v1.ModeMPS, "a", "b"), sharedGPU("n1", 1, v1.ModeMPS, "d", "e", "f", "g")}}
	steps, nodes := OrderDevicePluginChanges(cur, next, Migration(cur, next, 4), DevicePluginChanges(&v1.Pool{}, cur, next), 4)
	var got []string
	for _, s := range steps {
		got = append(got, stepText(s))
	}
	want := []string{
		"1 node-config n1/0 - mps 3>mps 4", "1 restart n1/0 a n1/0>n1/0", "1 restart n1/0 b n1/0>n1/0", "1 stop n1/0 c n1/0>none",
		"2 start n1/1 d none>n1/1", "2 start n1/1 e none>n1/1", "2 start n1/1 f none>n1/1", "2 start n1/1 g none>n1/1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(nodes) != 1 || nodes[0].Wave != 1 || nodes[0].Restarts != 2 || !strings.Contains(nodes[0].Reason, "1 that stop later in the migration stop in this wave instead") {
		t.Errorf("changes %+v", nodes)
	}
}
