package render

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

// DevicePluginConfigMap is the name of the ConfigMap holding every node's device-plugin config;
// point the device plugin (helm value config.name) at it.
const DevicePluginConfigMap = "gpupool-device-plugin-configs"

// Node pools, the values of the gpupool.dev/pool label.
const (
	PoolExclusive = "gpu-exclusive"
	PoolMIG       = "gpu-mig"
	PoolMIGShared = "gpu-mig-shared"
	PoolTimeSlice = "gpu-timeslice"
	PoolMPS       = "gpu-mps"
)

// DevicePluginConfig is one k8s-device-plugin config file (version v1), as the plugin's README
// documents it.
type DevicePluginConfig struct {
	Version string             `json:"version"`
	Flags   DevicePluginFlags  `json:"flags"`
	Sharing *DevicePluginShare `json:"sharing,omitempty"`
}

// DevicePluginFlags are the plugin flags the artifacts set.
type DevicePluginFlags struct {
	MigStrategy string `json:"migStrategy"`
}

// DevicePluginShare is the sharing section: time-slicing or MPS, never both.
type DevicePluginShare struct {
	TimeSlicing *ReplicatedResources `json:"timeSlicing,omitempty"`
	MPS         *ReplicatedResources `json:"mps,omitempty"`
}

// ReplicatedResources lists the resources the plugin hands out as several references.
type ReplicatedResources struct {
	RenameByDefault            bool                 `json:"renameByDefault"`
	FailRequestsGreaterThanOne bool                 `json:"failRequestsGreaterThanOne,omitempty"`
	Resources                  []ReplicatedResource `json:"resources"`
}

// ReplicatedResource is one resource name and its references per device.
type ReplicatedResource struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

// The device plugin's migStrategy values the configs use.
const (
	// MigStrategyMixed advertises MIG instances as nvidia.com/mig-<profile>; the plugin refuses
	// MPS sharing with it.
	MigStrategyMixed = "mixed"
	// MigStrategyNone advertises whole GPUs only; the plugin's MPS sharing needs it.
	MigStrategyNone = "none"
)

// migStrategyOf is the node's migStrategy: mixed when the plan gives one of its GPUs MIG mode
// (any role: a canary's instances are advertised too), none otherwise, so whole-GPU MPS can run
// there.
func migStrategyOf(n *node) string {
	for _, g := range n.gpus {
		if g.plan.Mode == v1.ModeMIG {
			return MigStrategyMixed
		}
	}
	return MigStrategyNone
}

// strategy is how the device plugin must hand out one device.
type strategy string

const (
	stratNone strategy = "none"         // one pod owns the device
	stratTS   strategy = "time-slicing" // N references by time-slicing replication
	stratMPS  strategy = "mps"          // N references through the plugin's MPS daemon
)

type want struct {
	strat strategy
	n     int
}

// wantOf says how the device must be handed out; ok is false for a device without replicas,
// which constrains nothing. A GPU running a shared LoRA engine is wanted unshared, like an
// exclusive replica's.
func wantOf(d *device) (want, bool) {
	if d.loraEngine != "" {
		return want{stratNone, 1}, true
	}
	if len(d.replicas) == 0 {
		return want{}, false
	}
	switch d.kind {
	case v1.SliceTimeSlice, v1.SliceMIGTimeSlice:
		n := 0
		for _, r := range d.replicas {
			n += max(1, r.Limits.TimeSliceReplicas)
		}
		return want{stratTS, n}, true
	case v1.SliceMIGMPS: // references by replication: the plugin runs no MPS on MIG devices (checkMIGMPS)
		return want{stratTS, len(d.replicas)}, true
	case v1.SliceMPS:
		return want{stratMPS, len(d.replicas)}, true
	}
	return want{stratNone, 1}, true
}

// devicePluginConfig builds the node's config and records what it cannot express.
func (m *model) devicePluginConfig(n *node) DevicePluginConfig {
	byRes := map[string][]*device{}
	var names []string
	for _, g := range n.gpus {
		for _, d := range g.devices {
			if _, ok := byRes[d.baseResource()]; !ok {
				names = append(names, d.baseResource())
			}
			byRes[d.baseResource()] = append(byRes[d.baseResource()], d)
		}
	}
	sort.Strings(names)
	shared := map[strategy][]ReplicatedResource{}
	for _, res := range names {
		w, ok := m.resourceWant(n.name, res, byRes[res])
		if !ok || w.strat == stratNone {
			continue
		}
		shared[w.strat] = append(shared[w.strat], ReplicatedResource{Name: res, Replicas: w.n})
		m.checkPairing(n.name, res, byRes[res])
		m.noteUnused(n.name, res, w, byRes[res])
	}
	cfg := DevicePluginConfig{Version: "v1", Flags: DevicePluginFlags{MigStrategy: migStrategyOf(n)}}
	if cfg.Flags.MigStrategy == MigStrategyMixed && len(shared[stratMPS]) > 0 {
		m.problem(n.name, "nvidia.com/gpu", "the plan MPS-shares whole GPUs on a node with MIG GPUs, but the device "+
			"plugin runs MPS only with migStrategy none (it refuses mixed) and MIG devices are advertised only "+
			"with mixed; the node's config shares no whole GPU, so pods asking for nvidia.com/gpu.shared there stay Pending")
		shared[stratMPS] = nil
	}
	switch {
	case len(shared[stratTS]) > 0 && len(shared[stratMPS]) > 0:
		m.problem(n.name, "", "the plan time-slices %s and MPS-shares %s, but the device plugin's time-slicing and "+
			"MPS are mutually exclusive on a node; the node's config shares nothing, so pods asking for "+
			"shared resources there stay Pending", resNames(shared[stratTS]), resNames(shared[stratMPS]))
	case len(shared[stratTS]) > 0:
		cfg.Sharing = &DevicePluginShare{TimeSlicing: &ReplicatedResources{RenameByDefault: true,
			FailRequestsGreaterThanOne: true, Resources: shared[stratTS]}}
	case len(shared[stratMPS]) > 0:
		cfg.Sharing = &DevicePluginShare{MPS: &ReplicatedResources{RenameByDefault: true, Resources: shared[stratMPS]}}
	}
	return cfg
}

// resourceWant merges the wants of every device of one resource on a node: the plugin applies
// one setting to all of them. ok is false when they disagree (a problem) or none has replicas.
func (m *model) resourceWant(nodeName, res string, devs []*device) (want, bool) {
	var got []want
	var where [][]string
	for _, d := range devs {
		w, ok := wantOf(d)
		if !ok {
			continue
		}
		i := slices.Index(got, w)
		if i < 0 {
			got = append(got, w)
			where = append(where, nil)
			i = len(got) - 1
		}
		where[i] = append(where[i], d.where())
	}
	if len(got) == 0 {
		return want{}, false
	}
	if w, ok := mergeCounts(got); ok {
		if len(got) > 1 {
			m.notes = append(m.notes, fmt.Sprintf("node %s: %s: devices hold different numbers of replicas; each is advertised as %d references by %s, and the references a device's replicas do not take stay free.",
				nodeName, res, w.n, w.strat))
		}
		return w, true
	}
	if len(got) > 1 {
		parts := make([]string, len(got))
		for i, w := range got {
			parts[i] = fmt.Sprintf("%s (%s)", describeWant(w), strings.Join(where[i], ", "))
		}
		m.problem(nodeName, res, "the plan wants %s, but the device plugin applies one sharing setting to every "+
			"device of a resource on a node; the resource is not shared, so pods asking for %s.shared there stay Pending",
			strings.Join(parts, " and "), res)
		return want{}, false
	}
	return got[0], true
}

// mergeCounts is the one setting that serves every want when they share a sharing strategy: the
// largest reference count (a device whose replicas take fewer leaves the rest free). ok is false
// when the strategies differ, which no single setting serves.
func mergeCounts(ws []want) (want, bool) {
	w := ws[0]
	for _, x := range ws[1:] {
		if x.strat != w.strat || w.strat == stratNone {
			return want{}, false
		}
		w.n = max(w.n, x.n)
	}
	return w, true
}

func describeWant(w want) string {
	if w.strat == stratNone {
		return "one pod per device"
	}
	return fmt.Sprintf("%d references per device by %s", w.n, w.strat)
}

// checkPairing: Kubernetes hands out references of any device of a resource, so when several
// shared devices of one resource on a node hold different tenants, the pairing is not the plan's.
// That is a problem when a tenant among them shares only within its trust group.
func (m *model) checkPairing(nodeName, res string, devs []*device) {
	var sets []string
	paths := map[string]bool{}
	strict := false
	for _, d := range devs {
		if len(d.replicas) == 0 {
			continue
		}
		var ts []string
		for _, r := range d.replicas {
			ts = append(ts, r.Tenant)
			t := m.tenants[r.Tenant]
			paths[t.Path] = true
			strict = strict || t.Isolation != v1.IsolationShared
		}
		sort.Strings(ts)
		ts = slices.Compact(ts)
		if s := strings.Join(ts, ","); !slices.Contains(sets, s) {
			sets = append(sets, s)
		}
	}
	if len(sets) < 2 {
		return
	}
	msg := fmt.Sprintf("the plan shares %d devices among different tenants (%s); Kubernetes hands out "+
		"references of any of them, so which tenants end up together is the device plugin's choice",
		len(devs), strings.Join(sets, " | "))
	if strict && len(paths) > 1 {
		m.problem(nodeName, res, "%s, which may put tenants of different trust groups together", msg)
		return
	}
	m.notes = append(m.notes, fmt.Sprintf("node %s: %s: %s.", nodeName, res, msg))
}

// noteUnused notes devices without replicas that the shared setting of their resource also
// covers (idle, burst and empty devices are advertised as references too).
func (m *model) noteUnused(nodeName, res string, w want, devs []*device) {
	var idle []string
	for _, d := range devs {
		if len(d.replicas) == 0 {
			idle = append(idle, d.where())
		}
	}
	if len(idle) > 0 {
		m.notes = append(m.notes, fmt.Sprintf("node %s: %s is shared with %s, so devices without replicas "+
			"(%s) are advertised as %s references too.", nodeName, res, describeWant(w), strings.Join(idle, ", "), res+".shared"))
	}
}

func resNames(rs []ReplicatedResource) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Name
	}
	return strings.Join(s, ", ")
}

// nodePool names the node's pool by the most shared kind among its devices with replicas.
func nodePool(n *node) string {
	rank := map[v1.SliceKind]int{v1.SliceExclusive: 0, v1.SliceMIG: 1, v1.SliceMIGMPS: 2, v1.SliceMIGTimeSlice: 2,
		v1.SliceTimeSlice: 3, v1.SliceMPS: 4}
	best := v1.SliceExclusive
	for _, g := range n.gpus {
		for _, d := range g.devices {
			if len(d.replicas) > 0 && rank[d.kind] > rank[best] {
				best = d.kind
			}
		}
	}
	return slicePool(best)
}

// slicePool is the node pool a slice kind belongs to.
func slicePool(k v1.SliceKind) string {
	switch k {
	case v1.SliceMIG:
		return PoolMIG
	case v1.SliceMIGMPS, v1.SliceMIGTimeSlice:
		return PoolMIGShared
	case v1.SliceTimeSlice:
		return PoolTimeSlice
	case v1.SliceMPS:
		return PoolMPS
	}
	return PoolExclusive
}

func devicePluginArtifacts(m *model) ([]Artifact, error) {
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: DevicePluginConfigMap, Labels: managedLabels()}, Data: map[string]string{}}
	var out []Artifact
	for _, n := range m.nodes {
		before := len(m.problems)
		cfg := m.devicePluginConfig(n)
		m.checkMPSShares(n)
		m.checkMIGMPS(n)
		m.checkMixedBoards(n)
		if m.dra() {
			m.devicePluginOnly(before)
		}
		data, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("render device-plugin config: node %s: %w", n.name, err)
		}
		n.dpConfig = n.name
		n.pool = nodePool(n)
		cm.Data[n.name] = string(data)
		head := "# k8s-device-plugin config for node " + n.name + " (key " + n.name + " of ConfigMap " +
			DevicePluginConfigMap + ").\n"
		if hasKind(n, v1.SliceMIGMPS) {
			head += "# MIG instances the plan shares by MPS are handed out as time-slicing references here: the\n" +
				"# device plugin runs no MPS on MIG devices, so their pods share them by time-slicing (see the\n" +
				"# problems in README.md; the DRA path runs MPS on MIG instances).\n"
		}
		out = append(out, Artifact{Path: "device-plugin/" + n.name + ".yaml", Data: append([]byte(head), data...)})
	}
	data, err := yaml.Marshal(cm)
	if err != nil {
		return nil, fmt.Errorf("render device-plugin configmap: %w", err)
	}
	out = append(out, Artifact{Path: "device-plugin/configmap.yaml", Data: data})
	labels, err := nodeLabelsArtifact(m)
	if err != nil {
		return nil, err
	}
	return append(out, labels), nil
}

// checkMixedBoards records a problem for every resource of node n that the device plugin
// advertises from GPUs of more than one board while the plan puts replicas on it. The plugin
// names a device by its resource only (nvidia.com/gpu for every whole GPU, nvidia.com/mig-<profile>
// for every instance of a profile, whatever the board; GPU Feature Discovery's labels and the
// per-node config cannot split a resource by board) and hands a pod any free device of its
// resource on the node, so a replica the plan sized for one board (its memory, its vLLM limits,
// its predicted latency) may be started on the other. The DRA path pins the board instead
// (draBoardSelector).
func (m *model) checkMixedBoards(n *node) {
	byRes := map[string][]*device{}
	var names []string
	for _, d := range n.devices() {
		if _, ok := byRes[d.baseResource()]; !ok {
			names = append(names, d.baseResource())
		}
		byRes[d.baseResource()] = append(byRes[d.baseResource()], d)
	}
	slices.Sort(names)
	for _, res := range names {
		var boards, users []string
		on := map[string][]string{}
		for _, d := range byRes[res] {
			b := d.board.Name
			if _, ok := on[b]; !ok {
				boards = append(boards, b)
			}
			on[b] = append(on[b], fmt.Sprint(d.gpu))
			for _, r := range d.replicas {
				users = append(users, fmt.Sprintf("%s#%d (%s)", r.Tenant, r.Index, d.where()+" "+b))
			}
			if d.loraEngine != "" {
				users = append(users, fmt.Sprintf("LoRA engine %s (%s)", d.loraEngine, d.where()+" "+b))
			}
		}
		if len(boards) < 2 || len(users) == 0 {
			continue
		}
		parts := make([]string, len(boards))
		for i, b := range boards {
			parts[i] = fmt.Sprintf("%s (GPU %s)", b, strings.Join(slices.Compact(on[b]), ", "))
		}
		m.problem(n.name, res, "the device plugin advertises the devices of boards %s as this one resource and "+
			"hands a pod any free one of them, but the plan sized %s for the board it placed each on (memory, "+
			"vLLM limits, predicted latency); a pod may be started on the other board, where its model may not "+
			"fit or its SLOs may not hold. Give each board nodes of its own, or take devices by DRA claims "+
			"(policy.kubernetesDeviceAPI: dra), which select the board by its productName",
			strings.Join(parts, " and "), strings.Join(users, ", "))
	}
}

// devicePluginOnly turns the problems from index first on into notes, on the DRA path: the
// pool's pods take their devices by DRA claims, each with its own sharing setting
// and pairing (dra.go), not by the device plugin's resources, so what the device plugin's
// per-node config could not express (one sharing setting per resource and node, one sharing
// strategy per node, the pairing of a resource's references) binds no pod of the pool. The
// config is still written, for a device plugin that runs beside the driver.
func (m *model) devicePluginOnly(first int) {
	for _, p := range m.problems[first:] {
		m.notes = append(m.notes, "device-plugin config only (this pool's pods take their devices by DRA claims): "+p.String()+".")
	}
	m.problems = m.problems[:first]
}

func hasKind(n *node, k v1.SliceKind) bool {
	for _, g := range n.gpus {
		for _, d := range g.devices {
			if d.kind == k && len(d.replicas) > 0 {
				return true
			}
		}
	}
	return false
}

func managedLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "gpupool"}
}
