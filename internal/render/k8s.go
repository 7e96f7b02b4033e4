package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Labels and annotations on the Deployments and their pods.
const (
	LabelTenant     = "gpupool.dev/tenant"
	LabelDeployment = "gpupool.dev/deployment"
	LabelSlice      = "gpupool.dev/slice"
	LabelTrustGroup = "gpupool.dev/trust-group" // the tenant's path with '/' written as '.'
	AnnotationPath  = "gpupool.dev/path"
	AnnotationPlan  = "gpupool.dev/plan"
	AnnotationSlots = "gpupool.dev/replicas" // where the plan puts each replica
	// Image is the vLLM OpenAI-compatible server image, pinned: a moving tag would change what
	// runs without a new plan. Re-validate before changing it.
	Image = "vllm/vllm-openai:v0.12.0"
	// HostnameLabel is the well-known node label the Deployments' node affinity uses.
	HostnameLabel = "kubernetes.io/hostname"
)

// group is the replicas of one tenant that one Deployment runs: same slice kind, resource,
// arguments and MPS environment.
type group struct {
	tenant   string
	kind     v1.SliceKind
	resource string
	count    int // devices of resource per pod: the tensor-parallel size, else 1
	args     []string
	env      map[string]string
	replicas []placedReplica
	name     string
	// claim is, with the DRA device API, the named ResourceClaim of the shared device every
	// replica of the group is on (one Deployment per shared device); empty otherwise.
	claim string
	// board is, with the DRA device API on a pool with a node of GPUs of several boards, the
	// board of the group's devices: its claims select the board (draBoardSelector), so a group
	// holds one board's devices only.
	board string
}

func (g *group) key() string {
	return fmt.Sprint(g.kind, "|", g.resource, "|", g.count, "|", strings.Join(g.args, "\x00"), "|", envString(g.env), "|", g.claim, "|", g.board)
}

// dra tells whether the pool's pods get their devices through DRA claims.
func (m *model) dra() bool { return m.pool.Policy.DeviceAPI() == v1.DeviceAPIDRA }

func envString(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + env[k] + ";")
	}
	return b.String()
}

// groups splits a tenant's replicas into Deployments, in order of each group's first replica.
func (m *model) groups(tenant string, rs []placedReplica) []*group {
	var out []*group
	t := m.tenants[tenant]
	mixed := m.dra() && m.anyMixedNode()
	for k, pr := range rs {
		g := &group{tenant: tenant, kind: pr.d.kind, resource: pr.d.resource(), count: pr.count(), args: vllmArgs(t, rs, k), env: replicaEnv(pr)}
		switch {
		case m.dra() && pr.d.shared():
			// The DRA driver runs the MPS daemon of a claim and hands its pipe to the pod; the
			// pods of a shared device all reference that device's claim.
			g.claim = draClaimName(pr.d)
		case !m.dra() && pr.d.kind == v1.SliceMIGMPS:
			// No MPS daemon serves a MIG instance on the device-plugin path (a Problem): the pods
			// share the instance by time-slicing, where MPS client limits mean nothing.
			g.env = nil
		}
		if mixed {
			g.board = pr.d.board.Name
		}
		i := slices.IndexFunc(out, func(o *group) bool { return o.key() == g.key() })
		if i < 0 {
			out = append(out, g)
			i = len(out) - 1
		}
		out[i].replicas = append(out[i].replicas, pr)
	}
	used := map[string]int{}
	for _, g := range out {
		base := deploymentName(tenant, g.kind, g.replicas[0].d)
		if g.count > 1 {
			base += fmt.Sprintf("-tp%d", g.count)
		}
		used[base]++
		g.name = base
		if used[base] > 1 {
			g.name = fmt.Sprintf("%s-%d", base, used[base])
		}
		g.name = shorten(g.name)
	}
	return out
}

// deploymentName is "<tenant>-<slice>", like chat-gpu, code-complete-mig-3g-40gb, docs-qa-mig-3g-40gb-mps;
// groups add "-tp<N>" for tensor-parallel replicas (chat-gpu-tp4).
func deploymentName(tenant string, k v1.SliceKind, d *device) string {
	s := "gpu"
	if d.instance != nil {
		s = "mig-" + strings.NewReplacer(".", "-", "+", "-").Replace(d.instance.Profile)
	}
	switch k {
	case v1.SliceMPS, v1.SliceMIGMPS:
		s += "-mps"
	case v1.SliceTimeSlice, v1.SliceMIGTimeSlice:
		s += "-ts"
	}
	return strings.ToLower(tenant + "-" + s)
}

// shorten keeps a name within the 63 characters of a label value.
func shorten(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:52], "-") + "-" + hex.EncodeToString(sum[:])[:10]
}

func sliceSlug(k v1.SliceKind) string { return strings.ReplaceAll(string(k), "+", "-") }

func (m *model) deployment(g *group) appsv1.Deployment {
	t := m.tenants[g.tenant]
	nodes := map[string]bool{}
	var slots []string
	for _, pr := range g.replicas {
		nodes[pr.d.node] = true
		where := pr.d.where()
		if pr.count() > 1 {
			where = pr.gpus()
		}
		slots = append(slots, fmt.Sprintf("%d@%s", pr.r.Index, where))
	}
	hosts := make([]string, 0, len(nodes))
	for n := range nodes {
		hosts = append(hosts, n)
	}
	sort.Strings(hosts)
	labels := map[string]string{"app.kubernetes.io/name": g.tenant, "app.kubernetes.io/managed-by": "gpupool",
		LabelTenant: g.tenant, LabelDeployment: g.name, LabelSlice: sliceSlug(g.kind)}
	if t.Path != "" {
		labels[LabelTrustGroup] = strings.ReplaceAll(t.Path, "/", ".")
	}
	n := int32(len(g.replicas))
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	pod := m.podSpec(g, hosts)
	podLabels := maps(labels)
	if sel := pod.NodeSelector[LabelPool]; sel != "" {
		podLabels[LabelPool] = sel
	}
	return appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: g.name, Labels: labels, Annotations: map[string]string{
			AnnotationPath: t.Path, AnnotationPlan: m.plan.Metadata.Name, AnnotationSlots: strings.Join(slots, ", ")}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelDeployment: g.name}},
			// No surge: every replica's slice is planned, there is no spare one to surge onto.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &one}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: pod},
		},
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (m *model) podSpec(g *group, hosts []string) corev1.PodSpec {
	pools := map[string]bool{}
	for _, n := range m.nodes {
		if slices.Contains(hosts, n.name) {
			pools[n.pool] = true
		}
	}
	c := corev1.Container{Name: "vllm", Image: Image, Args: g.args,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000, Protocol: corev1.ProtocolTCP}}}
	var claims []corev1.PodResourceClaim
	switch {
	case m.dra() && g.claim != "":
		// a shared device: the named claim of dra/shared.yaml
		claims = []corev1.PodResourceClaim{{Name: DRARequest, ResourceClaimName: &g.claim}}
	case m.dra():
		// unshared devices: a claim per pod from the group's template in dra/<tenant>.yaml
		claims = []corev1.PodResourceClaim{{Name: DRARequest, ResourceClaimTemplateName: &g.name}}
	default:
		c.Resources.Limits = corev1.ResourceList{
			corev1.ResourceName(g.resource): *resource.NewQuantity(int64(max(g.count, 1)), resource.DecimalSI)}
	}
	if claims != nil {
		c.Resources.Claims = []corev1.ResourceClaim{{Name: DRARequest}}
	}
	keys := make([]string, 0, len(g.env))
	for k := range g.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: g.env[k]})
	}
	spec := corev1.PodSpec{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: hosts}}}}}}},
		Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		ResourceClaims: claims,
	}
	if len(pools) == 1 {
		for p := range pools {
			spec.NodeSelector = map[string]string{LabelPool: p}
		}
	}
	// No hostIPC and no hostPath: whoever runs a device's MPS daemon hands its pipe directory and
	// shared memory to the container of the device it allocated (the device plugin's Allocate for
	// whole GPUs, the DRA driver's CDI edits for a claim), so every pod passes the Pod Security
	// baseline.
	// vllmContainerDefaults mounts a memory-backed /dev/shm, which tensor-parallel workers need too.
	adapterVolume(m.tenants[g.tenant], &c, &spec)
	vllmContainerDefaults(&c, &spec)
	spec.Containers = []corev1.Container{c}
	return spec
}

func k8sArtifacts(m *model) ([]Artifact, error) {
	by, names := m.replicasByTenant()
	var out []Artifact
	for _, name := range names {
		if !servesLLM(m.tenants[name]) {
			continue
		}
		var docs []string
		for _, g := range m.groups(name, by[name]) {
			data, err := yaml.Marshal(m.deployment(g))
			if err != nil {
				return nil, fmt.Errorf("render deployment: tenant %s: %w", name, err)
			}
			docs = append(docs, string(data))
		}
		out = append(out, Artifact{Path: "k8s/" + name + ".yaml", Data: []byte(strings.Join(docs, "---\n"))})
	}
	return out, nil
}
