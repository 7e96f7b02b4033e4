package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// markerFile marks a directory gpupool wrote with --out. A non-empty directory without it is
// someone else's, and gpupool replaces it only with --force.
const markerFile = ".gpupool-output"

const markerText = "# This directory was written by gpupool. A later run with --out replaces it as a whole, and\n" +
	"# refuses to (without --force) when a file listed below was edited, removed or added by hand.\n"

// markerData lists every file with its SHA-256, so that a later run can tell hand edits.
func markerData(files []outFile) []byte {
	var b strings.Builder
	b.WriteString(markerText)
	for _, f := range files {
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(f.Data), f.Path)
	}
	return []byte(b.String())
}

// outFile is one file of an output directory, at a slash-separated path relative to it.
type outFile struct {
	Path string
	Data []byte
}

// writeOutDir replaces dir with exactly files, atomically: everything is written into a fresh
// directory beside dir, which is then renamed into place, so that dir holds either its old
// content or the whole new one, never a mix, and files of an earlier run do not survive. A
// symlink at dir is refused, never followed; so is a non-empty directory that has no marker
// file, unless force. On any failure, or when ctx is cancelled first, dir is left as it was and
// the new directory is removed. Errors are the user's to fix (exit 1).
func writeOutDir(ctx context.Context, dir string, files []outFile, force bool) error {
	dir = filepath.Clean(dir) // "out/" would make Lstat follow a link at "out"
	if err := checkOutFiles(files); err != nil {
		return err // a bug in the renderer, not the user's
	}
	if err := checkOutTarget(dir, force); err != nil {
		return invalid(err)
	}
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	removeStale(parent, base)
	tmp, err := os.MkdirTemp(parent, "."+base+".gpupool-new-")
	if err != nil {
		return invalid(fmt.Errorf("write %s: %w", dir, err))
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return invalid(fmt.Errorf("write %s: %w", dir, err))
	}
	if err := fillDir(ctx, tmp, append(files, outFile{Path: markerFile, Data: markerData(files)})); err != nil {
		return invalid(fmt.Errorf("write %s: %w (the directory was not changed)", dir, err))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	old, err := swapDir(tmp, dir)
	if err != nil {
		return invalid(fmt.Errorf("write %s: %w (the directory was not changed)", dir, err))
	}
	committed = true
	if old != "" {
		_ = os.RemoveAll(old)
	}
	return nil
}

// checkOutFiles refuses paths that would leave the directory or collide with the marker.
func checkOutFiles(files []outFile) error {
	for _, f := range files {
		rel := filepath.FromSlash(f.Path)
		if !filepath.IsLocal(rel) || f.Path == markerFile {
			return fmt.Errorf("write output: file path %q is not a plain path inside the output directory", f.Path)
		}
	}
	return nil
}

// checkOutTarget says whether dir may be replaced: missing, an empty directory, or a directory
// gpupool wrote whose files are still exactly those its marker lists (any non-empty directory
// with force). A symlink or a file at dir is refused.
func checkOutTarget(dir string, force bool) error {
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("flag --out: %w", err)
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("flag --out: %s is a symbolic link; gpupool does not follow links: give the directory it points to", dir)
	case !st.IsDir():
		return fmt.Errorf("flag --out: %s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("flag --out: %w", err)
	}
	if len(entries) == 0 || force {
		return nil
	}
	m, err := os.Lstat(filepath.Join(dir, markerFile))
	if err != nil || !m.Mode().IsRegular() || m.Size() > maxInputBytes {
		return fmt.Errorf("flag --out: %s is not empty and was not written by gpupool (no %s file); its content would be replaced: "+
			"choose another directory, or add --force to replace it", dir, markerFile)
	}
	changed, err := handEdits(dir)
	if err != nil {
		return fmt.Errorf("flag --out: %w", err)
	}
	if len(changed) > 0 {
		if len(changed) > 5 {
			changed = append(changed[:5], fmt.Sprintf("and %d more", len(changed)-5))
		}
		return fmt.Errorf("flag --out: %s was changed since gpupool wrote it (%s); the next run would lose that: "+
			"move what you want to keep, or add --force to replace it", dir, strings.Join(changed, ", "))
	}
	return nil
}

// handEdits compares dir with its marker's list and names every file edited, removed or added
// (or made something other than a regular file) since gpupool wrote it.
func handEdits(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, markerFile))
	if err != nil {
		return nil, err
	}
	want, ok := parseMarker(data)
	if !ok {
		return []string{markerFile + " edited (unreadable)"}, nil
	}
	var changed []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() || rel == markerFile {
			return nil
		}
		sum, listed := want[rel]
		delete(want, rel)
		switch {
		case !listed:
			changed = append(changed, rel+" added")
		case !d.Type().IsRegular():
			changed = append(changed, rel+" is no longer a regular file")
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if fmt.Sprintf("%x", sha256.Sum256(b)) != sum {
				changed = append(changed, rel+" edited")
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for path := range want {
		changed = append(changed, path+" removed")
	}
	sort.Strings(changed)
	return changed, nil
}

// fillDir writes files under root through an os.Root, which refuses any path that leaves it.
func fillDir(ctx context.Context, root string, files []outFile) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel := filepath.FromSlash(f.Path)
		if d := filepath.Dir(rel); d != "." {
			if err := r.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", filepath.ToSlash(d), err)
			}
		}
		if err := writeRootFile(r, rel, f.Data); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

// writeRootFile creates name under r (it must not exist) and syncs it.
func writeRootFile(r *os.Root, name string, data []byte) error {
	fh, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.Write(data); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// removeStale removes what an interrupted earlier run left beside the target: its unfinished
// new directory or its replaced old one.
func removeStale(parent, base string) {
	for _, pattern := range []string{"." + base + ".gpupool-new-*", "." + base + ".gpupool-old-*"} {
		matches, _ := filepath.Glob(filepath.Join(parent, pattern))
		for _, m := range matches {
			if st, err := os.Lstat(m); err == nil && st.IsDir() && strings.HasPrefix(filepath.Base(m), "."+base+".gpupool-") {
				_ = os.RemoveAll(m)
			}
		}
	}
}

// swapDirTwoRenames moves dir aside, then tmp into place; when the second rename fails the
// first is undone. Between the two, dir is briefly missing.
func swapDirTwoRenames(tmp, dir string) (string, error) {
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	old, err := os.MkdirTemp(parent, "."+base+".gpupool-old-")
	if err != nil {
		return "", err
	}
	if err := os.Remove(old); err != nil {
		return "", err
	}
	if err := os.Rename(dir, old); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return "", fmt.Errorf("%w; the old content is at %s (restoring it failed: %v)", err, old, rerr)
		}
		return "", err
	}
	return old, nil
}

// parseMarker reads the marker's list: path → SHA-256 in hex. It reports false for anything
// gpupool did not write: a line that is not "<64 hex digits>  <local path>", or a path twice.
func parseMarker(data []byte) (map[string]string, bool) {
	want := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, path, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 2*sha256.Size || strings.Trim(sum, "0123456789abcdef") != "" ||
			!filepath.IsLocal(filepath.FromSlash(path)) || path == markerFile {
			return nil, false
		}
		if _, dup := want[path]; dup {
			return nil, false
		}
		want[path] = sum
	}
	return want, true
}
