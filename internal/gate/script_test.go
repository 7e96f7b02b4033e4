package gate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// A script is one event per line, "at DURATION EVENT key=value…"; the golden file beside it holds
// what Step answered: the phase, the actions and the new notes after every event.
//
//	policy cooldown=1h max=2 window=1h [uncordonAttempts=4 uncordonMaxDelay=5s jitter=0.5]
//	at 0s desire gpu=G0 board=H100-SXM5-80GB current="7g.80gb@0" layout="3g.40gb@0 3g.40gb@4"
//	at 1s done                      (answers the pending action)
//	at 2s done observed="7g.80gb@0" partial=""
//	at 3s fail error="boom" [draw=0.25] (draw: the executor's random draw, 0 unless given)
//	at 4s tick | recover | reset
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.script")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts under testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".script"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runScript(string(src))
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".script") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("script %s: output differs from %s (run with -update after checking):\n%s", f, golden, got)
			}
		})
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func runScript(src string) (string, error) {
	var s State
	var out strings.Builder
	for i, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := fields(line)
		switch f[0] {
		case "policy":
			kv := keyvals(f[1:])
			s.Policy.Cooldown, _ = time.ParseDuration(kv["cooldown"])
			s.Policy.Window, _ = time.ParseDuration(kv["window"])
			s.Policy.MaxChanges, _ = strconv.Atoi(kv["max"])
			s.Policy.Uncordon.Attempts, _ = strconv.Atoi(kv["uncordonAttempts"])
			s.Policy.Uncordon.MaxDelay, _ = time.ParseDuration(kv["uncordonMaxDelay"])
			s.Policy.Uncordon.Jitter, _ = strconv.ParseFloat(kv["jitter"], 64)
			continue
		case "at":
		default:
			return "", fmt.Errorf("line %d: want policy or at, got %q", i+1, f[0])
		}
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return "", fmt.Errorf("line %d: %w", i+1, err)
		}
		ev, err := scriptEvent(s, f[2], keyvals(f[3:]))
		if err != nil {
			return "", fmt.Errorf("line %d: %w", i+1, err)
		}
		notes := len(s.Notes)
		var acts []Action
		s, acts = Step(s, ev, epoch.Add(d))
		fmt.Fprintf(&out, "%s %s -> phase=%s cordoned=%t queue=%d", f[1], strings.Join(f[2:], " "), s.Phase(), s.Cordoned, len(s.Queue))
		if s.UncordonFailures > 0 {
			fmt.Fprintf(&out, " uncordonFailures=%d", s.UncordonFailures)
		}
		out.WriteString("\n")
		for _, a := range acts {
			fmt.Fprintf(&out, "  action %d %s gpu=%s instance=%s instances=%q reason=%q", a.ID, a.Kind, a.GPU, inst(a.Instance), a.Instances.String(), a.Reason)
			if !a.NotBefore.IsZero() {
				fmt.Fprintf(&out, " notBefore=%s", a.NotBefore.Sub(epoch))
			}
			out.WriteString("\n")
		}
		for _, n := range s.Notes[min(notes, len(s.Notes)):] {
			fmt.Fprintf(&out, "  note %s: %s\n", n.Code, n.Message)
		}
	}
	return out.String(), nil
}

func inst(in gpu.Instance) string {
	if in.Profile == "" {
		return "-"
	}
	return in.String()
}

func scriptEvent(s State, kind string, kv map[string]string) (Event, error) {
	layout := func(k string) gpu.Layout {
		l, _ := gpu.ParseLayout(kv[k])
		return l
	}
	var id uint64
	if s.Pending != nil {
		id = s.Pending.ID
	}
	if v, ok := kv["id"]; ok {
		id, _ = strconv.ParseUint(v, 10, 64)
	}
	switch kind {
	case "desire":
		return Event{Kind: EvDesire, Desired: Desired{GPU: kv["gpu"], Board: kv["board"], Layout: layout("layout"), Current: layout("current")}}, nil
	case "done":
		ev := Event{Kind: EvDone, ID: id}
		if _, ok := kv["observed"]; ok {
			ev.Observed = &Observation{Layout: layout("observed"), Partial: layout("partial")}
		}
		return ev, nil
	case "fail":
		draw, _ := strconv.ParseFloat(kv["draw"], 64)
		return Event{Kind: EvFailed, ID: id, Error: kv["error"], Draw: draw}, nil
	case "tick":
		return Event{Kind: EvTick}, nil
	case "recover":
		return Event{Kind: EvRecover}, nil
	case "reset":
		return Event{Kind: EvReset}, nil
	}
	return Event{}, fmt.Errorf("unknown event %q", kind)
}

// fields splits on spaces outside double quotes.
func fields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func keyvals(f []string) map[string]string {
	kv := map[string]string{}
	for _, x := range f {
		k, v, _ := strings.Cut(x, "=")
		kv[k] = strings.Trim(v, `"`)
	}
	return kv
}
