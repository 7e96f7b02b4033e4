package render

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// An adapter tenant that runs replicas of its own (one outside every shared LoRA engine, such as
// a hard-isolated one) serves its adapter from them: its base model with the adapter loaded, as
// an engine serves its adapters, so that requests naming the adapter reach it.

// adapterPath is where vLLM finds the adapter, as an engine has it (WithAdapters): the repo,
// AdapterMountPath(name) for an adapter on a volume, else the dir as written.
func adapterPath(a *v1.Adapter) string {
	switch {
	case a.Repo != "":
		return a.Repo
	case a.Volume != nil:
		return AdapterMountPath(a.Name)
	default:
		return a.Dir
	}
}

// adapterFlags are the LoRA flags of an adapter tenant's own replicas: --enable-lora with one
// adapter slot, --max-lora-rank the smallest of vLLM's values that covers model.adapter.rank
// (left to vLLM's default when the rank is not in the pool: an adapter read from its dir), and
// --lora-modules under the adapter's name.
func adapterFlags(a *v1.Adapter) []string {
	f := []string{"--enable-lora", "--max-loras", "1"}
	if r := llm.RankFor(a.Rank); a.Rank > 0 && r > 0 {
		f = append(f, "--max-lora-rank", strconv.Itoa(r))
	}
	return append(f, "--max-cpu-loras", "1", "--lora-modules", a.Name+"="+adapterPath(a))
}

// adapterVolume mounts an adapter given by a volume into the pod of its tenant's own replicas,
// read-only at AdapterMountPath(name), as an engine's pod mounts it (mountAdapters).
func adapterVolume(t v1.Tenant, c *corev1.Container, spec *corev1.PodSpec) {
	a := t.Model.Adapter
	if a == nil || a.Volume == nil {
		return
	}
	_, vols, mounts, _ := mountAdapters([]string{t.Name}, map[string]string{t.Name: a.Name}, nil,
		map[string]v1.AdapterVolume{t.Name: *a.Volume}, llm.LoRAArgs{})
	spec.Volumes = append(spec.Volumes, vols...)
	c.VolumeMounts = append(c.VolumeMounts, mounts...)
}

// noteOwnAdapters records, per adapter tenant with replicas of its own, a Problem when its adapter
// is a dir without a volume (no pod has it) and a note when its rank is not in the pool.
func (m *model) noteOwnAdapters(names []string) {
	for _, name := range names {
		t := m.tenants[name]
		a := t.Model.Adapter
		if a == nil || !servesLLM(t) {
			continue
		}
		field := ""
		for i, pt := range m.pool.Tenants {
			if pt.Name == name {
				field = fmt.Sprintf("tenants[%d].model.adapter", i)
			}
		}
		if a.Dir != "" && a.Volume == nil && a.Repo == "" {
			m.problems = append(m.problems, unmountedProblem("", "tenant "+name, name, a.Name, a.Dir, field))
		}
		if a.Rank == 0 {
			m.notes = append(m.notes, fmt.Sprintf("tenant %s serves adapter %s from replicas of its own with vLLM's default --max-lora-rank: "+
				"set %s.rank when the adapter's rank is above it", name, a.Name, field))
		}
	}
}
