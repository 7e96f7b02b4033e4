package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/migparted"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Paths of the node-level artifacts.
const (
	MigPartedPath = "mig-parted/config.yaml"
	// MigPartedConfigMap is the ConfigMap holding the mig-parted config under key config.yaml,
	// for the GPU Operator's MIG manager (migManager.config.name).
	MigPartedConfigMap = "gpupool-mig-parted-config"
	NodeLabelsPath     = "node-labels.yaml"
	// AllDisabled is NVIDIA's name for the config that turns MIG off on every GPU; nodes without
	// MIG GPUs get it, and it is always present as the way back.
	AllDisabled = "all-disabled"
	// Label keys written on nodes.
	LabelMigConfig    = "nvidia.com/mig.config"
	LabelDeviceConfig = "nvidia.com/device-plugin.config"
	LabelPool         = "gpupool.dev/pool"
)

// MigPartedConfig builds the mig-parted config of the plan: all-disabled, then one named config
// per distinct node layout, in node order. It also returns each node's config name.
func MigPartedConfig(plan *v1.Plan, pool *v1.Pool) (*migparted.Config, map[string]string, error) {
	m, err := build(plan, pool)
	if err != nil {
		return nil, nil, err
	}
	cfg, names, err := m.migParted()
	return cfg, names, err
}

func (m *model) migParted() (*migparted.Config, map[string]string, error) {
	cfg := &migparted.Config{Configs: []migparted.NamedConfig{{Name: AllDisabled,
		Entries: []migparted.Entry{{Devices: migparted.AllDevices(), MigEnabled: false}}}}}
	names := map[string]string{}
	for _, n := range m.nodes {
		entries := nodeEntries(n)
		name, err := configName(entries)
		if err != nil {
			return nil, nil, fmt.Errorf("render mig-parted config: node %s: %w", n.name, err)
		}
		names[n.name] = name
		if _, seen := cfg.Lookup(name); !seen {
			cfg.Configs = append(cfg.Configs, migparted.NamedConfig{Name: name, Entries: entries})
		}
	}
	return cfg, names, nil
}

// nodeEntries groups a node's GPUs by (board, MIG mode, counts), in index order; one group that
// covers every GPU of the node is written as `devices: all`. Canary GPUs are in no entry, so
// mig-parted leaves them as they are (it touches only the GPUs an entry selects), unless every
// GPU of the node is a canary: a named config needs at least one entry, so they then get the
// plan's mode like the others.
func nodeEntries(n *node) []migparted.Entry {
	var entries []migparted.Entry
	var keys []string
	skipCanary := slices.ContainsFunc(n.gpus, func(g *gpuModel) bool { return g.plan.Role != v1.RoleCanary })
	for _, g := range n.gpus {
		if skipCanary && g.plan.Role == v1.RoleCanary {
			continue
		}
		e := gpuEntry(g)
		k := fmt.Sprint(g.board.Name, e.MigEnabled, gpu.MultisetKey(e.MigDevices))
		i := slices.Index(keys, k)
		if i < 0 {
			keys = append(keys, k)
			entries = append(entries, e)
			i = len(entries) - 1
		}
		entries[i].Devices.Indices = append(entries[i].Devices.Indices, g.plan.Index)
	}
	if len(entries) == 1 && len(entries[0].Devices.Indices) == len(n.gpus) {
		entries[0].Devices = migparted.AllDevices()
	}
	return entries
}

func gpuEntry(g *gpuModel) migparted.Entry {
	if g.plan.Mode != v1.ModeMIG {
		return migparted.Entry{MigEnabled: false}
	}
	counts := map[string]int{}
	for _, in := range g.plan.Instances {
		counts[in.Profile]++
	}
	e := migparted.Entry{MigEnabled: true, MigDevices: counts}
	if len(g.board.PCIDeviceIDs) > 0 {
		e.DeviceFilter = slices.Clone(g.board.PCIDeviceIDs)
	}
	return e
}

// configName is "all-disabled" for a node without MIG, else "gpupool-" and the first 10 hex
// digits of the SHA-256 of the encoded entries: the name changes exactly when the layout does,
// which is what makes the MIG manager re-apply it.
func configName(entries []migparted.Entry) (string, error) {
	if len(entries) == 1 && !entries[0].MigEnabled && entries[0].Devices.All && entries[0].DeviceFilter == nil {
		return AllDisabled, nil
	}
	data, err := migparted.Encode(&migparted.Config{Configs: []migparted.NamedConfig{{Name: "x", Entries: entries}}})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "gpupool-" + hex.EncodeToString(sum[:])[:10], nil
}

func migPartedArtifacts(m *model) ([]Artifact, error) {
	cfg, names, err := m.migParted()
	if err != nil {
		return nil, err
	}
	for _, n := range m.nodes {
		n.migConfig = names[n.name]
	}
	if err := m.noteStarts(); err != nil {
		return nil, err
	}
	data, err := migparted.Encode(cfg)
	if err != nil {
		return nil, fmt.Errorf("render mig-parted config: %w", err)
	}
	head := "# mig-parted config for plan " + m.plan.Metadata.Name + ": select a config per node with the\n" +
		"# nvidia.com/mig.config label (see node-labels.yaml). mig-parted creates instances by count;\n" +
		"# the driver chooses their start slices.\n"
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: MigPartedConfigMap, Labels: managedLabels()},
		Data:       map[string]string{"config.yaml": string(data)}}
	cmData, err := yaml.Marshal(cm)
	if err != nil {
		return nil, fmt.Errorf("render mig-parted configmap: %w", err)
	}
	return []Artifact{{Path: MigPartedPath, Data: append([]byte(head), data...)},
		{Path: "mig-parted/configmap.yaml", Data: cmData}}, nil
}

// noteStarts records, for every MIG GPU, when the plan's start slices differ from those the
// placement search chooses for the same counts.
func (m *model) noteStarts() error {
	for _, n := range m.nodes {
		for _, g := range n.gpus {
			if g.plan.Mode != v1.ModeMIG || len(g.plan.Instances) == 0 {
				continue
			}
			want := planLayout(g.plan)
			got, err := g.board.Place(want.Counts())
			if err != nil {
				return fmt.Errorf("render mig-parted config: gpu %s/%d: place %s: %w", n.name, g.plan.Index, want, err)
			}
			if want.Sorted().String() != got.Sorted().String() {
				m.notes = append(m.notes, fmt.Sprintf("GPU %s/%d: the plan places %s; for the same counts the "+
					"placement search would choose %s. mig-parted creates instances by count, so the starts on the "+
					"GPU are the driver's; only the profiles and counts are guaranteed.", n.name, g.plan.Index,
					want.Sorted(), got.Sorted()))
			}
		}
	}
	return nil
}

func planLayout(g v1.PlanGPU) gpu.Layout {
	l := make(gpu.Layout, len(g.Instances))
	for i, in := range g.Instances {
		l[i] = gpu.Instance{Profile: in.Profile, Start: in.Start}
	}
	return l
}

// nodeLabelsArtifact writes, per node, the labels that select its configs and pool.
func nodeLabelsArtifact(m *model) (Artifact, error) {
	labels := map[string]map[string]string{}
	for _, n := range m.nodes {
		l := map[string]string{LabelMigConfig: n.migConfig, LabelPool: n.pool}
		if n.dpConfig != "" {
			l[LabelDeviceConfig] = n.dpConfig
		}
		labels[n.name] = l
	}
	data, err := yaml.Marshal(labels)
	if err != nil {
		return Artifact{}, fmt.Errorf("render node labels: %w", err)
	}
	head := "# Labels per node (node name -> labels). Apply with\n" +
		"#   kubectl label node NODE KEY=VALUE ... --overwrite\n" +
		"# The GPU Operator must run with mig.strategy=mixed so MIG instances are advertised by profile.\n"
	return Artifact{Path: NodeLabelsPath, Data: append([]byte(head), data...)}, nil
}
