package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/migparted"
)

// Kinds of file validate recognises.
const (
	fileKindPool      = "Pool"
	fileKindPlan      = "Plan"
	fileKindMigParted = "mig-parted"
)

// validateResult is the outcome for one file.
type validateResult struct {
	File     string   `json:"file"`
	Kind     string   `json:"kind,omitempty"`
	Valid    bool     `json:"valid"`
	Errors   []string `json:"errors,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	Summary  string   `json:"summary,omitempty"`
}

type validateOutput struct {
	Files []validateResult `json:"files"`
	Valid bool             `json:"valid"`
}

func newValidateCmd(e *env) *cobra.Command {
	var board, poolFile string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check Pool, Plan and mig-parted config files (kind detected by content)",
		Long: "validate reads each FILE and tells what it is from its content: a gpupool document\n" +
			"(apiVersion: gpupool.dev/v1, kind Pool or Plan) or an NVIDIA mig-parted config\n" +
			"(version: v1 with mig-configs). Pools are defaulted and validated against the board and\n" +
			"model catalogs; Plans are validated, and against --pool when given; every named\n" +
			"mig-parted config is placed on every board it applies to (or on --board only).\n" +
			"All problems are reported, each with its field path. Exit 1 when any file is invalid.",
		Args: cobra.MinimumNArgs(1),
	}
	out := addOutputFlag(cmd)
	cmd.Flags().StringVar(&board, "board", "", "validate mig-parted configs on this board only")
	cmd.Flags().StringVar(&poolFile, "pool", "", "the Pool a Plan must agree with")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		format, err := parseOutput(*out)
		if err != nil {
			return err
		}
		var b *gpu.Board
		if board != "" {
			if b, err = gpu.Lookup(board); err != nil {
				return invalid(fmt.Errorf("flag --board: %w", err))
			}
		}
		var pool *v1.Pool
		if poolFile != "" {
			if pool, err = readPoolFlag(e.ctx, poolFile); err != nil {
				return invalid(err)
			}
		}
		res := validateOutput{Valid: true}
		for _, f := range args {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			r := validateFile(e.ctx, f, b, pool)
			res.Valid = res.Valid && r.Valid
			res.Files = append(res.Files, r)
		}
		if format == outTable {
			err = writeValidateText(e.stdout, res)
		} else {
			err = writeStructured(e.stdout, format, res)
		}
		if err != nil {
			return err
		}
		if !res.Valid {
			return invalid(errors.New("validation failed"))
		}
		return nil
	}
	return cmd
}

// readPool reads, defaults and validates a Pool file.
func readPool(ctx context.Context, path string) (*v1.Pool, error) {
	data, err := readInput(ctx, path, "pool")
	if err != nil {
		return nil, err
	}
	p, err := v1.LoadPool(data)
	if err != nil {
		return nil, fmt.Errorf("load pool %s: %w", path, err)
	}
	return p, nil
}

// readPoolFlag is readPool for the --pool flag.
func readPoolFlag(ctx context.Context, path string) (*v1.Pool, error) {
	p, err := readPool(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("flag --pool: %w", err)
	}
	return p, nil
}

// readPlan reads and decodes a Plan file; what names the argument in errors.
func readPlan(ctx context.Context, path, what string) (*v1.Plan, error) {
	data, err := readInput(ctx, path, what)
	if err != nil {
		return nil, err
	}
	p, err := v1.DecodePlan(data)
	if err != nil {
		return nil, fmt.Errorf("decode plan %s: %w", path, err)
	}
	return p, nil
}

// detectKind tells a gpupool document from a mig-parted config by their top-level keys. Block
// YAML is told by a scan of its unindented lines, so that a large pool is parsed once, by the
// decoder; anything else (JSON, flow style) is parsed here.
func detectKind(data []byte) (string, error) {
	if k := scanTopKeys(data); k != "" {
		return k, nil
	}
	var top map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &top); err != nil {
		if bytes.Contains(data, []byte("apiVersion")) && !bytes.Contains(data, []byte("mig-configs")) {
			return fileKindPool, nil // the document decoder says what is wrong, with the path
		}
		return "", fmt.Errorf("parse: %w", err)
	}
	_, hasAPI := top["apiVersion"]
	_, hasKind := top["kind"]
	_, hasMig := top["mig-configs"]
	switch {
	case hasAPI || hasKind:
		var k string
		_ = json.Unmarshal(top["kind"], &k)
		if k == fileKindPlan {
			return fileKindPlan, nil
		}
		return fileKindPool, nil // Decode checks apiVersion and kind and says what is wrong
	case hasMig:
		return fileKindMigParted, nil
	}
	return "", errors.New("cannot tell what this file is: expected a gpupool document " +
		"(apiVersion: gpupool.dev/v1, kind: Pool or Plan) or a mig-parted config (version: v1, mig-configs: …)")
}

// scanTopKeys finds the kind from the unindented "key: value" lines of block YAML; "" when they
// do not say.
func scanTopKeys(data []byte) string {
	var kind string
	var api, hasKind, mig bool
	for _, line := range bytes.Split(data, []byte("\n")) {
		k, v, ok := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		if !ok || len(k) == 0 || !(k[0] >= 'a' && k[0] <= 'z' || k[0] >= 'A' && k[0] <= 'Z') {
			continue
		}
		switch string(k) {
		case "apiVersion":
			api = true
		case "kind":
			val, _, _ := strings.Cut(string(v), " #") // a comment after the value
			hasKind, kind = true, strings.Trim(strings.TrimSpace(val), `"'`)
		case "mig-configs":
			mig = true
		}
	}
	switch {
	case kind == fileKindPlan:
		return fileKindPlan
	case api || hasKind:
		return fileKindPool // Decode checks apiVersion and kind and says what is wrong
	case mig:
		return fileKindMigParted
	}
	return ""
}

func validateFile(ctx context.Context, path string, board *gpu.Board, pool *v1.Pool) validateResult {
	r := validateResult{File: path}
	data, err := readInput(ctx, path, "file")
	if err != nil {
		r.Errors = []string{err.Error()}
		return r
	}
	if r.Kind, err = detectKind(data); err != nil {
		r.Errors = []string{err.Error()}
		return r
	}
	switch r.Kind {
	case fileKindMigParted:
		validateMigParted(&r, data, board)
	default:
		validateDocument(&r, data, pool)
	}
	r.Valid = len(r.Errors) == 0
	return r
}

func validateMigParted(r *validateResult, data []byte, board *gpu.Board) {
	cfg, err := migparted.Decode(data)
	if err != nil {
		r.Errors = splitErrors(err)
		return
	}
	rep := migparted.Validate(cfg, migparted.Options{Board: board})
	for _, f := range rep.Findings() {
		if f.Severity == migparted.SeverityError {
			r.Errors = append(r.Errors, f.Error())
		} else {
			r.Warnings = append(r.Warnings, f.Error())
		}
	}
	s := rep.Summary
	r.Summary = fmt.Sprintf("%d configs, %d checks on boards, %d failed, %d not applicable", s.Configs, s.Checks, s.Failures, s.Skipped)
}

func validateDocument(r *validateResult, data []byte, pool *v1.Pool) {
	doc, err := v1.Decode(data)
	if err != nil {
		if _, ok := doc.(*v1.Pool); ok {
			// A Pool with malformed fields is still checked without them (as plan and
			// simulate read it), so every problem of the file is listed at once.
			if _, lerr := v1.LoadPool(data); lerr != nil {
				err = lerr
			}
		}
		r.Errors = splitErrors(err)
		return
	}
	switch d := doc.(type) {
	case *v1.Pool:
		v1.Default(d)
		if err := v1.Validate(d); err != nil { // Decode succeeded: no malformed fields to merge
			r.Errors = splitErrors(err)
			return
		}
		gpus := 0
		for _, n := range d.Fleet.Nodes {
			for _, g := range n.GPUs {
				gpus += g.Count
			}
		}
		r.Summary = fmt.Sprintf("Pool %q: %s, %s, %s", d.Metadata.Name, plural(len(d.Fleet.Nodes), "node"), plural(gpus, "GPU"), plural(len(d.Tenants), "tenant"))
	case *v1.Plan:
		if err := v1.ValidatePlan(d, pool); err != nil {
			r.Errors = splitErrors(err)
			return
		}
		r.Summary = fmt.Sprintf("Plan %q: %s, %s", d.Metadata.Name, plural(len(d.GPUs), "GPU"), plural(len(d.Tenants), "tenant"))
		if pool == nil {
			r.Warnings = append(r.Warnings, "checked on its own: give --pool POOL to check it against its Pool")
		}
	}
}

// splitErrors turns an error into one message per problem: FieldErrors and joined errors are
// already lists.
func splitErrors(err error) []string {
	var fe v1.FieldErrors
	if errors.As(err, &fe) {
		out := make([]string, len(fe))
		for i, e := range fe {
			out[i] = e.Error()
		}
		return out
	}
	var fp *migparted.FieldError
	if errors.As(err, &fp) {
		return strings.Split(err.Error(), "\n")
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return strings.Split(err.Error(), "\n")
}

func writeValidateText(w io.Writer, res validateOutput) error {
	var b strings.Builder
	for _, r := range res.Files {
		status := "ok"
		if !r.Valid {
			status = "INVALID (" + plural(len(r.Errors), "problem") + ")"
		}
		kind := r.Kind
		if kind == "" {
			kind = "unknown"
		}
		fmt.Fprintf(&b, "%s: %s: %s\n", r.File, kind, status)
		if r.Summary != "" {
			fmt.Fprintf(&b, "  %s\n", r.Summary)
		}
		for _, e := range r.Errors {
			fmt.Fprintf(&b, "  error: %s\n", e)
		}
		for _, wn := range r.Warnings {
			fmt.Fprintf(&b, "  warning: %s\n", wn)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plural writes "1 node", "2 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
