package v1

import (
	"reflect"
	"testing"
	"time"
)

func TestDefaultFillsUnsetFields(t *testing.T) {
	p := &Pool{Tenants: []Tenant{{Name: "a"}}}
	Default(p)
	pol, ten := p.Policy, p.Tenants[0]
	checks := []struct {
		what string
		got  any
		want any
	}{
		{"apiVersion", p.APIVersion, "gpupool.dev/v1"},
		{"kind", p.Kind, "Pool"},
		{"burstPoolPercent", *pol.BurstPoolPercent, 10},
		{"allowedModes", pol.AllowedModes, []Mode{"exclusive", "mig", "mps", "timeslice"}},
		{"maxUnavailable", *pol.MaxUnavailable, IntOrPercent{Value: 1}},
		{"reconfigCooldown", pol.ReconfigCooldown.Std(), time.Hour},
		{"weight", *ten.Weight, 1.0},
		{"isolation", ten.Isolation, IsolationSoft},
		{"energyClass", ten.EnergyClass, EnergyBalanced},
		{"kvCacheDtype", ten.Model.KVCacheDtype, "auto"},
		{"pattern", ten.Traffic.Pattern, PatternPoisson},
		// No default: unset keeps its meaning.
		{"canaryGPUs", pol.CanaryGPUs, []GPURef(nil)},
		{"cap", ten.Cap, (*int)(nil)},
		{"replicas", ten.Replicas, (*int)(nil)},
		{"quantization", string(ten.Model.Quantization), ""},
		{"maxContext", ten.MaxContext, 0},
		{"slo.ttftP99", ten.SLO.TTFTP99, (*Duration)(nil)},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func TestDefaultKeepsSetFields(t *testing.T) {
	p := &Pool{
		APIVersion: "other/v9", Kind: "Other",
		Policy: Policy{BurstPoolPercent: ptr(0), AllowedModes: []Mode{ModeMIG},
			MaxUnavailable: &IntOrPercent{Value: 25, Percent: true}, ReconfigCooldown: ptr(Duration(0))},
		Tenants: []Tenant{{Name: "a", Weight: ptr(2.5), Isolation: IsolationHard, EnergyClass: EnergyEfficiency,
			Model: Model{KVCacheDtype: "fp8"}, Traffic: Traffic{Pattern: PatternBursty}}},
	}
	want := clonePool(t, p)
	Default(p)
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Default changed set fields:\n got %#v\nwant %#v", p, want)
	}
}

func TestDefaultNormalisesQuantization(t *testing.T) {
	p := &Pool{Tenants: []Tenant{{Name: "a", Model: Model{Quantization: "awq"}}, {Name: "b", Model: Model{Quantization: "fp8_e4m3"}},
		{Name: "c", Model: Model{Quantization: "int8"}}, {Name: "d", Model: Model{Quantization: "nf4"}}}}
	Default(p)
	for i, want := range []string{"int4-awq", "fp8", "int8", "nf4"} {
		if got := string(p.Tenants[i].Model.Quantization); got != want {
			t.Errorf("tenant %s: quantization %q, want %q", p.Tenants[i].Name, got, want)
		}
	}
}

func TestDefaultIsIdempotent(t *testing.T) {
	p := loadValidPool(t) // already defaulted once
	once := clonePool(t, p)
	Default(p)
	if !reflect.DeepEqual(p, once) {
		t.Error("a second Default changed the pool")
	}
	Default(nil) // must not panic
}

// clonePool deep-copies p through JSON.
func clonePool(t testing.TB, p *Pool) *Pool {
	t.Helper()
	b, err := EncodeJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	var out Pool
	tree, err := parseTree(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeTree(tree, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
