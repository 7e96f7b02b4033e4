package render

import (
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/migparted"
)

// checkMigParted decodes the rendered mig-parted file, validates it on every board of the plan
// (the check `gpupool validate --board` makes) and on the whole catalog, and checks that each MIG
// GPU's counts, as mig-parted will create them, have a legal placement with the plan's multiset.
func checkMigParted(t tb, plan *v1.Plan, data []byte) *migparted.Config {
	t.Helper()
	cfg, err := migparted.Decode(data)
	if err != nil {
		t.Fatalf("decode mig-parted config: %v\n%s", err, data)
	}
	if rep := migparted.Validate(cfg, migparted.Options{}); !rep.OK() {
		t.Errorf("mig-parted config fails validation: %v", rep.Err())
	}
	for _, g := range plan.GPUs {
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			t.Fatal(err)
		}
		if rep := migparted.Validate(cfg, migparted.Options{Board: b}); !rep.OK() {
			t.Errorf("mig-parted config fails validation on %s: %v", b.Name, rep.Err())
		}
		if g.Mode != v1.ModeMIG || len(g.Instances) == 0 {
			continue
		}
		want := planLayout(g)
		got, err := b.Place(want.Counts())
		if err != nil {
			t.Errorf("gpu %s/%d: counts %v have no placement: %v", g.Node, g.Index, want.Counts(), err)
			continue
		}
		if gpu.MultisetKey(got.Counts()) != gpu.MultisetKey(want.Counts()) {
			t.Errorf("gpu %s/%d: placed %s, plan %s", g.Node, g.Index, got, want)
		}
	}
	return cfg
}

// entryFor finds the entry of a named config that mig-parted applies to GPU index on a node.
func entryFor(t tb, cfg *migparted.Config, name string, index int) (migparted.Entry, bool) {
	t.Helper()
	nc, ok := cfg.Lookup(name)
	if !ok {
		t.Fatalf("no config %q", name)
	}
	for _, e := range nc.Entries {
		if e.Devices.All || slices.Contains(e.Devices.Indices, index) {
			return e, true
		}
	}
	return migparted.Entry{}, false
}

func TestMigPartedFixture(t *testing.T) {
	plan, pool := loadFixture(t)
	arts, _ := Artifacts(plan, pool)
	cfg := checkMigParted(t, plan, artifactMap(arts)[MigPartedPath])
	if cfg.Configs[0].Name != AllDisabled {
		t.Errorf("first config = %q, want %q", cfg.Configs[0].Name, AllDisabled)
	}
	_, names, err := MigPartedConfig(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	// Every GPU's entry in its node's config carries exactly the plan's counts; the canary
	// gpu-node-b/3 is in no entry, so mig-parted leaves it alone.
	for _, g := range plan.GPUs {
		e, ok := entryFor(t, cfg, names[g.Node], g.Index)
		if ok == (g.Role == v1.RoleCanary) {
			t.Errorf("gpu %s/%d (role %s): in an entry = %v", g.Node, g.Index, g.Role, ok)
			continue
		}
		if !ok {
			continue
		}
		if e.MigEnabled != (g.Mode == v1.ModeMIG) {
			t.Errorf("gpu %s/%d: mig-enabled %v, mode %s", g.Node, g.Index, e.MigEnabled, g.Mode)
		}
		if g.Mode == v1.ModeMIG && gpu.MultisetKey(e.MigDevices) != gpu.MultisetKey(planLayout(g).Counts()) {
			t.Errorf("gpu %s/%d: mig-devices %v, plan %s", g.Node, g.Index, e.MigDevices, planLayout(g))
		}
	}
}

func TestMigPartedConfigs(t *testing.T) {
	const h100 = "H100-SXM5-80GB"
	shared := []tenantSpec{{"a", "org/x", v1.IsolationShared}, {"b", "org/x", v1.IsolationShared}}
	tests := []struct {
		name string
		edit func(p *v1.Plan)
		// same lists node pairs that must share a config name; allDisabled lists nodes that get it.
		same        [][2]string
		allDisabled []string
		configs     int // all-disabled plus distinct layouts
	}{
		{"no MIG anywhere", func(p *v1.Plan) { whole(p, "n0", 0, v1.ModeExclusive, rep("a", v1.Limits{})) },
			nil, []string{"n0", "n1"}, 1},
		{"two nodes, one layout, written once", func(p *v1.Plan) {
			for _, n := range []string{"n0", "n1"} {
				for i := range 2 {
					mig(p, n, i, inst("3g.40gb", 0, "", rep("a", v1.Limits{})), inst("3g.40gb", 4, ""))
				}
			}
		}, [][2]string{{"n0", "n1"}}, nil, 2},
		{"per-GPU layouts on one node", func(p *v1.Plan) {
			mig(p, "n0", 0, inst("7g.80gb", 0, "", rep("a", v1.Limits{})))
			mig(p, "n0", 1, inst("1g.10gb", 0, ""), inst("1g.10gb", 1, ""), inst("2g.20gb", 2, ""), inst("3g.40gb", 4, "", rep("b", v1.Limits{})))
		}, nil, []string{"n1"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t, h100, []int{2, 2}, shared...)
			plan := newPlan(pool, h100)
			tc.edit(plan)
			finish(plan, pool)
			cfg, names, err := MigPartedConfig(plan, pool)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Configs) != tc.configs {
				t.Errorf("configs = %v, want %d", cfg.Names(), tc.configs)
			}
			for _, pr := range tc.same {
				if names[pr[0]] != names[pr[1]] {
					t.Errorf("nodes %s and %s have configs %q and %q", pr[0], pr[1], names[pr[0]], names[pr[1]])
				}
			}
			for _, n := range tc.allDisabled {
				if names[n] != AllDisabled {
					t.Errorf("node %s: config %q, want %q", n, names[n], AllDisabled)
				}
			}
			arts, err := Artifacts(plan, pool)
			if err != nil {
				t.Fatal(err)
			}
			checkMigParted(t, plan, artifactMap(arts)[MigPartedPath])
		})
	}
}

// TestStartsNote: 3g.40gb at slice 0 plus 1g.10gb at 6 is legal, but for the same counts the
// placement search chooses 1g.10gb@0 3g.40gb@4, so the README says the starts are the driver's.
func TestStartsNote(t *testing.T) {
	const h100 = "H100-SXM5-80GB"
	pool := newPool(t, h100, []int{1}, tenantSpec{"a", "", v1.IsolationShared})
	plan := newPlan(pool, h100)
	mig(plan, "n0", 0, inst("3g.40gb", 0, "", rep("a", v1.Limits{})), inst("1g.10gb", 6, ""))
	finish(plan, pool)
	arts, err := Artifacts(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(artifactMap(arts)["README.md"])
	if !containsAll(readme, "GPU n0/0: the plan places 3g.40gb@0 1g.10gb@6", "would choose 1g.10gb@0 3g.40gb@4") {
		t.Errorf("README does not note the start difference:\n%s", readme)
	}
	// The same counts placed where the search puts them: no note.
	mig(plan, "n0", 0, inst("1g.10gb", 0, ""), inst("3g.40gb", 4, "", rep("a", v1.Limits{})))
	finish(plan, pool)
	arts, err = Artifacts(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(artifactMap(arts)["README.md"]), "the plan places") {
		t.Error("README notes a start difference where there is none")
	}
}

// TestCanaryLeftAlone: a canary GPU is in no entry of its node's config, so mig-parted does not
// touch it; on a node of canaries only, a config still needs an entry, so they get the plan's mode.
func TestCanaryLeftAlone(t *testing.T) {
	pool := newPool(t, h100, []int{2, 2}, tenantSpec{"a", "", v1.IsolationShared})
	pool.Policy.CanaryGPUs = []v1.GPURef{{Node: "n0", Index: 1}, {Node: "n1", Index: 0}, {Node: "n1", Index: 1}}
	plan := newPlan(pool, h100)
	whole(plan, "n0", 0, v1.ModeExclusive, rep("a", v1.Limits{}))
	for _, r := range pool.Policy.CanaryGPUs {
		g := at(plan, r.Node, r.Index)
		g.Role, g.Mode = v1.RoleCanary, v1.ModeMIG
	}
	finish(plan, pool)
	cfg, names, err := MigPartedConfig(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := entryFor(t, cfg, names["n0"], 1); ok {
		t.Error("canary n0/1 is in an entry")
	}
	if e, ok := entryFor(t, cfg, names["n0"], 0); !ok || e.MigEnabled || e.Devices.All {
		t.Errorf("n0/0: entry %+v (found %v), want MIG disabled on [0]", e, ok)
	}
	if e, ok := entryFor(t, cfg, names["n1"], 0); !ok || !e.MigEnabled || !e.Devices.All {
		t.Errorf("n1 (canaries only): entry %+v (found %v), want MIG enabled on all", e, ok)
	}
	arts, err := Artifacts(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	checkMigParted(t, plan, artifactMap(arts)[MigPartedPath])
}
