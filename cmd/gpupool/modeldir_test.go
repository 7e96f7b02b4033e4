package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const tinyLlamaDir = "../../internal/llm/testdata/tiny-llama"

// copyTiny copies the tiny checkpoint into a fresh directory.
func copyTiny(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(tinyLlamaDir, f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, f), string(b))
	}
	return dir
}

// fit --model-dir reads only regular files inside the folder: a symlink out of it is refused
// without its target's content in the error, and a FIFO is refused at once instead of hanging.
func TestFitModelDirUntrusted(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "shadow")
	writeFile(t, secret, "root:$6$s3cr3tHash:19000:0:99999:7:::\n")
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"config links out", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "config.json")))
			must(t, os.Symlink(secret, filepath.Join(dir, "config.json")))
		}, "config.json: statat config.json: path escapes from parent (a symbolic link leads out of the model directory"},
		{"weights link out", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "model.safetensors")))
			must(t, os.Symlink(secret, filepath.Join(dir, "model.safetensors")))
		}, "model.safetensors: path escapes from parent (a symbolic link leads out"},
		{"weights are a FIFO", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "model.safetensors")))
			must(t, syscall.Mkfifo(filepath.Join(dir, "model.safetensors"), 0o644))
		}, "is a named pipe (FIFO), not a regular file"},
		{"config is a FIFO", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "config.json")))
			must(t, syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o644))
		}, "is a named pipe (FIFO), not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyTiny(t)
			tt.setup(t, dir)
			start := time.Now()
			out, errOut, code := runCmd(t, "fit", "--model-dir", dir, "--board", "H100")
			if code != exitInvalid || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, want 1 naming %q:\n%s", code, tt.want, errOut)
			}
			if strings.Contains(out+errOut, "s3cr3t") || strings.Contains(out+errOut, "root:") {
				t.Errorf("the output quotes the linked file:\n%s%s", out, errOut)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	// A symlink inside the folder stays allowed.
	dir := copyTiny(t)
	must(t, os.Rename(filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "weights.bin")))
	must(t, os.Symlink("weights.bin", filepath.Join(dir, "model.safetensors")))
	if _, errOut, code := runCmd(t, "fit", "--model-dir", dir, "--board", "H100"); code != exitOK {
		t.Errorf("a link inside the folder: exit %d:\n%s", code, errOut)
	}
}

// The size limit is checked before a file is read or parsed, the same for every file argument.
func TestInputSizeLimit(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(big)
	must(t, err)
	must(t, f.Truncate(maxInputBytes+1)) // sparse: nothing is written, only the size checked
	must(t, f.Close())
	pool := writeTemp(t, "pool.yaml", planPool)
	for _, args := range [][]string{{"validate", big}, {"plan", big}, {"plan", pool, "--current", big}, {"fair", big},
		{"simulate", pool, "--plan", big}, {"simulate", pool, "--strategy", "mps", "--trace", big}, {"render", big, "--pool", pool, "--dry-run"}} {
		start := time.Now()
		out, errOut, code := runCmd(t, args...)
		if code != exitInvalid || !strings.Contains(out+errOut, "more than the 67108864 (64 MiB) gpupool reads") {
			t.Errorf("%v: exit %d:\n%s%s", args, code, out, errOut)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%v took %v: the file was read", args, d)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A pipe is read as a file argument (a shell's <(…)), up to the limit; a stream past the limit
// is refused, not cut.
func TestInputPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pool.fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(planPool)
	}()
	if _, errOut, code := runCmd(t, "validate", fifo); code != exitOK {
		t.Fatalf("validate a pipe: exit %d: %s", code, errOut)
	}
	c := newCapped(strings.NewReader(strings.Repeat("x", maxInputBytes+10)), "flag --trace", "t.csv")
	n, err := io.Copy(io.Discard, c)
	if err == nil || !strings.Contains(err.Error(), "more than the 67108864 bytes") || n > maxInputBytes+1 {
		t.Errorf("capped read %d bytes, error %v", n, err)
	}
	c = newCapped(strings.NewReader("short"), "flag --trace", "t.csv")
	if b, err := io.ReadAll(c); err != nil || string(b) != "short" {
		t.Errorf("capped short read = %q, %v", b, err)
	}
}
