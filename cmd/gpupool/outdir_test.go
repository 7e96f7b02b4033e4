package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapshot maps every path under dir to its content ("-> target" for a symlink, "/" for a
// directory), so that a test can say a directory is exactly as it was.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case info.IsDir():
			out[rel] = "/"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s changed", what, k)
		}
	}
}

// leftovers lists the temporary directories writeOutDir left beside the target.
func leftovers(t *testing.T, parent string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(parent, ".*.gpupool-*"))
	return m
}

func planOut(t *testing.T, dir string, extra ...string) (string, int) {
	t.Helper()
	_, errOut, code := runCmd(t, append([]string{"plan", writeTemp(t, "pool.yaml", planPool), "--out", dir}, extra...)...)
	return errOut, code
}

// A second run replaces the directory as a whole: files of the first run that the second does
// not write are gone, and the marker lists exactly the files there.
func TestOutDirStaleFilesGo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if errOut, code := planOut(t, dir); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	first := snapshot(t, dir)
	if _, ok := first[markerFile]; !ok {
		t.Fatalf("no %s after the first run", markerFile)
	}
	// An earlier run's file that this run does not write: put it in the marker, as a run that
	// wrote it would have.
	stale := outFile{Path: "kubernetes/old-tenant.yaml", Data: []byte("kind: Deployment\n")}
	var files []outFile
	for p, c := range first {
		if c != "/" && p != markerFile {
			files = append(files, outFile{Path: filepath.ToSlash(p), Data: []byte(c)})
		}
	}
	if err := writeOutDir(context.Background(), dir, append(files, stale), false); err != nil {
		t.Fatal(err)
	}
	if errOut, code := planOut(t, dir); code != exitOK {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	second := snapshot(t, dir)
	if _, ok := second[filepath.FromSlash(stale.Path)]; ok {
		t.Errorf("%s of an earlier run is still there", stale.Path)
	}
	sameTree(t, "second run", second, first)
	if l := leftovers(t, filepath.Dir(dir)); len(l) > 0 {
		t.Errorf("temporary directories left: %v", l)
	}
}

// Hand edits, added and removed files, and a foreign directory are refused (exit 1, nothing
// touched) unless --force.
func TestOutDirRefusesHandEditsAndForeignDirs(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"edited", func(t *testing.T, dir string) { appendFile(t, filepath.Join(dir, "plan.yaml"), "# mine\n") }, "plan.yaml edited"},
		{"added", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "notes.txt"), "mine") }, "notes.txt added"},
		{"removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "plan.yaml")); err != nil {
				t.Fatal(err)
			}
		}, "plan.yaml removed"},
		{"foreign", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, markerFile)); err != nil {
				t.Fatal(err)
			}
		}, "was not written by gpupool"},
		{"symlink inside", func(t *testing.T, dir string) {
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.Remove(filepath.Join(dir, "plan.yaml")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dir, "plan.yaml")); err != nil {
				t.Fatal(err)
			}
		}, "plan.yaml is no longer a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if errOut, code := planOut(t, dir); code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			tt.setup(t, dir)
			before := snapshot(t, dir)
			errOut, code := planOut(t, dir)
			if code != exitInvalid || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "--force") {
				t.Fatalf("exit %d, want 1 with %q and --force: %s", code, tt.want, errOut)
			}
			sameTree(t, "refused run", snapshot(t, dir), before)
			if errOut, code := planOut(t, dir, "--force"); code != exitOK {
				t.Fatalf("--force: exit %d: %s", code, errOut)
			}
			if changed, err := handEdits(dir); err != nil || len(changed) > 0 {
				t.Errorf("after --force: changes %v, %v", changed, err)
			}
		})
	}
}

// --out never follows a symlink: one at the target (dangling or not) is refused and neither it
// nor what it points to changes.
func TestOutDirSymlinkTarget(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	writeFile(t, filepath.Join(real, "keep.txt"), "keep")
	for _, target := range []string{real, filepath.Join(base, "missing")} {
		link := filepath.Join(base, "link-"+filepath.Base(target))
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{link, link + "/"} {
			errOut, code := planOut(t, out, "--force")
			if code != exitInvalid || !strings.Contains(errOut, "symbolic link") {
				t.Errorf("%s: exit %d, want 1 naming the symbolic link: %s", out, code, errOut)
			}
		}
		if got, _ := os.Readlink(link); got != target {
			t.Errorf("the link now points to %q", got)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "missing")); err == nil {
		t.Error("a dangling link's target was created")
	}
	sameTree(t, "link target", snapshot(t, real), map[string]string{".": "/", "keep.txt": "keep"})
}

// A failure half-way (the second file cannot be created) leaves the old content exactly as it
// was, and no temporary directory behind.
func TestOutDirFailureHalfWay(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	old := []outFile{{Path: "plan.yaml", Data: []byte("old plan\n")}, {Path: "deploy/a.yaml", Data: []byte("old a\n")}}
	if err := writeOutDir(context.Background(), dir, old, false); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	bad := []outFile{{Path: "plan.yaml", Data: []byte("new plan\n")}, {Path: "plan.yaml/x", Data: []byte("cannot be\n")},
		{Path: "deploy/b.yaml", Data: []byte("new b\n")}}
	err := writeOutDir(context.Background(), dir, bad, false)
	if err == nil || exitCode(err) != exitInvalid || !strings.Contains(err.Error(), "the directory was not changed") {
		t.Fatalf("writeOutDir = %v (exit %d), want exit 1 saying nothing changed", err, exitCode(err))
	}
	sameTree(t, "after the failure", snapshot(t, dir), before)
	if l := leftovers(t, filepath.Dir(dir)); len(l) > 0 {
		t.Errorf("temporary directories left: %v", l)
	}
	// A cancelled run changes nothing either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := writeOutDir(ctx, dir, bad[:1], false); err == nil {
		t.Fatal("writeOutDir with a cancelled context succeeded")
	}
	sameTree(t, "after the cancelled run", snapshot(t, dir), before)
}

// --out that is a file, or inside a directory that cannot be written, is the user's to fix.
func TestOutDirUnwritable(t *testing.T) {
	file := writeTemp(t, "file", "x")
	if errOut, code := planOut(t, file); code != exitInvalid || !strings.Contains(errOut, "not a directory") {
		t.Errorf("--out FILE: exit %d: %s", code, errOut)
	}
	if errOut, code := planOut(t, filepath.Join(file, "sub")); code != exitInvalid {
		t.Errorf("--out FILE/sub: exit %d, want 1: %s", code, errOut)
	}
	poolFile := writeTemp(t, "pool.yaml", planPool)
	planYAML, errOut, code := runCmd(t, "plan", poolFile, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	planFile := writeTemp(t, "plan.yaml", planYAML)
	if _, errOut, code := runCmd(t, "render", planFile, "--pool", poolFile, "--out", file); code != exitInvalid || !strings.Contains(errOut, "not a directory") {
		t.Errorf("render --out FILE: exit %d, want 1: %s", code, errOut)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// The marker gpupool writes reads back as exactly its files; anything else parses as a marker
// only if every line is a digest and a local path, each path once.
func FuzzParseMarker(f *testing.F) {
	f.Add(markerData([]outFile{{Path: "plan.yaml", Data: []byte("x")}, {Path: "deploy/a.yaml", Data: nil}}))
	f.Add([]byte("# comment\n" + strings.Repeat("a", 64) + "  ../escape\n"))
	f.Add([]byte(strings.Repeat("0", 64) + "  a\n" + strings.Repeat("0", 64) + "  a\n"))
	f.Add([]byte("nonsense"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, ok := parseMarker(data)
		if !ok {
			return
		}
		for path, sum := range want {
			if len(sum) != 64 || !filepath.IsLocal(filepath.FromSlash(path)) || path == markerFile {
				t.Fatalf("accepted %q → %q", path, sum)
			}
		}
		// Round trip: a marker written for files with these paths lists the same paths.
		var files []outFile
		for path := range want {
			if strings.ContainsAny(path, "\n") {
				t.Fatalf("accepted a path with a newline: %q", path)
			}
			files = append(files, outFile{Path: path})
		}
		back, ok := parseMarker(markerData(files))
		if !ok || len(back) != len(want) {
			t.Fatalf("round trip of %v: %v, %v", want, back, ok)
		}
	})
}
