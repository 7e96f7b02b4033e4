package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// runCmd runs the CLI in-process and returns stdout, stderr and the exit code main would use.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	if err != nil {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), exitCode(err)
}

// writeTemp writes content to name in a fresh temporary directory and returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
