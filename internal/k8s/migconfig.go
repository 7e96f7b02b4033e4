package k8s

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/migparted"
	"gpupool.dev/gpupool/internal/render"
)

// The GPU Operator runs one mig-manager per cluster, reading one ConfigMap (ClusterPolicy
// migManager.config.name) and in it one mig-parted file under the key config.yaml. Several
// GPUPools therefore share that file: each pool keeps its own configs under its own key
// (poolConfigKey) as the source, and config.yaml is the merge of every pool's key, rewritten by
// whichever pool reconciles, under the ConfigMap's resourceVersion so that two pools writing at
// once cannot drop each other's configs. Config names are digests of their content, so a name two
// pools share is the same config.

// migApplyAttempts bounds the read-merge-write passes of one apply of the shared mig-parted file.
const migApplyAttempts = 12

// MigConfigKey is the key mig-manager reads.
const MigConfigKey = "config.yaml"

// poolConfigKey is the ConfigMap key of one pool's own mig-parted configs.
func poolConfigKey(pool string) string {
	return "pool." + shortName(pool, 253-len("pool..yaml")) + ".yaml"
}

// poolFieldManager is the server-side apply field manager of one pool's part of the shared
// ConfigMaps: the device-plugin ConfigMap's keys (one per node) and the mig-parted ConfigMap's
// pool key are owned per pool, so one pool's apply never removes another pool's keys.
func poolFieldManager(pool string) string {
	// the API server takes field manager names up to 128 characters
	return FieldOwner + "/pool/" + shortName(pool, 128-len(FieldOwner+"/pool/"))
}

// shortName is name when it has at most limit characters, else its first limit-11 characters, a dash
// and 10 hex digits of its SHA-256, so that two long names stay apart.
func shortName(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:limit-11] + "-" + hex.EncodeToString(sum[:])[:10]
}

// mergeMigConfigs is the config.yaml of the shared ConfigMap: all-disabled, then the configs of
// own (this pool), then those of every other pool key (in key order), then the configs of the
// previous config.yaml that a node still names (its label, or a gate's target or previous label:
// the gate's rollback needs the previous config). A name is written once.
func mergeMigConfigs(own *migparted.Config, others []*migparted.Config, previous *migparted.Config, inUse map[string]bool) *migparted.Config {
	out := &migparted.Config{}
	add := func(c *migparted.Config, only map[string]bool) {
		if c == nil {
			return
		}
		for _, nc := range c.Configs {
			if only != nil && !only[nc.Name] {
				continue
			}
			if _, seen := out.Lookup(nc.Name); !seen {
				out.Configs = append(out.Configs, nc)
			}
		}
	}
	out.Configs = append(out.Configs, migparted.NamedConfig{Name: render.AllDisabled,
		Entries: []migparted.Entry{{Devices: migparted.AllDevices(), MigEnabled: false}}})
	add(own, nil)
	for _, o := range others {
		add(o, nil)
	}
	add(previous, inUse)
	return out
}

// migConfigsInUse names the mig-parted configs nodes refer to: their nvidia.com/mig.config
// label and a gate's target and previous label.
func migConfigsInUse(nodes []corev1.Node) map[string]bool {
	use := map[string]bool{}
	for _, n := range nodes {
		for _, v := range []string{n.Labels[LabelMIGConfig], n.Annotations[AnnotGateTarget], n.Annotations[AnnotGatePrevious]} {
			if v != "" {
				use[v] = true
			}
		}
	}
	return use
}

// applyMigParted applies pool's mig-parted configs (the ConfigMap artifact a) to the shared
// ConfigMap: its own key, and config.yaml merged with the other pools' keys. A write that races
// with another pool's is retried on the fresh object.
func (r *PoolReconciler) applyMigParted(ctx context.Context, pool string, a render.Artifact) error {
	objs, err := DecodeObjects(a.Data)
	if err != nil || len(objs) != 1 {
		return fmt.Errorf("artifact %s: want one ConfigMap: %v", a.Path, err)
	}
	ownData, _, _ := unstructured.NestedString(objs[0].Object, "data", MigConfigKey)
	own, err := migparted.Decode([]byte(ownData))
	if err != nil {
		return fmt.Errorf("artifact %s: data.%s: %w", a.Path, MigConfigKey, err)
	}
	return r.writeMigParted(ctx, pool, objs[0].GetName(), objs[0].GetLabels(), &poolMigConfigs{data: ownData, cfg: own})
}

// poolMigConfigs is one pool's mig-parted file: its text and its configs.
type poolMigConfigs struct {
	data string
	cfg  *migparted.Config
}

// writeMigParted writes pool's key of the shared mig-parted ConfigMap name and config.yaml
// merged with the other pools' keys; with own nil it removes the pool's key (the GPUPool is
// deleted) and merges config.yaml without it, keeping the configs nodes still name.
func (r *PoolReconciler) writeMigParted(ctx context.Context, pool, name string, labels map[string]string, own *poolMigConfigs) error {
	key := poolConfigKey(pool)
	var lastErr error
	// Writers that lost a race back off with jitter, so that several pools do not collide again.
	backoff := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 1, Steps: migApplyAttempts}
	for attempt := range migApplyAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff.Step()):
			}
		}
		cm := &corev1.ConfigMap{}
		err := r.C.Get(ctx, client.ObjectKey{Namespace: r.OperatorNamespace, Name: name}, cm)
		if apierrors.IsNotFound(err) {
			if own == nil {
				return nil // nothing to remove
			}
			// Create it with this pool's key only; the next pass merges under a resourceVersion.
			if err := r.applyConfigMap(ctx, name, "", labels, map[string]string{key: own.data}, pool); err != nil && !apierrors.IsConflict(err) {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("ConfigMap %s/%s: %w", r.OperatorNamespace, name, err)
		}
		var others []*migparted.Config
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			if k == key || !strings.HasPrefix(k, "pool.") || !strings.HasSuffix(k, ".yaml") {
				continue
			}
			c, err := migparted.Decode([]byte(cm.Data[k]))
			if err != nil {
				return fmt.Errorf("ConfigMap %s/%s: data.%s: %w", r.OperatorNamespace, name, k, err)
			}
			others = append(others, c)
		}
		var previous *migparted.Config
		if prev := cm.Data[MigConfigKey]; prev != "" {
			// A config.yaml that does not decode is replaced; nothing of it is kept.
			previous, _ = migparted.Decode([]byte(prev))
		}
		var nodes corev1.NodeList
		if err := r.C.List(ctx, &nodes); err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		var ownCfg *migparted.Config
		data := map[string]string{}
		if own != nil {
			ownCfg, data[key] = own.cfg, own.data
		} else {
			labels = cm.Labels
		}
		merged, err := migparted.Encode(mergeMigConfigs(ownCfg, others, previous, migConfigsInUse(nodes.Items)))
		if err != nil {
			return fmt.Errorf("ConfigMap %s/%s: data.%s: %w", r.OperatorNamespace, name, MigConfigKey, err)
		}
		data[MigConfigKey] = string(merged)
		err = r.applyConfigMap(ctx, name, cm.ResourceVersion, labels, data, pool)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		lastErr = err
	}
	return fmt.Errorf("ConfigMap %s/%s: gave up after repeated conflicts: %w", r.OperatorNamespace, name, lastErr)
}

// applyConfigMap server-side applies data to the ConfigMap as pool's field manager; a non-empty
// resourceVersion makes it conditional on the object being unchanged since it was read.
func (r *PoolReconciler) applyConfigMap(ctx context.Context, name, resourceVersion string, labels, data map[string]string, pool string) error {
	d := map[string]any{}
	for k, v := range data {
		d[k] = v
	}
	l := map[string]any{}
	for k, v := range labels {
		l[k] = v
	}
	meta := map[string]any{"name": name, "namespace": r.OperatorNamespace, "labels": l}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": d}}
	if err := r.C.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(poolFieldManager(pool)), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply ConfigMap %s/%s: %w", r.OperatorNamespace, name, err)
	}
	return nil
}
