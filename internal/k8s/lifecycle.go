package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"gpupool.dev/gpupool/internal/render"
)

// The lifecycle of what a GPUPool applies. Every object the reconciler applies for a pool in the
// tenants' namespaces (Deployments, ResourceClaims, ResourceClaimTemplates) and every node it
// labels carries LabelOwnerPool. After a plan is applied in full, the objects of the pool that
// the plan no longer wants are deleted (prune); when the GPUPool is deleted, its finalizer removes
// everything the pool owns (finalize). Both select by the label and also require that gpupool's
// server-side apply manager applied the object, so an object a user made, even with the label,
// is never touched.

// PoolFinalizer holds a deleted GPUPool until what it applied is removed.
const PoolFinalizer = "gpupool.dev/pool-cleanup"

// LabelOwnerPool names, on the objects and nodes a GPUPool applied, that GPUPool (its name, or for
// a name longer than a label value its first characters and a digest; see ownerValue).
const LabelOwnerPool = "gpupool.dev/gpupool"

// ownerValue is the LabelOwnerPool value of pool.
func ownerValue(pool string) string { return shortName(pool, 63) }

// Kinds the reconciler applies in the tenants' namespaces, in the order they are pruned: the
// Deployments before the claims and templates their pods use.
var (
	gvkDeployment    = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	gvkClaim         = schema.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaim"}
	gvkClaimTemplate = schema.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplate"}
	prunedKinds      = []schema.GroupVersionKind{gvkDeployment, gvkClaim, gvkClaimTemplate}
)

// objRef names one applied object.
type objRef struct{ Kind, Namespace, Name string }

func (o objRef) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// applyState is what one apply of a pool's plan records: the objects applied (the plan's wanted
// set, which prune keeps) and the content names given to claims and templates.
type applyState struct {
	owner   string // LabelOwnerPool value
	applied map[objRef]bool
	// claimNames maps "namespace/kind/rendered name" to the content name applied.
	claimNames map[string]string
}

func newApplyState(pool string) *applyState {
	return &applyState{owner: ownerValue(pool), applied: map[objRef]bool{}, claimNames: map[string]string{}}
}

// prepare readies u for apply in the tenants' namespaces: it labels it with the pool, gives a
// claim or a template its content name, and points a Deployment's pod template at the content
// names of the claims and templates it references (those of this apply, in its namespace).
func (st *applyState) prepare(u *unstructured.Unstructured) error {
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[LabelOwnerPool] = st.owner
	u.SetLabels(l)
	switch u.GetKind() {
	case gvkClaim.Kind, gvkClaimTemplate.Kind:
		name, err := contentName(u)
		if err != nil {
			return err
		}
		st.claimNames[u.GetNamespace()+"/"+u.GetKind()+"/"+u.GetName()] = name
		u.SetName(name)
	case gvkDeployment.Kind:
		claims, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "resourceClaims")
		if err != nil {
			return fmt.Errorf("Deployment %s: spec.template.spec.resourceClaims: %w", u.GetName(), err)
		}
		for i, c := range claims {
			pc, ok := c.(map[string]any)
			if !ok {
				continue
			}
			for _, fk := range [][2]string{{"resourceClaimName", gvkClaim.Kind}, {"resourceClaimTemplateName", gvkClaimTemplate.Kind}} {
				field, kind := fk[0], fk[1]
				if ref, ok := pc[field].(string); ok {
					name, ok := st.claimNames[u.GetNamespace()+"/"+kind+"/"+ref]
					if !ok {
						return fmt.Errorf("Deployment %s/%s: spec.template.spec.resourceClaims[%d].%s: %s %s is not applied with it", u.GetNamespace(), u.GetName(), i, field, kind, ref)
					}
					pc[field] = name
				}
			}
		}
		if len(claims) > 0 {
			if err := unstructured.SetNestedSlice(u.Object, claims, "spec", "template", "spec", "resourceClaims"); err != nil {
				return err
			}
		}
	}
	return nil
}

// contentName is a claim's or template's name followed by 8 hex digits of the SHA-256 of its
// spec. Their specs are immutable: a plan that changes one gets a new object under a new name, and
// the Deployment rolls to it; the old one is pruned once no pod uses it.
func contentName(u *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(u.Object["spec"]) // map keys in order: the same spec, the same bytes
	if err != nil {
		return "", fmt.Errorf("%s %s: spec: %w", u.GetKind(), u.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return shortName(u.GetName(), 253-9) + "-" + hex.EncodeToString(sum[:])[:8], nil
}

// appliedByGpupool: gpupool's server-side apply manager applied o (what a user created, even
// with the pool's label, is not).
func appliedByGpupool(o metav1.Object) bool {
	for _, mf := range o.GetManagedFields() {
		if mf.Manager == FieldOwner && mf.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// ownedObjects lists, over every namespace, the objects of kind that the pool's apply made.
func (r *PoolReconciler) ownedObjects(ctx context.Context, gvk schema.GroupVersionKind, owner string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := r.C.List(ctx, l, client.MatchingLabels{LabelOwnerPool: owner}); err != nil {
		return nil, fmt.Errorf("list %ss of the pool: %w", gvk.Kind, err)
	}
	out := l.Items[:0]
	for _, u := range l.Items {
		if appliedByGpupool(&u) && u.GetDeletionTimestamp() == nil {
			out = append(out, u)
		}
	}
	return out, nil
}

// claimsInUse names the ResourceClaims and ResourceClaimTemplates of namespace ns that a pod
// references ("ResourceClaim/name", "ResourceClaimTemplate/name").
func (r *PoolReconciler) claimsInUse(ctx context.Context, ns string) (map[string]bool, error) {
	var pods corev1.PodList
	if err := r.C.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", ns, err)
	}
	use := map[string]bool{}
	for _, p := range pods.Items {
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimName != nil {
				use[gvkClaim.Kind+"/"+*pc.ResourceClaimName] = true
			}
			if pc.ResourceClaimTemplateName != nil {
				use[gvkClaimTemplate.Kind+"/"+*pc.ResourceClaimTemplateName] = true
			}
		}
	}
	return use, nil
}

// prune deletes the objects the pool applied earlier that st (the plan just applied) does not
// want: Deployments at once, claims and templates once no pod references them (a claim also once
// nothing holds a reservation on it). With all set, every object of the pool goes (the GPUPool
// is being deleted; Kubernetes itself keeps an allocated claim until its pods are gone). waiting
// lists the objects kept because pods still use them; the next reconcile looks again.
func (r *PoolReconciler) prune(ctx context.Context, st *applyState, all bool) (pruned, waiting []string, err error) {
	var errs []error
	inUse := map[string]map[string]bool{}
	for _, gvk := range prunedKinds {
		objs, err := r.ownedObjects(ctx, gvk, st.owner)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range objs {
			u := &objs[i]
			ref := objRef{Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
			if !all && st.applied[ref] {
				continue
			}
			if gvk != gvkDeployment && !all {
				use, ok := inUse[ref.Namespace]
				if !ok {
					if use, err = r.claimsInUse(ctx, ref.Namespace); err != nil {
						errs = append(errs, err)
						continue
					}
					inUse[ref.Namespace] = use
				}
				reserved, _, _ := unstructured.NestedSlice(u.Object, "status", "reservedFor")
				if use[ref.Kind+"/"+ref.Name] || len(reserved) > 0 {
					waiting = append(waiting, ref.String())
					continue
				}
			}
			// Delete only the object listed: a new one under the same name is not ours to remove.
			pre := client.Preconditions{UID: ptrTo(u.GetUID())}
			if err := r.C.Delete(ctx, u, pre, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %s: %w", ref, err))
				continue
			}
			pruned = append(pruned, ref.String())
		}
	}
	return pruned, waiting, errors.Join(errs...)
}

// poolLabelKeys are the node labels the reconciler applies (the MIG config label is the gate's,
// and a node keeps its MIG layout when it leaves a pool).
var poolLabelKeys = []string{LabelDevicePluginConfig, LabelPool, LabelOwnerPool}

// releaseNodes removes the labels the reconciler applied from the nodes labelled with the pool
// that are not in keep, unless a GPUPool other than the pool (and not being deleted) selects the
// node: that pool labels it as its plan says. The device-plugin config label goes with its key.
func (r *PoolReconciler) releaseNodes(ctx context.Context, pool string, keep map[string]bool) (released []string, err error) {
	var nodes corev1.NodeList
	if err := r.C.List(ctx, &nodes, client.MatchingLabels{LabelOwnerPool: ownerValue(pool)}); err != nil {
		return nil, fmt.Errorf("list nodes of the pool: %w", err)
	}
	var pools GPUPoolList
	if err := r.C.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("list GPUPools: %w", err)
	}
	var errs []error
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for _, n := range nodes.Items {
		if keep[n.Name] || !appliedByGpupool(&n) {
			continue
		}
		if other := otherPoolOf(&n, pool, pools.Items); other != "" {
			continue
		}
		// Applying no labels drops those gpupool's apply manager owns on the node and no others.
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": n.Name}}}
		if err := r.C.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			errs = append(errs, fmt.Errorf("node %s: remove the pool's labels %v: %w", n.Name, poolLabelKeys, err))
			continue
		}
		released = append(released, n.Name)
	}
	return released, errors.Join(errs...)
}

// otherPoolOf is the first GPUPool other than pool, not being deleted, whose node selector
// matches n; "" when none.
func otherPoolOf(n *corev1.Node, pool string, pools []GPUPool) string {
	for _, p := range pools {
		if p.Name == pool || p.DeletionTimestamp != nil || len(p.Spec.NodeSelector) == 0 {
			continue
		}
		if labels.SelectorFromSet(p.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
			return p.Name
		}
	}
	return ""
}

// releaseConfigMaps removes the pool's keys from the shared ConfigMaps: its device-plugin keys (by
// applying none as the pool's field manager) and its mig-parted key, with config.yaml merged again
// from the other pools' keys and the configs nodes still name.
func (r *PoolReconciler) releaseConfigMaps(ctx context.Context, pool string) error {
	cm := &corev1.ConfigMap{}
	err := r.C.Get(ctx, client.ObjectKey{Namespace: r.OperatorNamespace, Name: render.DevicePluginConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("ConfigMap %s/%s: %w", r.OperatorNamespace, render.DevicePluginConfigMap, err)
	default:
		if err := r.applyConfigMap(ctx, cm.Name, "", cm.Labels, map[string]string{}, pool); err != nil {
			return err
		}
	}
	return r.writeMigParted(ctx, pool, render.MigPartedConfigMap, nil, nil)
}

// ensureFinalizer adds PoolFinalizer to gp.
func (r *PoolReconciler) ensureFinalizer(ctx context.Context, gp *GPUPool) error {
	if controllerutil.ContainsFinalizer(gp, PoolFinalizer) {
		return nil
	}
	base := gp.DeepCopyObject().(*GPUPool)
	controllerutil.AddFinalizer(gp, PoolFinalizer)
	if err := r.C.Patch(ctx, gp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("GPUPool %s: add finalizer %s: %w", gp.Name, PoolFinalizer, err)
	}
	return nil
}

// finalize removes what the deleted GPUPool gp owns — its Deployments, claims and templates, its
// labels on nodes no other pool selects, its keys in the shared ConfigMaps — and then its
// finalizer. Each step is idempotent, so a reconcile that fails part way starts again.
func (r *PoolReconciler) finalize(ctx context.Context, gp *GPUPool) error {
	r.builtMu.Lock()
	delete(r.built, gp.Name)
	r.builtMu.Unlock()
	if !controllerutil.ContainsFinalizer(gp, PoolFinalizer) {
		return nil
	}
	pruned, _, err := r.prune(ctx, newApplyState(gp.Name), true)
	if err != nil {
		return fmt.Errorf("GPUPool %s: finalize: %w", gp.Name, err)
	}
	released, err := r.releaseNodes(ctx, gp.Name, nil)
	if err != nil {
		return fmt.Errorf("GPUPool %s: finalize: %w", gp.Name, err)
	}
	if err := r.releaseConfigMaps(ctx, gp.Name); err != nil {
		return fmt.Errorf("GPUPool %s: finalize: %w", gp.Name, err)
	}
	base := gp.DeepCopyObject().(*GPUPool)
	controllerutil.RemoveFinalizer(gp, PoolFinalizer)
	if err := r.C.Patch(ctx, gp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("GPUPool %s: remove finalizer %s: %w", gp.Name, PoolFinalizer, err)
	}
	r.log().Info("pool deleted", "pool", gp.Name, "deleted", pruned, "nodesReleased", released)
	return nil
}

// sortedRefs is the refs in order (for messages).
func sortedRefs(refs []string) []string {
	out := slices.Clone(refs)
	sort.Strings(out)
	return out
}

// joinShort joins at most n items, saying how many more there are.
func joinShort(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
