package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/control"
)

// startInProcess runs the control plane in this process and returns its URL and operator token.
func startInProcess(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	o := control.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0",
		Ready: func(addr, secret string) { ready <- [2]string{"http://" + addr, secret} }}
	go func() { done <- control.Run(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case r := <-ready:
		return r[0], r[1]
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start")
	}
	return "", ""
}

func TestClientCommands(t *testing.T) {
	url, op := startInProcess(t)
	cli := func(args ...string) (string, string, int) {
		return runCmd(t, append(args, "--server", url, "--token", op)...)
	}
	// A node registers through the API (an operator may speak for a node).
	c := &client{base: url, token: op, http: newHTTPClient()}
	n1 := control.Inventory{GPUs: []control.GPU{{UUID: "GPU-0", Board: "H100-SXM5-80GB", Slices: []string{"3g.40gb", "3g.40gb", "1g.10gb"}}}}
	must(t, c.call(context.Background(), "PUT", "/v1/nodes/n1", n1, nil))

	if out, errs, code := cli("tenant", "set", "alpha", "2", "--weight", "2"); code != 0 || !strings.Contains(out, "tenant alpha: demand 2 (version 1)") {
		t.Fatalf("tenant set: %d %q %q", code, out, errs)
	}
	if out, _, code := cli("tenant", "demand", "alpha", "3"); code != 0 || !strings.Contains(out, "demand 3 (version 2)") {
		t.Fatalf("tenant demand: %d %q", code, out)
	}
	if out, errs, code := cli("tenant", "set", "rated", "1", "--rate-per-replica", "50"); code != 0 {
		t.Fatalf("tenant set rated: %d %q %q", code, out, errs)
	}
	if out, errs, code := cli("tenant", "demand", "rated", "--rate", "120"); code != 0 || !strings.Contains(out, "demand 3 ") {
		t.Fatalf("tenant demand --rate 120 at 50 per replica: %d %q %q, want demand 3", code, out, errs)
	}
	cli("tenant", "rm", "rated")
	out, _, code := cli("tenant", "list")
	if code != 0 || !strings.Contains(out, "alpha") || !strings.Contains(out, "100.0%") {
		t.Fatalf("tenant list: %d %q (alpha alone holds the 3 slices: 100%%)", code, out)
	}
	out, _, code = cli("grants", "--json")
	var gs []control.Grant
	if code != 0 || json.Unmarshal([]byte(out), &gs) != nil || len(gs) != 3 {
		t.Fatalf("grants: %d %q, want 3 grants", code, out)
	}
	// A tenant token made by `token create` sees its own tenant only.
	out, _, code = cli("token", "create", "tenant", "beta")
	if code != 0 || !strings.HasPrefix(out, "gp_") {
		t.Fatalf("token create: %d %q", code, out)
	}
	beta := strings.TrimSpace(out)
	_, errs, code := runCmd(t, "tenant", "get", "alpha", "--server", url, "--token", beta)
	if code != exitInvalid || !strings.Contains(errs, "404") {
		t.Fatalf("beta reading alpha: exit %d %q, want 1 and a 404", code, errs)
	}
	// Invalid input is exit 1 with the field named.
	if _, errs, code := cli("tenant", "set", "Bad_Name", "1"); code != exitInvalid || !strings.Contains(errs, "400") {
		t.Fatalf("bad name: exit %d %q", code, errs)
	}
	pool := writeTemp(t, "pool.yaml", mustRead(t, "../../examples/h100x8-mixed.yaml"))
	out, errs, code = cli("apply", pool)
	if code != 0 || strings.Count(out, "tenant ") < 2 {
		t.Fatalf("apply: %d %q %q", code, out, errs)
	}
	if out, _, code := cli("node", "cordon", "n1"); code != 0 || !strings.Contains(out, "cordoned true") {
		t.Fatalf("node cordon: %d %q", code, out)
	}
	if out, _, code := cli("node", "list"); code != 0 || !strings.Contains(out, "cordoned") {
		t.Fatalf("node list: %d %q", code, out)
	}
	out, _, _ = cli("grants", "--json")
	if json.Unmarshal([]byte(out), &gs) != nil || len(gs) != 0 {
		t.Fatalf("grants on the only, cordoned node: %q", out)
	}
	if _, _, code := cli("tenant", "rm", "alpha"); code != 0 {
		t.Fatalf("tenant rm: %d", code)
	}
	// A cordoned node with no replica left is removed for good; an unknown one is a 404.
	if out, errs, code := cli("node", "rm", "n1"); code != 0 || !strings.Contains(out, "node n1 removed") {
		t.Fatalf("node rm: %d %q %q", code, out, errs)
	}
	if out, _, _ := cli("node", "list"); strings.Contains(out, "n1") {
		t.Fatalf("node list after rm: %q", out)
	}
	if _, errs, code := cli("node", "rm", "n1"); code != exitInvalid || !strings.Contains(errs, "404") {
		t.Fatalf("node rm of a removed node: %d %q, want exit 1 and a 404", code, errs)
	}
	// Removed, the node's reports are refused (410) until it is re-admitted.
	if err := c.call(context.Background(), "PUT", "/v1/nodes/n1", n1, nil); err == nil || !strings.Contains(err.Error(), "410") {
		t.Fatalf("report of the removed node: %v, want a 410", err)
	}
	if out, errs, code := cli("node", "admit", "n1"); code != 0 || !strings.Contains(out, "node n1 re-admitted") {
		t.Fatalf("node admit: %d %q %q", code, out, errs)
	}
	if _, errs, code := cli("node", "admit", "n1"); code != exitInvalid || !strings.Contains(errs, "404") {
		t.Fatalf("node admit of a node not removed: %d %q, want exit 1 and a 404", code, errs)
	}
	must(t, c.call(context.Background(), "PUT", "/v1/nodes/n1", n1, nil))
}

func mustRead(t *testing.T, p string) string {
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestServeDemo runs `gpupool serve --demo` as a child process and waits until its agents (two
// real agents on mock H100s, one simulated MPS node) registered, the demo tenants hold grants,
// and a MIG change asked by the demo passed a real agent's gate.
func TestServeDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child server")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUPOOL_TEST_CHILD=1", "GPUPOOL_TEST_ARGS=serve --demo --data "+dir+" --listen 127.0.0.1:0")
	out, _ := cmd.StdoutPipe()
	must(t, cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(out, buf, 40)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	base, ok := strings.CutPrefix(line, "gpupool serve: listening on ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	secret, _ := os.ReadFile(filepath.Join(dir, "operator.token"))
	c := &client{base: base, token: strings.TrimSpace(string(secret)), http: newHTTPClient()}
	deadline := time.Now().Add(25 * time.Second)
	for {
		var nodes []control.Node
		var ts []control.TenantStatus
		var evs []control.Event
		err1 := c.call(context.Background(), "GET", "/v1/nodes", nil, &nodes)
		err2 := c.call(context.Background(), "GET", "/v1/tenants", nil, &ts)
		err3 := c.call(context.Background(), "GET", "/v1/events", nil, &evs)
		granted, gated := 0, false
		for _, x := range ts {
			granted += x.Granted
		}
		for _, ev := range evs {
			gated = gated || ev.Code == control.CodeGateDone
		}
		if err1 == nil && err2 == nil && err3 == nil && len(nodes) == 3 && len(ts) >= 3 && granted > 0 && gated {
			owner := map[string]string{} // every GPU of the pool is one GPU: UUIDs distinct across nodes
			for _, nd := range nodes {
				for _, g := range nd.Inventory.GPUs {
					if o, dup := owner[g.UUID]; dup {
						t.Fatalf("GPU %s reported by node %s and node %s", g.UUID, o, nd.Name)
					}
					owner[g.UUID] = nd.Name
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo: %d nodes, %d tenants, %d grants, a gate done %t after 25s (%v, %v, %v)", len(nodes), len(ts), granted, gated, err1, err2, err3)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// `gpupool serve` plans as `gpupool plan` does: its dry-run plan is confirmed by simulation
// (the Simulated reason) unless --sim-requests -1 says not to; a budget below -1 is invalid.
func TestServePlansWithSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two server processes")
	}
	dryRun := func(extra ...string) string {
		t.Helper()
		dir := t.TempDir()
		c := startServe(t, dir, extra...)
		defer func() { c.cmd.Process.Kill(); c.cmd.Wait() }()
		secret, err := os.ReadFile(filepath.Join(dir, "operator.token"))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", "http://"+c.addr+"/v1/plans/dry-run", strings.NewReader(planPool))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(secret)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("dry run %v: %d %s", extra, resp.StatusCode, body)
		}
		return string(body)
	}
	if on := dryRun(); !strings.Contains(on, `"code":"Simulated"`) {
		t.Errorf("serve's dry-run plan carries no Simulated reason:\n%.2000s", on)
	}
	if off := dryRun("--sim-requests -1"); strings.Contains(off, `"code":"Simulated"`) {
		t.Errorf("serve --sim-requests -1: a Simulated reason:\n%.2000s", off)
	}
	if _, errOut, code := runCmd(t, "serve", "--data", t.TempDir(), "--sim-requests", "-2"); code != exitInvalid || !strings.Contains(errOut, "--sim-requests") {
		t.Errorf("serve --sim-requests -2: exit %d, stderr %q", code, errOut)
	}
}

// TestServeRefusesNodeTimeoutBelowHeartbeats: a node timeout shorter than two of the node agent's
// heartbeats is refused before anything starts; before, it was taken and a live agent's node was
// declared lost between heartbeats again and again (its epoch growing, its replicas moving).
func TestServeRefusesNodeTimeoutBelowHeartbeats(t *testing.T) {
	for _, nt := range []string{"3s", "9s", "0s"} {
		_, errOut, code := runCmd(t, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--node-timeout", nt)
		if code != exitInvalid || !strings.Contains(errOut, "--node-timeout "+nt+" is shorter than two heartbeats") {
			t.Errorf("serve --node-timeout %s: exit %d, stderr %q", nt, code, errOut)
		}
	}
}
