package v1

import "gpupool.dev/gpupool/internal/llm"

// Defaults filled by Default.
const (
	DefaultBurstPoolPercent = 10
	DefaultMaxUnavailable   = 1
	DefaultReconfigCooldown = Duration(3600e9) // 1h
	DefaultWeight           = 1.0
	DefaultIsolation        = IsolationSoft
	DefaultEnergyClass      = EnergyBalanced
	DefaultKVCacheDtype     = "auto"
	DefaultPattern          = PatternPoisson
)

// Default fills every unset field of p that has a default, in place, and leaves set fields
// alone (an explicit `burstPoolPercent: 0` stays 0). It is idempotent. The defaults:
//
//   - apiVersion gpupool.dev/v1, kind Pool
//   - policy.burstPoolPercent 10, policy.allowedModes [exclusive, mig, mps, timeslice],
//     policy.maxUnavailable 1, policy.reconfigCooldown 1h
//   - per tenant: weight 1, isolation soft, energyClass balanced, model.kvCacheDtype auto,
//     traffic.pattern poisson
//
// Fields without a default (maxContext, concurrency, cap, replicas, model.quantization) keep
// their "unset" meaning, described on each field. A model.quantization given as a known alias
// ("awq", "w4a16", …) is rewritten to its canonical name, as Decode does.
func Default(p *Pool) {
	if p == nil {
		return
	}
	if p.APIVersion == "" {
		p.APIVersion = APIVersion
	}
	if p.Kind == "" {
		p.Kind = KindPool
	}
	pol := &p.Policy
	if pol.BurstPoolPercent == nil {
		pol.BurstPoolPercent = ptr(DefaultBurstPoolPercent)
	}
	if pol.AllowedModes == nil {
		pol.AllowedModes = append([]Mode(nil), allModes...)
	}
	if pol.MaxUnavailable == nil {
		pol.MaxUnavailable = &IntOrPercent{Value: DefaultMaxUnavailable}
	}
	if pol.ReconfigCooldown == nil {
		pol.ReconfigCooldown = ptr(DefaultReconfigCooldown)
	}
	for i := range p.Tenants {
		defaultTenant(&p.Tenants[i])
	}
}

func defaultTenant(t *Tenant) {
	if t.Weight == nil {
		t.Weight = ptr(DefaultWeight)
	}
	if t.Isolation == "" {
		t.Isolation = DefaultIsolation
	}
	if t.EnergyClass == "" {
		t.EnergyClass = DefaultEnergyClass
	}
	if t.Model.KVCacheDtype == "" {
		t.Model.KVCacheDtype = DefaultKVCacheDtype
	}
	if t.Traffic.Pattern == "" {
		t.Traffic.Pattern = DefaultPattern
	}
	t.Model.Quantization = canonicalQuantization(t.Model.Quantization)
}

// normaliseQuantizations rewrites every tenant's model.quantization spelled as an alias that
// llm.ParseQuantization knows ("awq", "gptq", "w4a16", "fp8_e4m3", "bfloat16", …) to its canonical
// name. Unknown spellings are kept, so that Validate reports them.
func normaliseQuantizations(p *Pool) {
	for i := range p.Tenants {
		m := &p.Tenants[i].Model
		m.Quantization = canonicalQuantization(m.Quantization)
	}
}

// canonicalQuantization returns q's canonical name, or q itself when it is empty or unknown.
func canonicalQuantization(q llm.Quantization) llm.Quantization {
	if q == "" || q.Valid() {
		return q
	}
	if c, err := llm.ParseQuantization(string(q)); err == nil {
		return c
	}
	return q
}

func ptr[T any](v T) *T { return &v }
