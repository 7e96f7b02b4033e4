package plan

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// shortPlanner is 150 synthetic tenants on 30 GPUs, packed, each on its dearest feasible
// candidate (so that cheaper kinds exist for the messages to name), with every other tenant's
// cheapest two kinds forbidden and a node rule on one kind: many tenants are short.
func shortPlanner(t *testing.T) *planner {
	t.Helper()
	p := evaluated(t, Synthetic(SyntheticOptions{Tenants: 150, GPUs: 30, Varied: true}, rand.New(rand.NewPCG(150, 30))))
	p.forbid, p.nodeRule = map[*tenant]map[forbidKey]string{}, map[*tenant]map[forbidKey]string{}
	for i, tn := range p.tenants {
		if len(tn.feasible) == 0 {
			continue
		}
		tn.choice = tn.feasible[len(tn.feasible)-1]
		if i%2 == 1 {
			continue
		}
		for j, c := range tn.feasible[:min(2, len(tn.feasible))] {
			m := p.forbid
			if j == 1 && i%4 == 0 {
				m = p.nodeRule
			}
			if m[tn] == nil {
				m[tn] = map[forbidKey]string{}
			}
			m[tn][forbidKey{c.board.Name, c.kind}] = fmt.Sprintf("rule %d of %s", j, tn.t.Name)
		}
	}
	if err := p.pack(); err != nil {
		t.Fatal(err)
	}
	return p
}

// markUnplacedBySprintf is markUnplaced's messages as it formatted them with fmt, one tenant at
// a time, before it wrote each into one allocation of its size.
func markUnplacedBySprintf(p *planner, units []*unit) map[*tenant]string {
	short := map[*tenant]int{}
	var order []*tenant
	for _, u := range units {
		for _, r := range u.reps {
			if short[r.tn] == 0 {
				order = append(order, r.tn)
			}
			short[r.tn]++
		}
	}
	why := map[*tenant]string{}
	for _, u := range units {
		if b, ok := p.blocked[u]; ok {
			for _, r := range u.reps {
				why[r.tn] = b.rule
			}
		}
	}
	rules := map[forbidKey]string{}
	for _, m := range append(slicesOfValues(p.forbid), slicesOfValues(p.nodeRule)...) {
		for k, r := range m {
			if _, ok := rules[k]; !ok || r < rules[k] {
				rules[k] = r
			}
		}
	}
	out := map[*tenant]string{}
	for _, tn := range order {
		msg := fmt.Sprintf("%d of %d replicas (%s on %s) found no free GPU: the pool has %d GPUs of which %d are canaries and %d held for the burst pool",
			short[tn], tn.choice.replicas, tn.choice.label(), tn.choice.board.Name, len(p.fleet), p.canaries(), p.burst)
		if w := why[tn]; w != "" {
			msg += "; free GPUs of the board were left, but " + w
		}
		var keys []forbidKey
		for _, c := range tn.feasible {
			if c.cost >= tn.choice.cost-1e-9 {
				continue
			}
			k := forbidKey{c.board.Name, c.kind}
			if _, ok := rules[k]; ok && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(a, b forbidKey) int { return cmp.Or(cmp.Compare(a.board, b.board), cmp.Compare(a.kind, b.kind)) })
		for _, k := range keys {
			msg += fmt.Sprintf("; %s on %s, cheaper, was not used: %s", k.kind, k.board, rules[k])
		}
		out[tn] = v1.NewReason(v1.ReasonNoCapacity, "%s", msg).Message
	}
	return out
}

func slicesOfValues(m map[*tenant]map[forbidKey]string) []map[forbidKey]string {
	var out []map[forbidKey]string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// markUnplaced writes each short tenant's message with the parts common to all formatted once
// and the message sized before it is written; the text must be what formatting each message
// with fmt gave, the forbidden kinds' part and the blocked rule's included.
func TestMarkUnplacedText(t *testing.T) {
	p := shortPlanner(t)
	if len(p.unplaced) == 0 {
		t.Fatal("no unit left unplaced: the pool must be short")
	}
	// a blocked unit, so that the node rule's part is written too
	p.blocked[p.unplaced[0]] = blockage{rule: "a test node rule"}
	want := markUnplacedBySprintf(p, p.unplaced)
	for _, tn := range p.tenants {
		tn.infeas = nil
	}
	p.markUnplaced(p.unplaced)
	named, blocked := 0, 0
	for _, tn := range p.tenants {
		w, short := want[tn]
		if !short {
			if len(tn.infeas) > 0 {
				t.Errorf("%s: not short, reasons %v", tn.t.Name, tn.infeas)
			}
			continue
		}
		if len(tn.infeas) != 1 {
			t.Fatalf("%s: %d reasons, want 1", tn.t.Name, len(tn.infeas))
		}
		r := tn.infeas[0]
		if r != v1.NewReason(v1.ReasonNoCapacity, "%s", w) {
			t.Errorf("%s:\n got %+v\nwant %q", tn.t.Name, r, w)
		}
		if strings.Contains(w, notUsed) {
			named++
		}
		if strings.Contains(w, wasLeft) {
			blocked++
		}
	}
	if named == 0 || blocked == 0 {
		t.Errorf("%d messages name a forbidden kind, %d a blocked rule: the test must cover both", named, blocked)
	}
}

// formUnits lays the units and their replicas out in two arrays made once; the units must be
// those made one at a time (same groups, candidates and replicas, in order), and a replica
// appended to one unit must not show in another's.
func TestFormUnitsLayout(t *testing.T) {
	p := shortPlanner(t)
	for _, tn := range p.tenants {
		if len(tn.feasible) > 0 {
			tn.choice = tn.feasible[0] // the cheapest, shared where it can be
		}
	}
	got := p.formUnits()
	// the units one at a time, as formUnits made them before
	byKey := map[groupKey][]*tenant{}
	var keys []groupKey
	for _, tn := range p.tenants {
		if _, out := p.released[tn]; tn.choice == nil || out {
			continue
		}
		k := keyOf(tn, tn.choice)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], tn)
	}
	slices.SortFunc(keys, compareKeys)
	var want []*unit
	for _, k := range keys {
		var cur *unit
		for _, tn := range byKey[k] {
			for range tn.choice.replicas {
				if cur == nil || len(cur.reps) == k.share {
					cur = &unit{key: k, c: tn.choice}
					want = append(want, cur)
				}
				cur.reps = append(cur.reps, replica{tn: tn})
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d units, want %d", len(got), len(want))
	}
	shared := 0
	for i, u := range got {
		w := want[i]
		if u.key != w.key || u.c != w.c || !slices.Equal(u.reps, w.reps) || !u.tp.IsZero() || u.rk != 0 || u.mark != 0 {
			t.Fatalf("unit %d: got %+v, want %+v", i, *u, *w)
		}
		if u.key.share > 1 {
			shared++
		}
	}
	if shared == 0 || len(got) < 2 {
		t.Fatalf("%d units, %d shared: the test must cover units of several replicas", len(got), shared)
	}
	extra := &tenant{}
	for _, u := range got {
		u.reps = append(u.reps, replica{tn: extra})
	}
	for i, u := range got {
		if n := len(want[i].reps) + 1; len(u.reps) != n || !slices.Equal(u.reps[:n-1], want[i].reps) || u.reps[n-1].tn != extra {
			t.Fatalf("unit %d after an append to every unit: %d replicas, want %d: another unit's append wrote over it", i, len(u.reps), n)
		}
	}
}
