package agent

import (
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
)

func TestParseConfig(t *testing.T) {
	c, s, err := ParseConfig([]byte(`
node: n1
stateDir: /tmp/x
policy: {reconfigCooldown: 30m, maxChanges: 2}
gpus:
- {index: 0, layout: "3g.40gb@0 3g.40gb@4", mps: {activeThreadPercent: 50, pinnedMemory: 20G}}
engines:
- {tenant: chat, gpu: 0, slice: "3g.40gb@0", url: "http://127.0.0.1:8000/metrics"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9400" || s.Poll != time.Second || s.Cooldown != 30*time.Minute || s.Layouts[0].String() != "3g.40gb@0 3g.40gb@4" {
		t.Fatalf("config %+v settings %+v", c, s)
	}
}

// policy.uncordon: the defaults are ADR 0073's attempts and longest wait with half of each wait
// random; set values are taken, jitter 0 included (the fixed schedule), and bad ones are refused
// with their field paths, all at once.
func TestParseConfigUncordon(t *testing.T) {
	_, s, err := ParseConfig([]byte("stateDir: /x\ngpus: []\n"))
	if err != nil || s.Uncordon != (gate.UncordonPolicy{Attempts: 8, MaxDelay: 30 * time.Second, Jitter: 0.5}) {
		t.Fatalf("defaults: %+v, %v", s.Uncordon, err)
	}
	_, s, err = ParseConfig([]byte("stateDir: /x\ngpus: []\npolicy: {uncordon: {attempts: 3, maxDelay: 2m, jitter: 0}}\n"))
	if err != nil || s.Uncordon != (gate.UncordonPolicy{Attempts: 3, MaxDelay: 2 * time.Minute, Jitter: 0}) {
		t.Fatalf("set: %+v, %v", s.Uncordon, err)
	}
	_, s, err = ParseConfig([]byte("stateDir: /x\ngpus: []\npolicy: {uncordon: {jitter: 1, maxDelay: 1s, attempts: 100}}\n"))
	if err != nil || s.Uncordon != (gate.UncordonPolicy{Attempts: 100, MaxDelay: time.Second, Jitter: 1}) {
		t.Fatalf("bounds: %+v, %v", s.Uncordon, err)
	}
	for _, tt := range []struct{ in, want string }{
		{"{attempts: -1}", "policy.uncordon.attempts: -1 outside 1..100"},
		{"{attempts: 101}", "policy.uncordon.attempts: 101 outside 1..100"},
		{"{maxDelay: 500ms}", "policy.uncordon.maxDelay: 500ms outside 1s..1h0m0s"},
		{"{maxDelay: 2h}", "policy.uncordon.maxDelay: 2h0m0s outside 1s..1h0m0s"},
		{"{maxDelay: soon}", `policy.uncordon.maxDelay: "soon" is not a duration`},
		{"{jitter: 1.5}", "policy.uncordon.jitter: 1.5 outside 0..1"},
		{"{jitter: -0.1}", "policy.uncordon.jitter: -0.1 outside 0..1"},
		{"{Jitter: 0.2}", `policy.uncordon.Jitter: unknown field (field names are case-sensitive: "jitter")`},
	} {
		_, _, err := ParseConfig([]byte("stateDir: /x\ngpus: []\npolicy: {uncordon: " + tt.in + "}\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.in, err, tt.want)
		}
	}
	_, _, err = ParseConfig([]byte("stateDir: /x\ngpus: []\npolicy: {uncordon: {attempts: 0, maxDelay: 0s, jitter: 2}}\n"))
	if err == nil || !strings.Contains(err.Error(), "policy.uncordon.maxDelay: 0s outside") || !strings.Contains(err.Error(), "policy.uncordon.jitter: 2 outside") {
		t.Errorf("two bad fields: %v, want both reported", err)
	}
}

// Every problem is reported at once, each with its field path.
func TestParseConfigAllErrors(t *testing.T) {
	_, _, err := ParseConfig([]byte(`
pollInterval: 10ms
policy: {reconfigCooldown: soon, maxChanges: -1}
gpus:
- {index: 0, layout: "3g.40gb"}
- {index: 0, mps: {activeThreadPercent: 150}, clocks: {minMHz: 2000, maxMHz: 1000}}
engines:
- {gpu: 0, smShare: 2}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"stateDir: required", "pollInterval: 10ms is below 100ms", "policy.reconfigCooldown:",
		"policy.maxChanges:", "gpus[0].layout:", "gpus[1].index: GPU 0 listed twice", "gpus[1].mps.activeThreadPercent:",
		"gpus[1].clocks:", "engines[0].tenant: required", "engines[0].url: required", "engines[0].smShare:", "engines[0].slice:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	_, _, err = ParseConfig([]byte("stateDir: x\nmpsDaemons: cluster\ngpus: [{index: 1, mps: {activeThreadPercent: 50}}]\n"))
	if err == nil || !strings.Contains(err.Error(), "gpus[0].mps: the cluster runs the MPS daemons") {
		t.Errorf("an mps block with mpsDaemons cluster: %v", err)
	}
	if _, _, err := ParseConfig([]byte("stateDir: x\nmpsDaemons: kubelet\n")); err == nil || !strings.Contains(err.Error(), `mpsDaemons: "kubelet" is not agent or cluster`) {
		t.Errorf("mpsDaemons kubelet: %v", err)
	}
	if _, _, err := ParseConfig([]byte("stateDir: x\nbogus: 1\n")); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown field: %v", err)
	}
}

// A field name in other letter case is refused, not taken as the field (the last of the two
// winning silently), in nested blocks and lists too; the right spelling still decodes.
func TestParseConfigFieldCase(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"stateDir: /x\ngpus: [{index: 0}]\npolicy: {maxChanges: 1, maxchanges: 2}\n",
			`policy.maxchanges: unknown field (field names are case-sensitive: "maxChanges")`},
		{"stateDir: /x\nnode: a\nNode: b\ngpus: []\n", `Node: unknown field (field names are case-sensitive: "node")`},
		{"stateDir: /x\ngpus: [{index: 0, MPS: {activeThreadPercent: 50}}]\n", `gpus[0].MPS: unknown field (field names are case-sensitive: "mps")`},
		{"stateDir: /x\ngpus: [{index: 0, mps: {ActiveThreadPercent: 50}}]\n",
			`gpus[0].mps.ActiveThreadPercent: unknown field (field names are case-sensitive: "activeThreadPercent")`},
	} {
		_, _, err := ParseConfig([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.in, err, tt.want)
		}
	}
	c, _, err := ParseConfig([]byte("stateDir: /x\ngpus: [{index: 0, mps: {activeThreadPercent: 50}}]\npolicy: {maxChanges: 2}\n"))
	if err != nil || c.Policy.MaxChanges != 2 || c.GPUs[0].MPS.ActiveThreadPercent != 50 {
		t.Errorf("well-spelled config: %+v, %v", c, err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("stateDir: /x\ngpus: [{index: 1, layout: \"7g.80gb@0\"}]\n"))
	f.Add([]byte("node: a\npolicy: {window: 2h}\n"))
	f.Add([]byte("stateDir: /x\npolicy: {uncordon: {attempts: 3, maxDelay: 10s, jitter: 0.25}}\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, s, err := ParseConfig(b)
		if err != nil {
			return
		}
		u := s.Uncordon
		if c.StateDir == "" || s.Poll < 100*time.Millisecond && s.Poll != 0 || len(s.Layouts) > len(c.GPUs) ||
			u.Attempts < 1 || u.Attempts > 100 || u.MaxDelay < time.Second || u.MaxDelay > time.Hour || !(u.Jitter >= 0 && u.Jitter <= 1) {
			t.Fatalf("accepted an invalid config: %+v %+v", c, s)
		}
	})
}
