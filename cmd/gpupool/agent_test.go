package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/agent"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func agentConfig(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../examples/agent-fake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.Replace(string(src), "stateDir: .gpupool-agent-demo", "stateDir: "+filepath.Join(dir, "state"), 1)
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The README's quick start: one poll on the fake node re-partitions two GPUs and defers the third.
func TestAgentFakeOnce(t *testing.T) {
	cfg := agentConfig(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	s := out.String()
	for _, want := range []string{`re-partitioned from "7g.80gb@0" to "3g.40gb@0 3g.40gb@4"`,
		`re-partitioned from "7g.80gb@0" to "2g.20gb@0 2g.20gb@2 3g.40gb@4"`, "GateRateLimit", "gate: phase idle, cordoned false, 1 queued"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// A second start on the same state: the layouts are kept, nothing is re-done.
	out.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "GateDone") {
		t.Errorf("second start re-partitioned again:\n%s", out.String())
	}
}

func TestAgentServesMetricsAndHealth(t *testing.T) {
	cfg := agentConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "--fake", "--config", cfg, "--listen", "127.0.0.1:0"}, out, io.Discard)
	}()
	re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no address printed:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, body = get("/metrics")
		if strings.Contains(body, `gpupool_tenant_energy_joules_total{tenant="chat"}`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{`gpupool_gate_phase{phase="idle"} 1`, `gpupool_gate_changes_total{outcome="GateDone"} 2`,
		`gpupool_gpu_info{board="H100-SXM5-80GB"`, `gpupool_tenant_tokens_total{tenant="chat"}`,
		`gpupool_tenant_energy_joules_total{tenant="chat"}`, `gpupool_slice_memory_planned_bytes{gpu=`, "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, b := get("/healthz"); code != 200 || b != "ok\n" {
		t.Errorf("/healthz = %d %q", code, b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// With plan: in the config, the node's GPUs take their layouts from the Plan.
func TestAgentFromPlan(t *testing.T) {
	dir := t.TempDir()
	plan := `apiVersion: gpupool.dev/v1
kind: Plan
metadata: {name: small}
pool: small
gpus:
- {node: n1, index: 0, board: H100-SXM5-80GB, role: pool, mode: mig, instances: [{profile: 4g.40gb, start: 0}, {profile: 3g.40gb, start: 4}]}
- {node: n1, index: 1, board: H100-SXM5-80GB, role: idle, mode: exclusive}
- {node: n2, index: 0, board: H100-SXM5-80GB, role: pool, mode: mig, instances: [{profile: 7g.80gb, start: 0}]}
`
	cfg := "node: n1\nstateDir: " + filepath.Join(dir, "state") + "\nplan: plan.yaml\n"
	for name, body := range map[string]string{"plan.yaml": plan, "agent.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", filepath.Join(dir, "agent.yaml"), "--once"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `re-partitioned from "7g.80gb@0" to "4g.40gb@0 3g.40gb@4"`) || strings.Count(out.String(), "GateDone") != 1 {
		t.Fatalf("output:\n%s", out.String())
	}
	os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("node: n3\nstateDir: x\nplan: plan.yaml\n"), 0o644)
	err := run(context.Background(), []string{"agent", "--fake", "--config", filepath.Join(dir, "agent.yaml"), "--once"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `no GPU on node "n3"`) || exitCode(err) != exitInvalid {
		t.Fatalf("plan without the node: %v", err)
	}
	// --node names the node where the config does not (one config for every node of a
	// DaemonSet): n1's GPU takes its layout from the plan again.
	out.Reset()
	os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte("stateDir: "+filepath.Join(dir, "state2")+"\nplan: plan.yaml\n"), 0o644)
	if err := run(context.Background(), []string{"agent", "--fake", "--config", filepath.Join(dir, "agent.yaml"), "--node", "n1", "--once"}, &out, &errOut); err != nil {
		t.Fatalf("--node n1: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `re-partitioned from "7g.80gb@0" to "4g.40gb@0 3g.40gb@4"`) {
		t.Fatalf("--node n1: output:\n%s", out.String())
	}
}

// --reset on a gate that has nothing failed says so and changes nothing.
func TestAgentResetNothing(t *testing.T) {
	cfg := agentConfig(t)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "gate: phase idle, nothing to reset") {
		t.Fatalf("output: %s", out.String())
	}
}

// The agent configuration the Kubernetes DaemonSet ships (deploy/kubernetes/agent.yaml) is valid
// and runs as the DaemonSet runs it (--node from the downward API), here on the fake GPUs with its
// state directory moved to a temporary one.
func TestDeployAgentConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
			Spec struct {
				Template struct {
					Spec struct {
						HostIPC bool `json:"hostIPC"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Kind == "ConfigMap" {
			cfg = cm.Data["agent.yaml"]
		}
		if cm.Kind == "DaemonSet" && cm.Spec.Template.Spec.HostIPC {
			t.Error("the agent's DaemonSet asks for hostIPC, though it runs no MPS daemon on Kubernetes")
		}
	}
	if !strings.Contains(cfg, "stateDir: /var/lib/gpupool\n") {
		t.Fatalf("the DaemonSet's agent.yaml does not keep its state in the hostPath /var/lib/gpupool:\n%s", cfg)
	}
	// On Kubernetes the device plugin (whole GPUs) or the DRA driver (per claim) runs MPS and
	// hands pods the pipe of the device they got: an agent daemon beside it would fight over the GPU.
	if c, _, err := agent.ParseConfig([]byte(cfg)); err != nil || c.MPSDaemons != agent.MPSDaemonsCluster {
		t.Errorf("the DaemonSet's agent.yaml: mpsDaemons %q, want %s (%v)", c.MPSDaemons, agent.MPSDaemonsCluster, err)
	}
	dir := t.TempDir()
	cfg = strings.Replace(cfg, "stateDir: /var/lib/gpupool", "stateDir: "+filepath.Join(dir, "state"), 1)
	if err := os.WriteFile(filepath.Join(dir, "agent.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"agent", "--fake", "--config", filepath.Join(dir, "agent.yaml"), "--node", "gpu-node-1", "--once"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if strings.Contains(out.String(), "GateStarted") {
		t.Errorf("the shipped configuration lists no GPU, yet a change started:\n%s", out.String())
	}
}
