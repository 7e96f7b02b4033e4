package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/k8s"
)

func newControllerCmd(e *env) *cobra.Command {
	var kubeconfig, namespace string
	var installCRDs bool
	var drainTimeout, applyTimeout, verifyTimeout, poll time.Duration
	var leaseDuration, renewDeadline, retryPeriod time.Duration
	var qps float32
	var burst int
	var operatorNamespace string
	var admitEvery time.Duration
	var webhookPort, maxUnavailable int
	var cooldown, smokeTimeout, surgeTimeout time.Duration
	var smokeImage string
	var smokeCommand []string
	var webhookCertDir string
	var simRequests int
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run gpupool's Kubernetes controller: the MIG gate around mig-manager, with leader election",
		Long: "controller runs in a cluster with NVIDIA's GPU Operator. While it holds the Lease gpupool-controller\n" +
			"in --namespace it drives every node whose gpupool.dev/gate-target annotation differs from its\n" +
			"nvidia.com/mig.config label through the gate: cordon, evict through the Eviction API the node's GPU\n" +
			"pods that may hold a GPU whose MIG devices change, set the label, wait for\n" +
			"nvidia.com/mig.config.state=success, verify allocatable (on DRA pools: the\n" +
			"devices NVIDIA's DRA driver publishes in ResourceSlices), run a smoke Job per new resource kind\n" +
			"(--smoke-image), uncordon; on failure or timeout it restores the previous label. Progress lives in\n" +
			"node annotations, so a restarted or new replica resumes each gate; each gate is recorded in a\n" +
			"Reconfiguration object (kubectl get reconfigurations).\n\n" +
			"With --operator-namespace set (the default) it also plans every GPUPool: nodes by the pool's\n" +
			"nodeSelector and GPU Feature Discovery's nvidia.com/gpu.product and nvidia.com/gpu.count labels,\n" +
			"tenants from the InferenceTenants naming the pool. It server-side applies the mig-parted and\n" +
			"device-plugin ConfigMaps there, the nvidia.com/device-plugin.config and gpupool.dev/pool node labels\n" +
			"and each tenant's Deployments (owned by its InferenceTenant), requests the gate for each node whose\n" +
			"MIG config changes, and writes GPUPool and InferenceTenant status. Plans of pools of up to 64 tenants are\n" +
			"confirmed by simulation, as gpupool plan does (--sim-requests).\n\n" +
			"With --admit-every above zero (the default) it admits tenant pods: the fair allocator shares the\n" +
			"devices the pools' nodes advertise among the InferenceTenants by weight, each demanding its live\n" +
			"pods; pods within a tenant's grant lose the gpupool.dev/admission scheduling gate, admitted pods\n" +
			"beyond it are evicted. See docs/kubernetes.md.",
		Example: "  gpupool controller --namespace gpupool-system --install-crds\n" +
			"  gpupool controller --kubeconfig ~/.kube/config --namespace gpupool-system",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var problems []error
			if namespace == "" {
				problems = append(problems, fmt.Errorf("--namespace: must be set (the leader-election Lease lives there)"))
			}
			for _, d := range []struct {
				flag string
				v    time.Duration
			}{{"--poll", poll}, {"--lease-duration", leaseDuration}, {"--renew-deadline", renewDeadline}, {"--retry-period", retryPeriod}} {
				if d.v <= 0 {
					problems = append(problems, fmt.Errorf("%s: must be positive, got %s", d.flag, d.v))
				}
			}
			if renewDeadline >= leaseDuration || retryPeriod >= renewDeadline {
				problems = append(problems, fmt.Errorf("--retry-period (%s) < --renew-deadline (%s) < --lease-duration (%s) must hold", retryPeriod, renewDeadline, leaseDuration))
			}
			if maxUnavailable < 0 || cooldown < 0 {
				problems = append(problems, fmt.Errorf("--max-unavailable and --cooldown: must not be negative, got %d and %s", maxUnavailable, cooldown))
			}
			if smokeTimeout <= 0 {
				problems = append(problems, fmt.Errorf("--smoke-timeout: must be positive, got %s", smokeTimeout))
			}
			if err := checkSimRequests(simRequests); err != nil {
				problems = append(problems, err)
			}
			if qps <= 0 || burst < 1 {
				problems = append(problems, fmt.Errorf("--kube-api-qps and --kube-api-burst: must be positive, got %g and %d", qps, burst))
			}
			if err := errors.Join(problems...); err != nil {
				return invalid(err)
			}
			log := slog.New(slog.NewTextHandler(e.stderr, nil))
			k8s.SetLogger(log)
			cfg, err := k8s.LoadConfig(kubeconfig)
			if err != nil {
				return invalid(err)
			}
			// client-go's default (5 requests/s) starves the gate and then the Lease renewal, and a
			// leader that cannot renew stops.
			cfg.QPS, cfg.Burst = qps, burst
			if installCRDs {
				if err := k8s.InstallCRDsWith(e.ctx, cfg); err != nil {
					return err
				}
			}
			mgr, err := k8s.NewController(cfg, k8s.ControllerOptions{Namespace: namespace, Log: log,
				LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod, OperatorNamespace: operatorNamespace, AdmitEvery: admitEvery,
				WebhookPort: webhookPort, WebhookCertDir: webhookCertDir, Planning: planning(simRequests),
				Gate: k8s.MIGGate{DrainTimeout: drainTimeout, ApplyTimeout: applyTimeout, VerifyTimeout: verifyTimeout, Poll: poll,
					MaxUnavailable: maxUnavailable, Cooldown: cooldown, SurgeTimeout: surgeTimeout,
					Smoke: k8s.SmokeTest{Image: smokeImage, Command: smokeCommand, Namespace: namespace, Timeout: smokeTimeout}}})
			if err != nil {
				return err
			}
			log.Info("gpupool controller starting", "namespace", namespace)
			return mgr.Start(e.ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	f.StringVar(&namespace, "namespace", "", "namespace of the leader-election Lease (required)")
	f.BoolVar(&installCRDs, "install-crds", false, "create or update the gpupool.dev/v1 CRDs first")
	f.DurationVar(&drainTimeout, "drain-timeout", 10*time.Minute, "give up evicting a node's GPU pods after this long (the label is left unchanged)")
	f.DurationVar(&applyTimeout, "apply-timeout", 15*time.Minute, "restore the previous label when mig-manager has not reported success after this long")
	f.DurationVar(&verifyTimeout, "verify-timeout", 5*time.Minute, "restore the previous label when allocatable (on DRA pools: the published devices) does not match after this long")
	f.Float32Var(&qps, "kube-api-qps", 50, "requests per second to the API server (client-side limit)")
	f.IntVar(&burst, "kube-api-burst", 100, "burst of requests to the API server above --kube-api-qps")
	f.StringVar(&operatorNamespace, "operator-namespace", "gpu-operator", "the GPU Operator's namespace, where the mig-parted and device-plugin ConfigMaps are applied; empty turns planning off (the gate alone runs)")
	f.DurationVar(&admitEvery, "admit-every", time.Second, "admit tenant pods (remove the gpupool.dev/admission scheduling gate) by the fair allocator's grants this often; 0 turns admission off")
	f.IntVar(&webhookPort, "webhook-port", 0, "serve the mutating webhook that adds the gpupool.dev/admission scheduling gate to tenant pods on this port (TLS; 0: off)")
	f.StringVar(&webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding the webhook's tls.crt and tls.key")
	f.IntVar(&maxUnavailable, "max-unavailable", 1, "nodes that may be in a MIG gate (cordoned by it) at once; 0: no limit")
	f.DurationVar(&cooldown, "cooldown", time.Hour, "least time between the end of a node's MIG gate and the start of its next")
	f.StringVar(&smokeImage, "smoke-image", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "image of the smoke Jobs run on a node's new MIG devices before it is uncordoned (in --namespace); empty turns the smoke test off")
	f.StringSliceVar(&smokeCommand, "smoke-command", []string{"nvidia-smi", "-L"}, "command of the smoke Jobs' container; it must exit 0")
	f.DurationVar(&surgeTimeout, "surge-timeout", 5*time.Minute, "before evicting a Deployment's pods from a node in a gate, raise its replicas when other nodes have room and wait this long for the new ones to be Ready (then evict anyway); negative turns it off")
	f.DurationVar(&smokeTimeout, "smoke-timeout", 5*time.Minute, "restore the previous label when the smoke Jobs have not succeeded after this long")
	f.DurationVar(&poll, "poll", 2*time.Second, "pause between two steps of a node's gate while it waits")
	f.DurationVar(&leaseDuration, "lease-duration", 15*time.Second, "leader election: how long a standby waits before taking a Lease its holder stopped renewing")
	f.DurationVar(&renewDeadline, "renew-deadline", 10*time.Second, "leader election: the leader stops when it cannot renew the Lease for this long")
	f.DurationVar(&retryPeriod, "retry-period", 2*time.Second, "leader election: pause between tries to acquire or renew the Lease")
	simRequestsFlag(f, &simRequests)
	return cmd
}
