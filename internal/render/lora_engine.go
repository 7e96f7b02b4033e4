package render

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/plan"
)

// LoRAEnginesInput is a planned shared group and what its engines' Deployments need: the
// group's base model (any of its tenants: they share model, quantization and trust group), each
// tenant's adapter name (what requests ask for, and what vLLM serves it as) and path (a Hugging
// Face repository id, or a folder that must exist at that path inside the pod).
type LoRAEnginesInput struct {
	Namespace   string
	Base        v1.Tenant
	Plan        plan.LoRAPlan
	AdapterName map[string]string // tenant → adapter name
	AdapterPath map[string]string // tenant → repo or folder
	// AdapterDir maps each tenant whose adapter is given by dir to that folder, and
	// AdapterVolume each tenant whose adapter is on a volume to it: the volume is mounted
	// (mountAdapters); a dir without one is passed to vLLM as written and is a Problem.
	AdapterDir    map[string]string
	AdapterVolume map[string]v1.AdapterVolume
	// AdapterField maps a tenant to its adapter's field path in the Pool
	// (tenants[i].model.adapter), for Problems; without one the tenant is named instead.
	AdapterField map[string]string
}

// enginePin is where a planned engine runs and what its pod mounts: the node (required node
// affinity on its hostname, like the plan's Deployments), the node's gpupool.dev/pool value, the
// plan and the GPU it is planned on, and the adapters' volumes.
type enginePin struct {
	node, pool, plan, where string
	volumes                 []corev1.Volume
	mounts                  []corev1.VolumeMount
}

// AdapterMountRoot is where an engine's pod mounts the adapters given by a volume: each at
// AdapterMountRoot/<adapter name>, read-only.
const AdapterMountRoot = "/adapters"

// AdapterMountPath is where an engine's pod finds the adapter of that name when it is given by
// a volume.
func AdapterMountPath(name string) string { return AdapterMountRoot + "/" + name }

// mountAdapters mounts every adapter given by a volume into the engine's pod: one read-only
// PersistentVolumeClaim volume per claim (a claim's volume is named adapters-<i> in claim-name
// order) and, per adapter, a read-only mount of its subPath at AdapterMountPath(name), which its
// --lora-modules entry points to. Nothing is mounted from the node: a hostPath volume would fail
// the Pod Security baseline. unmounted lists, in tenant order, the tenants whose adapter is given
// by a dir without a volume: vLLM gets that path as written, which the pod does not have.
func mountAdapters(tenants []string, names, dirs map[string]string, vols map[string]v1.AdapterVolume, la llm.LoRAArgs) (out llm.LoRAArgs, volumes []corev1.Volume, mounts []corev1.VolumeMount, unmounted []string) {
	la.Modules = maps(la.Modules)
	sorted := append([]string(nil), tenants...)
	sort.Strings(sorted)
	claims := map[string]string{} // claim → volume name
	var claimNames []string
	for _, t := range sorted {
		if v, ok := vols[t]; ok {
			if _, seen := claims[v.ClaimName]; !seen {
				claims[v.ClaimName] = ""
				claimNames = append(claimNames, v.ClaimName)
			}
		}
	}
	sort.Strings(claimNames)
	for i, c := range claimNames {
		vol := fmt.Sprintf("adapters-%d", i)
		claims[c] = vol
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c, ReadOnly: true}}})
	}
	for _, t := range sorted {
		v, ok := vols[t]
		if !ok {
			if dirs[t] != "" {
				unmounted = append(unmounted, t)
			}
			continue
		}
		n := names[t]
		path := AdapterMountPath(n)
		mounts = append(mounts, corev1.VolumeMount{Name: claims[v.ClaimName], MountPath: path, SubPath: v.SubPath, ReadOnly: true})
		la.Modules[n] = path
	}
	return la, volumes, mounts, unmounted
}

// unmountedProblem is the Problem of an adapter given by a dir without a volume.
func unmountedProblem(node, engine, tenant, name, dir, field string) Problem {
	p := Problem{Node: node, Resource: engine, Field: field + ".dir"}
	if field == "" {
		p.Field = "tenant " + tenant + ": model.adapter.dir"
	}
	if strings.HasPrefix(dir, "/") {
		p.Message = fmt.Sprintf("adapter %s: %q is a folder on the node, which needs a hostPath volume, and the Pod Security "+
			"baseline forbids those: give a volume (model.adapter.volume, a PersistentVolumeClaim) or a repo; "+
			"vLLM gets the path as written and the pod does not have it", name, dir)
	} else {
		p.Message = fmt.Sprintf("adapter %s: %q is relative to the Pool file, which no pod has: give a volume "+
			"(model.adapter.volume, a PersistentVolumeClaim) or a repo; vLLM gets the path as written", name, dir)
	}
	return p
}

// LoRAModuleArgs are an engine's LoRA flags with every adapter under its adapter name (the name
// requests ask for and the gateway routes on), not its tenant's name.
func LoRAModuleArgs(e plan.LoRAEngine, name, path map[string]string) (llm.LoRAArgs, error) {
	a := e.LoRAArgs(nil)
	a.Modules = map[string]string{}
	for _, t := range e.Adapters {
		n, p := name[t], path[t]
		if n == "" || p == "" {
			return llm.LoRAArgs{}, fmt.Errorf("engine %s: tenant %s has no adapter name or path", e.Name, t)
		}
		if strings.ContainsAny(n, "= ") {
			return llm.LoRAArgs{}, fmt.Errorf("engine %s: tenant %s: adapter name %q cannot be written as --lora-modules name=path", e.Name, t, n)
		}
		if _, dup := a.Modules[n]; dup {
			return llm.LoRAArgs{}, fmt.Errorf("engine %s: adapter name %q is used twice", e.Name, n)
		}
		a.Modules[n] = p
	}
	return a, nil
}

// LoRAEngineDeployments renders one Deployment per engine of a planned group: one replica on one
// whole GPU (nvidia.com/gpu: 1), the pinned vLLM image with the same probes, requests, Hugging
// Face token and memory-backed /dev/shm as the plan's Deployments, and the arguments
// --model <base> followed by the engine's LoRA flags (LoRAModuleArgs). Its pods carry
// LoRAEngineLabel with the engine's name, which the engine's InferencePool (LoRAGateway)
// selects. One multi-document YAML per engine, in the plan's engine order. Adapters on a volume
// are mounted (mountAdapters); each adapter given by a dir alone is a Problem, returned in a
// *ProblemsError beside the complete artifacts.
func LoRAEngineDeployments(in LoRAEnginesInput) ([]Artifact, error) {
	if in.Namespace == "" || len(in.Plan.Engines) == 0 {
		return nil, errors.New("render lora engines: a namespace and at least one engine are required")
	}
	var out []Artifact
	var problems []Problem
	for _, e := range in.Plan.Engines {
		la, err := LoRAModuleArgs(e, in.AdapterName, in.AdapterPath)
		if err != nil {
			return nil, fmt.Errorf("render lora engines: %w", err)
		}
		la, vols, mounts, unmounted := mountAdapters(e.Adapters, in.AdapterName, in.AdapterDir, in.AdapterVolume, la)
		for _, t := range unmounted {
			problems = append(problems, unmountedProblem("", e.Name, t, in.AdapterName[t], in.AdapterDir[t], in.AdapterField[t]))
		}
		d := loraDeployment(in.Namespace, in.Base, e, la, enginePin{volumes: vols, mounts: mounts})
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("render lora engines: engine %s: %w", e.Name, err)
		}
		out = append(out, Artifact{Path: "k8s/" + e.Name + ".yaml", Data: b})
	}
	if len(problems) > 0 {
		return out, &ProblemsError{Problems: problems}
	}
	return out, nil
}

func loraDeployment(ns string, base v1.Tenant, e plan.LoRAEngine, la llm.LoRAArgs, pin enginePin) appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": e.Name, "app.kubernetes.io/managed-by": "gpupool",
		LoRAEngineLabel: e.Name, LabelSlice: sliceSlug(v1.SliceExclusive)}
	if base.Path != "" {
		labels[LabelTrustGroup] = strings.ReplaceAll(base.Path, "/", ".")
	}
	tenants := append([]string(nil), e.Adapters...)
	sort.Strings(tenants)
	args := append([]string{"--model", modelName(base)}, la.Flags()...)
	c := corev1.Container{Name: "vllm", Image: Image, Args: args,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: vllmPort, Protocol: corev1.ProtocolTCP}}}
	c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(1, resource.DecimalSI)}
	spec := corev1.PodSpec{
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Volumes:     pin.volumes,
	}
	c.VolumeMounts = append(c.VolumeMounts, pin.mounts...)
	if pin.node != "" {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{pin.node}}}}}}}}
	}
	podLabels := maps(labels)
	if pin.pool != "" {
		spec.NodeSelector = map[string]string{LabelPool: pin.pool}
		podLabels[LabelPool] = pin.pool
	}
	vllmContainerDefaults(&c, &spec)
	spec.Containers = []corev1.Container{c}
	one := int32(1)
	zero, maxUnavailable := intstr.FromInt32(0), intstr.FromInt32(1)
	ann := map[string]string{AnnotationPath: base.Path, AnnotationLoRATenants: strings.Join(tenants, ",")}
	if pin.plan != "" {
		ann[AnnotationPlan], ann[AnnotationSlots] = pin.plan, "0@"+pin.where
	}
	return appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: ns, Labels: labels, Annotations: ann},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LoRAEngineLabel: e.Name}},
			// No surge: the plan counts one GPU per engine, there is no spare one to surge onto.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &maxUnavailable}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: spec},
		},
	}
}

// LoRAReadme explains an output directory of `gpupool lora --out`: what each engine serves and
// how to apply it. plans are the groups in order; names maps a tenant to its adapter name.
func LoRAReadme(namespace, gateway string, plans []plan.LoRAPlan, names map[string]string) []byte {
	var b strings.Builder
	b.WriteString("# LoRA engines\n\n")
	fmt.Fprintf(&b, "Written by gpupool lora for namespace `%s` and Gateway `%s`. Each engine is one vLLM\n", namespace, gateway)
	b.WriteString("Deployment on one whole GPU serving its base model with `--enable-lora` and its adapters\n" +
		"(`--lora-modules name=path`); its InferencePool selects its pods by the label\n" +
		"`" + LoRAEngineLabel + "`, and the HTTPRoutes send each adapter's requests (by the OpenAI `model`\n" +
		"field, copied to `" + ModelNameHeader + "`) to the pools of the engines that serve it.\n\n")
	b.WriteString("Each pool's endpoint picker (`<engine>-epp`: Deployment, Service, ServiceAccount, the Roles it\n" +
		"needs to watch pods, InferencePools and InferenceObjectives, and its plugins ConfigMap) is in\n" +
		"`gateway/<first engine>-epp.yaml`, image `" + EPPImage + "`. Apply after the Gateway API\n" +
		"Inference Extension CRDs and the Gateway exist:\n\n```sh\nkubectl apply -f k8s/ -f gateway/\n```\n\n")
	b.WriteString("A Secret `" + HFTokenSecret + "` with key `" + HFTokenKey + "` in the namespace, when present, gives the pods a\n" +
		"Hugging Face token for gated models and adapters. An adapter given by `volume` is mounted\n" +
		"read-only from its PersistentVolumeClaim at `" + AdapterMountRoot + "/NAME` (the claim must let every\n" +
		"engine's node mount it: ReadOnlyMany or ReadWriteMany); one given by `repo` is downloaded by\n" +
		"vLLM. Nothing is mounted from the node, so the pods pass the Pod Security baseline.\n\n")
	b.WriteString("| group | engine | adapters | req/s | --max-loras | --max-lora-rank | --max-cpu-loras |\n|---|---|---|---|---|---|---|\n")
	for _, p := range plans {
		for _, e := range p.Engines {
			ads := make([]string, 0, len(e.Adapters))
			for _, t := range e.Adapters {
				ads = append(ads, names[t])
			}
			sort.Strings(ads)
			list := strings.Join(ads, ", ")
			if len(ads) > 8 {
				list = strings.Join(ads[:8], ", ") + fmt.Sprintf(" and %d more", len(ads)-8)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.3g | %d | %d | %d |\n", p.Group, e.Name, list, e.RPS, e.MaxLoRAs, e.MaxRank,
				max(e.MaxCPULoRAs, e.MaxLoRAs))
		}
	}
	b.WriteString("\n`lora.json` is the plan (reasons, shares, fair caps, simulation) as `gpupool lora -o json` prints it.\n")
	return []byte(b.String())
}

// WithAdapters returns in with its adapter maps filled from pool's adapter tenants: each
// tenant's adapter name; its path, the repo, AdapterMountPath(name) for an adapter on a volume,
// else the dir as written; its dir, its volume and its field path.
func (in LoRAEnginesInput) WithAdapters(pool *v1.Pool) LoRAEnginesInput {
	in.AdapterName, in.AdapterPath, in.AdapterDir = map[string]string{}, map[string]string{}, map[string]string{}
	in.AdapterVolume, in.AdapterField = map[string]v1.AdapterVolume{}, map[string]string{}
	for i, t := range pool.Tenants {
		a := t.Model.Adapter
		if a == nil {
			continue
		}
		in.AdapterName[t.Name], in.AdapterField[t.Name] = a.Name, fmt.Sprintf("tenants[%d].model.adapter", i)
		switch {
		case a.Repo != "":
			in.AdapterPath[t.Name] = a.Repo
		case a.Volume != nil:
			in.AdapterPath[t.Name] = AdapterMountPath(a.Name)
		default:
			in.AdapterPath[t.Name] = a.Dir
		}
		if a.Dir != "" {
			in.AdapterDir[t.Name] = a.Dir
		}
		if a.Volume != nil {
			in.AdapterVolume[t.Name] = *a.Volume
		}
	}
	return in
}

// loraEngineArtifacts renders the plan's shared LoRA engines (plan.loraEngines): a Deployment
// per engine, k8s/<engine>.yaml, as LoRAEngineDeployments renders it, pinned to the node of its
// planned GPU by required node affinity on the hostname (and the node's gpupool.dev/pool, like
// the plan's Deployments), with the adapters given by a volume mounted read-only. An adapter
// given by a dir without a volume is a Problem (mountAdapters).
func loraEngineArtifacts(m *model) ([]Artifact, error) {
	ad := LoRAEnginesInput{}.WithAdapters(m.pool)
	var out []Artifact
	for _, e := range m.plan.LoRAEngines {
		if _, clash := m.tenants[e.Name]; clash {
			return nil, fmt.Errorf("render lora engines: engine %s has a tenant's name: both would be k8s/%s.yaml", e.Name, e.Name)
		}
		pe := plan.LoRAPlanOf(&v1.Plan{LoRAEngines: []v1.PlanLoRAEngine{e}}, e.Group).Engines[0]
		la, err := LoRAModuleArgs(pe, ad.AdapterName, ad.AdapterPath)
		if err != nil {
			return nil, fmt.Errorf("render lora engines: %w", err)
		}
		la, vols, mounts, unmounted := mountAdapters(pe.Adapters, ad.AdapterName, ad.AdapterDir, ad.AdapterVolume, la)
		for _, t := range unmounted {
			m.problems = append(m.problems, unmountedProblem(e.GPU.Node, e.Name, t, ad.AdapterName[t], ad.AdapterDir[t], ad.AdapterField[t]))
		}
		if m.dra() {
			m.problem(e.GPU.Node, e.Name, "the engine's pod asks for nvidia.com/gpu through the device plugin: engines are not rendered for the DRA device API")
		}
		m.notes = append(m.notes, fmt.Sprintf("LoRA engine %s runs on %s with %d adapters (max_loras %d); requests reach it through the "+
			"gateway objects and its endpoint picker %s-epp (both written with plan --out --gateway)", e.Name, e.GPU, len(e.Adapters), e.MaxLoRAs, e.Name))
		base := m.tenants[e.Adapters[0].Tenant]
		pin := enginePin{node: e.GPU.Node, plan: m.plan.Metadata.Name, where: e.GPU.String(), volumes: vols, mounts: mounts}
		for _, n := range m.nodes {
			if n.name == e.GPU.Node {
				pin.pool = n.pool
			}
		}
		b, err := yaml.Marshal(loraDeployment("", base, pe, la, pin))
		if err != nil {
			return nil, fmt.Errorf("render lora engines: engine %s: %w", e.Name, err)
		}
		out = append(out, Artifact{Path: "k8s/" + e.Name + ".yaml", Data: b})
	}
	return out, nil
}
