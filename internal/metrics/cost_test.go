package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The cost counters are promlint clean and carry the snapshot's figures; a policy without a
// market-based intensity exports no market-based series, one without prices no money.
func TestCostMetrics(t *testing.T) {
	s := sample
	s.Cost = &Cost{Currency: "EUR", Money: true, Location: true,
		Tenants: []TenantCost{{Tenant: "chat", CostFigures: CostFigures{Chargeback: 1.5, Showback: 0.75, CarbonLocation: 120}}},
		Idle:    CostFigures{Chargeback: 0.5, Showback: 1.25, CarbonLocation: 30}}
	c := NewCollector(s)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := `
# HELP gpupool_tenant_chargeback_cost_total Cost of the tenant on this node since the agent started on the allocation basis (chargeback: hardware by reserved fraction plus energy), in the policy's currency (docs/cost.md).
# TYPE gpupool_tenant_chargeback_cost_total counter
gpupool_tenant_chargeback_cost_total{currency="EUR",tenant="chat"} 1.5
# HELP gpupool_tenant_showback_cost_total Cost of the tenant on this node since the agent started on the usage basis (showback: hardware by activity plus energy), in the policy's currency (docs/cost.md).
# TYPE gpupool_tenant_showback_cost_total counter
gpupool_tenant_showback_cost_total{currency="EUR",tenant="chat"} 0.75
# HELP gpupool_idle_showback_cost_total The node's idle line on the usage basis since the agent started (idle energy and unused time), in the policy's currency; tenants plus this add up to the GPUs' cost.
# TYPE gpupool_idle_showback_cost_total counter
gpupool_idle_showback_cost_total{currency="EUR"} 1.25
# HELP gpupool_tenant_carbon_location_based_grams_total Emissions of the tenant's energy on this node since the agent started, location-based, in grams CO2e.
# TYPE gpupool_tenant_carbon_location_based_grams_total counter
gpupool_tenant_carbon_location_based_grams_total{tenant="chat"} 120
`
	names := []string{NameTenantChargeback, NameTenantShowback, NameIdleShowback, NameTenantCarbonLocation, NameTenantCarbonMarket, NameIdleCarbonMarket}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	s.Cost = &Cost{Location: true, Tenants: s.Cost.Tenants}
	if err := testutil.CollectAndCompare(NewCollector(s), strings.NewReader(""), NameTenantChargeback, NameIdleChargeback); err != nil {
		t.Errorf("without prices: %v", err)
	}
}
