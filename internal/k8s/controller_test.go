package k8s

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestControllerLeaderTakesOver runs two controller replicas. The one holding the Lease starts a
// node's gate; it is stopped while the node is still cordoned (mig-manager has not answered), the
// other replica takes the Lease and finishes the gate from the node's annotations.
func TestControllerLeaderTakesOver(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	ns := newNamespace(t, c, "ctrl")
	node := nextNode("ctrl")
	newGPUNode(t, c, node, "all-1g.10gb", ns)
	// mig-manager stays silent until the first replica is gone.
	d := &nodeDouble{c: c, node: node, configs: gateConfigs}
	d.mute.Store(true)
	opts := ControllerOptions{Namespace: ns, Gate: MIGGate{Poll: 20 * time.Millisecond}, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
	start := func() (context.CancelFunc, *sync.WaitGroup) {
		m, err := NewController(testCfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := m.Start(mctx); err != nil {
				t.Error(err)
			}
		})
		// A replica left running would drive every other test's nodes: stop it whatever happens.
		t.Cleanup(func() { cancel(); wg.Wait() })
		return cancel, &wg
	}
	stop1, wg1 := start()
	if err := (&MIGGate{C: c}).Request(ctx, node, "all-3g.40gb", gateConfigs["all-3g.40gb"]); err != nil {
		t.Fatal(err)
	}
	startDouble(t, d)
	waitFor(t, "the first replica to set the label", func(n *corev1.Node) bool {
		return n.Annotations[AnnotGateStep] == string(StepApplying)
	}, c, node)
	stop2, wg2 := start() // waits on the Lease
	stop1()
	wg1.Wait()
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gpupool-controller"}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		t.Fatal("no holder in the Lease")
	}
	d.mute.Store(false)
	waitFor(t, "the second replica to finish the gate", func(n *corev1.Node) bool {
		return n.Annotations[AnnotGateStep] == "" && n.Annotations[AnnotGateResult] == "success all-3g.40gb"
	}, c, node)
	stop2()
	wg2.Wait()
	checkSettled(t, c, node, "", "all-3g.40gb")
}

func waitFor(t *testing.T, what string, cond func(*corev1.Node) bool, c client.Client, node string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, nil
		}
		return cond(n), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
