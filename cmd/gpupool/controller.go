package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/k8s"
)

func newControllerCmd(e *env) *cobra.Command {
	var kubeconfig, namespace string
	var installCRDs bool
	var drainTimeout, applyTimeout, verifyTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run gpupool's Kubernetes controller: the MIG gate around mig-manager, with leader election",
		Long: "controller runs in a cluster with NVIDIA's GPU Operator. While it holds the Lease gpupool-controller\n" +
			"in --namespace it drives every node whose gpupool.dev/gate-target annotation differs from its\n" +
			"nvidia.com/mig.config label through the gate: cordon, evict the node's GPU pods through the Eviction\n" +
			"API, set the label, wait for nvidia.com/mig.config.state=success, verify allocatable, uncordon; on\n" +
			"failure or timeout it restores the previous label. Progress lives in node annotations, so a restarted\n" +
			"or new replica resumes each gate. See docs/kubernetes.md.",
		Example: "  gpupool controller --namespace gpupool-system --install-crds\n" +
			"  gpupool controller --kubeconfig ~/.kube/config --namespace gpupool-system",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" {
				return invalid(fmt.Errorf("--namespace: must be set (the leader-election Lease lives there)"))
			}
			log := slog.New(slog.NewTextHandler(e.stderr, nil))
			k8s.SetLogger(log)
			cfg, err := k8s.LoadConfig(kubeconfig)
			if err != nil {
				return invalid(err)
			}
			if installCRDs {
				if err := k8s.InstallCRDsWith(e.ctx, cfg); err != nil {
					return err
				}
			}
			mgr, err := k8s.NewController(cfg, k8s.ControllerOptions{Namespace: namespace, Log: log,
				Gate: k8s.MIGGate{DrainTimeout: drainTimeout, ApplyTimeout: applyTimeout, VerifyTimeout: verifyTimeout, Poll: 2 * time.Second}})
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
	f.DurationVar(&verifyTimeout, "verify-timeout", 5*time.Minute, "restore the previous label when allocatable does not match after this long")
	return cmd
}
