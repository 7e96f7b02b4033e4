package v1

import (
	"strconv"
	"strings"
	"testing"
)

// TestValidatePoolUpperBounds sets each bounded number one step above its range (and the range's
// edge, which must pass) and expects exactly the listed error.
func TestValidatePoolUpperBounds(t *testing.T) {
	d := func(s string) *Duration { v, _ := ParseDuration(s); return &v }
	w := func(f float64) *float64 { return &f }
	tests := []struct {
		name   string
		mutate func(p *Pool)
		want   string
	}{
		{"rps edge", func(p *Pool) { p.Tenants[1].Traffic.RPS = MaxRPS }, ``},
		{"rps above", func(p *Pool) { p.Tenants[1].Traffic.RPS = 1e20 }, `tenants[1].traffic.rps: must be between 0 and 1000000 (got 1e+20)`},
		{"inputTokens above", func(p *Pool) {
			p.Tenants[1].Traffic.InputTokens, p.Tenants[1].Traffic.OutputTokens, p.Tenants[1].MaxContext = MaxTokens+1, 0, 0
		}, `tenants[1].traffic: inputTokens + outputTokens = 10000001 is more than the model's maximum context 131072` + "\n" +
			`tenants[1].traffic.inputTokens: must be between 0 and 10000000 (got 10000001)`},
		{"outputTokens above", func(p *Pool) {
			p.Tenants[4].Traffic.InputTokens, p.Tenants[4].Traffic.OutputTokens, p.Tenants[4].MaxContext = 0, 1<<40, 0
		}, `tenants[4].traffic: inputTokens + outputTokens = 1099511627776 is more than the model's maximum context 32768` + "\n" +
			`tenants[4].traffic.outputTokens: must be between 0 and 10000000 (got 1099511627776)`},
		{"maxContext above", func(p *Pool) { p.Tenants[1].MaxContext = MaxTokens + 1 },
			`tenants[1].maxContext: must be between 0 and 10000000 (got 10000001)`},
		{"concurrency above", func(p *Pool) { p.Tenants[1].Concurrency = MaxConcurrency + 1 },
			`tenants[1].concurrency: must be between 0 and 100000 (got 100001)`},
		{"reservation above", func(p *Pool) { p.Tenants[4].Reservation = MaxReplicaCount + 1 },
			`tenants[4].reservation: must be between 0 and 100000 (got 100001)`},
		{"cap above", func(p *Pool) { p.Tenants[1].Cap = ptr(MaxReplicaCount + 1) }, `tenants[1].cap: must be between 1 and 100000 (got 100001)`},
		{"replicas above", func(p *Pool) { p.Tenants[4].Replicas = ptr(MaxReplicaCount + 1) },
			`tenants[4].replicas: must be between 1 and 100000 (got 100001)`},
		{"weight tiny", func(p *Pool) { p.Tenants[0].Weight = w(1e-300) }, `tenants[0].weight: must be between 1e-06 and 1e+06 (got 1e-300)`},
		{"weight huge", func(p *Pool) { p.Tenants[0].Weight = w(1e300) }, `tenants[0].weight: must be between 1e-06 and 1e+06 (got 1e+300)`},
		{"weight edges", func(p *Pool) { p.Tenants[0].Weight = w(MinWeight); p.Tenants[1].Weight = w(MaxWeight) }, ``},
		{"slo above", func(p *Pool) { p.Tenants[1].SLO.TPOTP99 = d("25h") }, `tenants[1].slo.tpotP99: must be at most 24h (got "25h")`},
		{"slo edge", func(p *Pool) { p.Tenants[1].SLO.TPOTP99 = d("24h") }, ``},
		{"cooldown above", func(p *Pool) { p.Policy.ReconfigCooldown = d("8761h") },
			`policy.reconfigCooldown: must be between 0s and 8760h (got "8761h")`},
		{"maxUnavailable above", func(p *Pool) { p.Policy.MaxUnavailable = &IntOrPercent{Value: MaxUnavailableCount + 1} },
			`policy.maxUnavailable: must be between 1 and 1000000 or a percentage (got 1000001)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadValidPool(t)
			tt.mutate(p)
			got := ""
			if err := testValidator.Pool(p); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("errors =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestLoadPoolReportsEverythingWithUnknownField: a malformed field does not hide the rest of the
// document's problems.
func TestLoadPoolReportsEverythingWithUnknownField(t *testing.T) {
	in := `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: p, namespace: x}
fleet:
  nodes:
  - name: node-1
    gpus: [{board: H100X, count: 1}]
tenants:
- name: a
  weight: -1
  model: {name: llama-3.1-8b}
  slo: {ttftP99: -1s}
  traffic: {rps: many}
`
	_, err := LoadPool([]byte(in))
	want := strings.Join([]string{
		`fleet.nodes[0].gpus[0].board: unknown board "H100X" (valid: ` + listOrNone(Builtin.BoardNames()) + `)`,
		`metadata.namespace: unknown field`,
		`tenants[0].slo.ttftP99: must be > 0 (got "-1s")`,
		`tenants[0].traffic.rps: expected a number, got the string "many"`,
		`tenants[0].weight: must be between 1e-06 and 1e+06 (got -1)`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("LoadPool error =\n%v\nwant\n%s", err, want)
	}
	if _, err := DecodePool([]byte(in)); err == nil || strings.Contains(err.Error(), "weight") {
		t.Errorf("DecodePool error = %v, want the decoding problems only", err)
	}
}

// A fleet or tenant list beyond its bound is reported, and validating it stays cheap: the fleet
// is not expanded past the bound.
func TestValidatePoolSizeBounds(t *testing.T) {
	p := loadValidPool(t)
	p.Policy.CanaryGPUs = nil
	node := p.Fleet.Nodes[0]
	p.Fleet.Nodes = nil
	for i := range MaxFleetGPUs/8 + 1 { // 8 GPUs each: 100,008 GPUs
		n := node
		n.Name = "node-" + strconv.Itoa(i)
		p.Fleet.Nodes = append(p.Fleet.Nodes, n)
	}
	ten := p.Tenants[4]
	for len(p.Tenants) <= MaxTenants {
		ten.Name = "t-" + strconv.Itoa(len(p.Tenants))
		p.Tenants = append(p.Tenants, ten)
	}
	err := testValidator.Pool(p)
	for _, want := range []string{
		"fleet.nodes: 100008 GPUs in all, more than the 100000 a pool may have",
		"tenants: 100001 tenants, more than the 100000 a pool may have",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q", want)
		}
	}
	if got := fleetGPUs(p.Fleet); len(got["node-12500"]) != 0 || len(got["node-12499"]) != 8 {
		t.Errorf("expansion did not stop at %d GPUs: last nodes hold %d and %d", MaxFleetGPUs, len(got["node-12499"]), len(got["node-12500"]))
	}
}
