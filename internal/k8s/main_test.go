package k8s

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The tests in this package run against a real etcd and kube-apiserver started once per test
// binary. scripts/build-k8s-test-binaries.sh builds them; GPUPOOL_K8S_TEST_BINS (or
// KUBEBUILDER_ASSETS) names the directory, which defaults to the script's cache directory.
var (
	testCfg    *rest.Config
	testClient client.Client
	testEnv    *envtest.Environment
	testBins   string
	// noAPI says why the API server is missing; tests that need it skip with it (fail under CI).
	noAPI string
)

func binDir() string {
	for _, v := range []string{"GPUPOOL_K8S_TEST_BINS", "KUBEBUILDER_ASSETS"} {
		if d := os.Getenv(v); d != "" {
			return d
		}
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "gpupool", "k8s-v1.37.2")
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir := binDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			noAPI = fmt.Sprintf("no %s in %s: run scripts/build-k8s-test-binaries.sh (or set GPUPOOL_K8S_TEST_BINS)", b, dir)
			return m.Run()
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// kube-apiserver 1.37 refuses a loopback advertise address with the endpoint reconciler on;
	// with both set the API server also starts in a network namespace that has only loopback.
	a := env.ControlPlane.GetAPIServer().Configure()
	a.Set("advertise-address", "127.0.0.1")
	a.Set("endpoint-reconciler-type", "none")
	// The admission-gate webhook, installed as the chart installs it but served from this process
	// (envtest points its client config at a local port with its own certificates).
	// Its name differs from the manifests' so that TestDeployDryRun applies theirs afresh.
	path := strings.TrimPrefix(WebhookPath, "/")
	wh := PodGateWebhookConfiguration(admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: "gpupool-system", Name: "gpupool-webhook", Path: &path}})
	wh.Name += "-test"
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{MutatingWebhooks: []*admissionregistrationv1.MutatingWebhookConfiguration{wh}}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start etcd and kube-apiserver from %s: %v\n", dir, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}()
	wo := env.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	srv.Register(WebhookPath, &webhook.Admission{Handler: PodGateHandler()})
	wctx, stopWebhook := context.WithCancel(context.Background())
	defer stopWebhook()
	go func() {
		if err := srv.Start(wctx); err != nil {
			fmt.Fprintf(os.Stderr, "webhook server: %v\n", err)
		}
	}()
	for start := time.Now(); srv.StartedChecker()(nil) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			fmt.Fprintln(os.Stderr, "webhook server did not start within a minute")
			return 1
		}
	}
	cfg.QPS, cfg.Burst = 500, 1000
	scheme, err := NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := InstallCRDs(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testCfg, testClient, testEnv, testBins = cfg, c, env, dir
	return m.Run()
}

// needAPI skips t when there is no API server, and fails it under CI=true, where the binaries
// must have been built.
func needAPI(t *testing.T) client.Client {
	t.Helper()
	if noAPI == "" {
		return testClient
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("real API server required under CI: %s", noAPI)
	}
	t.Skip(noAPI)
	return nil
}
