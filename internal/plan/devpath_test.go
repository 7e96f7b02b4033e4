package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// migMPSInstances counts the MIG instances a plan shares by MPS.
func migMPSInstances(pl *v1.Plan) int {
	n := 0
	for _, g := range pl.GPUs {
		for _, in := range g.Instances {
			if in.Sharing.Mode == v1.SharingMPS && len(in.Replicas) > 0 {
				n++
			}
		}
	}
	return n
}

// MIG+MPS is a candidate only on the DRA device path: the device plugin runs no MPS on MIG
// devices. ParvaGPU's scenario 6 (MPS inside MIG instances is its method) and the 8 × H100
// example with a bf16 KV cache share MIG instances by MPS on the DRA path; on the device-plugin
// path (the pools' default) neither plan shares a MIG instance by MPS, and every tenant that may
// share by MPS says why (ModeNotAllowed, naming policy.kubernetesDeviceAPI: dra).
func TestMIGMPSOnlyOnDRA(t *testing.T) {
	parva, profiles := parvaPool(t, 5, 3, 8)
	h100 := loadPool(t, "../../examples/h100x8-mixed.yaml")
	setKV(h100, "llama-2-13b", "")
	for _, c := range []struct {
		name string
		pool *v1.Pool
	}{{"parvagpu scenario 6", parva}, {"h100x8-mixed, bf16 KV", h100}} {
		for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDRA, "", v1.DeviceAPIDevicePlugin} {
			pool := *c.pool
			pool.Policy.KubernetesDeviceAPI = api
			pl, err := Build(context.Background(), &pool, Options{Profiles: profiles})
			if err != nil {
				t.Fatal(err)
			}
			n := migMPSInstances(pl)
			t.Logf("%s, device API %q: %d GPUs (bound %d), %d MIG instances shared by MPS", c.name, api, pl.Summary.GPUsUsed, pl.Summary.LowerBound, n)
			if api == v1.DeviceAPIDRA {
				if n == 0 {
					t.Errorf("%s on the DRA path: no MIG instance shared by MPS; the test no longer tells the paths apart", c.name)
				}
				continue
			}
			if n > 0 {
				t.Errorf("%s, device API %q: %d MIG instances shared by MPS, which the device plugin cannot serve", c.name, api, n)
			}
			for _, tn := range pl.Tenants {
				isol := tenantIsolation(&pool, tn.Name)
				said := false
				for _, r := range tn.Reasons {
					said = said || r.Code == v1.ReasonModeNotAllowed && strings.Contains(r.Message, "MIG+MPS needs policy.kubernetesDeviceAPI: dra")
				}
				if isol != v1.IsolationHard && !said {
					t.Errorf("%s: tenant %s (isolation %s) does not say why it gets no MIG+MPS", c.name, tn.Name, isol)
				}
				if isol == v1.IsolationHard && said {
					t.Errorf("%s: hard-isolated tenant %s names MIG+MPS, which its tier excludes anyway", c.name, tn.Name)
				}
			}
		}
	}
}

func tenantIsolation(pool *v1.Pool, name string) v1.Isolation {
	for _, t := range pool.Tenants {
		if t.Name == name {
			return isolationOf(t)
		}
	}
	return ""
}

// On the DRA path no shared LoRA engine is planned (an engine's pod asks for nvidia.com/gpu, and
// the renderer writes none for DRA): the mixed LoRA example's adapter tenants are planned on
// replicas of their own, and each that could have shared an engine says why; on its own
// (device-plugin) path the same pool gets its engine.
func TestNoLoRAEnginesOnDRA(t *testing.T) {
	for _, api := range []v1.KubernetesDeviceAPI{"", v1.DeviceAPIDRA} {
		pool := loadPool(t, "../../examples/lora-mixed.yaml")
		pool.Policy.KubernetesDeviceAPI = api
		pl, groups, err := BuildWithLoRA(context.Background(), pool, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if api == "" {
			if len(pl.LoRAEngines) == 0 || len(groups) == 0 {
				t.Fatalf("device plugin: %d engines, %d groups; want the example's engine", len(pl.LoRAEngines), len(groups))
			}
			continue
		}
		if len(pl.LoRAEngines) != 0 || len(groups) != 0 {
			t.Errorf("dra: %d engines, %d groups; want none", len(pl.LoRAEngines), len(groups))
		}
		byName := map[string]v1.Tenant{}
		for _, pt := range pool.Tenants {
			byName[pt.Name] = pt
		}
		adapters := 0
		for _, tn := range pl.Tenants {
			if pt := byName[tn.Name]; pt.Model.Adapter == nil || isolationOf(pt) == v1.IsolationHard {
				continue
			}
			adapters++
			said := false
			for _, r := range tn.Reasons {
				said = said || r.Message == LoRANeedsDevicePlugin
			}
			if !said || len(tn.LoRAEngines) > 0 {
				t.Errorf("dra: adapter tenant %s: engines %v, reason given %v", tn.Name, tn.LoRAEngines, said)
			}
		}
		if adapters == 0 {
			t.Fatal("the example has no adapter tenant that could share an engine")
		}
	}
}

// On the device-plugin path the 8 × H100 node with a bf16 KV cache cannot serve all 24 tenants:
// the 70B tenants take four whole GPUs (exclusive, so nvidia.com/gpu is unshared on the node, or
// 7g.80gb, so the node has MIG GPUs), which rules out whole-GPU MPS and leaves each 13B tenant
// at least half a GPU of MIG instances (4 GPUs for 8), and the 7B and 1.5B tenants need more than
// nothing. The cheapest choice of every 13B tenant, an MPS third of a whole GPU, breaks that
// node rule; the planner re-chooses those tenants' kinds and packs again, serving 21 of 24 (by
// memory slices the most the 4 MIG GPUs hold: 8 of 32 for the 7B tenants' 1g.20gb, 4 for the
// bots' shared 1g.10gb, 4 per 13B 3g.40gb), where packing the first choice served 18. Every
// 13B tenant left short says which rule kept its cheaper kind off the node. Since tenants give
// way where that serves more in full (ADR 0041), one 70B tenant gives up its whole GPU to two
// 13B tenants (a fifth MIG GPU, two 3g.40gb): 22 of 24, the released tenant naming the two.
func TestBlockedKindsRechosen(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	setKV(pool, "llama-2-13b", "")
	pl, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := sharingConflicts(pl); c > 0 {
		t.Errorf("%d node/profile pairs shared two ways", c)
	}
	short, released := 0, 0
	for _, tn := range pl.Tenants {
		var msg string
		for _, r := range tn.Reasons {
			if r.Code == v1.ReasonNoCapacity {
				msg = r.Message
			}
		}
		if msg == "" {
			continue
		}
		short++
		if strings.HasPrefix(tn.Name, "chat-") && strings.Contains(msg, "left unplaced in favour of product-") {
			released++
			continue
		}
		if !strings.HasPrefix(tn.Name, "product-") {
			t.Errorf("%s short, want only 13B tenants and a 70B tenant released", tn.Name)
		}
		if !strings.Contains(msg, "mps on H100-SXM5-80GB, cheaper, was not used: node h100-node") {
			t.Errorf("%s: reason %q does not say which node rule kept whole-GPU MPS off", tn.Name, msg)
		}
	}
	t.Logf("%d GPUs used (bound %d), %d tenants short, %d released", pl.Summary.GPUsUsed, pl.Summary.LowerBound, short, released)
	if short > 2 || released > 1 {
		t.Errorf("%d tenants short, %d released: want at most 2 (the 13B tenants' blocked MPS re-chosen as MIG, a 70B tenant giving way to two 13B tenants)", short, released)
	}
}

// boundColumns counts the lower bound's columns of p by slice kind: each tenant's feasible
// candidates and the rejected or rounded ones only the bound counts (boundExtra).
func boundColumns(p *planner) map[v1.SliceKind]int {
	n := map[v1.SliceKind]int{}
	for _, tn := range p.tenants {
		for _, c := range slices.Concat(tn.feasible, tn.boundExtra) {
			n[c.kind]++
		}
	}
	return n
}

// The lower bound is a bound for the pool's own device path: on the device-plugin path it
// counts no MIG instance shared by MPS, which that path never plans (the device plugin runs no
// MPS on MIG devices), and it is exactly the DRA path's bound with the MIG+MPS columns taken out.
// On the synthetic 100 the device-plugin bound is 21 against the DRA path's 20 (the DRA plan's 21
// GPUs share 1g.10gb, 3g.40gb and 4g.40gb instances by MPS), on the synthetic 1,000 214 against
// 210, on ParvaGPU's scenario 6 (MPS inside MIG instances is its method, 16 GPUs deployed) 18
// against 16; the DRA planner's bound with its MIG+MPS columns removed is 21, 214 and 18. The
// test fails if the device-plugin bound counts a MIG+MPS column (it would fall to the DRA
// figure), or leaves out any kind the DRA path's columns share with it.
func TestDevicePluginBoundWithoutMIGMPS(t *testing.T) {
	parva, profiles := parvaPool(t, 5, 3, 8)
	pools := []struct {
		name string
		pool *v1.Pool
		o    Options
	}{{"synthetic 100", synthPool(100), Options{}}, {"parvagpu scenario 6", parva, Options{Profiles: profiles}}}
	if !testing.Short() {
		pools = append(pools, struct {
			name string
			pool *v1.Pool
			o    Options
		}{"synthetic 1,000", synthPool(1000), Options{}})
	}
	for _, tc := range pools {
		bound := map[v1.KubernetesDeviceAPI]int{}
		var without int
		for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
			pool := *tc.pool
			pool.Policy.KubernetesDeviceAPI = api
			p, err := newPlanner(&pool, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			p.ctx = context.Background()
			p.evaluate()
			if err := p.optimise(); err != nil {
				t.Fatal(err)
			}
			pl, err := p.result()
			if err != nil {
				t.Fatal(err)
			}
			bound[api] = pl.Summary.LowerBound
			if pl.Summary.LowerBound > pl.Summary.GPUsUsed {
				t.Errorf("%s (%s): bound %d above the plan's %d GPUs", tc.name, api, pl.Summary.LowerBound, pl.Summary.GPUsUsed)
			}
			cols := boundColumns(p)
			if api == v1.DeviceAPIDevicePlugin {
				if cols[v1.SliceMIGMPS] > 0 {
					t.Errorf("%s (%s): the bound counts %d MIG+MPS columns, which the device plugin cannot serve", tc.name, api, cols[v1.SliceMIGMPS])
				}
				continue
			}
			if cols[v1.SliceMIGMPS] == 0 {
				t.Fatalf("%s (%s): no MIG+MPS column; the test no longer tells the paths apart", tc.name, api)
			}
			isMIGMPS := func(c *cand) bool { return c.kind == v1.SliceMIGMPS }
			for _, tn := range p.tenants {
				tn.feasible = slices.DeleteFunc(slices.Clone(tn.feasible), isMIGMPS)
				tn.boundExtra = slices.DeleteFunc(slices.Clone(tn.boundExtra), isMIGMPS)
			}
			without = p.lowerBound()
		}
		t.Logf("%s: device-plugin bound %d, DRA bound %d, DRA bound without its MIG+MPS columns %d", tc.name, bound[v1.DeviceAPIDevicePlugin], bound[v1.DeviceAPIDRA], without)
		if bound[v1.DeviceAPIDevicePlugin] != without {
			t.Errorf("%s: device-plugin bound %d, want the DRA path's columns without MIG+MPS, %d", tc.name, bound[v1.DeviceAPIDevicePlugin], without)
		}
		if without <= bound[v1.DeviceAPIDRA] {
			t.Errorf("%s: MIG+MPS no longer lowers the DRA bound (%d without it, %d with); the pool shows nothing", tc.name, without, bound[v1.DeviceAPIDRA])
		}
	}
}
