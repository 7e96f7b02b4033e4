package v1

import (
	"math"
	"strings"
	"testing"
)

func validCost() *CostPolicy {
	return &CostPolicy{
		Currency:        "USD",
		Boards:          []BoardCost{{Board: "H100-SXM5-80GB", Capex: ptr(30000.0), AmortizationYears: ptr(4.0), MaintenancePercent: ptr(10.0), Source: "quote 2026-01"}},
		EnergyPrice:     &SourcedValue{Value: 0.12, Source: "utility tariff 2026"},
		PUE:             &SourcedValue{Value: 1.3, Source: "facility report 2025"},
		CarbonIntensity: &CarbonIntensity{LocationBased: &SourcedValue{Value: 370, Source: "grid operator 2025 average"}},
		IdlePolicy:      IdleReservation,
	}
}

// TestValidateCost changes policy.cost per case and expects exactly the listed errors, all of
// them at once.
func TestValidateCost(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *CostPolicy)
		want   []string
	}{
		{"valid", func(*CostPolicy) {}, nil},
		{"hourly price is enough", func(c *CostPolicy) {
			c.Boards[0] = BoardCost{Board: "H100", HourlyPrice: ptr(2.5), Source: "cloud list price"}
		}, nil},
		{"no currency", func(c *CostPolicy) { c.Currency = "" },
			[]string{"policy.cost.currency: required when a price is given (an ISO 4217 code such as USD)"}},
		{"bad currency", func(c *CostPolicy) { c.Currency = "usd" },
			[]string{`policy.cost.currency: must be an ISO 4217 code, three upper-case letters (got "usd")`}},
		{"neither price", func(c *CostPolicy) { c.Boards[0] = BoardCost{Board: "H100", Source: "x"} },
			[]string{"policy.cost.boards[0]: needs hourlyPrice or capex"}},
		{"both prices, all errors at once", func(c *CostPolicy) {
			c.Boards[0].HourlyPrice = ptr(-1.0)
			c.Boards[0].Source = " "
			c.PUE.Value = 0.9
			c.IdlePolicy = "fair"
		}, []string{
			"policy.cost.boards[0]: hourlyPrice and capex are exclusive",
			"policy.cost.boards[0].hourlyPrice: must be between 0 and 1000 (got -1)",
			"policy.cost.boards[0].source: required: name where the figure comes from (a price list, a quote, a grid operator and its date)",
			`policy.cost.idlePolicy: unknown value "fair" (valid: none, reservation, use)`,
			"policy.cost.pue.value: must be between 1 and 3 (got 0.9)",
		}},
		{"capex without years", func(c *CostPolicy) { c.Boards[0].AmortizationYears = nil },
			[]string{"policy.cost.boards[0].amortizationYears: required with capex"}},
		{"years 0, maintenance 150", func(c *CostPolicy) {
			c.Boards[0].AmortizationYears = ptr(0.0)
			c.Boards[0].MaintenancePercent = ptr(150.0)
		}, []string{
			"policy.cost.boards[0].amortizationYears: must be above 0 and at most 20 (got 0)",
			"policy.cost.boards[0].maintenancePercent: must be between 0 and 100 (got 150)",
		}},
		{"maintenance without capex", func(c *CostPolicy) {
			c.Boards[0] = BoardCost{Board: "H100", HourlyPrice: ptr(2.0), MaintenancePercent: ptr(5.0), Source: "x"}
		}, []string{"policy.cost.boards[0].maintenancePercent: only with capex"}},
		{"duplicate board by alias", func(c *CostPolicy) {
			c.Boards = append(c.Boards, BoardCost{Board: "H100", HourlyPrice: ptr(2.0), Source: "x"})
		}, []string{`policy.cost.boards[1].board: duplicate board "H100-SXM5-80GB" (first at policy.cost.boards[0].board)`}},
		{"unknown board", func(c *CostPolicy) { c.Boards[0].Board = "H900" },
			[]string{`policy.cost.boards[0].board: unknown board "H900"`}},
		{"carbon needs location-based", func(c *CostPolicy) {
			c.CarbonIntensity = &CarbonIntensity{MarketBased: &SourcedValue{Value: 3000, Source: "ppa"}}
		}, []string{
			"policy.cost.carbonIntensity.locationBased: required (the grid average where the pool runs)",
			"policy.cost.carbonIntensity.marketBased.value: must be between 0 and 2000 (got 3000)",
		}},
		{"energy price NaN", func(c *CostPolicy) { c.EnergyPrice.Value = math.NaN() },
			[]string{"policy.cost.energyPricePerKWh.value: must be between 0 and 10 (got NaN)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := loadValidPool(t)
			p.Policy.Cost = validCost()
			tc.mutate(p.Policy.Cost)
			err := Validate(p)
			var got []string
			if err != nil {
				for _, e := range err.(FieldErrors) {
					if strings.HasPrefix(e.Path, "policy.cost") {
						got = append(got, e.Error())
					}
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(tc.want), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d:\n got %s\nwant %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}
