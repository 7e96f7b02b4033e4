package k8s

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LoadConfig returns the API server connection: the kubeconfig file at path when set, else
// $KUBECONFIG or ~/.kube/config, else the in-cluster service account.
func LoadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %q: %w", path, err)
	}
	return cfg, nil
}

// InstallCRDsWith installs gpupool's CRDs through a new client for cfg.
func InstallCRDsWith(ctx context.Context, cfg *rest.Config) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	return InstallCRDs(ctx, c)
}

// SetLogger sends controller-runtime's own logs to log.
func SetLogger(log *slog.Logger) { ctrl.SetLogger(logr.FromSlogHandler(log.Handler())) }
