package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SmokeTest configures the gate's smoke Jobs: after verification, one Job per new resource kind on
// the node (the drain scope's Smoke list), pinned to the node and tolerating the gate's cordon,
// whose pod asks for every free instance of that kind and runs Command.
type SmokeTest struct {
	// Image runs the check; empty turns the smoke step off.
	Image string
	// Command is the container's command (default nvidia-smi -L); it must exit 0.
	Command []string
	// Namespace holds the Jobs.
	Namespace string
	// Timeout bounds the wait for every Job to succeed (default 5 min); past it the gate rolls back.
	Timeout time.Duration
}

// LabelReconfiguration on a smoke Job names its Reconfiguration.
const LabelReconfiguration = "gpupool.dev/reconfiguration"

// errSmokeRefused marks a smoke Job's object the API server refused: no retry would help.
var errSmokeRefused = errors.New("refused")

// refused says the API server will not take the object as it is (or not in that namespace).
func refused(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// smokeJobName is the Job of one resource kind in one gate.
func smokeJobName(record, res string) string {
	kind := strings.NewReplacer("nvidia.com/", "", "/", "-", ".", "-", "+", "-", "_", "-").Replace(res)
	return shortName(strings.ToLower(record+"-smoke-"+kind), 63)
}

// smoke creates the node's smoke Jobs that do not exist yet and waits for them: all complete →
// success; one failed, or the timeout passed → rollback.
func (g *MIGGate) smoke(ctx context.Context, n *corev1.Node) error {
	record := n.Annotations[AnnotGateRecord]
	kinds := decodeScope(n.Annotations[AnnotGateScope]).Smoke
	timeout := orDefault(g.Smoke.Timeout, 5*time.Minute)
	exp, err := deviceExpectation(n)
	if err != nil {
		return err
	}
	var waiting []string
	for _, res := range kinds {
		name := smokeJobName(record, res)
		j := &batchv1.Job{}
		err := g.C.Get(ctx, client.ObjectKey{Namespace: g.Smoke.Namespace, Name: name}, j)
		if apierrors.IsNotFound(err) {
			if exp != nil {
				j, err = g.draSmokeJob(ctx, n, exp, record, name, res)
			} else {
				j, err = g.smokeJob(ctx, n, record, name, res)
			}
			if err != nil {
				if errors.Is(err, errSmokeRefused) {
					return g.rollback(ctx, n, fmt.Sprintf("could not create smoke Job %s/%s for %s: %v", g.Smoke.Namespace, name, res, err))
				}
				return err
			}
			g.hook("before:smoke-job")
			if err := g.C.Create(ctx, j); err != nil && !apierrors.IsAlreadyExists(err) {
				if refused(err) {
					// no retry would help: the node must not wait cordoned for a test that cannot run
					return g.rollback(ctx, n, fmt.Sprintf("could not create smoke Job %s/%s for %s: %v", g.Smoke.Namespace, name, res, err))
				}
				return fmt.Errorf("gate node %s: create smoke Job %s/%s: %w", n.Name, g.Smoke.Namespace, name, err)
			}
			g.hook("after:smoke-job")
			waiting = append(waiting, name)
			continue
		}
		if err != nil {
			return fmt.Errorf("gate node %s: smoke Job %s/%s: %w", n.Name, g.Smoke.Namespace, name, err)
		}
		if c := jobCondition(j, batchv1.JobFailed); c != nil {
			return g.rollback(ctx, n, fmt.Sprintf("smoke Job %s/%s for %s failed: %s %s", j.Namespace, j.Name, res, c.Reason, c.Message))
		}
		if jobCondition(j, batchv1.JobComplete) == nil {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) == 0 {
		return g.finish(ctx, n, "success "+n.Annotations[AnnotGateTarget])
	}
	if g.now().Sub(g.since(n)) > timeout {
		return g.rollback(ctx, n, fmt.Sprintf("smoke Jobs %s did not succeed within %s", strings.Join(waiting, ", "), timeout))
	}
	return nil
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// smokeJob builds the Job testing resource res on n: its pod is bound to the node (nodeName, so
// the cordon does not keep it off; it also tolerates the cordon's taint), asks for every instance
// of res the node's other pods do not hold, never restarts, and meets the restricted Pod Security
// level. It is owned by the Reconfiguration, so it goes with the record.
func (g *MIGGate) smokeJob(ctx context.Context, n *corev1.Node, record, name, res string) (*batchv1.Job, error) {
	free, err := g.freeInstances(ctx, n, res)
	if err != nil {
		return nil, err
	}
	r := &Reconfiguration{}
	if err := g.C.Get(ctx, client.ObjectKey{Name: record}, r); err != nil {
		return nil, fmt.Errorf("gate node %s: reconfiguration %s: %w", n.Name, record, err)
	}
	pod := g.smokePod(n, record)
	pod.Spec.NodeName = n.Name
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceName(res): *resource.NewQuantity(free, resource.DecimalSI)}}
	return g.smokeJobOf(r, name, n.Name, pod), nil
}

// smokePod is the smoke Job's pod template, less its node and its devices: it never restarts,
// tolerates the gate's cordon and NVIDIA's GPU taint, and meets the restricted Pod Security level.
func (g *MIGGate) smokePod(n *corev1.Node, record string) corev1.PodTemplateSpec {
	cmd := g.Smoke.Command
	if len(cmd) == 0 {
		cmd = []string{"nvidia-smi", "-L"}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelNode: n.Name, LabelReconfiguration: record}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(65534)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "smoke", Image: g.Smoke.Image, Command: cmd,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// smokeJobOf is the smoke Job running pod, owned by the Reconfiguration r.
func (g *MIGGate) smokeJobOf(r *Reconfiguration, name, node string, pod corev1.PodTemplateSpec) *batchv1.Job {
	deadline := int64(orDefault(g.Smoke.Timeout, 5*time.Minute) / time.Second)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.Smoke.Namespace, Labels: map[string]string{LabelNode: node, LabelReconfiguration: r.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: GroupVersion.String(), Kind: "Reconfiguration", Name: r.Name, UID: r.UID}}},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptrTo(int32(0)),
			ActiveDeadlineSeconds:   &deadline,
			TTLSecondsAfterFinished: ptrTo(int32(3600)),
			Template:                pod,
		},
	}
}

// freeInstances is the node's allocatable res less what its running pods (other than smoke
// pods) hold, at least 1: the smoke pod takes every free instance, so the device plugin cannot
// hand it only instances on GPUs that did not change.
func (g *MIGGate) freeInstances(ctx context.Context, n *corev1.Node, res string) (int64, error) {
	alloc := n.Status.Allocatable[corev1.ResourceName(res)]
	free := alloc.Value()
	var pods corev1.PodList
	if err := g.C.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return 0, fmt.Errorf("gate node %s: list pods: %w", n.Name, err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.Labels[LabelReconfiguration] != "" {
			continue
		}
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Limits[corev1.ResourceName(res)]; ok {
				free -= q.Value()
			}
		}
	}
	return max(free, 1), nil
}
