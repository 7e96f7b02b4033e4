package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/render"
)

// SchedulingGate is the scheduling gate tenant pods are created with; the scheduler leaves a pod
// alone until gpupool removes the gate, which it does only for replicas the allocator granted.
const SchedulingGate = "gpupool.dev/admission"

// Admitter admits tenant pods (label gpupool.dev/tenant) by removing SchedulingGate, up to each
// tenant's granted replicas, and evicts admitted pods beyond the grant (preemption) through the
// Eviction API. Grants come from the fair allocator.
type Admitter struct {
	C client.Client
	// Namespace limits the pods considered ("" = all namespaces).
	Namespace string
	// Workers is how many gate removals run at once (default 16).
	Workers int
}

// AdmitResult says what one Admit call did.
type AdmitResult struct {
	// Admitted lists the pods whose gate was removed, in the order they were chosen.
	Admitted []client.ObjectKey
	// Evicted lists the pods evicted to bring a tenant back to its grant.
	Evicted []client.ObjectKey
}

type tenantPods struct {
	gated    []*corev1.Pod // oldest first
	admitted []*corev1.Pod // newest first
}

func hasGate(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
}

// Admit brings every tenant's admitted pods to min(grant, pods) and returns what it did.
func (a *Admitter) Admit(ctx context.Context, grants map[string]int) (AdmitResult, error) {
	var pods corev1.PodList
	if err := a.C.List(ctx, &pods, client.InNamespace(a.Namespace), client.HasLabels{render.LabelTenant}); err != nil {
		return AdmitResult{}, fmt.Errorf("admit: list tenant pods: %w", err)
	}
	by := map[string]*tenantPods{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		t := p.Labels[render.LabelTenant]
		if by[t] == nil {
			by[t] = &tenantPods{}
		}
		if hasGate(p) {
			by[t].gated = append(by[t].gated, p)
		} else {
			by[t].admitted = append(by[t].admitted, p)
		}
	}
	for _, tp := range by {
		sort.Slice(tp.gated, func(i, j int) bool { return older(tp.gated[i], tp.gated[j]) })
		sort.Slice(tp.admitted, func(i, j int) bool { return older(tp.admitted[j], tp.admitted[i]) })
	}
	var res AdmitResult
	toEvict, admit := admissionPlan(by, grants)
	for _, p := range toEvict {
		refused, err := evict(ctx, a.C, p)
		if err != nil {
			return res, fmt.Errorf("admit: evict pod %s/%s of tenant %s: %w", p.Namespace, p.Name, p.Labels[render.LabelTenant], err)
		}
		if !refused {
			res.Evicted = append(res.Evicted, client.ObjectKeyFromObject(p))
		}
	}
	for _, p := range admit {
		res.Admitted = append(res.Admitted, client.ObjectKeyFromObject(p))
	}
	return res, a.ungate(ctx, admit)
}

func older(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// admissionPlan chooses the pods to evict (each tenant's newest admitted pods beyond its grant)
// and the pods to admit, in fair order: the next pod goes to the tenant with the lowest share of
// its grant admitted so far (ties: fewer admitted, then name), so every tenant progresses at
// the same rate and none waits behind another's whole backlog.
func admissionPlan(by map[string]*tenantPods, grants map[string]int) (evict, admit []*corev1.Pod) {
	names := make([]string, 0, len(by))
	for t := range by {
		names = append(names, t)
	}
	sort.Strings(names)
	count := map[string]int{}
	for _, t := range names {
		tp, g := by[t], grants[t]
		if n := len(tp.admitted); n > g {
			evict = append(evict, tp.admitted[:n-g]...)
			count[t] = g
		} else {
			count[t] = n
		}
	}
	next := map[string]int{}
	for {
		best := ""
		for _, t := range names {
			g := grants[t]
			if count[t] >= g || next[t] >= len(by[t].gated) {
				continue
			}
			if best == "" || less(count[t], g, count[best], grants[best]) {
				best = t
			}
		}
		if best == "" {
			return evict, admit
		}
		admit = append(admit, by[best].gated[next[best]])
		next[best]++
		count[best]++
	}
}

// less compares admitted shares a/ga and b/gb exactly (a·gb < b·ga), then admitted counts.
func less(a, ga, b, gb int) bool {
	if a*gb != b*ga {
		return a*gb < b*ga
	}
	return a < b
}

// ungate removes SchedulingGate from pods, Workers at a time; the plan's order is the order the
// removals start in.
func (a *Admitter) ungate(ctx context.Context, pods []*corev1.Pod) error {
	workers := a.Workers
	if workers <= 0 {
		workers = 16
	}
	work := make(chan *corev1.Pod)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p := range work {
				if err := a.removeGate(ctx, p); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range pods {
		work <- p
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

func (a *Admitter) removeGate(ctx context.Context, p *corev1.Pod) error {
	for {
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
		err := a.C.Update(ctx, p)
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("admit: remove scheduling gate of pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			return nil
		}
		if err := a.C.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return fmt.Errorf("admit: re-read pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if !hasGate(p) {
			return nil
		}
	}
}
