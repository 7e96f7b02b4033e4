package plan

import (
	"context"
	"strings"
	"testing"
)

// Review 12's m1 with docs-qa's traffic Poisson (testdata/review12/m1p-mixed-boards-poisson.yaml):
// nine GPUs of three boards on the device-plugin path. The choice puts chat-bursty on 3 × 3g.40gb
// of H100, whose four GPUs docs-qa, capped, one-at-a-time and fixed-two take, and leaves two
// A100s and both A30s idle, where chat-bursty's other candidates do not fit (4 A100s or 8 A30s).
// Moving capped (tensor-parallel 2 on the A100s) and one-at-a-time (2g.12gb on the A30s) off the
// H100s serves all six; without moveServed chat-bursty stays short.
func TestRescueMovesServedTenants(t *testing.T) {
	pool := loadPool(t, "../../testdata/review12/m1p-mixed-boards-poisson.yaml")
	served := map[bool]map[string]bool{}
	for _, off := range []bool{true, false} {
		p, err := newPlanner(pool, Options{})
		if err != nil {
			t.Fatal(err)
		}
		p.ctx = context.Background()
		p.noMoveServed = off
		p.evaluate()
		if err := p.optimise(); err != nil {
			t.Fatal(err)
		}
		served[off] = map[string]bool{}
		for _, tn := range p.tenants {
			if servedInFull(tn) {
				served[off][tn.t.Name] = true
			}
		}
		if off {
			if len(served[off]) != 5 || served[off]["chat-bursty"] {
				t.Fatalf("without moving served tenants: %d of 6 served in full, chat-bursty %v; want 5, chat-bursty short", len(served[off]), served[off]["chat-bursty"])
			}
			continue
		}
		if len(served[off]) != 6 {
			t.Errorf("moving served tenants: %d of 6 served in full: %v", len(served[off]), served[off])
		}
		for _, tn := range p.tenants {
			switch tn.t.Name {
			case "chat-bursty":
				if w := p.moved[tn]; !strings.Contains(w, "holds all 3 replicas") || !strings.Contains(w, "moved off H100-SXM5-80GB") {
					t.Errorf("chat-bursty's reason does not say how it was served: %q", w)
				}
			case "capped", "one-at-a-time":
				if w := p.moved[tn]; !strings.Contains(w, "moved off H100-SXM5-80GB") || !strings.Contains(w, "chat-bursty") || tn.choice.board.Name == "H100-SXM5-80GB" {
					t.Errorf("%s on %s: reason %q", tn.t.Name, tn.choice.board.Name, w)
				}
			}
		}
	}
	for name := range served[true] {
		if !served[false][name] {
			t.Errorf("%s, served in full without the move, is short with it", name)
		}
	}
	// the whole plan, the simulation's confirmation included
	pl, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range pl.Tenants {
		if tp.Infeasible {
			t.Errorf("Build: %s infeasible", tp.Name)
		}
	}
}
