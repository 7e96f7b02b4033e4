package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"gpupool.dev/gpupool/internal/migparted"
)

// What NVIDIA's mig-manager does to a node when its nvidia.com/mig.config label changes
// (mig-parted, pkg/mig/reconfigure and cmd/nvidia-mig-parted/apply): it pauses the GPU Operator's
// own GPU clients on the whole node (device plugin, GPU feature discovery, DCGM, DCGM exporter and
// DaemonSets selected by nvidia.com/gpu.deploy.client) and waits for their pods to go, but it does
// not touch users' pods. If any GPU's MIG mode must change, mig-parted resets every GPU of the
// node. Otherwise `mig-parted apply` walks the GPUs one by one and skips each whose MIG devices
// already equal the config's ("Skipping -- already set to desired value"); only the GPUs that
// differ have their instances destroyed and created again.
//
// So a pod whose MIG instances are all on GPUs the new config leaves as they are keeps working.
// Which GPU a pod holds is decided by the device plugin and is not in the API; what the gate can
// know is by resource name: a pod may stay when every nvidia.com/ resource it asks for is one
// whose instances, under the old config, all lie on GPUs that do not change (so whichever
// instance the device plugin gave it survives), and whose count on the node does not drop.

// drainScope is the gate's decision, taken once when the gate begins and kept in the node's
// annotations so a resumed gate drains the same pods.
type drainScope struct {
	// Keep lists the resources whose pods may stay; empty means every GPU pod is drained.
	Keep []string `json:"keep,omitempty"`
	// Smoke lists the resources the smoke Jobs test after the change: the new config's resources
	// on GPUs that change (every expected resource when the change is not known GPU by GPU).
	Smoke []string `json:"smoke,omitempty"`
	// Why says how the decision was reached (in the Reconfiguration's Draining step).
	Why string `json:"why,omitempty"`
	// DRA, on a node whose GPUs a DRA driver publishes, decides by the devices the pods' claims
	// hold (and Smoke lists device keys, "gpu" or "mig-<profile>").
	DRA *draScope `json:"dra,omitempty"`
}

func decodeScope(s string) drainScope {
	var d drainScope
	_ = json.Unmarshal([]byte(s), &d) // a missing or unreadable scope drains everything
	return d
}

func (d drainScope) encode() string {
	b, _ := json.Marshal(d)
	return string(b)
}

func drainMessage(scope string) string {
	d := decodeScope(scope)
	if d.DRA != nil {
		if len(d.DRA.Keep) == 0 {
			return fmt.Sprintf("evicting every pod holding a device of %s (or an nvidia.com/ resource): %s", d.DRA.Driver, d.Why)
		}
		return fmt.Sprintf("evicting pods holding a device of %s other than the %d on GPUs that keep their devices (and pods asking for an nvidia.com/ resource): %s", d.DRA.Driver, len(d.DRA.Keep), d.Why)
	}
	if len(d.Keep) == 0 {
		return "evicting every GPU pod of the node: " + d.Why
	}
	return fmt.Sprintf("evicting GPU pods except those asking only for %s: %s", strings.Join(d.Keep, ", "), d.Why)
}

// gpuClass is one GPU index of the node named by a config, or -1: every GPU no entry names by index.
type gpuClass = int

// covering lists the entries of c that apply to class i, in order.
func covering(c *migparted.NamedConfig, i gpuClass) []migparted.Entry {
	var out []migparted.Entry
	for _, e := range c.Entries {
		if e.Devices.All || (i >= 0 && slices.Contains(e.Devices.Indices, i)) {
			e.MigDevices = nonZero(e.MigDevices)
			out = append(out, e)
		}
	}
	return out
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// resourcesOf names the device-plugin resources the entries give a GPU. When unsure it names
// more: a MIG-enabled GPU may also show as nvidia.com/gpu (device plugin strategies single and
// none), and a profile with attributes ("1g.10gb+me") is named both with and without them.
func resourcesOf(es []migparted.Entry, conservative bool) []string {
	var out []string
	for _, e := range es {
		if !e.MigEnabled {
			out = append(out, "nvidia.com/gpu")
			continue
		}
		if conservative {
			out = append(out, "nvidia.com/gpu")
		}
		for p := range e.MigDevices {
			out = append(out, "nvidia.com/mig-"+p)
			if base, _, attr := strings.Cut(p, "+"); attr && conservative {
				out = append(out, "nvidia.com/mig-"+base, "nvidia.com/mig-"+strings.ReplaceAll(p, "+", "."))
			}
		}
	}
	return out
}

func enabledSet(es []migparted.Entry) map[bool]bool {
	out := map[bool]bool{}
	for _, e := range es {
		out[e.MigEnabled] = true
	}
	return out
}

// classChanges compares old and new GPU class by class: the classes (every GPU index either
// config names, and -1), those whose entries differ, and, when the MIG mode of one changes, why
// every GPU of the node is reset (mig-parted then resets them all).
func classChanges(old, new *migparted.NamedConfig) (classes, changed []gpuClass, reset string) {
	classes = []gpuClass{-1}
	for _, c := range []*migparted.NamedConfig{old, new} {
		for _, e := range c.Entries {
			for _, i := range e.Devices.Indices {
				if !slices.Contains(classes, i) {
					classes = append(classes, i)
				}
			}
		}
	}
	slices.Sort(classes)
	for _, i := range classes {
		o, n := covering(old, i), covering(new, i)
		if reflect.DeepEqual(o, n) {
			continue
		}
		if !maps.Equal(enabledSet(o), enabledSet(n)) {
			return classes, changed, fmt.Sprintf("the MIG mode of %s changes, and mig-parted then resets every GPU of the node", className(i))
		}
		changed = append(changed, i)
	}
	return classes, changed, ""
}

func className(i gpuClass) string {
	if i < 0 {
		return "the GPUs no entry names by index"
	}
	return fmt.Sprintf("GPU %d", i)
}

// planDrainScope decides which resources' pods may stay while the node goes from old to new.
// before is the node's nvidia.com/ allocatable now and after the expectation. A nil old or new
// (the config is unknown) drains everything.
func planDrainScope(old, new *migparted.NamedConfig, before, after map[string]int64) drainScope {
	all := slices.Sorted(maps.Keys(after))
	every := func(why string) drainScope { return drainScope{Smoke: positive(all, after), Why: why} }
	if old == nil || new == nil {
		return every(unknownConfigs)
	}
	classes, changedCls, reset := classChanges(old, new)
	if reset != "" {
		return every(reset)
	}
	changedOld, changedNew := map[string]bool{}, map[string]bool{}
	keptOld, keptNew := map[string]bool{}, map[string]bool{}
	var changed []string
	for _, i := range classes {
		o, n := covering(old, i), covering(new, i)
		if !slices.Contains(changedCls, i) {
			for _, r := range resourcesOf(o, false) {
				keptOld[r] = true
			}
			for _, r := range resourcesOf(n, false) {
				keptNew[r] = true
			}
			continue
		}
		changed = append(changed, className(i))
		for _, r := range resourcesOf(o, true) {
			changedOld[r] = true
		}
		for _, r := range resourcesOf(n, true) {
			changedNew[r] = true
		}
	}
	var keep, dropped []string
	for _, r := range slices.Sorted(maps.Keys(keptOld)) {
		switch {
		case changedOld[r]:
		case after[r] < before[r]:
			dropped = append(dropped, fmt.Sprintf("%s %d→%d", r, before[r], after[r]))
		default:
			keep = append(keep, r)
		}
	}
	var smoke []string
	for _, r := range positive(all, after) {
		if !keptNew[r] || changedNew[r] {
			smoke = append(smoke, r)
		}
	}
	why := "no GPU's MIG devices change"
	if len(changed) > 0 {
		why = fmt.Sprintf("MIG devices change on %s only", strings.Join(changed, ", "))
	}
	if len(dropped) > 0 {
		why += "; counts drop for " + strings.Join(dropped, ", ")
	}
	return drainScope{Keep: keep, Smoke: smoke, Why: why}
}

const unknownConfigs = "the old or new mig-parted config is not known, so the GPUs that change are not known"

func positive(names []string, q map[string]int64) []string {
	var out []string
	for _, r := range names {
		if q[r] > 0 {
			out = append(out, r)
		}
	}
	return out
}

// drainScope reads the old and new configs from the mig-parted ConfigMap and decides the scope.
// A ConfigMap that is not configured, missing or unreadable drains everything (said in Why). On a
// node whose GPUs a DRA driver publishes (the request carries a DeviceExpectation) the scope is
// decided device by device (planDRADrainScope).
func (g *MIGGate) drainScope(ctx context.Context, n *corev1.Node, prev, target string) (drainScope, error) {
	exp, err := deviceExpectation(n)
	if err != nil {
		return drainScope{}, err
	}
	want := map[string]int64{}
	if exp != nil {
		want = exp.Devices
	} else if s := n.Annotations[AnnotGateExpect]; s != "" {
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			return drainScope{}, fmt.Errorf("gate node %s: annotation %s: %w", n.Name, AnnotGateExpect, err)
		}
	}
	old, new, note, err := g.migConfigs(ctx, n, prev, target)
	if err != nil {
		return drainScope{}, err
	}
	var d drainScope
	if exp != nil {
		if st := n.Labels[LabelMIGConfigState]; st != MIGStateSuccess && old != nil {
			old, note = nil, fmt.Sprintf("%s is %q, so the devices the driver publishes may not be those of %s; ", LabelMIGConfigState, st, prev)
		}
		devs, incomplete, err := nodeDriverDevices(ctx, g.C, n.Name, exp.Driver)
		if err != nil {
			return drainScope{}, err
		}
		if incomplete != "" && old != nil {
			old, note = nil, fmt.Sprintf("the driver's ResourceSlices are incomplete (%s); ", incomplete)
		}
		d = planDRADrainScope(old, new, devs, want, exp.Driver)
	} else {
		before := map[string]int64{}
		for r, q := range n.Status.Allocatable {
			if strings.HasPrefix(string(r), "nvidia.com/") {
				before[string(r)] = q.Value()
			}
		}
		d = planDrainScope(old, new, before, want)
	}
	d.Why = note + d.Why
	return d, nil
}

// migConfigs reads the old and new named configs from the mig-parted ConfigMap; nil for one that
// is not known, with note saying why when the ConfigMap itself is missing or unreadable.
func (g *MIGGate) migConfigs(ctx context.Context, n *corev1.Node, prev, target string) (old, new *migparted.NamedConfig, note string, err error) {
	if g.MigConfigMap.Name == "" {
		return nil, nil, "", nil
	}
	cm := &corev1.ConfigMap{}
	if err := g.C.Get(ctx, g.MigConfigMap, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("ConfigMap %s not found; ", g.MigConfigMap), nil
		}
		return nil, nil, "", fmt.Errorf("gate node %s: ConfigMap %s: %w", n.Name, g.MigConfigMap, err)
	}
	cfg, err := migparted.Decode([]byte(cm.Data[MigConfigKey]))
	if err != nil {
		return nil, nil, fmt.Sprintf("ConfigMap %s data.%s does not decode (%v); ", g.MigConfigMap, MigConfigKey, err), nil
	}
	if c, ok := cfg.Lookup(prev); ok && prev != "" {
		old = c
	}
	if c, ok := cfg.Lookup(target); ok {
		new = c
	}
	return old, new, "", nil
}

// onlyKept: every nvidia.com/ resource p asks for is in keep.
func onlyKept(p corev1.Pod, keep []string) bool {
	if len(keep) == 0 {
		return false
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
				for r := range l {
					if strings.HasPrefix(string(r), "nvidia.com/") && !slices.Contains(keep, string(r)) {
						return false
					}
				}
			}
		}
	}
	return true
}
