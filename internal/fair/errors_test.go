package fair

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRefusalsNameTheirField: every refusal of a change to one tenant carries a *FieldError
// naming the tenant's field, and its text is the one the allocator always wrote. Pool 8:
// reservations 3 + 20 > 8 (reservation); demand 2^20 + 1 over limits.maxDemand (demand); a
// demand pushing the total 3 + 6 over limits.maxTotalDemand 8 (demand); weight 1e7 (weight).
func TestRefusalsNameTheirField(t *testing.T) {
	a, err := New(Config{Capacity: Vector{"gpu": 8}, Limits: Limits{MaxTotalDemand: 8},
		Tenants: []Tenant{{Name: "a", Task: Vector{"gpu": 1}, Demand: 3, Reservation: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	big := Tenant{Name: "b", Task: Vector{"gpu": 1}, Demand: 1, Reservation: 20}
	heavy := Tenant{Name: "b", Task: Vector{"gpu": 1}, Demand: 1, Weight: 1e7}
	cases := []struct {
		name   string
		apply  func() error
		fields []string
		text   string
	}{
		{"reservation", func() error { _, err := a.Apply(t0, AddTenant{Tenant: big}); return err }, []string{"reservation"}, "reservations: need 23 of gpu, the steady pool has 8"},
		{"weight", func() error { _, err := a.Apply(t0, AddTenant{Tenant: heavy}); return err }, []string{"weight"}, "weight: 1e+07 is outside"},
		{"demand limit", func() error { _, err := a.SetDemand(t0, "a", 1<<20+1); return err }, []string{"demand"}, "demand: 1048577 exceeds the limit"},
		{"total demand", func() error { _, err := a.Apply(t0, SetDemand{Tenant: "a", Demand: 9}); return err }, []string{"demand"}, "total demand 9 would exceed the limit of 8"},
	}
	for _, c := range cases {
		err := c.apply()
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %q lacks %q", c.name, err, c.text)
		}
		var fields []string
		for _, e := range joined(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				fields = append(fields, fe.Field)
			}
		}
		if !slices.Equal(fields, c.fields) {
			t.Errorf("%s: fields %v, want %v (%v)", c.name, fields, c.fields, err)
		}
	}
}

// joined flattens errors.Join trees into their leaves.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, joined(e)...)
		}
		return out
	}
	return []error{err}
}
