package k8s

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/migparted"
	"gpupool.dev/gpupool/internal/render"
)

func migCfg(names ...string) *migparted.Config {
	c := &migparted.Config{}
	for i, n := range names {
		c.Configs = append(c.Configs, migparted.NamedConfig{Name: n, Entries: []migparted.Entry{{Devices: migparted.AllDevices(),
			MigEnabled: true, MigDevices: map[string]int{"1g.10gb": i + 1}}}})
	}
	return c
}

// migPartedArtifact is a rendered mig-parted ConfigMap artifact holding the named configs.
func migPartedArtifact(t *testing.T, names ...string) render.Artifact {
	t.Helper()
	data, err := migparted.Encode(migCfg(names...))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Marshal(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: render.MigPartedConfigMap}, Data: map[string]string{MigConfigKey: string(data)}})
	if err != nil {
		t.Fatal(err)
	}
	return render.Artifact{Path: "mig-parted/configmap.yaml", Data: doc}
}

// sharedMigParted reads the shared mig-parted ConfigMap of ns and decodes its config.yaml.
func sharedMigParted(t *testing.T, c client.Client, ns string) (*corev1.ConfigMap, *migparted.Config) {
	t.Helper()
	mp := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: render.MigPartedConfigMap}, mp); err != nil {
		t.Fatal(err)
	}
	shared, err := migparted.Decode([]byte(mp.Data[MigConfigKey]))
	if err != nil {
		t.Fatalf("shared %s: %v", MigConfigKey, err)
	}
	return mp, shared
}

// TestMergeMigConfigs: the shared config.yaml holds all-disabled, this pool's configs, every other
// pool's, and of the previous file only the configs a node still names, each name once.
func TestMergeMigConfigs(t *testing.T) {
	own := migCfg("gpupool-a1", "gpupool-shared")
	others := []*migparted.Config{migCfg("gpupool-b1", "gpupool-shared"), migCfg("gpupool-c1")}
	previous := migCfg("gpupool-old-in-use", "gpupool-old-unused", "gpupool-a1")
	got := mergeMigConfigs(own, others, previous, map[string]bool{"gpupool-old-in-use": true, "gpupool-a1": true})
	want := []string{render.AllDisabled, "gpupool-a1", "gpupool-shared", "gpupool-b1", "gpupool-c1", "gpupool-old-in-use"}
	if !slices.Equal(got.Names(), want) {
		t.Fatalf("merged names %v, want %v", got.Names(), want)
	}
	if _, err := migparted.Encode(got); err != nil {
		t.Fatal(err)
	}
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelMIGConfig: "x"},
		Annotations: map[string]string{AnnotGateTarget: "y", AnnotGatePrevious: "z"}}}, {}}
	if use := migConfigsInUse(nodes); !maps.Equal(use, map[string]bool{"x": true, "y": true, "z": true}) {
		t.Errorf("in use %v", use)
	}
}

// TestPoolKeysOfLongNames: a GPUPool's name may be up to 253 characters; its ConfigMap key and
// field manager stay within the API server's limits (253 and 128) and apart for two long names
// with a common prefix.
func TestPoolKeysOfLongNames(t *testing.T) {
	a, b := strings.Repeat("p", 240)+"-a", strings.Repeat("p", 240)+"-b"
	for _, f := range []struct {
		name string
		of   func(string) string
		max  int
	}{{"config key", poolConfigKey, 253}, {"field manager", poolFieldManager, 128}} {
		ka, kb := f.of(a), f.of(b)
		if len(ka) > f.max || len(kb) > f.max || ka == kb {
			t.Errorf("%s: %q (%d) and %q (%d): want distinct, at most %d characters", f.name, ka, len(ka), kb, len(kb), f.max)
		}
		if short := f.of("pool-1"); !strings.Contains(short, "pool-1") || len(short) > f.max {
			t.Errorf("%s of a short name: %q", f.name, short)
		}
	}
	if got := poolConfigKey("h100"); got != "pool.h100.yaml" {
		t.Errorf("config key %q", got)
	}
}

// TestTwoPoolsShareOperatorConfigs runs two GPUPools (two H100 nodes, one A100 node) with one
// controller on the real API server: the GPU Operator has one mig-parted ConfigMap and one
// device-plugin ConfigMap, and neither pool's configs may be lost to the other's writes. Every
// node ends at a config the shared config.yaml defines, each pool's configs are all in it, and
// every node's device-plugin key is present.
func TestTwoPoolsShareOperatorConfigs(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	opNS, leaseNS := newNamespace(t, c, "gpu-operator"), newNamespace(t, c, "planner")
	type poolDef struct {
		name    string
		product string
		nodes   int
		tenants []v1.Tenant
	}
	ex := exampleTenants(t)
	defs := []poolDef{
		{"shared-h100-" + strconv.Itoa(int(nsSeq.Add(1))), "NVIDIA-H100-80GB-HBM3", 2, ex},
		{"shared-a100-" + strconv.Itoa(int(nsSeq.Add(1))), "NVIDIA-A100-SXM4-80GB", 1, ex[:1]},
	}
	nodesOf := map[string][]string{}
	var gps []*GPUPool
	for _, d := range defs {
		tenNS := newNamespace(t, c, "tenants")
		for range d.nodes {
			name := nextNode("shared")
			nodesOf[d.name] = append(nodesOf[d.name], name)
			newPlanNode(t, c, name, d.name, d.product, opNS)
		}
		for _, tn := range d.tenants {
			it := &InferenceTenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, Namespace: tenNS}, Spec: InferenceTenantSpec{Pool: d.name, Tenant: tn}}
			if err := c.Create(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		// each pool may take all its GPUs through the gate at once, so both pools write the
		// shared ConfigMaps at about the same time
		gps = append(gps, createPool(t, c, d.name, v1.Policy{AllowedModes: []v1.Mode{v1.ModeMIG}, BurstPoolPercent: ptrTo(0),
			MaxUnavailable: &v1.IntOrPercent{Value: d.nodes}}))
	}
	m, err := NewController(testCfg, ControllerOptions{Namespace: leaseNS, OperatorNamespace: opNS, Gate: MIGGate{Poll: 20 * time.Millisecond},
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, m)
	for _, gp := range gps {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Name: gp.Name}, gp); err != nil {
				return false, nil
			}
			return apimeta.IsStatusConditionTrue(gp.Status.Conditions, CondApplied), nil
		})
		if err != nil {
			t.Fatalf("pool %s not applied: %v (status %+v)", gp.Name, err, gp.Status)
		}
	}
	mp, shared := sharedMigParted(t, c, opNS)
	var dp corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: render.DevicePluginConfigMap}, &dp); err != nil {
		t.Fatal(err)
	}
	poolNames := map[string][]string{}
	for _, d := range defs {
		own, err := migparted.Decode([]byte(mp.Data[poolConfigKey(d.name)]))
		if err != nil {
			t.Fatalf("pool %s: key %s: %v", d.name, poolConfigKey(d.name), err)
		}
		for _, name := range own.Names() {
			if _, ok := shared.Lookup(name); !ok {
				t.Errorf("pool %s: config %s missing from the shared %s %v", d.name, name, MigConfigKey, shared.Names())
			}
			if name != render.AllDisabled {
				poolNames[d.name] = append(poolNames[d.name], name)
			}
		}
		for _, node := range nodesOf[d.name] {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				t.Fatal(err)
			}
			cfg := n.Labels[LabelMIGConfig]
			checkSettled(t, c, node, cfg, cfg) // not cordoned, no gate step left
			if _, ok := shared.Lookup(cfg); !ok || !slices.Contains(poolNames[d.name], cfg) {
				t.Errorf("node %s of pool %s: %s=%q is not one of the pool's configs %v in the shared file", node, d.name, LabelMIGConfig, cfg, poolNames[d.name])
			}
			if res := n.Annotations[AnnotGateResult]; res != "success "+cfg {
				t.Errorf("node %s: gate result %q", node, res)
			}
			if _, ok := dp.Data[n.Labels[LabelDevicePluginConfig]]; !ok {
				t.Errorf("node %s: %s=%q has no key in %s (keys %v)", node, LabelDevicePluginConfig, n.Labels[LabelDevicePluginConfig],
					render.DevicePluginConfigMap, slices.Sorted(maps.Keys(dp.Data)))
			}
		}
	}
	// The two pools' layouts differ (H100 and A100 profiles), so the test shows a merge.
	a, b := poolNames[defs[0].name], poolNames[defs[1].name]
	if len(a) == 0 || len(b) == 0 || slices.ContainsFunc(a, func(s string) bool { return slices.Contains(b, s) }) {
		t.Errorf("pool configs %v and %v: want two non-empty, disjoint sets", a, b)
	}
}

// TestMigPartedConcurrentPools: six pools write the shared mig-parted ConfigMap at the same time
// (the controller reconciles one pool at a time, but two controllers of different releases or a
// leader change can overlap); the resourceVersion on each write makes the losers merge again, so
// the final config.yaml holds every pool's configs.
func TestMigPartedConcurrentPools(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	opNS := newNamespace(t, c, "gpu-operator")
	const pools = 6
	errs := make(chan error, pools*3)
	var wg sync.WaitGroup
	for i := range pools {
		name := "race-" + strconv.Itoa(i)
		a := migPartedArtifact(t, "gpupool-"+name+"-a", "gpupool-"+name+"-b")
		r := &PoolReconciler{C: c, OperatorNamespace: opNS}
		wg.Go(func() {
			for range 3 {
				errs <- r.applyMigParted(ctx, name, a)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	mp, shared := sharedMigParted(t, c, opNS)
	for i := range pools {
		name := "race-" + strconv.Itoa(i)
		for _, cfg := range []string{"gpupool-" + name + "-a", "gpupool-" + name + "-b"} {
			if _, ok := shared.Lookup(cfg); !ok {
				t.Errorf("config %s of pool %s lost: %s has %v", cfg, name, MigConfigKey, shared.Names())
			}
		}
		if mp.Data[poolConfigKey(name)] == "" {
			t.Errorf("pool %s: no key %s", name, poolConfigKey(name))
		}
	}
	if n := len(shared.Names()); n != 1+2*pools {
		t.Errorf("%d configs, want %d: %v", n, 1+2*pools, shared.Names())
	}
}

// TestMigPartedLostUpdate: pool "late" writes the shared file between pool "early"'s read and its
// write; early's write must then fail on the resourceVersion and merge again, so late's configs
// stay in config.yaml.
func TestMigPartedLostUpdate(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	opNS := newNamespace(t, c, "gpu-operator")
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	ww, err := client.NewWithWatch(testCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	late := &PoolReconciler{C: c, OperatorNamespace: opNS}
	applies := 0
	early := &PoolReconciler{OperatorNamespace: opNS, C: interceptor.NewClient(ww, interceptor.Funcs{
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies++
			if applies == 2 { // early's first merged write (the first one created the ConfigMap)
				if err := late.applyMigParted(ctx, "late", migPartedArtifact(t, "gpupool-late")); err != nil {
					t.Error(err)
				}
			}
			return cl.Apply(ctx, obj, opts...)
		}})}
	if err := early.applyMigParted(ctx, "early", migPartedArtifact(t, "gpupool-early")); err != nil {
		t.Fatal(err)
	}
	if applies < 3 {
		t.Errorf("early applied %d times: its stale write was not refused", applies)
	}
	_, shared := sharedMigParted(t, c, opNS)
	if want := []string{render.AllDisabled, "gpupool-early", "gpupool-late"}; !slices.Equal(shared.Names(), want) {
		t.Errorf("%s has %v, want %v", MigConfigKey, shared.Names(), want)
	}
}
