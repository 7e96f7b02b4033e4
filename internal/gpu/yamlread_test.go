package gpu

// A small line-based reader for the two YAML files under testdata/. Package gpu may import the
// standard library only, so the tests read just the shapes those files use: one profile per line
// as a flow mapping, two-space indentation. See testdata/README.md.

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// stripComment removes a "# ..." comment that is outside quotes and preceded by a space.
func stripComment(line string) string {
	inQuote := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '"':
			inQuote = !inQuote
		case c == '#' && !inQuote && (i == 0 || line[i-1] == ' '):
			return strings.TrimRight(line[:i], " ")
		}
	}
	return strings.TrimRight(line, " ")
}

// splitTop splits s on commas at nesting depth 0, outside quotes.
func splitTop(s string) []string {
	var parts []string
	depth, inQuote, last := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '[', '{':
			if !inQuote {
				depth++
			}
		case ']', '}':
			if !inQuote {
				depth--
			}
		case ',':
			if !inQuote && depth == 0 {
				parts = append(parts, strings.TrimSpace(s[last:i]))
				last = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[last:]); rest != "" {
		parts = append(parts, rest)
	}
	return parts
}

// parseFlow reads "{a: 1, b: [1, 2], c: {x: 1}}" into raw values by key.
func parseFlow(s string) map[string]string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	m := map[string]string{}
	for _, part := range splitTop(s) {
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			continue
		}
		m[unquote(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	return m
}

func unquote(s string) string { return strings.Trim(strings.TrimSpace(s), `"`) }

// parseList reads "[a, b]" or a single scalar into strings.
func parseList(s string) []string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") {
		return []string{unquote(s)}
	}
	var out []string
	for _, p := range splitTop(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")) {
		out = append(out, unquote(p))
	}
	return out
}

func parseInts(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, p := range parseList(s) {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("parse int list %q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, stripComment(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return lines
}

// refBoard is one board of mig-profiles.yaml: its scalar keys and its profile rows.
type refBoard struct {
	name     string
	kv       map[string]string
	profiles []map[string]string
}

// readProfilesYAML reads the `gpus:` section of testdata/mig-profiles.yaml.
func readProfilesYAML(t *testing.T) []*refBoard {
	t.Helper()
	var boards []*refBoard
	inGPUs := false
	for _, line := range readLines(t, "testdata/mig-profiles.yaml") {
		trim := strings.TrimSpace(line)
		switch ind := indentOf(line); {
		case trim == "":
		case ind == 0:
			inGPUs = trim == "gpus:"
		case !inGPUs:
		case ind == 2 && strings.HasSuffix(trim, ":"):
			boards = append(boards, &refBoard{name: strings.TrimSuffix(trim, ":"), kv: map[string]string{}})
		case ind == 4 && len(boards) > 0:
			if k, v, ok := strings.Cut(trim, ":"); ok {
				boards[len(boards)-1].kv[k] = strings.TrimSpace(v)
			}
		case ind == 6 && strings.HasPrefix(trim, "- {") && len(boards) > 0:
			b := boards[len(boards)-1]
			b.profiles = append(b.profiles, parseFlow(strings.TrimPrefix(trim, "- ")))
		}
	}
	if len(boards) < 10 {
		t.Fatalf("read %d boards from mig-profiles.yaml; the reader no longer matches the file", len(boards))
	}
	return boards
}

// cfgEntry is one list entry of a mig-parted config.
type cfgEntry struct {
	config  string
	filters []string
	devices map[string]int
}

// readMigParted reads the entries of testdata/mig-parted-config-default.yaml.
func readMigParted(t *testing.T) []*cfgEntry {
	t.Helper()
	var out []*cfgEntry
	config := ""
	for _, line := range readLines(t, "testdata/mig-parted-config-default.yaml") {
		trim := strings.TrimSpace(line)
		switch ind := indentOf(line); {
		case trim == "":
		case ind == 2 && strings.HasSuffix(trim, ":"):
			config = strings.TrimSuffix(trim, ":")
		case ind == 4 && strings.HasPrefix(trim, "- "):
			out = append(out, &cfgEntry{config: config, devices: map[string]int{}})
			trim = strings.TrimPrefix(trim, "- ")
			fallthrough
		case ind == 6 && len(out) > 0:
			if v, ok := strings.CutPrefix(trim, "device-filter:"); ok {
				out[len(out)-1].filters = parseList(v)
			}
		case ind == 8 && len(out) > 0:
			k, v, _ := strings.Cut(trim, ":")
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("mig-parted %s: count %q: %v", config, v, err)
			}
			out[len(out)-1].devices[unquote(k)] = n
		}
	}
	if len(out) < 81 {
		t.Fatalf("read %d entries from mig-parted config; the reader no longer matches the file", len(out))
	}
	return out
}
