package control

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPartitionFencing partitions node n2 from the server while it runs replicas: the server
// declares it lost after the node timeout and moves its replicas to n1; when the partition
// heals, n2's report for its old epoch is refused, it takes the layout of the new epoch (which
// stops what it ran) and comes back. With a lease shorter than the node timeout the agent stops
// its replicas before the server moves them, so no replica ever runs on both nodes; without a
// lease the old replicas run on until the partition heals, and the epoch stops them then.
func TestPartitionFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for node timeouts")
	}
	for _, c := range []struct {
		name  string
		lease time.Duration
	}{{"lease", 400 * time.Millisecond}, {"no lease", 0}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarnessLoop(t, ServerConfig{}, LoopConfig{Tick: 50 * time.Millisecond, Engine: EngineConfig{NodeTimeout: time.Second}})
			agents := map[string]*SimAgent{}
			start := func(n string, lease time.Duration) {
				agents[n] = h.simAgent(t, n, func(a *SimAgent) { a.Lease = lease })
			}
			running := func(n string) []string {
				var gs []string
				for _, s := range agents[n].Applied().Slices {
					if s.Grant != "" {
						gs = append(gs, s.Grant)
					}
				}
				slices.Sort(gs)
				return gs
			}
			// Alice's 2 replicas run on n2; n1 joins with room for them.
			start("n2", c.lease)
			waitFor(t, 10*time.Second, "n2 registered", func() bool { return h.node("n2").Name == "n2" })
			h.must("operator", "POST", "/v1/tenants", Tenant{Name: "alice", Demand: 2}, 200)
			waitFor(t, 10*time.Second, "n2 runs alice's 2 replicas", func() bool { return len(running("n2")) == 2 })
			start("n1", 0)
			waitFor(t, 10*time.Second, "n1 registered", func() bool { return h.node("n1").Name == "n1" })
			// Watch for a replica running on both nodes at once.
			var twice []string
			var wmu sync.Mutex
			watch, stopWatch := context.WithCancel(context.Background())
			var ww sync.WaitGroup
			ww.Go(func() {
				for sleep(watch, 5*time.Millisecond) {
					for _, g := range running("n2") {
						if slices.Contains(running("n1"), g) {
							wmu.Lock()
							twice = append(twice, g)
							wmu.Unlock()
						}
					}
				}
			})
			agents["n2"].SetServer("http://127.0.0.1:1") // the partition: n2 reaches nothing
			waitFor(t, 10*time.Second, "n2 lost and alice's replicas moved to n1", func() bool {
				return len(running("n1")) == 2 && h.node("n2").Lost
			})
			if c.lease > 0 && len(running("n2")) != 0 {
				t.Fatalf("n2 still runs %v after its lease ran out", running("n2"))
			}
			if c.lease == 0 && len(running("n2")) == 0 {
				t.Fatal("without a lease n2 stopped its replicas during the partition: the partition did not happen")
			}
			agents["n2"].SetServer(h.srv.URL)
			waitFor(t, 10*time.Second, "n2 back at epoch 1, running nothing of the old epoch", func() bool {
				n := h.node("n2")
				return !n.Lost && n.Epoch == 1 && agents["n2"].Applied().Epoch == 1
			})
			stopWatch()
			ww.Wait()
			for _, g := range running("n2") {
				if slices.Contains(running("n1"), g) {
					t.Fatalf("grant %s runs on n1 and n2 after the partition healed", g)
				}
			}
			if agents["n2"].Fenced() == 0 {
				t.Error("n2 never stopped its replicas")
			}
			if c.lease > 0 && len(twice) > 0 {
				t.Errorf("with a lease, replicas %v ran on both nodes at once", twice)
			}
			if c.lease == 0 && len(twice) == 0 {
				t.Error("without a lease no replica ran twice during the partition: the test shows nothing")
			}
			var evs []Event
			json.Unmarshal(h.must("operator", "GET", "/v1/events", nil, 200), &evs)
			if !slices.ContainsFunc(evs, func(e Event) bool { return e.Code == CodeNodeFenced && e.Node == "n2" }) {
				t.Errorf("no NodeFenced event for n2's stale report: %v", evs)
			}
		})
	}
}

func (h *harness) node(name string) Node {
	h.t.Helper()
	var ns []Node
	json.Unmarshal(h.must("operator", "GET", "/v1/nodes", nil, 200), &ns)
	for _, n := range ns {
		if n.Name == name {
			return n
		}
	}
	return Node{}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
