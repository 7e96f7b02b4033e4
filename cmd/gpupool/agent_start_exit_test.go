package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentStartExitCodes: the agent's start-up failures that are the operator's to fix exit 1
// with a message naming the path or condition and what to do, not 3 ("internal error, please
// report"), which each exited before: a state directory that cannot be made (a regular file in
// its place, or above it: file modes would not stop a test run as root), a lock file that cannot
// be opened (a directory in its place), no GPU driver (NVML's start fails, without --fake), an
// address already in use, and a server CA file that cannot be read. Each is run as a child
// process through main, so the exit status is the process's own.
func TestAgentStartExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup prepares dir and returns the config's stateDir and the command's arguments after
		// "agent --config CFG".
		setup func(t *testing.T, dir string) (state string, args []string)
		want  []string
	}{
		{name: "state dir is a file", setup: func(t *testing.T, dir string) (string, []string) {
			state := filepath.Join(dir, "state")
			must(t, os.WriteFile(state, nil, 0o644))
			return state, []string{"--fake", "--once"}
		}, want: []string{"create state dir", "state", "not a directory", "check the config's stateDir", "no file in its place"}},
		{name: "file above the state dir", setup: func(t *testing.T, dir string) (string, []string) {
			must(t, os.WriteFile(filepath.Join(dir, "var"), nil, 0o644))
			return filepath.Join(dir, "var", "gpupool"), []string{"--fake"}
		}, want: []string{"create state dir", filepath.Join("var", "gpupool"), "not a directory", "the agent's user may create and write it"}},
		{name: "lock file is a directory", setup: func(t *testing.T, dir string) (string, []string) {
			state := filepath.Join(dir, "state")
			must(t, os.MkdirAll(filepath.Join(state, "lock"), 0o755))
			return state, []string{"--fake", "--once"}
		}, want: []string{"lock state dir", "is a directory", filepath.Join("state", "lock") + ": check that it is a regular file",
			"another stateDir"}},
		{name: "no GPU driver", setup: func(t *testing.T, dir string) (string, []string) {
			return filepath.Join(dir, "state"), []string{"--once"}
		}, want: []string{"init nvml", "NVIDIA driver is loaded", "nvidia-smi", "--fake"}},
		{name: "address in use", setup: func(t *testing.T, dir string) (string, []string) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			must(t, err)
			t.Cleanup(func() { ln.Close() })
			return filepath.Join(dir, "state"), []string{"--fake", "--listen", ln.Addr().String()}
		}, want: []string{"listen 127.0.0.1:", "address already in use", "a free address with --listen"}},
		{name: "server CA unreadable", setup: func(t *testing.T, dir string) (string, []string) {
			return filepath.Join(dir, "state"), []string{"--fake", "--server", "https://127.0.0.1:1", "--token", "t",
				"--server-ca", filepath.Join(dir, "missing-ca.pem")}
		}, want: []string{"read server CA", "missing-ca.pem", "--server-ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			state, args := tc.setup(t, dir)
			cfg := filepath.Join(dir, "agent.yaml")
			must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("node: n1\nstateDir: %s\nlisten: 127.0.0.1:0\ngpus: []\n", state)), 0o644))
			code, stdout, stderr := commandExit(t, append([]string{"agent", "--config", cfg}, args...)...)
			if tc.name == "no GPU driver" && code == exitOK {
				t.Skip("NVML starts on this machine (a GPU driver is loaded): no failure to check")
			}
			if code != exitInvalid {
				t.Fatalf("agent (%s): exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.name, code, exitInvalid, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("agent (%s): stderr lacks %q:\n%s", tc.name, w, stderr)
				}
			}
			if strings.Contains(stderr, "internal error") {
				t.Errorf("agent (%s) calls itself a bug:\n%s", tc.name, stderr)
			}
		})
	}
}
