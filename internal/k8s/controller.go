package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"gpupool.dev/gpupool/internal/control"
	"gpupool.dev/gpupool/internal/render"
)

// ControllerOptions configure NewController.
type ControllerOptions struct {
	// Namespace holds the leader-election Lease.
	Namespace string
	// LeaseName names the Lease (default "gpupool-controller").
	LeaseName string
	// Gate configures the MIG gate; its C is set by NewController.
	Gate MIGGate
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (defaults 15 s, 10 s, 2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       *slog.Logger
	// OperatorNamespace, when set, turns on the pool reconciler (PoolReconciler): GPUPools are
	// planned and their artifacts applied, the ConfigMaps into this namespace (the GPU Operator's).
	OperatorNamespace string
	// AdmitEvery, when positive, runs GrantAdmission this often: tenant pods are admitted by the
	// fair allocator's grants (and preempted through the Eviction API).
	AdmitEvery time.Duration
	// WebhookPort, when positive, serves the admission-gate webhook (PodGateHandler at
	// WebhookPath) over TLS on this port with the certificate tls.crt/tls.key in WebhookCertDir.
	// Every replica serves it, leader or not.
	WebhookPort    int
	WebhookCertDir string
	// Planning is how the pool reconciler plans GPUPools (the zero value: by the queueing model
	// alone; `gpupool controller` confirms plans by simulation, as `gpupool plan` does).
	Planning control.Planning
}

// NewController returns a manager that, while it holds the leader Lease, drives the MIG gate of
// every node that has a gate request or a gate in progress. Start it with mgr.Start(ctx); a second
// replica waits on the Lease and takes over, resuming each gate from the node's annotations.
func NewController(cfg *rest.Config, o ControllerOptions) (manager.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	lease := o.LeaseName
	if lease == "" {
		lease = "gpupool-controller"
	}
	d := func(v, def time.Duration) *time.Duration { v = orDefault(v, def); return &v }
	var wh webhook.Server
	if o.WebhookPort > 0 {
		wh = webhook.NewServer(webhook.Options{Port: o.WebhookPort, CertDir: o.WebhookCertDir})
		wh.Register(WebhookPath, &webhook.Admission{Handler: PodGateHandler()})
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:           wh,
		Scheme:                  scheme,
		LeaderElection:          true,
		LeaderElectionID:        lease,
		LeaderElectionNamespace: o.Namespace,
		LeaseDuration:           d(o.LeaseDuration, 15*time.Second),
		RenewDeadline:           d(o.RenewDeadline, 10*time.Second),
		RetryPeriod:             d(o.RetryPeriod, 2*time.Second),
		// The Lease is given up on a clean stop, so a successor takes over at once.
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
	})
	if err != nil {
		return nil, fmt.Errorf("new controller manager: %w", err)
	}
	if wh != nil {
		mgr.GetWebhookServer() // adds the server to the manager's runnables
	}
	// The gate reads what it just wrote, so it talks to the API server directly, not the cache.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("new controller client: %w", err)
	}
	g := o.Gate
	g.C = direct
	if g.MigConfigMap.Name == "" && o.OperatorNamespace != "" {
		g.MigConfigMap = client.ObjectKey{Namespace: o.OperatorNamespace, Name: render.MigPartedConfigMap}
	}
	if g.Smoke.Namespace == "" {
		g.Smoke.Namespace = o.Namespace
	}
	g.Slots = &sync.Mutex{}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &gateReconciler{gate: &g, log: log}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("mig-gate").
		For(&corev1.Node{}, builder.WithPredicates(gatePredicate())).
		// Several managers in one process (tests, or a restart in place) register the same name
		// with the global metrics registry; the name is fixed, so skip that uniqueness check.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptrTo(true)}).
		Complete(r)
	if err != nil {
		return nil, fmt.Errorf("register mig gate controller: %w", err)
	}
	if o.AdmitEvery > 0 {
		ga := &GrantAdmission{C: direct, Admitter: &Admitter{C: direct}, Log: log}
		// a Runnable without NeedLeaderElection runs only on the leader
		err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			t := time.NewTicker(o.AdmitEvery)
			defer t.Stop()
			for {
				if _, res, err := ga.Sync(ctx); err != nil {
					log.Warn("admission", "err", err)
				} else if len(res.Admitted)+len(res.Evicted) > 0 {
					log.Info("admission", "admitted", len(res.Admitted), "evicted", len(res.Evicted))
				}
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
				}
			}
		}))
		if err != nil {
			return nil, fmt.Errorf("register admission: %w", err)
		}
	}
	if o.OperatorNamespace == "" {
		return mgr, nil
	}
	pr := &PoolReconciler{C: direct, OperatorNamespace: o.OperatorNamespace, Gate: &g, Log: log, Planning: o.Planning}
	allPools := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var l GPUPoolList
		if err := direct.List(ctx, &l); err != nil {
			log.Warn("list GPUPools", "err", err)
			return nil
		}
		out := make([]reconcile.Request, len(l.Items))
		for i, p := range l.Items {
			out[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}}
		}
		return out
	})
	err = ctrl.NewControllerManagedBy(mgr).
		Named("gpupool-planner").
		For(&GPUPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&InferenceTenant{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*InferenceTenant).Spec.Pool}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, allPools, builder.WithPredicates(fleetPredicate())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: ptrTo(true)}).
		Complete(pr)
	if err != nil {
		return nil, fmt.Errorf("register pool controller: %w", err)
	}
	return mgr, nil
}

// gatePredicate lets through the node events that concern a gate (each replica's identity in the
// Lease is its host name plus a random suffix, so several replicas on one host are told apart).
func gatePredicate() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return gateWanted(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return gateWanted(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// gateWanted: the node has a gate in progress, or a request its label does not meet yet.
func gateWanted(o client.Object) bool {
	a := o.GetAnnotations()
	if a[AnnotGateStep] != "" || a[AnnotGateRecord] != "" {
		return true // a gate in progress, or one whose Reconfiguration lacks the outcome
	}
	t, ok := a[AnnotGateTarget]
	return ok && t != o.GetLabels()[LabelMIGConfig]
}

type gateReconciler struct {
	gate *MIGGate
	log  *slog.Logger
}

// Reconcile advances one node's gate by one step and comes back after the gate's poll interval
// until the gate is finished.
func (r *gateReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	done, err := r.gate.Step(ctx, req.Name)
	if err != nil {
		r.log.Warn("mig gate step", "node", req.Name, "err", err)
		return reconcile.Result{}, err // requeued with backoff; a conflict is retried the same way
	}
	if done {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: orDefault(r.gate.Poll, 200*time.Millisecond)}, nil
}

// fleetPredicate lets through node events that can change a pool's fleet: a node added or
// removed, or a label changed other than those gpupool and the GPU Operator's mig-manager write
// while reconfiguring (each gate step would otherwise re-plan).
func fleetPredicate() predicate.Funcs {
	own := map[string]bool{LabelMIGConfig: true, LabelMIGConfigState: true, LabelDevicePluginConfig: true, LabelPool: true}
	strip := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if !own[k] {
				out[k] = v
			}
		}
		return out
	}
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(strip(e.ObjectOld.GetLabels()), strip(e.ObjectNew.GetLabels()))
		},
	}
}

func ptrTo[T any](v T) *T { return &v }
