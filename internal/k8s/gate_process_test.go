package k8s

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"gpupool.dev/gpupool/internal/render"
	"gpupool.dev/gpupool/internal/testbin"
)

// The process kill test runs the real `gpupool controller` binary as a child process against the
// test API server and SIGKILLs it while nodes are at each gate step, then starts it again. The
// step is read from what the controller writes (the node's gate annotations and labels); the kill
// lands a random 0–60 ms after the step is seen, so across runs it falls while the gate waits in a
// step, during the write that ends it, and right after that write.

// buildGpupool builds cmd/gpupool (without the race detector) into a temporary directory.
func buildGpupool(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "../../cmd/gpupool", "gpupool")
}

// kubeconfigFile writes a kubeconfig for a new cluster-admin user of the test API server.
func kubeconfigFile(t *testing.T, name string) string {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, testCfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ctrlProc is one `gpupool controller` process.
type ctrlProc struct {
	cmd  *exec.Cmd
	done chan error
}

func startControllerProc(t *testing.T, bin, kubeconfig, ns string, log *os.File) *ctrlProc {
	t.Helper()
	cmd := exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--namespace", ns,
		"--poll", "100ms", "--kube-api-qps", "200", "--kube-api-burst", "400", "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms",
		"--drain-timeout", "1m", "--apply-timeout", "1m", "--verify-timeout", "1500ms",
		"--max-unavailable", strconv.Itoa(killMaxUnavailable), "--cooldown", "0s")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ctrlProc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p
}

// kill SIGKILLs the process and waits for it; it reports whether the process was still running
// (a controller that lost its Lease under load exits by itself, which is not a kill).
func (p *ctrlProc) kill() (killed bool) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}

// exited says whether the process ended on its own.
func (p *ctrlProc) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

func leaseHolder(c client.Client, ns string) string {
	var l coordinationv1.Lease
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "gpupool-controller"}, &l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// gateState names where a node's gate is, as the controller last wrote it: "requested" (a target
// and no step yet), a GateStep, "finished" (a result and no step) or "idle".
func gateState(n *corev1.Node) string {
	a := n.Annotations
	switch {
	case a[AnnotGateStep] != "":
		return a[AnnotGateStep]
	case a[AnnotGateResult] != "":
		return "finished"
	case a[AnnotGateTarget] != "":
		return "requested"
	}
	return "idle"
}

// processKillRuns is how many node gates TestGateControllerProcessKilled runs (10 per round);
// GPUPOOL_GATE_PROCESS_KILL_RUNS raises it (the bar is 100).
func processKillRuns() int {
	if n, err := strconv.Atoi(os.Getenv("GPUPOOL_GATE_PROCESS_KILL_RUNS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// killMaxUnavailable is the controller's --max-unavailable in the kill test: no kill may let more
// nodes than this be in a gate at once.
const killMaxUnavailable = 4

// killScenario is what one node of a round asks for and how it must end.
type killScenario struct {
	to      string
	double  func(*nodeDouble)
	success bool
	// dra makes the node one whose GPUs NVIDIA's DRA driver publishes (draGateDevices), its
	// gate requested with the devices the driver must publish
	dra bool
}

var killScenarios = []killScenario{
	{to: "all-3g.40gb", success: true},
	{to: "all-3g.40gb", success: true},
	// mig-manager reports failed: the gate restores the previous label
	{to: "all-bad", double: func(d *nodeDouble) { d.fail = map[string]bool{"all-bad": true} }},
	// the device plugin comes back with the wrong resources: the verify timeout restores
	{to: "all-3g.40gb", double: func(d *nodeDouble) { d.wrongAlloc = map[string]bool{"all-3g.40gb": true} }},
	// the smoke Job on the new slices fails: the gate restores
	{to: "all-3g.40gb", double: func(d *nodeDouble) { d.smokeFail = map[string]bool{"all-3g.40gb": true} }},
	// a DRA node: verified by its ResourceSlice, smoke-tested from a claim template
	{to: "all-3g.40gb", success: true, dra: true},
	// the DRA driver comes back with the wrong devices: the verify timeout restores
	{to: "all-3g.40gb", dra: true, double: func(d *nodeDouble) { d.wrongAlloc = map[string]bool{"all-3g.40gb": true} }},
}

// draGateConfigs is what NVIDIA's DRA driver publishes on an 8-GPU H100 node under gateConfigs'
// configs, and the expectation of each.
func draGateConfigs(node string) (map[string][]resourcev1.Device, map[string]map[string]int64) {
	devs := map[string][]resourcev1.Device{
		"all-1g.10gb": draGPUs(node, slices.Repeat([][]string{slices.Repeat([]string{"1g.10gb"}, 7)}, 8)...),
		"all-3g.40gb": draGPUs(node, slices.Repeat([][]string{slices.Repeat([]string{"3g.40gb"}, 2)}, 8)...),
		"all-bad":     draGPUs(node, slices.Repeat([][]string{{"7g.80gb"}}, 8)...),
	}
	return devs, map[string]map[string]int64{"all-1g.10gb": {"mig-1g.10gb": 56}, "all-3g.40gb": {"mig-3g.40gb": 16}, "all-bad": {"mig-7g.80gb": 8}}
}

// makeDRANode turns a node newGPUNode made into one whose GPUs the DRA driver publishes: no
// nvidia.com/ allocatable, the devices of its config in a ResourceSlice.
func makeDRANode(t *testing.T, c client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	setAllocatable(n, nil)
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	devs, _ := draGateConfigs(name)
	publishDevices(ctx, c, name, devs[n.Labels[LabelMIGConfig]])
}

// TestGateControllerProcessKilled is the gate's kill bar with real processes: rounds of 10 nodes
// go through the gate (success, mig-manager failure, wrong allocatable, failed smoke Job; on nodes
// whose GPUs a DRA driver publishes, success and wrong devices) driven
// by the `gpupool controller` binary, which is SIGKILLed while some node is at each state in turn
// (requested, Draining, Applying, Verifying, SmokeTesting, Restoring, finished) and started
// again. Each node's Reconfiguration must end closed with the outcome its label shows. After every
// kill no node is cordoned outside a gate and every label is the node's old or new config; at the
// end every node is uncordoned, its gate cleared, and its outcome the one its scenario calls for.
func TestGateControllerProcessKilled(t *testing.T) {
	c := needAPI(t)
	if testing.Short() {
		t.Skip("builds the gpupool binary")
	}
	ctx := context.Background()
	bin := buildGpupool(t)
	kc := kubeconfigFile(t, "gate-kill")
	ns := newNamespace(t, c, "pkill")
	logf, err := os.Create(filepath.Join(t.TempDir(), "controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("controller log (tail):\n%s", b)
		}
	}()
	proc := startControllerProc(t, bin, kc, ns, logf)
	defer func() { proc.kill() }()
	holder := ""
	restart := func() {
		if !proc.kill() {
			t.Logf("controller had exited by itself (lost its Lease under load); started again")
		}
		holder = leaseHolder(c, ns)
		proc = startControllerProc(t, bin, kc, ns, logf)
	}
	// waitLeader waits until the current process holds the Lease (a killed holder's Lease
	// expires after --lease-duration).
	waitLeader := func() {
		deadline := time.Now().Add(time.Minute)
		for {
			if h := leaseHolder(c, ns); h != "" && h != holder {
				return
			}
			if proc.exited() {
				restart()
			}
			if time.Now().After(deadline) {
				t.Fatal("the controller did not take the Lease within a minute")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	targets := []string{"requested", string(StepDraining), string(StepApplying), string(StepVerifying), string(StepSmoke), string(StepRestoring), "finished"}
	landed := map[string]int{} // node states seen right after each kill, over all nodes
	kills, runs := 0, processKillRuns()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	for round := 0; round*10 < runs; round++ {
		nodes := make([]string, 10)
		scen := make([]killScenario, 10)
		dctx, stopDoubles := context.WithCancel(ctx)
		var doubles sync.WaitGroup
		for i := range nodes {
			nodes[i] = nextNode(fmt.Sprintf("pk%d", round))
			scen[i] = killScenarios[i%len(killScenarios)]
			newGPUNode(t, c, nodes[i], "all-1g.10gb", ns)
			d := &nodeDouble{c: c, node: nodes[i], configs: gateConfigs, every: time.Duration(100+rng.IntN(150)) * time.Millisecond}
			if scen[i].dra {
				makeDRANode(t, c, nodes[i])
				d.draDevices, _ = draGateConfigs(nodes[i])
			}
			if scen[i].double != nil {
				scen[i].double(d)
			}
			doubles.Go(func() { d.run(dctx) })
		}
		t.Cleanup(func() { stopDoubles(); doubles.Wait() })
		snapshot := func() []corev1.Node {
			out := make([]corev1.Node, len(nodes))
			for i, name := range nodes {
				if err := c.Get(ctx, client.ObjectKey{Name: name}, &out[i]); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		waitLeader()
		for i, name := range nodes {
			var err error
			if scen[i].dra {
				_, expect := draGateConfigs(name)
				err = (&MIGGate{C: c}).RequestDRA(ctx, name, scen[i].to, DeviceExpectation{Driver: render.DRADriver, Devices: expect[scen[i].to]})
			} else {
				err = (&MIGGate{C: c}).Request(ctx, name, scen[i].to, gateConfigs[scen[i].to])
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, target := range targets {
			seen := false
			for deadline := time.Now().Add(30 * time.Second); !seen && time.Now().Before(deadline); {
				for _, n := range snapshot() {
					seen = seen || gateState(&n) == target
				}
				if !seen {
					if proc.exited() {
						restart()
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if !seen {
				t.Logf("round %d: no node reached %s while the controller ran", round, target)
				continue
			}
			if target != "requested" {
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			}
			restart()
			kills++
			busy := 0
			for _, n := range snapshot() {
				if n.Annotations[AnnotGateStep] != "" {
					busy++
				}
			}
			if busy > killMaxUnavailable {
				t.Errorf("after a kill: %d nodes in a gate, more than --max-unavailable %d", busy, killMaxUnavailable)
			}
			for i, n := range snapshot() {
				landed[gateState(&n)]++
				if l := n.Labels[LabelMIGConfig]; l != "all-1g.10gb" && l != scen[i].to {
					t.Errorf("after a kill: node %s label %q, want all-1g.10gb or %s", n.Name, l, scen[i].to)
				}
				if n.Spec.Unschedulable && n.Annotations[AnnotGateStep] == "" {
					t.Errorf("after a kill: node %s cordoned with no gate in progress (%v)", n.Name, n.Annotations)
				}
			}
		}
		// The last process finishes what is left.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			left := 0
			for _, n := range snapshot() {
				if gateState(&n) != "finished" || n.Annotations[AnnotGateRecord] != "" {
					left++ // the gate, or its Reconfiguration, is not finished
				}
			}
			if left == 0 {
				break
			}
			if proc.exited() {
				restart()
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d gates unfinished two minutes after the last kill", round, left)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for i, name := range nodes {
			n := checkSettled(t, c, name, "all-1g.10gb", scen[i].to)
			res := n.Annotations[AnnotGateResult]
			switch {
			case scen[i].success && (n.Labels[LabelMIGConfig] != scen[i].to || res != "success "+scen[i].to):
				t.Errorf("node %s: label %q result %q, want %s and success", name, n.Labels[LabelMIGConfig], res, scen[i].to)
			case !scen[i].success && (n.Labels[LabelMIGConfig] != "all-1g.10gb" || !strings.HasPrefix(res, "rolled-back "+scen[i].to)):
				t.Errorf("node %s: label %q result %q, want all-1g.10gb and rolled back", name, n.Labels[LabelMIGConfig], res)
			}
			// one Reconfiguration, closed, whose outcome is what the label shows
			checkRecord(t, c, name, "all-1g.10gb", scen[i].to)
		}
		stopDoubles()
		doubles.Wait()
	}
	var states []string
	for s, k := range landed {
		states = append(states, fmt.Sprintf("%s=%d", s, k))
	}
	slices.Sort(states)
	t.Logf("%d node gates, %d SIGKILLs; node states right after the kills: %s", (runs+9)/10*10, kills, strings.Join(states, " "))
	// Where a kill lands depends on the machine's timing; a short pass (CI's one round) may miss
	// a step, which is reported, while the full count (100 gates and more) must cover them all.
	for _, s := range targets[1:] {
		switch {
		case landed[s] > 0:
		case runs >= 100:
			t.Errorf("no kill landed while a node was at %s", s)
		default:
			t.Logf("no kill landed while a node was at %s in this short pass", s)
		}
	}
}
