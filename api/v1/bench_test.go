package v1

import "testing"

func BenchmarkDecodePool(b *testing.B) {
	data := readTestdata(b, "pool-valid.yaml")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodePool(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePlanJSON(b *testing.B) {
	js, err := EncodeJSON(loadValidPlan(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(js)))
	for b.Loop() {
		if _, err := DecodePlan(js); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidatePlan(b *testing.B) {
	plan, pool := loadValidPlan(b), loadValidPool(b)
	for b.Loop() {
		if err := testValidator.Plan(plan, pool); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeYAMLPlan(b *testing.B) {
	plan := loadValidPlan(b)
	for b.Loop() {
		if _, err := EncodeYAML(plan); err != nil {
			b.Fatal(err)
		}
	}
}
