package fair

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// grantOrder lists the tenants of the grant items in decision order.
func grantOrder(d Decision) string {
	var b strings.Builder
	for _, it := range d.Items {
		if it.Kind == KindGrant {
			b.WriteString(it.Tenant)
		}
	}
	return b.String()
}

func stateOf(t *testing.T, a *Allocator, name string) TenantState {
	t.Helper()
	for _, s := range a.Snapshot() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("tenant %q not in snapshot", name)
	return TenantState{}
}

// TestDRFPaper reproduces §4.1 of Ghodsi et al., "Dominant Resource Fairness" (NSDI 2011) and the
// weighted variants of §4.3, under the skip rule and ties to the smaller name.
//
// Pool ⟨9 CPU, 18 GB⟩. A's task ⟨1, 4⟩: memory dominates, 4/18 = 2/9 per task. B's task ⟨3, 1⟩:
// CPU dominates, 3/9 = 1/3 per task. Weighted share s = tasks · per-task share / weight.
func TestDRFPaper(t *testing.T) {
	cases := []struct {
		name           string
		wA, wB         float64
		tasksA, tasksB int
		order          string
		cpu, mem       float64
		shareA, shareB float64 // unweighted dominant shares
	}{
		// (1,1): A 2/9 · B 1/3 · A 4/9 · B 2/3 · A 6/9 = 2/3; then A needs CPU 10 > 9 and B needs
		// CPU 12 > 9. CPU 3+6 = 9, memory 12+2 = 14. The paper's x = 3, y = 2, shares 2/3.
		{"paper", 1, 1, 3, 2, "ABABA", 9, 14, 2.0 / 3, 2.0 / 3},
		// (2,1): A's weighted step is 1/9. A 1/9 · B 1/3 · A 2/9 · A 3/9 (ties B's 1/3: A by name)
		// · A 4/9; B then needs CPU 7+3 = 10 > 9 (skipped) and A memory 17+4 = 21 > 18.
		{"weights 2:1", 2, 1, 4, 1, "ABAAA", 7, 17, 16.0 / 18, 1.0 / 3},
		// (1,2): B's weighted step is 1/6. A 2/9 · B 1/6 · B 2/6 · A 4/9 (cpu 8, mem 10) · B is
		// lowest at 1/3 but needs CPU 11 > 9: skipped (the paper's pseudo-code would stop here
		// with (2,2)) · A 6/9 (cpu 9, mem 14).
		{"weights 1:2 skip rule", 1, 2, 3, 2, "ABBAA", 9, 14, 2.0 / 3, 2.0 / 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{
				Capacity: Vector{"cpu": 9, "mem": 18},
				Tenants: []Tenant{
					{Name: "A", Weight: c.wA, Task: Vector{"cpu": 1, "mem": 4}, Demand: 100},
					{Name: "B", Weight: c.wB, Task: Vector{"cpu": 3, "mem": 1}, Demand: 100},
				},
			}
			a, d, err := Allocate(cfg, t0)
			if err != nil {
				t.Fatal(err)
			}
			if got := grantOrder(d); got != c.order {
				t.Errorf("pick order %s, want %s", got, c.order)
			}
			sa, sb := stateOf(t, a, "A"), stateOf(t, a, "B")
			if sa.Tasks != c.tasksA || sb.Tasks != c.tasksB {
				t.Errorf("tasks (A, B) = (%d, %d), want (%d, %d)", sa.Tasks, sb.Tasks, c.tasksA, c.tasksB)
			}
			if math.Abs(sa.DominantShare-c.shareA) > 1e-12 || math.Abs(sb.DominantShare-c.shareB) > 1e-12 {
				t.Errorf("dominant shares (%v, %v), want (%v, %v)", sa.DominantShare, sb.DominantShare, c.shareA, c.shareB)
			}
			cpu := float64(sa.Tasks)*1 + float64(sb.Tasks)*3
			mem := float64(sa.Tasks)*4 + float64(sb.Tasks)*1
			if cpu != c.cpu || mem != c.mem {
				t.Errorf("used (cpu, mem) = (%v, %v), want (%v, %v)", cpu, mem, c.cpu, c.mem)
			}
			for _, it := range d.Items {
				if it.Kind == KindQueue && (it.Reason != ReasonPoolFull || !it.Retry || it.Count != 100-map[string]int{"A": sa.Tasks, "B": sb.Tasks}[it.Tenant]) {
					t.Errorf("queue item %v: want PoolFull, retryable, with the unmet count", it)
				}
			}
		})
	}
}
