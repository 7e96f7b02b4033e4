package plan

import (
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// contextFor: maxContext wins; otherwise min(8192, model max), raised to prompt + output.
func TestContextFor(t *testing.T) {
	cases := []struct {
		name            string
		maxCtx, in, out int
		maxPos, want    int
	}{
		{"explicit", 4096, 10000, 200, 131072, 4096},
		{"default", 0, 800, 200, 131072, 8192},                  // min(8192, 131072)
		{"short model", 0, 800, 200, 4096, 4096},                // min(8192, 4096)
		{"long requests", 0, 10000, 200, 131072, 10200},         // 10000 + 200 > 8192
		{"longer than the model", 0, 30000, 5000, 32768, 32768}, // capped at the model's maximum
		{"unknown model maximum", 0, 9000, 1000, 0, 10000},
	}
	for _, c := range cases {
		tn := v1.Tenant{MaxContext: c.maxCtx, Traffic: v1.Traffic{InputTokens: c.in, OutputTokens: c.out}}
		if got := contextFor(tn, c.maxPos); got != c.want {
			t.Errorf("%s: context %d, want %d", c.name, got, c.want)
		}
	}
}
