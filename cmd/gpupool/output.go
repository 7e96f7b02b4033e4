package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// outputFormat is the value of -o on every read command.
type outputFormat string

const (
	outTable outputFormat = "table"
	outJSON  outputFormat = "json"
	outYAML  outputFormat = "yaml"
)

// addOutputFlag registers -o/--output on cmd and returns where its value lands.
func addOutputFlag(cmd *cobra.Command) *string {
	return cmd.Flags().StringP("output", "o", string(outTable), "output format: table|json|yaml")
}

// parseOutput checks the -o value.
func parseOutput(s string) (outputFormat, error) {
	switch f := outputFormat(s); f {
	case outTable, outJSON, outYAML:
		return f, nil
	}
	return "", invalid(fmt.Errorf("flag -o: unknown output format %q (valid: table, json, yaml)", s))
}

// writeStructured writes v as JSON (indented, trailing newline) or YAML. Table output is the
// caller's: every command draws its own.
func writeStructured(w io.Writer, f outputFormat, v any) error {
	switch f {
	case outJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("write output: format %q is not structured", f)
}

// newTable returns a tab-aligned writer; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}
