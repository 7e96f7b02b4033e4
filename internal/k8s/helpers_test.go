package k8s

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "gpupool.dev/gpupool/api/v1"
)

// exampleTenants returns the tenants of examples/h100-7b-sharing.yaml.
func exampleTenants(t *testing.T) []v1.Tenant {
	t.Helper()
	data, err := os.ReadFile("../../examples/h100-7b-sharing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := v1.DecodePool(data)
	if err != nil {
		t.Fatal(err)
	}
	return ex.Tenants
}

// createPool creates a GPUPool selecting the nodes labelled gpupool.dev/test-pool=name.
func createPool(t *testing.T, c client.Client, name string, policy v1.Policy) *GPUPool {
	t.Helper()
	gp := &GPUPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: GPUPoolSpec{
		NodeSelector: map[string]string{"gpupool.dev/test-pool": name}, Policy: policy}}
	if err := c.Create(context.Background(), gp); err != nil {
		t.Fatal(err)
	}
	return gp
}

// startManager runs m until the test ends, and fails the test if it stops with an error.
func startManager(t *testing.T, m manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// clientFor is a client of the package's scheme connecting with cfg.
func clientFor(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitBound waits until want pods of ns are bound to a node and returns how many are.
func waitBound(c client.Client, ns string, want int, within time.Duration) (int, error) {
	bound := 0
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		bound = 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == want, nil
	})
	return bound, err
}
