package render

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// placedReplica is one tenant replica and the device it runs on (the first of a tensor-parallel
// group).
type placedReplica struct {
	r v1.PlanReplica
	d *device
}

// count is how many devices the replica's pod requests: its tensor-parallel size, else 1.
func (pr placedReplica) count() int { return max(pr.r.TensorParallel.Size, 1) }

// gpus names the replica's GPUs: "node/3", or "node/0,1" for a tensor-parallel group.
func (pr placedReplica) gpus() string {
	if g := pr.r.TensorParallel.GPUs; len(g) > 0 {
		parts := make([]string, len(g))
		for i, x := range g {
			parts[i] = strconv.Itoa(x)
		}
		return pr.d.node + "/" + strings.Join(parts, ",")
	}
	return fmt.Sprintf("%s/%d", pr.d.node, pr.d.gpu)
}

// replicasByTenant lists every replica of the plan per tenant, in index order.
func (m *model) replicasByTenant() (map[string][]placedReplica, []string) {
	by := map[string][]placedReplica{}
	for _, d := range m.devices() {
		for _, r := range d.replicas {
			if tp := r.TensorParallel.GPUs; len(tp) > 0 && tp[0] != d.gpu {
				continue // a tensor-parallel replica runs once, from its group's first GPU
			}
			by[r.Tenant] = append(by[r.Tenant], placedReplica{r, d})
		}
	}
	names := make([]string, 0, len(by))
	for t, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].r.Index < rs[j].r.Index })
		names = append(names, t)
	}
	sort.Strings(names)
	return by, names
}

// modelName is what vLLM's --model gets: the catalog model's Hugging Face id, else the
// checkpoint directory, else the name as written.
func modelName(t v1.Tenant) string {
	if t.Model.Dir != "" {
		return t.Model.Dir
	}
	if a, err := llm.Lookup(t.Model.Name); err == nil && a.HFID != "" {
		return a.HFID
	}
	return t.Model.Name
}

// vllmArgs returns the arguments one replica runs with: the plan's (a replica without any takes
// those of the tenant's lowest-indexed replica that has them), with --model added when missing
// and --gpu-memory-utilization added when missing and the replica has a memory limit (the limit
// over the device's memory, rounded down to hundredths, so vLLM stays inside the plan's budget),
// --tensor-parallel-size for a tensor-parallel replica, when missing, and an adapter tenant's LoRA
// flags (adapterFlags) when --enable-lora is missing.
func vllmArgs(t v1.Tenant, rs []placedReplica, k int) []string {
	args := rs[k].r.VLLMArgs
	for i := 0; len(args) == 0 && i < len(rs); i++ {
		args = rs[i].r.VLLMArgs
	}
	out := append([]string(nil), args...)
	if !hasFlag(out, "--model") {
		out = append([]string{"--model", modelName(t)}, out...)
	}
	if a := t.Model.Adapter; a != nil && !hasFlag(out, "--enable-lora") {
		out = append(out, adapterFlags(a)...)
	}
	if n := rs[k].r.TensorParallel.Size; n > 1 && !hasFlag(out, "--tensor-parallel-size") {
		out = append(out, "--tensor-parallel-size", strconv.Itoa(n))
	}
	d, l := rs[k].d, rs[k].r.Limits
	if !hasFlag(out, "--gpu-memory-utilization") && !hasFlag(out, "--kv-cache-memory-bytes") && l.Memory > 0 && d.capacity > 0 {
		u := math.Floor(float64(l.Memory)*100/float64(d.capacity)) / 100
		out = append(out, "--gpu-memory-utilization", fmt.Sprintf("%.2f", min(u, 1)))
	}
	return out
}

// flagValue is the value of flag in args ("--flag value" or "--flag=value"), or "".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// VLLMTenant is the vLLM launch file of one tenant (vllm/<tenant>.yaml).
type VLLMTenant struct {
	Tenant   string        `json:"tenant"`
	Model    string        `json:"model"`
	Replicas []VLLMReplica `json:"replicas"`
}

// VLLMReplica is one replica's slice and arguments.
type VLLMReplica struct {
	Index    int          `json:"index"`
	GPU      string       `json:"gpu"`
	Instance string       `json:"instance,omitempty"`
	Slice    v1.SliceKind `json:"slice"`
	Resource string       `json:"resource"`
	// GPUCount is how many devices of Resource the replica takes: its tensor-parallel size; 1
	// when omitted.
	GPUCount int               `json:"gpuCount,omitempty"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env,omitempty"`
}

func vllmArtifacts(m *model) ([]Artifact, error) {
	by, names := m.replicasByTenant()
	m.noteNonLLM(names)
	m.noteOwnAdapters(names)
	var out []Artifact
	for _, name := range names {
		t := m.tenants[name]
		if !servesLLM(t) {
			continue
		}
		f := VLLMTenant{Tenant: name}
		rs := by[name]
		for k, pr := range rs {
			vr := VLLMReplica{Index: pr.r.Index, GPU: pr.gpus(), Slice: pr.d.kind,
				Resource: pr.d.resource(), Args: vllmArgs(t, rs, k), Env: replicaEnv(pr)}
			if n := pr.count(); n > 1 {
				vr.GPUCount = n
			}
			if f.Model == "" {
				f.Model = flagValue(vr.Args, "--model")
			}
			if pr.d.instance != nil {
				vr.Instance = pr.d.instance.Ref().String()
			}
			f.Replicas = append(f.Replicas, vr)
		}
		data, err := yaml.Marshal(f)
		if err != nil {
			return nil, fmt.Errorf("render vllm arguments: tenant %s: %w", name, err)
		}
		head := "# vLLM launch arguments for tenant " + name + ", one entry per replica (vllm serve / the\n" +
			"# OpenAI server entrypoint), with the MPS environment where the slice is MPS-shared.\n"
		out = append(out, Artifact{Path: "vllm/" + name + ".yaml", Data: append([]byte(head), data...)})
	}
	return out, nil
}

// replicaEnv is the MPS client environment of a replica on an MPS slice, else nil.
func replicaEnv(pr placedReplica) map[string]string {
	if pr.d.kind == v1.SliceMPS || pr.d.kind == v1.SliceMIGMPS {
		return mpsEnv(pr.r.Limits)
	}
	return nil
}
