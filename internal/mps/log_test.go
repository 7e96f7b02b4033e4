package mps

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseLogLine(t *testing.T) {
	cases := []struct {
		line string
		want logEvent
	}{
		// Lines as nvidia-cuda-mps-control 535 writes them (seen on this project's build machine).
		{"[2026-12-01 15:34:04.272 Control 23713] Starting new server 23743 for user 0", logEvent{"server-started", 23743, ""}},
		{"[2026-12-01 15:34:04.276 Control 23713] Server 23743 exited with status 1", logEvent{"server-exited", 23743, "1"}},
		{"[2026-12-01 15:34:04.807 Control 23713] Exit with status 1", logEvent{}},
		{"[2026-12-01 15:33:58.481 Control 23476] Cmd:get_server_list", logEvent{}},
		{"Server 99999999999999999999 exited with status 1", logEvent{}}, // pid overflows int: ignored
	}
	for _, c := range cases {
		if got := parseLogLine(c.line); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.line, got, c.want)
		}
	}
}

func FuzzParseLogLine(f *testing.F) {
	f.Add("[2026-12-01 15:34:04.272 Control 23713] Starting new server 23743 for user 0")
	f.Add("Server 1 exited with status -11")
	f.Add("")
	f.Fuzz(func(t *testing.T, line string) {
		e := parseLogLine(line)
		switch e.kind {
		case "":
		case "server-started", "server-exited":
			if e.pid < 0 || !strings.Contains(line, strconv.Itoa(e.pid)) {
				t.Fatalf("%q: pid %d not in the line", line, e.pid)
			}
		default:
			t.Fatalf("%q: kind %q", line, e.kind)
		}
	})
}
