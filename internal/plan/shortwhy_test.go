package plan

import "testing"

// Two units of one choice blocked by two different node rules: the reason names the least rule
// on every call, as the packed plan's summary does, never whichever the map order meets first.
func TestShortWhyNamesTheLeastRule(t *testing.T) {
	tn, other := &tenant{}, &tenant{}
	c, c2 := &cand{}, &cand{}
	p := &planner{blocked: map[*unit]blockage{}}
	rules := []string{"node n3 runs MIG", "node n1 shares whole GPUs by time-slicing", "node n2 runs exclusive GPUs"}
	for _, r := range rules {
		p.blocked[&unit{c: c, reps: []replica{{tn}}}] = blockage{rule: r}
	}
	p.blocked[&unit{c: c, reps: []replica{{other}}}] = blockage{rule: "a: another tenant's rule"}
	p.blocked[&unit{c: c2, reps: []replica{{tn}}}] = blockage{rule: "a: another choice's rule"}
	for i := 0; i < 100; i++ {
		if got := p.shortWhy(tn, c); got != rules[1] {
			t.Fatalf("call %d: %q, want %q", i, got, rules[1])
		}
	}
	if got := p.shortWhy(tn, &cand{}); got != "its board's pool GPUs were taken" {
		t.Errorf("no blocked unit: %q", got)
	}
}
