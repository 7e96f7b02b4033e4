package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/control"
)

// TestMain lets the test binary run as `gpupool serve` in a child process, so a test can kill
// the real server with SIGKILL.
// child is one server process.
type child struct {
	cmd  *exec.Cmd
	addr string
}

func startServe(t *testing.T, dir string, extra ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUPOOL_TEST_CHILD=1",
		"GPUPOOL_TEST_ARGS=serve --data "+dir+" --listen 127.0.0.1:0 --rate 100000 --burst 100000 "+strings.Join(extra, " "))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	ready := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "gpupool serve: listening on http://"); ok {
				ready <- a
			}
		}
	}()
	select {
	case a := <-ready:
		return &child{cmd: cmd, addr: a}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve did not start within 30s")
	}
	return nil
}

func (c *child) kill(t *testing.T) {
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// tenantClient changes one tenant's demand over and over and remembers what the server
// acknowledged and what it attempted since.
type tenantClient struct {
	name      string
	acked     control.Tenant
	attempted []int
}

// TestServeSurvivesSIGKILL: clients change demand while the server process is killed with
// SIGKILL again and again. After every restart no acknowledged write is lost (each tenant's
// stored version is the acknowledged one, or later only by writes that were in flight), no
// grant or slice is held twice, no tenant holds more than it asks, and every simulated agent
// converges to the stored layout. GPUPOOL_KILL_CLIENTS and GPUPOOL_KILLS scale it (defaults 50
// clients and 20 kills).
func TestServeSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child server process repeatedly")
	}
	clients, kills := envInt("GPUPOOL_KILL_CLIENTS", 50), envInt("GPUPOOL_KILLS", 20)
	dir := t.TempDir()
	c := startServe(t, dir)
	defer func() { c.cmd.Process.Kill(); c.cmd.Wait() }()
	secret, _ := os.ReadFile(filepath.Join(dir, "operator.token"))
	var addrMu sync.RWMutex // clients hold it for reading during a request; the checker for writing
	base := "http://" + c.addr
	cl := func() *client {
		return &client{base: base, token: strings.TrimSpace(string(secret)), http: &http.Client{Timeout: 5 * time.Second}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Three nodes of 8 slices: 24 slices for tenants that ask up to 4 each (up to 80).
	var agents []*control.SimAgent
	var agentWG sync.WaitGroup
	for i := range 3 {
		node := fmt.Sprintf("node-%d", i)
		var tok control.TokenResponse
		must(t, cl().call(ctx, "POST", "/v1/tokens", control.TokenRequest{Role: control.RoleAgent, Node: node}, &tok))
		inv := control.Inventory{}
		for g := range 2 {
			inv.GPUs = append(inv.GPUs, control.GPU{UUID: fmt.Sprintf("GPU-%d-%d", i, g), Board: "H100-SXM5-80GB",
				Slices: []string{"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"}})
		}
		a := &control.SimAgent{Server: base, Token: tok.Token, Node: node, Inventory: inv, Heartbeat: 200 * time.Millisecond,
			Client: &http.Client{Timeout: 3 * time.Second}}
		agents = append(agents, a)
		agentWG.Go(func() { a.Run(ctx) })
	}
	tcs := make([]*tenantClient, clients)
	for i := range tcs {
		tc := &tenantClient{name: fmt.Sprintf("t%02d", i)}
		must(t, cl().call(ctx, "PUT", "/v1/tenants/"+tc.name, control.Tenant{Name: tc.name, Demand: 1}, &tc.acked))
		tcs[i] = tc
	}

	var wg sync.WaitGroup
	var writes, acks, failed [64]int // per client, read under addrMu's write lock
	for i, tc := range tcs {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				addrMu.RLock()
				want := rng.IntN(5)
				tc.attempted = append(tc.attempted, want)
				var got control.Tenant
				err := cl().call(ctx, "PUT", "/v1/tenants/"+tc.name+"/demand", control.ReplicasDemand(want), &got)
				writes[i%64]++
				if err == nil {
					if got.Demand != want {
						t.Errorf("tenant %s: acknowledged demand %d, asked %d", tc.name, got.Demand, want)
					}
					tc.acked, tc.attempted = got, nil
					acks[i%64]++
				} else {
					failed[i%64]++
				}
				addrMu.RUnlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}

	rng := rand.New(rand.NewPCG(42, 42))
	start := time.Now()
	for k := range kills {
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
		c.kill(t)
		c = startServe(t, dir)
		addrMu.Lock()
		base = "http://" + c.addr
		for _, a := range agents {
			a.SetServer(base)
		}
		checkAfterRestart(t, k, cl(), tcs)
		addrMu.Unlock()
		checkAgentsConverge(t, k, cl(), agents)
	}
	cancel()
	wg.Wait()
	agentWG.Wait()
	total := [3]int{}
	for i := range writes {
		total[0] += writes[i]
		total[1] += acks[i]
		total[2] += failed[i]
	}
	t.Logf("%d clients, %d SIGKILLs in %s: %d demand writes, %d acknowledged, %d failed while the server was down",
		clients, kills, time.Since(start).Round(time.Millisecond), total[0], total[1], total[2])
	if total[1] < clients*kills {
		t.Errorf("only %d acknowledged writes: the test did not exercise the server", total[1])
	}
}

// TestServeKeepsLeasesAcrossSIGKILL: burst leases survive a SIGKILL of the server: after the
// restart each lease is the same grant on the same slice with the same expiry, and it is renewed
// at that expiry, not a fresh term after the restart.
func TestServeKeepsLeasesAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child server process")
	}
	const lease = 6 * time.Second
	dir := t.TempDir()
	c := startServe(t, dir, "--burst-pool-percent 20", "--lease "+lease.String())
	defer func() { c.cmd.Process.Kill(); c.cmd.Wait() }()
	secret, _ := os.ReadFile(filepath.Join(dir, "operator.token"))
	cl := &client{base: "http://" + c.addr, token: strings.TrimSpace(string(secret)), http: &http.Client{Timeout: 5 * time.Second}}
	ctx := context.Background()
	inv := control.Inventory{}
	for g := range 2 {
		inv.GPUs = append(inv.GPUs, control.GPU{UUID: fmt.Sprintf("GPU-%d", g), Board: "H100-SXM5-80GB",
			Slices: []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "3g.40gb"}})
	}
	must(t, cl.call(ctx, "PUT", "/v1/nodes/n1", inv, nil))
	must(t, cl.call(ctx, "PUT", "/v1/tenants/a", control.Tenant{Name: "a", Demand: 10}, nil))
	leases := func() map[string]control.Grant {
		var gs []control.Grant
		must(t, cl.call(ctx, "GET", "/v1/grants", nil, &gs))
		out := map[string]control.Grant{}
		for _, g := range gs {
			if !g.Expires.IsZero() {
				out[g.ID] = g
			}
		}
		return out
	}
	before := leases()
	if len(before) != 2 {
		t.Fatalf("%d leases, want 2 (20%% of 10 slices): %v", len(before), before)
	}
	var granted time.Time
	for _, g := range before {
		granted = g.Since
	}
	time.Sleep(time.Until(granted.Add(3 * time.Second))) // restart halfway through the term
	c.kill(t)
	restarted := time.Now()
	c = startServe(t, dir, "--burst-pool-percent 20", "--lease "+lease.String())
	cl.base = "http://" + c.addr
	after := leases()
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("leases changed across the restart:\n%v\n%v", before, after)
	}
	// Renewed at the stored expiry (the next tick after it), never a full term after the
	// restart, which would put the new expiry at or after restarted+2·lease.
	deadline := time.Now().Add(2*lease + 5*time.Second)
	for {
		now := leases()
		renewed := len(now) == len(before)
		for id, g := range now {
			b, ok := before[id]
			renewed = renewed && ok && g.Slice == b.Slice && g.Expires.After(b.Expires)
		}
		if renewed {
			for id, g := range now {
				if e := before[id].Expires; g.Expires.Before(e.Add(lease)) || !g.Expires.Before(restarted.Add(2*lease)) {
					t.Fatalf("lease %s renewed to %s: want at least its stored expiry %s plus %s, and before %s (a full term counted from the restart)",
						id, g.Expires.Format(time.TimeOnly+".000"), e.Format(time.TimeOnly+".000"), lease, restarted.Add(2*lease).Format(time.TimeOnly+".000"))
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases not renewed by %s: before %v, now %v", deadline.Format(time.TimeOnly), before, now)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkAfterRestart(t *testing.T, k int, cl *client, tcs []*tenantClient) {
	t.Helper()
	ctx := context.Background()
	var ts []control.TenantStatus
	must(t, cl.call(ctx, "GET", "/v1/tenants", nil, &ts))
	byName := map[string]control.TenantStatus{}
	for _, s := range ts {
		byName[s.Name] = s
	}
	for _, tc := range tcs {
		s, ok := byName[tc.name]
		switch {
		case !ok:
			t.Fatalf("kill %d: tenant %s lost", k, tc.name)
		case s.Version < tc.acked.Version:
			t.Fatalf("kill %d: tenant %s at version %d, acknowledged %d: an acknowledged write was lost", k, tc.name, s.Version, tc.acked.Version)
		case s.Version == tc.acked.Version && s.Demand != tc.acked.Demand:
			t.Fatalf("kill %d: tenant %s demand %d at acknowledged version %d, acknowledged demand %d", k, tc.name, s.Demand, s.Version, tc.acked.Demand)
		case s.Version > tc.acked.Version:
			if int(s.Version-tc.acked.Version) > len(tc.attempted) || !containsInt(tc.attempted, s.Demand) {
				t.Fatalf("kill %d: tenant %s at version %d demand %d; acknowledged %d, unacknowledged attempts %v", k, tc.name, s.Version, s.Demand, tc.acked.Version, tc.attempted)
			}
		}
		tc.acked, tc.attempted = s.Tenant, nil // an in-flight write that landed counts from now on
	}
	var gs []control.Grant
	must(t, cl.call(ctx, "GET", "/v1/grants", nil, &gs))
	ids, slices, per := map[string]bool{}, map[string]string{}, map[string]int{}
	for _, g := range gs {
		if ids[g.ID] {
			t.Fatalf("kill %d: grant %s listed twice", k, g.ID)
		}
		ids[g.ID] = true
		if other, dup := slices[g.Slice]; dup {
			t.Fatalf("kill %d: slice %s granted twice (%s, %s)", k, g.Slice, other, g.ID)
		}
		slices[g.Slice] = g.ID
		per[g.Tenant]++
	}
	for name, n := range per {
		if n > byName[name].Demand {
			t.Fatalf("kill %d: tenant %s holds %d grants, demand %d", k, name, n, byName[name].Demand)
		}
	}
}

// checkAgentsConverge waits until every agent has applied its node's stored layout.
func checkAgentsConverge(t *testing.T, k int, cl *client, agents []*control.SimAgent) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range agents {
		for {
			var l control.Layout
			err := cl.call(context.Background(), "GET", "/v1/nodes/"+a.Node+"/layout", nil, &l)
			got := a.Applied()
			if err == nil && got.Revision == l.Revision && sameAssignment(got, l) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: agent %s applied revision %d, stored %d (err %v)", k, a.Node, got.Revision, l.Revision, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func sameAssignment(a, b control.Layout) bool {
	if len(a.Slices) != len(b.Slices) {
		return false
	}
	for i := range a.Slices {
		if a.Slices[i].ID != b.Slices[i].ID || a.Slices[i].Grant != b.Slices[i].Grant {
			return false
		}
	}
	return true
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 0 {
		return n
	}
	return def
}
