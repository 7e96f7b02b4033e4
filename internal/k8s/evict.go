package k8s

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictWait bounds one Eviction API call. While a PodDisruptionBudget forbids an eviction the API
// server answers 429 with Retry-After: 10 s, and client-go sleeps and retries such answers itself
// (up to 10 times), so an unbounded call would block for minutes. A call cut short here is
// reported as refused and tried again on the next step.
const evictWait = 2 * time.Second

// evict asks the Eviction API to evict p. It returns refused when a budget forbids it now; a pod
// already gone counts as evicted.
func evict(ctx context.Context, c client.Client, p *corev1.Pod) (refused bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, evictWait)
	defer cancel()
	err = c.SubResource("eviction").Create(cctx, p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
	switch {
	case err == nil || apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsTooManyRequests(err):
		return true, nil
	case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(cctx.Err(), context.DeadlineExceeded)):
		return true, nil
	}
	return false, err
}
