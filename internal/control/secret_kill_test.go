package control

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// secretChildEnv makes the test binary a child that writes the operator token into the data
// directory it names and SIGKILLs itself at the step named by secretChildPoint.
const (
	secretChildEnv   = "GPUPOOL_TEST_SECRET_DIR"
	secretChildPoint = "GPUPOOL_TEST_SECRET_POINT"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(secretChildEnv); dir != "" {
		point := os.Getenv(secretChildPoint)
		secretHook = func(p string) {
			if p == point {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
		if _, err := operatorSecret(Options{DataDir: dir}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOperatorTokenSurvivesSIGKILL: `serve`'s first start writes the operator token file; a
// process SIGKILLed at any step of that write leaves either no token file (the next start makes
// one) or the whole one, never an empty or partial file. Before, the write was os.WriteFile
// (truncate, then write): a kill between the two left an empty file, and every later start
// failed with "read operator token …: file is empty" (TestEmptyOperatorTokenRefused shows the
// refusal, which stays: such a file is not the server's own doing any more).
func TestOperatorTokenSurvivesSIGKILL(t *testing.T) {
	for _, point := range []string{"created", "written", "synced", "renamed"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), secretChildEnv+"="+dir, secretChildPoint+"="+point)
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v, want killed by SIGKILL at %q", err, point)
			}
			path := filepath.Join(dir, "operator.token")
			before, statErr := os.ReadFile(path)
			if statErr == nil && len(strings.TrimSpace(string(before))) != len(NewSecret()) {
				t.Fatalf("killed at %q: token file holds %q, want no file or a whole token", point, before)
			}
			s, err := operatorSecret(Options{DataDir: dir})
			if err != nil {
				t.Fatalf("start after a kill at %q: %v", point, err)
			}
			after, err := os.ReadFile(path)
			if err != nil || strings.TrimSpace(string(after)) != s {
				t.Fatalf("start after a kill at %q: file %q (%v), secret %q", point, after, err, s)
			}
			if statErr == nil && string(before) != string(after) {
				t.Fatalf("killed at %q after the token was in place: the next start replaced it", point)
			}
		})
	}
}

// TestEmptyOperatorTokenRefused: an empty token file (what the old write left when killed
// between its truncate and its write) is refused with a message naming the file.
func TestEmptyOperatorTokenRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "operator.token"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := operatorSecret(Options{DataDir: dir}); err == nil || !strings.Contains(err.Error(), "file is empty") {
		t.Fatalf("empty token file: %v", err)
	}
}
