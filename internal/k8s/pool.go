package k8s

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/control"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/plan"
	"gpupool.dev/gpupool/internal/render"
)

// Labels GPU Feature Discovery (part of the GPU Operator) puts on GPU nodes, and the
// device-plugin config label the plugin's config manager reads.
const (
	LabelGPUProduct         = "nvidia.com/gpu.product"
	LabelGPUCount           = "nvidia.com/gpu.count"
	LabelDevicePluginConfig = "nvidia.com/device-plugin.config"
	LabelPool               = "gpupool.dev/pool"
)

// FieldOwner is the server-side apply field manager of everything the pool reconciler applies.
const FieldOwner = "gpupool"

// Conditions on GPUPool and InferenceTenant.
const (
	CondPlanned = "Planned" // GPUPool: a plan was built from the pool's nodes and tenants
	CondApplied = "Applied" // GPUPool: the plan's artifacts are applied and every node's gate is done
	CondGranted = "Granted" // InferenceTenant: the plan gives the tenant its replicas
)

// PoolReconciler plans a GPUPool: it reads the pool's nodes (by spec.nodeSelector, boards from GPU
// Feature Discovery's labels) and its InferenceTenants, builds a plan (internal/plan), renders it
// (internal/render) and applies with server-side apply the mig-parted and device-plugin ConfigMaps
// (in OperatorNamespace; shared with the other GPUPools, see applyMigParted), the device-plugin and pool labels of each node, and each tenant's
// Deployments (in the tenant's namespace, owned by its InferenceTenant). A node whose
// nvidia.com/mig.config must change gets a gate request (MIGGate.Request) with the allocatable
// the plan expects; the gate controller does the change. Status goes to the GPUPool (plan summary,
// conditions) and to each InferenceTenant (replicas granted, reasons).
type PoolReconciler struct {
	C client.Client
	// OperatorNamespace is the GPU Operator's namespace, where mig-manager and the device plugin
	// read their ConfigMaps.
	OperatorNamespace string
	// Gate places the gate requests (only its Request is used).
	Gate *MIGGate
	// Now is the clock of condition times (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
	// Planning is how GPUPools are planned (the zero value: by the queueing model alone).
	Planning control.Planning

	// built is the plan last made per GPUPool (build), under builtMu.
	builtMu sync.Mutex
	built   map[string]builtPlan
}

func (r *PoolReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// poolInputs is what a GPUPool plans over.
type poolInputs struct {
	gp      *GPUPool
	pool    *v1.Pool
	tenants map[string]*InferenceTenant // by tenant name
}

// Reconcile plans, renders and applies one GPUPool and writes the statuses.
func (r *PoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	gp := &GPUPool{}
	if err := r.C.Get(ctx, client.ObjectKey{Name: req.Name}, gp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if gp.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, gp)
	}
	if err := r.ensureFinalizer(ctx, gp); err != nil {
		return reconcile.Result{}, err
	}
	in, problems, err := r.inputs(ctx, gp)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(problems) > 0 {
		return reconcile.Result{}, r.setPoolStatus(ctx, gp, nil, metav1.ConditionFalse, "InvalidPool", strings.Join(problems, "; "), "", "")
	}
	pl, replanNote, err := r.build(ctx, gp, in)
	if err != nil {
		return reconcile.Result{}, r.setPoolStatus(ctx, gp, nil, metav1.ConditionFalse, "PlanFailed", err.Error(), "", "")
	}
	arts, err := render.Artifacts(pl, in.pool)
	var rp *render.ProblemsError
	var renderNote string
	if errors.As(err, &rp) {
		renderNote = fmt.Sprintf("; %d render problems (first: %s)", len(rp.Problems), rp.Problems[0])
	} else if err != nil {
		return reconcile.Result{}, r.setPoolStatus(ctx, gp, pl, metav1.ConditionFalse, "RenderFailed", err.Error(), "", "")
	}
	// what each node's gate verifies: the device plugin's allocatable, or the DRA driver's devices
	expect := render.Allocatable
	if in.pool.Policy.DeviceAPI() == v1.DeviceAPIDRA {
		expect = render.DRADevices
	}
	alloc, err := expect(pl, in.pool)
	if err != nil {
		return reconcile.Result{}, r.setPoolStatus(ctx, gp, pl, metav1.ConditionFalse, "RenderFailed", err.Error(), "", "")
	}
	digest := artifactsDigest(arts)
	st := newApplyState(gp.Name)
	pending, applyErr := r.apply(ctx, in, arts, alloc, st)
	var pruneNote string
	var waiting []string
	if applyErr == nil {
		// Only once the new plan's objects are all in place do the old ones go.
		var pruned []string
		pruned, waiting, applyErr = r.prune(ctx, st, false)
		if len(pruned) > 0 {
			pruneNote = "; deleted what the plan no longer wants: " + joinShort(sortedRefs(pruned), 5)
		}
		if len(waiting) > 0 {
			pruneNote += "; kept while pods use them: " + joinShort(sortedRefs(waiting), 5)
		}
	}
	if err := r.setTenantStatuses(ctx, in, pl); err != nil {
		return reconcile.Result{}, err
	}
	planMsg := fmt.Sprintf("%d of %d GPUs used (lower bound %d), %d tenants%s%s", pl.Summary.GPUsUsed, pl.Summary.GPUsTotal, pl.Summary.LowerBound, len(pl.Tenants), replanNote, renderNote)
	if applyErr == nil {
		// every artifact of pl is applied: pl is the plan in force from now on
		if gp.Status.CurrentPlan, err = encodePlan(pl); err != nil {
			return reconcile.Result{}, err
		}
	}
	applied, appliedMsg := "True", "artifacts applied; every node at its planned MIG config"+pruneNote
	switch {
	case applyErr != nil:
		applied, appliedMsg = "False", applyErr.Error()
	case len(pending) > 0:
		applied, appliedMsg = "False", "waiting for the MIG gate on "+strings.Join(pending, ", ")
	}
	if err := r.setPoolStatus(ctx, gp, pl, metav1.ConditionTrue, "Planned", planMsg, applied, appliedMsg); err != nil {
		return reconcile.Result{}, err
	}
	r.log().Info("pool planned", "pool", gp.Name, "digest", digest, "pending", pending, "applyErr", applyErr)
	if applyErr != nil {
		return reconcile.Result{}, applyErr
	}
	if len(pending) > 0 || len(waiting) > 0 {
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// build plans the pool. With a plan in force (status.currentPlan) it re-plans against it with the
// pool's policy.maxMoves, so that as few GPUs and replicas as possible change; when the planner
// cannot keep to it (the fleet lost GPUs the plan used, or the move budget cannot serve the
// pool), it plans from scratch and the note says why.
//
// The planner is deterministic (its simulations' seeds are fixed), so a pool reconciled again
// with the same Pool document and plan in force (every two seconds while a gate runs) gets the
// plan made last time instead of a new plan and its simulations.
func (r *PoolReconciler) build(ctx context.Context, gp *GPUPool, in *poolInputs) (*v1.Plan, string, error) {
	doc, err := v1.EncodeJSON(in.pool)
	if err != nil {
		return nil, "", fmt.Errorf("encode pool %s: %w", gp.Name, err)
	}
	h := sha256.New()
	h.Write(doc)
	h.Write([]byte{0})
	h.Write([]byte(gp.Status.CurrentPlan))
	key := string(h.Sum(nil))
	r.builtMu.Lock()
	last, ok := r.built[gp.Name]
	r.builtMu.Unlock()
	if ok && last.key == key {
		if pl, err := decodePlan(last.plan); err == nil {
			return pl, last.note, nil
		}
	}
	pl, note, err := r.buildNew(ctx, gp, in)
	if err != nil {
		return pl, note, err
	}
	if enc, err := encodePlan(pl); err == nil {
		r.builtMu.Lock()
		if r.built == nil {
			r.built = map[string]builtPlan{}
		}
		r.built[gp.Name] = builtPlan{key: key, plan: enc, note: note}
		r.builtMu.Unlock()
	}
	return pl, note, nil
}

// builtPlan is the plan last made for a GPUPool: its inputs' digest (Pool document and plan in
// force), the plan as status.currentPlan encodes it, and build's note.
type builtPlan struct {
	key, plan, note string
}

// buildNew is build without the memo.
func (r *PoolReconciler) buildNew(ctx context.Context, gp *GPUPool, in *poolInputs) (*v1.Plan, string, error) {
	if gp.Status.CurrentPlan == "" {
		pl, err := plan.Build(ctx, in.pool, r.Planning.Options(nil))
		return pl, "", err
	}
	cur, err := decodePlan(gp.Status.CurrentPlan)
	if err == nil {
		var pl *v1.Plan
		o := r.Planning.Options(cur)
		o.MaxMoves = in.pool.Policy.MaxMoves
		pl, err = plan.Build(ctx, in.pool, o)
		if err == nil {
			return pl, "; re-planned against the plan in force", nil
		}
	}
	pl, err2 := plan.Build(ctx, in.pool, r.Planning.Options(nil))
	return pl, fmt.Sprintf("; planned from scratch, the plan in force could not be kept (%v)", err), err2
}

// encodePlan is status.currentPlan of pl: gzip of its JSON document, base64.
func encodePlan(pl *v1.Plan) (string, error) {
	b, err := v1.EncodeJSON(pl)
	if err != nil {
		return "", fmt.Errorf("encode the plan in force: %w", err)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(z.Bytes()), nil
}

// decodePlan reads status.currentPlan.
func decodePlan(s string) (*v1.Plan, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("status.currentPlan: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("status.currentPlan: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("status.currentPlan: %w", err)
	}
	pl, err := v1.DecodePlan(b)
	if err != nil {
		return nil, fmt.Errorf("status.currentPlan: %w", err)
	}
	return pl, nil
}

func (r *PoolReconciler) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// inputs builds the Pool document of gp: its nodes in name order, its tenants in name order. It
// reports every problem it finds, each with the object and field concerned.
func (r *PoolReconciler) inputs(ctx context.Context, gp *GPUPool) (*poolInputs, []string, error) {
	var problems []string
	if len(gp.Spec.NodeSelector) == 0 {
		problems = append(problems, "spec.nodeSelector: must not be empty")
	}
	var nodes corev1.NodeList
	if err := r.C.List(ctx, &nodes, client.MatchingLabels(gp.Spec.NodeSelector)); err != nil {
		return nil, nil, fmt.Errorf("pool %s: list nodes: %w", gp.Name, err)
	}
	pool := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: gp.Name}, Policy: gp.Spec.Policy}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	for _, n := range nodes.Items {
		product, count := n.Labels[LabelGPUProduct], n.Labels[LabelGPUCount]
		if product == "" {
			problems = append(problems, fmt.Sprintf("node %s: label %s: missing (GPU Feature Discovery sets it)", n.Name, LabelGPUProduct))
			continue
		}
		b, err := gpu.Lookup(product)
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %s: label %s: %v", n.Name, LabelGPUProduct, err))
			continue
		}
		k, err := strconv.Atoi(count)
		if err != nil || k < 1 {
			problems = append(problems, fmt.Sprintf("node %s: label %s: want a positive count, got %q", n.Name, LabelGPUCount, count))
			continue
		}
		pool.Fleet.Nodes = append(pool.Fleet.Nodes, v1.Node{Name: n.Name, GPUs: []v1.GPUGroup{{Board: b.Name, Count: k}}})
	}
	if len(nodes.Items) == 0 && len(gp.Spec.NodeSelector) > 0 {
		problems = append(problems, fmt.Sprintf("spec.nodeSelector: no node matches %s", labels.SelectorFromSet(gp.Spec.NodeSelector)))
	}
	var tl InferenceTenantList
	if err := r.C.List(ctx, &tl); err != nil {
		return nil, nil, fmt.Errorf("pool %s: list InferenceTenants: %w", gp.Name, err)
	}
	tenants := map[string]*InferenceTenant{}
	sort.Slice(tl.Items, func(i, j int) bool {
		return tl.Items[i].Name+"/"+tl.Items[i].Namespace < tl.Items[j].Name+"/"+tl.Items[j].Namespace
	})
	for i := range tl.Items {
		it := &tl.Items[i]
		if it.Spec.Pool != gp.Name || it.DeletionTimestamp != nil {
			continue
		}
		if o, dup := tenants[it.Name]; dup {
			problems = append(problems, fmt.Sprintf("InferenceTenant %s/%s: metadata.name: tenant %s is also defined in namespace %s; tenant names are unique in a pool", it.Namespace, it.Name, it.Name, o.Namespace))
			continue
		}
		tenants[it.Name] = it
		t := it.Spec.Tenant
		t.Name = it.Name
		pool.Tenants = append(pool.Tenants, t)
	}
	v1.Default(pool)
	if err := v1.Validate(pool); err != nil {
		problems = append(problems, "pool document: "+err.Error())
	}
	return &poolInputs{gp: gp, pool: pool, tenants: tenants}, problems, nil
}

// artifactsDigest names a rendering by its bytes.
func artifactsDigest(arts []render.Artifact) string {
	h := sha256.New()
	for _, a := range arts {
		h.Write([]byte(a.Path))
		h.Write([]byte{0})
		h.Write(a.Data)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// apply applies the ConfigMaps, node labels and Deployments and requests the gate where a node's
// MIG config must change. pending lists the nodes whose gate is not done yet. All errors are
// reported together.
func (r *PoolReconciler) apply(ctx context.Context, in *poolInputs, arts []render.Artifact, alloc map[string]map[string]int64, st *applyState) (pending []string, err error) {
	var errs []error
	var nodeLabels map[string]map[string]string
	dra := in.pool.Policy.DeviceAPI() == v1.DeviceAPIDRA
	// Artifacts come in path order: the DRA claims (dra/) before the Deployments (k8s/) that
	// reference them.
	for _, a := range arts {
		switch {
		case a.Path == "mig-parted/configmap.yaml":
			errs = append(errs, r.applyMigParted(ctx, in.gp.Name, a))
		case a.Path == "device-plugin/configmap.yaml":
			// keyed by node: the pool's own field manager owns its nodes' keys only
			errs = append(errs, r.applyDocs(ctx, a, r.OperatorNamespace, nil, poolFieldManager(in.gp.Name), nil))
		case dra && a.Path == "dra/shared.yaml":
			errs = append(errs, r.applySharedClaims(ctx, in, a, st))
		case (dra && strings.HasPrefix(a.Path, "dra/") || strings.HasPrefix(a.Path, "k8s/")) && strings.HasSuffix(a.Path, ".yaml"):
			name := strings.TrimSuffix(a.Path[strings.IndexByte(a.Path, '/')+1:], ".yaml")
			it := in.tenants[name]
			if it == nil {
				errs = append(errs, fmt.Errorf("artifact %s: no InferenceTenant %s", a.Path, name))
				continue
			}
			owner := metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "InferenceTenant", Name: it.Name, UID: it.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}
			errs = append(errs, r.applyDocs(ctx, a, it.Namespace, &owner, FieldOwner, st))
		case a.Path == "node-labels.yaml":
			if e := yaml.Unmarshal(a.Data, &nodeLabels); e != nil {
				errs = append(errs, fmt.Errorf("artifact %s: %w", a.Path, e))
			}
		}
	}
	names := slices.Sorted(maps.Keys(nodeLabels))
	budget := r.gateBudget(ctx, in, names)
	for _, node := range names {
		want := nodeLabels[node]
		direct := map[string]any{LabelOwnerPool: st.owner}
		for k, v := range want {
			if k != LabelMIGConfig {
				direct[k] = v
			}
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": node, "labels": direct}}}
		if e := r.C.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); e != nil {
			errs = append(errs, fmt.Errorf("node %s: apply labels: %w", node, e))
			continue
		}
		st.applied[objRef{Kind: "Node", Name: node}] = true
		done, e := r.requestMIG(ctx, node, want[LabelMIGConfig], alloc[node], dra, budget)
		if e != nil {
			errs = append(errs, e)
		}
		if !done {
			pending = append(pending, node)
		}
	}
	if errors.Join(errs...) == nil {
		// Nodes the pool labelled that its plan no longer covers (they left the pool).
		keep := map[string]bool{}
		for _, node := range names {
			keep[node] = true
		}
		if _, e := r.releaseNodes(ctx, in.gp.Name, keep); e != nil {
			errs = append(errs, e)
		}
	}
	return pending, errors.Join(errs...)
}

// gateBudget is the pool's policy.maxUnavailable (in GPUs) and policy.reconfigCooldown as they
// stand: the GPUs of the pool's nodes with a gate requested or running count against the limit.
type gateBudget struct {
	gpus     map[string]int // GPUs per node of the pool
	free     int            // GPUs that may still go into a gate
	busy     bool           // some node of the pool is in a gate or has one requested
	cooldown time.Duration
}

func (r *PoolReconciler) gateBudget(ctx context.Context, in *poolInputs, nodes []string) *gateBudget {
	b := &gateBudget{gpus: map[string]int{}}
	total := 0
	for _, n := range in.pool.Fleet.Nodes {
		for _, g := range n.GPUs {
			b.gpus[n.Name] += g.Count
			total += g.Count
		}
	}
	pol := in.pool.Policy // defaulted by inputs
	b.free = total
	if pol.MaxUnavailable != nil {
		b.free = pol.MaxUnavailable.Resolve(total)
	}
	if pol.ReconfigCooldown != nil {
		b.cooldown = time.Duration(*pol.ReconfigCooldown)
	}
	for _, name := range nodes {
		n := &corev1.Node{}
		if err := r.C.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			continue
		}
		if gateBusy(n) {
			b.free -= b.gpus[name]
			b.busy = true
		}
	}
	return b
}

// gateBusy: the node is in a gate, or has a request the gate has not met yet.
func gateBusy(n *corev1.Node) bool {
	a := n.Annotations
	if a[AnnotGateStep] != "" {
		return true
	}
	t, ok := a[AnnotGateTarget]
	return ok && t != n.Labels[LabelMIGConfig] && !strings.HasPrefix(a[AnnotGateResult], "rolled-back "+t+":")
}

// requestMIG asks the gate for node's MIG config when it differs and the pool's budget allows;
// done says the node is at it with no gate in progress. expect is the node's allocatable after
// (render.Allocatable), or on a pool of the DRA path (dra) the devices the DRA driver publishes
// after (render.DRADevices).
func (r *PoolReconciler) requestMIG(ctx context.Context, node, cfg string, expect map[string]int64, dra bool, budget *gateBudget) (done bool, err error) {
	n := &corev1.Node{}
	if err := r.C.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return false, fmt.Errorf("node %s: %w", node, err)
	}
	step := n.Annotations[AnnotGateStep]
	switch {
	case step != "":
		return false, nil // the gate is busy; the next reconcile looks again
	case n.Labels[LabelMIGConfig] == cfg:
		return true, nil
	case n.Annotations[AnnotGateTarget] == cfg && strings.HasPrefix(n.Annotations[AnnotGateResult], "success"):
		return true, nil
	}
	if n.Annotations[AnnotGateTarget] == cfg {
		return false, nil // requested; the gate controller has not begun
	}
	if res := n.Annotations[AnnotGateResult]; strings.HasPrefix(res, "rolled-back "+cfg+":") {
		// the gate dropped the request after a rollback: asking again at once would repeat it
		return false, fmt.Errorf("node %s: the gate rolled back mig config %s (%s); not requested again until the plan changes or %s is removed",
			node, cfg, strings.TrimPrefix(res, "rolled-back "+cfg+": "), AnnotGateResult)
	}
	if r.Gate == nil {
		return false, fmt.Errorf("node %s: mig config %s wanted but no gate configured", node, cfg)
	}
	// The pool's budget: at most maxUnavailable GPUs in gates (a node larger than the budget
	// goes alone), and no node before its reconfigCooldown has passed.
	if budget != nil {
		if budget.busy && budget.gpus[node] > budget.free {
			return false, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, n.Annotations[AnnotGateDone]); err == nil && r.now().Before(t.Add(budget.cooldown)) {
			return false, nil
		}
	}
	request := func() error { return r.Gate.Request(ctx, node, cfg, expect) }
	if dra {
		request = func() error {
			return r.Gate.RequestDRA(ctx, node, cfg, DeviceExpectation{Driver: render.DRADriver, Devices: expect})
		}
	}
	if err := request(); err != nil {
		return false, err
	}
	if budget != nil {
		budget.free -= budget.gpus[node]
		budget.busy = true
	}
	return false, nil
}

// DecodeObjects decodes every object of a multi-document YAML (or JSON) stream, skipping empty
// documents.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// applySharedClaims applies the named ResourceClaims of the shared devices (dra/shared.yaml). A
// claim is namespaced and its pods must be in its namespace, so it goes to the namespace of the
// InferenceTenants whose replicas it lists (render.AnnotationSlots, "tenant#index, ..."); tenants
// sharing a device in different namespaces are an error. Claims belong to the GPUPool.
func (r *PoolReconciler) applySharedClaims(ctx context.Context, in *poolInputs, a render.Artifact, st *applyState) error {
	objs, err := DecodeObjects(a.Data)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", a.Path, err)
	}
	owner := metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "GPUPool", Name: in.gp.Name, UID: in.gp.UID}
	var errs []error
	for _, u := range objs {
		nss := map[string][]string{}
		for _, slot := range strings.Split(u.GetAnnotations()[render.AnnotationSlots], ", ") {
			tenant, _, _ := strings.Cut(slot, "#")
			it := in.tenants[tenant]
			if it == nil {
				errs = append(errs, fmt.Errorf("artifact %s: ResourceClaim %s: metadata.annotations[%s]: no InferenceTenant %s", a.Path, u.GetName(), render.AnnotationSlots, tenant))
				continue
			}
			if !slices.Contains(nss[it.Namespace], tenant) {
				nss[it.Namespace] = append(nss[it.Namespace], tenant)
			}
		}
		if len(nss) != 1 {
			if len(nss) > 1 {
				errs = append(errs, fmt.Errorf("artifact %s: ResourceClaim %s: the tenants sharing the device are in different namespaces (%v); a claim and its pods share one namespace, so put them in one or keep them off shared devices", a.Path, u.GetName(), nss))
			}
			continue
		}
		for ns := range nss {
			u.SetNamespace(ns)
		}
		u.SetOwnerReferences([]metav1.OwnerReference{owner})
		if err := st.prepare(u); err != nil {
			errs = append(errs, fmt.Errorf("artifact %s: %w", a.Path, err))
			continue
		}
		st.applied[objRef{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}] = true
		if err := r.C.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			errs = append(errs, fmt.Errorf("artifact %s: apply ResourceClaim %s/%s: %w", a.Path, u.GetNamespace(), u.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// applyDocs server-side applies every YAML document of a, in namespace ns, with owner when set,
// as field manager manager. With st, each object is prepared (the pool's label, content names of
// claims) and recorded as applied.
func (r *PoolReconciler) applyDocs(ctx context.Context, a render.Artifact, ns string, owner *metav1.OwnerReference, manager string, st *applyState) error {
	objs, err := DecodeObjects(a.Data)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", a.Path, err)
	}
	var errs []error
	for _, u := range objs {
		u.SetNamespace(ns)
		if owner != nil {
			u.SetOwnerReferences([]metav1.OwnerReference{*owner})
		}
		if st != nil {
			if err := st.prepare(u); err != nil {
				errs = append(errs, fmt.Errorf("artifact %s: %w", a.Path, err))
				continue
			}
			st.applied[objRef{Kind: u.GetKind(), Namespace: ns, Name: u.GetName()}] = true
		}
		if err := r.C.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership); err != nil {
			errs = append(errs, fmt.Errorf("artifact %s: apply %s %s/%s: %w", a.Path, u.GetKind(), ns, u.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

func (r *PoolReconciler) setPoolStatus(ctx context.Context, gp *GPUPool, pl *v1.Plan, planned metav1.ConditionStatus, reason, msg, applied, appliedMsg string) error {
	now := metav1.NewTime(r.now())
	st := &gp.Status
	st.ObservedGeneration = gp.Generation
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: CondPlanned, Status: planned, Reason: reason,
		Message: msg, ObservedGeneration: gp.Generation, LastTransitionTime: now})
	if applied != "" {
		reason := "Applied"
		if applied != "True" {
			reason = "Pending"
		}
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: CondApplied, Status: metav1.ConditionStatus(applied), Reason: reason,
			Message: appliedMsg, ObservedGeneration: gp.Generation, LastTransitionTime: now})
	} else {
		apimeta.RemoveStatusCondition(&st.Conditions, CondApplied)
	}
	if pl != nil {
		nodes := map[string]bool{}
		for _, g := range pl.GPUs {
			nodes[g.Node] = true
		}
		st.Nodes, st.GPUs, st.Replicas = len(nodes), pl.Summary.GPUsTotal, 0
		for _, t := range pl.Tenants {
			st.Replicas += len(t.Replicas)
		}
		b, _ := yaml.Marshal(pl)
		sum := sha256.Sum256(b)
		st.PlanDigest = hex.EncodeToString(sum[:])[:16]
	}
	if err := r.C.Status().Update(ctx, gp); err != nil {
		return fmt.Errorf("GPUPool %s: update status: %w", gp.Name, err)
	}
	return nil
}

// setTenantStatuses writes each tenant's granted replicas and the planner's reasons.
func (r *PoolReconciler) setTenantStatuses(ctx context.Context, in *poolInputs, pl *v1.Plan) error {
	var errs []error
	now := metav1.NewTime(r.now())
	for _, pt := range pl.Tenants {
		it := in.tenants[pt.Name]
		if it == nil {
			continue
		}
		cond := metav1.Condition{Type: CondGranted, Status: metav1.ConditionTrue, Reason: "Planned", ObservedGeneration: it.Generation, LastTransitionTime: now}
		var reasons []string
		for _, re := range pt.Reasons {
			reasons = append(reasons, fmt.Sprintf("%s: %s", re.Code, re.Message))
		}
		cond.Message = fmt.Sprintf("%d replicas planned", len(pt.Replicas))
		if len(reasons) > 0 {
			cond.Message += "; " + strings.Join(reasons, "; ")
		}
		if pt.Infeasible {
			cond.Status, cond.Reason = metav1.ConditionFalse, "Infeasible"
		}
		it.Status.ObservedGeneration = it.Generation
		it.Status.ReplicasPlanned = len(pt.Replicas)
		apimeta.SetStatusCondition(&it.Status.Conditions, cond)
		if err := r.C.Status().Update(ctx, it); err != nil {
			errs = append(errs, fmt.Errorf("InferenceTenant %s/%s: update status: %w", it.Namespace, it.Name, err))
		}
	}
	return errors.Join(errs...)
}
