package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// packLayout is the packed GPUs as text: each GPU's role and its units' tenants in order.
func packLayout(p *planner) string {
	var b strings.Builder
	for _, g := range p.gpus {
		fmt.Fprintf(&b, "%s %s:", g.fg.ref, g.role)
		for u := range g.eachUnit {
			b.WriteString(" [")
			for _, r := range u.reps {
				b.WriteString(" " + r.tn.t.Name)
			}
			b.WriteString(" ]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// packResult is a packing as text: the layout (packLayout), each tenant's reasons and the
// packing's score.
func packResult(p *planner) string {
	var b strings.Builder
	b.WriteString(packLayout(p))
	for _, tn := range p.tenants {
		for _, r := range tn.infeas {
			fmt.Fprintf(&b, "%s: %s %s\n", tn.t.Name, r.Code, r.Message)
		}
	}
	fmt.Fprintf(&b, "score %v\n", p.score())
	return b.String()
}

// A packing with the maps of packings before it (reusedMaps: spreadRedundant's and the
// compaction's indexes, formUnits' tenants by group, markUnplaced's short tenants and score's
// settings, handed out cleared) lays out the GPUs, gives the reasons and scores as one with maps
// of its own: no unit of an earlier packing is left in them for a spread or a compaction move to
// land on, no tenant of one is formed into a unit again, no replica left short is counted twice
// and no sharing setting of one counts as a conflict.
func TestPackReusedMapsKeepNothing(t *testing.T) {
	pools := map[string]*v1.Pool{}
	for _, path := range []string{"testdata/spread-self-pool.yaml", "testdata/spread-dra-pool.yaml",
		"testdata/board-fill-100.yaml", "testdata/short-150-on-60.yaml"} {
		pools[path] = loadPool(t, path)
	}
	dra := synthPool(100) // shared MIG instances that the compaction moves (TestCompactFreesGPUs)
	dra.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	pools["synth-100-dra"], pools["synth-100"] = dra, synthPool(100)
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		t.Run(name, func(t *testing.T) {
			p := plannedState(t, pools[name])
			infeas := make([]int, len(p.tenants)) // pack adds reasons; each packing starts from these
			for i, tn := range p.tenants {
				infeas[i] = len(tn.infeas)
			}
			packFresh := func(fresh bool) string {
				for i, tn := range p.tenants {
					tn.infeas = slices.Clip(tn.infeas[:infeas[i]])
				}
				if fresh {
					p.reuse = reusedMaps{}
				}
				if err := p.pack(); err != nil {
					t.Fatal(err)
				}
				return packResult(p)
			}
			want := packFresh(true)
			if p.reuse.spreadWhere == nil && p.reuse.compactPos == nil {
				t.Fatal("the packing used no reused map")
			}
			if p.reuse.formByKey == nil || p.reuse.scoreUses == nil {
				t.Fatal("the packing formed its units or scored without the reused maps")
			}
			if name == "testdata/short-150-on-60.yaml" && p.reuse.shortCount == nil {
				t.Fatal("a packing that leaves tenants short marked them without the reused maps")
			}
			for range 2 {
				if got := packFresh(false); got != want {
					t.Fatalf("packing with reused maps:\n%s\nwith fresh maps:\n%s", got, want)
				}
			}
		})
	}
}

// Each map reusedMaps hands out again is empty: no unit, tenant, node or GPU of its last use is
// in it, and a slice it keeps for a key is empty with its array zeroed.
func TestReusedMapsHandedOutEmpty(t *testing.T) {
	var r reusedMaps
	tn, g, u := &tenant{}, &gpuPlan{}, &unit{}
	where, byKey := r.spreadIndex(4)
	where[u], byKey[u.key] = g, append(byKey[u.key], u)
	cw, cu, cn, cp := r.compactIndex(4)
	cw[u], cu[tn], cn["n"], cp[g] = g, append(cu[tn], u), append(cn["n"], g), 1
	count, order := r.nodeCounts()
	count["n"], r.takeOrder = 2, append(order, "n")
	kept := [][]*unit{byKey[u.key], cu[tn]}
	keptG := cn["n"]
	fb, fk, fr := r.formIndex()
	fb[u.key] = append(fb[u.key], tn)
	r.formKeys, r.formReps = append(fk, u.key), append(fr, 1)
	keptT := fb[u.key]
	sc, sw, so := r.shortIndex()
	sc[tn], sw[tn], r.shortOrder = 1, "rule", append(so, tn)
	su, sf := r.scoreIndex()
	su[nodeProfile{"n", "1g.10gb"}], sf[nodeProfile{"n", "1g.10gb"}] = migUse{share: 2}, true

	if fb, fk, fr = r.formIndex(); len(fb[u.key]) != 0 || len(fk) != 0 || len(fr) != 0 || keptT[0] != nil {
		t.Errorf("formUnits' index not emptied: %v, %v, %v, array %v", fb[u.key], fk, fr, keptT)
	}
	if sc, sw, so = r.shortIndex(); len(sc) != 0 || len(sw) != 0 || len(so) != 0 || r.shortOrder[0] != nil {
		t.Errorf("markUnplaced's maps not emptied: %v, %v, %v, array %v", sc, sw, so, r.shortOrder)
	}
	if su, sf = r.scoreIndex(); len(su) != 0 || len(sf) != 0 {
		t.Errorf("score's maps not emptied: %v, %v", su, sf)
	}

	where, byKey = r.spreadIndex(4)
	cw, cu, cn, cp = r.compactIndex(4)
	if count, order = r.nodeCounts(); len(count) != 0 || len(order) != 0 {
		t.Errorf("takeGroup's count and order not emptied: %v, %v", count, order)
	}
	if len(where) != 0 || len(cw) != 0 || len(cp) != 0 {
		t.Errorf("maps not emptied: where %d, compaction where %d, pos %d", len(where), len(cw), len(cp))
	}
	if len(byKey[u.key]) != 0 || len(cu[tn]) != 0 || len(cn["n"]) != 0 {
		t.Errorf("slices not emptied: by key %v, units %v, by node %v", byKey[u.key], cu[tn], cn["n"])
	}
	for _, us := range kept {
		if us[0] != nil {
			t.Errorf("a truncated slice's array still holds unit %p", us[0])
		}
	}
	if keptG[0] != nil {
		t.Errorf("a truncated slice's array still holds GPU %p", keptG[0])
	}
}
