package main

import (
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gpupool version, commit and Go version",
		Long: "version prints the module version the binary was built as (\"(devel)\" for a build from a\n" +
			"checkout), the VCS commit and time with \"dirty\" when the checkout had uncommitted changes,\n" +
			"and the Go version, all read from the binary's build information.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			_, err := io.WriteString(e.stdout, versionLine(info)+"\n")
			return err
		},
	}
}

// version is set at build time with -ldflags "-X main.version=…"; it overrides the module version.
var version = ""

// versionLine formats the build information: "gpupool v1.2.3 (commit 0123abcd, 2026-01-02T03:04:05Z,
// dirty) go1.26.8".
func versionLine(info *debug.BuildInfo) string {
	v := version
	if info == nil {
		if v == "" {
			v = "unknown"
		}
		return "gpupool " + v + " (no build information)"
	}
	if v == "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", dirty"
			}
		}
	}
	line := "gpupool " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " (commit " + rev
		if at != "" {
			line += ", " + at
		}
		line += dirty + ")"
	}
	return line + " " + info.GoVersion
}
