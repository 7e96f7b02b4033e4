package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the main package in dir (a path relative to the calling test's package, such as
// "../../cmd/gpupool") into a temporary directory of t, without the race detector, and returns the
// binary's path. go must be on PATH; the build fails the test, with the compiler's output.
func Build(t testing.TB, dir, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("build %s: the go command is not on PATH: %v", name, err)
	}
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(goBin, "build", "-o", bin, dir)
	// go-nvml's header marks many functions deprecated; without this each cgo compile prints pages of warnings.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}
