package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestControllerInputErrors: the controller command refuses a missing --namespace and an
// unreadable kubeconfig as input errors (exit 1) before contacting any API server. Its behaviour
// against a real API server is tested in internal/k8s (TestControllerLeaderTakesOver).
func TestControllerInputErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"controller"}, "--namespace: must be set"},
		{[]string{"controller", "--poll", "0s", "--lease-duration", "1s"}, "the leader-election Lease lives there)\n--poll: must be positive, got 0s\n--retry-period (2s) < --renew-deadline (10s) < --lease-duration (1s) must hold"},
		{[]string{"controller", "--namespace", "gpupool-system", "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, "load kubeconfig"},
		{[]string{"controller", "--namespace", "gpupool-system", "--sim-requests", "-2"}, "--sim-requests: must be -1 (no simulation)"},
	} {
		_, stderr, code := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
