package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/control"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/render"
)

// GrantAdmission ties admission to the control plane's fair allocator: it runs a control.Engine
// whose slices are the nvidia.com/ devices the GPUPools' nodes advertise (allocatable, one slice
// per device; for a pool on the DRA path, the replica slots of the plan in force on the devices
// the DRA driver publishes, see draInventory) and whose tenants are the InferenceTenants, each demanding as many replicas as it
// has live tenant pods. The Engine's grants are what Admitter admits: a tenant's pods beyond its
// grant stay gated, and admitted pods beyond it are evicted.
//
// The Engine lives in memory. The API server holds everything it is built from (nodes, tenants,
// pods), so a new leader rebuilds it on its first Sync and the allocator decides again.
type GrantAdmission struct {
	C        client.Client
	Admitter *Admitter
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log, when set, gets a warning for each node whose devices are not counted because the
	// catalog does not know its GPU product (also a Warning Event on the node).
	Log *slog.Logger

	mu      sync.Mutex
	engine  *control.Engine
	inv     map[string]string // node → inventory signature last registered
	tenants map[string]control.Tenant
	refused map[string]string // node → the product label whose refusal was last reported
}

func (g *GrantAdmission) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Sync brings the Engine up to date with the cluster and admits by its grants; it returns the
// grants it admitted by.
func (g *GrantAdmission) Sync(ctx context.Context) (map[string]int, AdmitResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.engine == nil {
		e, err := control.NewEngine(control.EngineConfig{NodeTimeout: time.Hour}, now)
		if err != nil {
			return nil, AdmitResult{}, err
		}
		g.engine, g.inv, g.tenants, g.refused = e, map[string]string{}, map[string]control.Tenant{}, map[string]string{}
	}
	its, err := g.inferenceTenants(ctx)
	if err != nil {
		return nil, AdmitResult{}, err
	}
	pools := map[string]bool{}
	for _, it := range its {
		pools[it.Spec.Pool] = true
	}
	if err := g.syncNodes(ctx, now, pools); err != nil {
		return nil, AdmitResult{}, err
	}
	if err := g.syncTenants(ctx, now, its); err != nil {
		return nil, AdmitResult{}, err
	}
	// Tenants put in this Sync were granted one after another, at one instant; the allocator
	// preempts only tasks that started before the claim, so the first ones may hold more than
	// their share. A few ticks a microsecond apart let its share claims run to their fixed point
	// before anything is admitted.
	grants := map[string]int{}
	for i := range 8 {
		if err := g.engine.Tick(now.Add(time.Duration(i) * time.Microsecond)); err != nil {
			return nil, AdmitResult{}, fmt.Errorf("admission: engine tick: %w", err)
		}
		next := map[string]int{}
		for _, t := range g.engine.View(0).Tenants {
			next[t.Name] = t.Granted
		}
		if maps.Equal(next, grants) {
			break
		}
		grants = next
	}
	g.engine.Take() // nothing is persisted: the cluster is the record
	res, err := g.Admitter.Admit(ctx, grants)
	return grants, res, errors.Join(err, g.writeAdmitted(ctx, its, grants))
}

// writeAdmitted sets each InferenceTenant's status.replicasAdmitted to its grant where it
// differs, with a merge patch of that field alone (the PoolReconciler owns the rest of the status).
func (g *GrantAdmission) writeAdmitted(ctx context.Context, its []InferenceTenant, grants map[string]int) error {
	var errs []error
	for i := range its {
		it := &its[i]
		if it.Status.ReplicasAdmitted == grants[it.Name] {
			continue
		}
		base := it.DeepCopyObject().(client.Object)
		it.Status.ReplicasAdmitted = grants[it.Name]
		if err := g.C.Status().Patch(ctx, it, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("admission: InferenceTenant %s/%s: status.replicasAdmitted: %w", it.Namespace, it.Name, err))
		}
	}
	return errors.Join(errs...)
}

// inferenceTenants lists the InferenceTenants in the Admitter's namespace ("" = all) that are
// not being deleted.
func (g *GrantAdmission) inferenceTenants(ctx context.Context) ([]InferenceTenant, error) {
	var l InferenceTenantList
	if err := g.C.List(ctx, &l, client.InNamespace(g.Admitter.Namespace)); err != nil {
		return nil, fmt.Errorf("admission: list InferenceTenants: %w", err)
	}
	return slices.DeleteFunc(l.Items, func(it InferenceTenant) bool { return it.DeletionTimestamp != nil }), nil
}

// poolNode is a node of a GPUPool.
type poolNode struct {
	node *corev1.Node
	pool *GPUPool
}

// poolNodes lists the nodes of the GPUPools named in pools, by name.
func (g *GrantAdmission) poolNodes(ctx context.Context, pools map[string]bool) (map[string]poolNode, error) {
	var pl GPUPoolList
	if err := g.C.List(ctx, &pl); err != nil {
		return nil, fmt.Errorf("admission: list GPUPools: %w", err)
	}
	out := map[string]poolNode{}
	for i := range pl.Items {
		p := &pl.Items[i]
		if !pools[p.Name] || len(p.Spec.NodeSelector) == 0 {
			continue
		}
		var nodes corev1.NodeList
		if err := g.C.List(ctx, &nodes, client.MatchingLabels(p.Spec.NodeSelector)); err != nil {
			return nil, fmt.Errorf("admission: list nodes of pool %s: %w", p.Name, err)
		}
		for j := range nodes.Items {
			out[nodes.Items[j].Name] = poolNode{node: &nodes.Items[j], pool: p}
		}
	}
	return out, nil
}

// publishedDevices counts, per node, the devices NVIDIA's DRA driver publishes in ResourceSlices
// (each pool's newest generation), by render.DRADeviceKey ("gpu", "mig-<profile>").
func (g *GrantAdmission) publishedDevices(ctx context.Context) (map[string]map[string]int, error) {
	var l resourcev1.ResourceSliceList
	if err := g.C.List(ctx, &l); err != nil {
		return nil, fmt.Errorf("admission: list ResourceSlices: %w", err)
	}
	byNode, _ := driverDevices(l.Items, render.DRADriver)
	out := map[string]map[string]int{}
	for node, devs := range byNode {
		for _, d := range devs {
			if d.MIG && d.Profile == "" {
				continue
			}
			if out[node] == nil {
				out[node] = map[string]int{}
			}
			out[node][d.Key]++
		}
	}
	return out, nil
}

// draInventory is a DRA node's devices as the Engine's slices. The node advertises no
// nvidia.com allocatable (the driver publishes its devices in ResourceSlices, and the pods' claims
// say which device each gets), so the capacity is the plan in force's: one slice per replica the
// plan places on each of the node's devices (a whole GPU; a MIG instance), counted only for
// devices the driver publishes on the node (per type: "gpu", or "mig-<profile>"; the first ones
// in plan order when fewer are published than planned). A tensor-parallel replica counts once, on
// its first GPU, which also uses a published GPU for every other GPU of its group. Nothing while
// the node is not Ready or the pool has no plan in force.
func draInventory(n *corev1.Node, pl *v1.Plan, published map[string]int) control.Inventory {
	var inv control.Inventory
	if pl == nil || !nodeReady(n) {
		return inv
	}
	left := maps.Clone(published)
	take := func(key string, k int) bool {
		if left[key] < k {
			return false
		}
		left[key] -= k
		return true
	}
	add := func(uuid, kind string, slots int) {
		for chunk := 0; slots > 0; chunk++ {
			k := min(slots, 64)
			inv.GPUs = append(inv.GPUs, control.GPU{UUID: fmt.Sprintf("%s/%d", uuid, chunk),
				Board: n.Labels[LabelGPUProduct], Slices: slices.Repeat([]string{kind}, k)})
			slots -= k
		}
	}
	for _, pg := range pl.GPUs {
		if pg.Node != n.Name {
			continue
		}
		slots, gpus := 0, 1
		for _, r := range pg.Replicas {
			switch {
			case r.TensorParallel.IsZero():
				slots++
			case len(r.TensorParallel.GPUs) > 0 && r.TensorParallel.GPUs[0] == pg.Index:
				slots++
				gpus = max(gpus, len(r.TensorParallel.GPUs))
			}
		}
		// a GPU of a tensor-parallel group other than the first is taken with the first
		if slots > 0 && take("gpu", gpus) {
			add(fmt.Sprintf("%s/dra/%d", n.Name, pg.Index), "gpu", slots)
		}
		for _, in := range pg.Instances {
			if len(in.Replicas) > 0 && take("mig-"+in.Profile, 1) {
				add(fmt.Sprintf("%s/dra/%d/%s@%d", n.Name, pg.Index, in.Profile, in.Start), "mig-"+in.Profile, len(in.Replicas))
			}
		}
	}
	return inv
}

// inventory is the node's devices as the Engine's slices: one per unit of each nvidia.com/
// resource the node advertises (none while it is not Ready), grouped 64 to an entry, the Engine's
// limit per GPU. A cordoned node still counts: the MIG gate cordons while it drains the node's own
// pods, and taking its devices out of the pool would shrink every grant at once.
func inventory(n *corev1.Node) control.Inventory {
	var inv control.Inventory
	if !nodeReady(n) {
		return inv
	}
	names := slices.Sorted(maps.Keys(n.Status.Allocatable))
	for _, r := range names {
		kind, ok := strings.CutPrefix(string(r), "nvidia.com/")
		if !ok {
			continue
		}
		q := n.Status.Allocatable[r]
		left := q.Value()
		for chunk := 0; left > 0; chunk++ {
			k := min(left, 64)
			inv.GPUs = append(inv.GPUs, control.GPU{UUID: fmt.Sprintf("%s/%s/%d", n.Name, kind, chunk),
				Board: n.Labels[LabelGPUProduct], Slices: slices.Repeat([]string{kind}, int(k))})
			left -= k
		}
	}
	return inv
}

// productBoard maps a node's GPU product label (GPU Feature Discovery's nvidia.com/gpu.product,
// NVML's product name with spaces as dashes, e.g. "NVIDIA-H100-80GB-HBM3") to the catalog's board
// name, as node reports to the control plane are mapped (gpu.Lookup: names, aliases, NVML product
// names). GFD's decorations are taken off first: "-SHARED" (a GPU shared by time-slicing or MPS)
// and "-MIG-<profile>" (the single MIG strategy).
func productBoard(product string) (string, error) {
	if product == "" {
		return "", fmt.Errorf("label %s: missing (GPU Feature Discovery sets it)", LabelGPUProduct)
	}
	p := strings.TrimSuffix(product, "-SHARED")
	if i := strings.LastIndex(p, "-MIG-"); i > 0 {
		p = p[:i]
	}
	b, err := gpu.Lookup(p)
	if err != nil {
		return "", fmt.Errorf("label %s=%q: the catalog knows no such board (gpupool boards lists it): %w", LabelGPUProduct, product, gpu.ErrUnknownBoard)
	}
	return b.Name, nil
}

// refuse reports, once per node and product label, that a node's devices are not counted: a
// warning in the log and a Warning Event on the node (reason GPUProductUnknown, best-effort).
func (g *GrantAdmission) refuse(ctx context.Context, n *corev1.Node, product string, inv control.Inventory, why error) {
	if old, ok := g.refused[n.Name]; ok && old == product {
		return
	}
	g.refused[n.Name] = product
	devices := 0
	for _, d := range inv.GPUs {
		devices += len(d.Slices)
	}
	msg := fmt.Sprintf("%v; its %d GPU devices are not counted for admission until the catalog knows the board", why, devices)
	if devices == 1 {
		msg = fmt.Sprintf("%v; its one GPU device is not counted for admission until the catalog knows the board", why)
	}
	if g.Log != nil {
		g.Log.Warn("admission: node's GPUs not counted", "node", n.Name, "field", "metadata.labels["+LabelGPUProduct+"]", "product", product, "err", why)
	}
	now := metav1.NewTime(g.now())
	_ = g.C.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: n.Name + ".admission.", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		Reason:         ReasonGPUProductUnknown, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "gpupool-admission"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})
}

// ReasonGPUProductUnknown is the reason of the Warning Event on a node whose GPU devices
// admission does not count: no product label, or one the catalog does not know.
const ReasonGPUProductUnknown = "GPUProductUnknown"

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func invSignature(inv control.Inventory) string {
	var b strings.Builder
	for _, g := range inv.GPUs {
		fmt.Fprintf(&b, "%s:%d;", g.UUID, len(g.Slices))
	}
	return b.String()
}

func (g *GrantAdmission) syncNodes(ctx context.Context, now time.Time, pools map[string]bool) error {
	nodes, err := g.poolNodes(ctx, pools)
	if err != nil {
		return err
	}
	var errs []error
	plans := map[string]*v1.Plan{} // DRA pools' plans in force
	var published map[string]map[string]int
	for _, name := range slices.Sorted(maps.Keys(nodes)) { // errors in node order
		p := nodes[name].pool
		if p.Spec.Policy.DeviceAPI() != v1.DeviceAPIDRA {
			continue
		}
		if _, done := plans[p.Name]; !done {
			plans[p.Name] = nil
			if p.Status.CurrentPlan != "" {
				pl, err := decodePlan(p.Status.CurrentPlan)
				if err != nil {
					errs = append(errs, fmt.Errorf("admission: GPUPool %s: %w", p.Name, err))
				}
				plans[p.Name] = pl
			}
		}
		if published == nil {
			if published, err = g.publishedDevices(ctx); err != nil {
				return err
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		pn := nodes[name]
		inv := inventory(pn.node)
		if pn.pool.Spec.Policy.DeviceAPI() == v1.DeviceAPIDRA {
			inv = draInventory(pn.node, plans[pn.pool.Name], published[name])
		}
		// The board is the catalog's name for the node's GPU product; a product the catalog does
		// not know (or no product label) offers nothing: its devices could not be planned for,
		// and the PoolReconciler leaves the node out of the pool's plan for the same reason.
		product := pn.node.Labels[LabelGPUProduct]
		if board, err := productBoard(product); err != nil {
			if len(inv.GPUs) > 0 {
				g.refuse(ctx, pn.node, product, inv, err)
			}
			inv = control.Inventory{}
		} else {
			for i := range inv.GPUs {
				inv.GPUs[i].Board = board
			}
			delete(g.refused, name)
		}
		sig := invSignature(inv)
		if old, ok := g.inv[name]; ok && old == sig {
			continue
		}
		if _, err := g.engine.Register(now, name, inv); err != nil {
			errs = append(errs, fmt.Errorf("admission: node %s: %w", name, err))
			continue
		}
		g.inv[name] = sig
	}
	for name := range g.inv { // a node that left every pool offers nothing
		if _, ok := nodes[name]; !ok {
			if _, err := g.engine.Register(now, name, control.Inventory{}); err != nil {
				errs = append(errs, fmt.Errorf("admission: node %s: %w", name, err))
				continue
			}
			delete(g.inv, name)
		}
	}
	return errors.Join(errs...)
}

func (g *GrantAdmission) syncTenants(ctx context.Context, now time.Time, its []InferenceTenant) error {
	var pods corev1.PodList
	if err := g.C.List(ctx, &pods, client.InNamespace(g.Admitter.Namespace), client.HasLabels{render.LabelTenant}); err != nil {
		return fmt.Errorf("admission: list tenant pods: %w", err)
	}
	demand := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			demand[p.Labels[render.LabelTenant]]++
		}
	}
	want := map[string]control.Tenant{}
	for _, it := range its {
		t := control.Tenant{Name: it.Name, Path: it.Spec.Tenant.Path, Weight: 1, Demand: demand[it.Name]}
		if w := it.Spec.Tenant.Weight; w != nil {
			t.Weight = *w
		}
		want[it.Name] = t
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(g.tenants)) {
		if w, ok := want[name]; !ok || w.Path != g.tenants[name].Path {
			if err := g.engine.DeleteTenant(now, name); err != nil {
				errs = append(errs, fmt.Errorf("admission: tenant %s: %w", name, err))
			}
			delete(g.tenants, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w := want[name]
		if old, ok := g.tenants[name]; ok && old.Demand == w.Demand && old.Weight == w.Weight {
			continue
		}
		if _, err := g.engine.PutTenant(now, w); err != nil {
			errs = append(errs, fmt.Errorf("admission: InferenceTenant %s: %w", name, err))
			continue
		}
		g.tenants[name] = w
	}
	return errors.Join(errs...)
}
