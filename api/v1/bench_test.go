package v1

import (
	"fmt"
	"strings"
	"testing"
)

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

// bigPool writes a pool of n tenants on n/2 H100s (eight per node), in YAML.
func bigPool(n int) []byte {
	var sb strings.Builder
	sb.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata:\n  name: big\nfleet:\n  nodes:\n")
	for i := range n / 16 {
		fmt.Fprintf(&sb, "  - name: node-%d\n    gpus:\n    - board: H100-SXM5-80GB\n      count: 8\n", i)
	}
	sb.WriteString("tenants:\n")
	for i := range n {
		fmt.Fprintf(&sb, "- name: t-%d\n  path: org-%d/team-%d\n  model:\n    name: llama-3.1-8b\n  traffic:\n    rps: 0.5\n"+
			"    inputTokens: 512\n    outputTokens: 128\n  slo:\n    ttftP99: 2s\n    tpotP99: 100ms\n", i, i%10, i%100)
	}
	return []byte(sb.String())
}

// BenchmarkLoadPool20000 decodes, defaults and validates a pool of 20,000 tenants on 10,000
// GPUs, the planner's largest bar.
func BenchmarkLoadPool20000(b *testing.B) {
	data := bigPool(20000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := LoadPool(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeTree20000 measures, side by side, decoding a parsed 20,000-tenant pool from its
// own JSON text (what Decode does when the shape check changed nothing) and from the tree
// encoded again (what it must do otherwise).
func BenchmarkDecodeTree20000(b *testing.B) {
	data := bigPool(20000)
	for _, c := range []struct {
		name  string
		reuse bool
	}{{"reencode", false}, {"raw", true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				tree, raw, err := parseTreeRaw(data)
				if err != nil {
					b.Fatal(err)
				}
				if !c.reuse {
					raw = nil
				}
				b.StartTimer()
				if err := decodeTreeRaw(tree, raw, new(Pool)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
