package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
)

// Every documented exit code, each from a real way to get it.
func TestExitCodes(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", planPool)
	tests := []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"ok", []string{"gpus"}, exitOK, ""},
		{"unknown flag", []string{"plan", pool, "--bogus"}, exitInvalid, "unknown flag: --bogus (see gpupool plan --help)"},
		{"unknown flag of a nested command", []string{"tenant", "set", "chat", "1", "--bogus"}, exitInvalid,
			"unknown flag: --bogus (see gpupool tenant set --help)"},
		{"bad flag value", []string{"simulate", pool, "--strategy", "mps", "--duration", "ten"}, exitInvalid, `invalid argument "ten"`},
		{"zero duration", []string{"simulate", pool, "--strategy", "mps", "--duration", "0s"}, exitInvalid, "flag --duration: must be between 1ns"},
		{"huge input tokens", []string{"perf", "--model", "qwen2.5-7b", "--board", "H100", "--input-tokens", "2000000000"}, exitInvalid,
			"flag --input-tokens: must be between 1 and 10000000"},
		{"missing file", []string{"plan", filepath.Join(t.TempDir(), "none.yaml")}, exitInvalid, "no such file"},
		{"directory as file", []string{"validate", t.TempDir()}, exitInvalid, "not a regular file (a directory)"},
		{"wrong arg count", []string{"plan"}, exitInvalid, "accepts 1 arg"},
		{"trace of 1000 days", []string{"simulate", pool, "--strategy", "mps", "--trace",
			writeTemp(t, "t.csv", "timestamp,tenant,input_tokens,output_tokens\n0,chat,500,100\n86400000,chat,5,5\n")}, exitInvalid,
			"spans 24000h0m1s, more than the 24h one simulation covers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, tt.args...)
			if code != tt.want || !strings.Contains(out+errOut, tt.msg) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, tt.want, tt.msg, errOut)
			}
		})
	}
}

// A panic becomes exit 3 with a request to report it (here: a nil stdout).
func TestPanicIsInternalError(t *testing.T) {
	var errb bytes.Buffer
	err := run(context.Background(), []string{"gpus"}, nil, &errb)
	if exitCode(err) != exitInternal || !strings.Contains(err.Error(), "please report it") || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("exit %d, error %v; want 3 asking for a report", exitCode(err), err)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// A closed pipe or a full disk on stdout is the user's to fix: exit 1.
func TestOutputWriteErrorIsInvalid(t *testing.T) {
	for _, e := range []error{syscall.EPIPE, syscall.ENOSPC} {
		err := run(context.Background(), []string{"gpus", "-o", "json"}, failingWriter{e}, &bytes.Buffer{})
		if exitCode(err) != exitInvalid || !errors.Is(err, e) || !strings.Contains(err.Error(), "write output") {
			t.Errorf("%v: exit %d, error %v; want 1", e, exitCode(err), err)
		}
	}
}

// A cancelled context is exit 130, for every long command, and nothing is written.
func TestCancelledIsInterrupted(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", planPool)
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{"plan", pool, "--out", out}, {"simulate", pool, "--strategy", "mps", "--plot", out}, {"validate", pool}} {
		var stdout bytes.Buffer
		err := run(ctx, args, &stdout, &bytes.Buffer{})
		if exitCode(err) != exitInterrupted || stdout.Len() > 0 {
			t.Errorf("%s: exit %d (%v), %d bytes on stdout; want 130 and nothing", args[0], exitCode(err), err, stdout.Len())
		}
		if _, err := os.Lstat(out); err == nil {
			t.Errorf("%s: %s was written", args[0], out)
		}
	}
}

func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionLine(info), "gpupool v0.3.0 (commit 0123456789ab, 2026-11-30T10:00:00Z, dirty) go1.26.8"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	info.Settings[2].Value = "false"
	info.Main.Version = ""
	if got, want := versionLine(info), "gpupool (devel) (commit 0123456789ab, 2026-11-30T10:00:00Z) go1.26.8"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	out, _, code := runCmd(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "gpupool ") || strings.Contains(out, "dev\n") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}
