package mps

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestEventsThatKillClientsAreWarnings: a daemon or server that exited (its clients died with it)
// and a daemon that did not become ready are logged as warnings, so that a log showing warnings
// only (the node agent's) records them; a start or a stop stays at info.
func TestEventsThatKillClientsAreWarnings(t *testing.T) {
	var buf bytes.Buffer
	s := New(Options{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	for _, k := range []string{"started", "restarted", "stopped", "exited", "server-exited", "not-ready"} {
		s.emit(Event{UUID: "GPU-0", Kind: k})
	}
	out := buf.String()
	for _, k := range []string{"event=exited", "event=server-exited", "event=not-ready"} {
		if !strings.Contains(out, k) {
			t.Errorf("%s is not a warning:\n%s", k, out)
		}
	}
	for _, k := range []string{"event=started", "event=restarted", "event=stopped"} {
		if strings.Contains(out, k) {
			t.Errorf("%s is a warning:\n%s", k, out)
		}
	}
}
