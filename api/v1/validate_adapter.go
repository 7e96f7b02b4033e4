package v1

import (
	"regexp"
	"slices"
	"strings"
)

// MaxAdapterRank is the largest LoRA rank an engine serves (vLLM's --max-lora-rank choices end
// at 512).
const MaxAdapterRank = 512

var (
	adapterNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// hfRepoRE is a Hugging Face repository id: owner/name, each 1-96 of [A-Za-z0-9._-], not
	// starting with '.' or '-'.
	hfRepoRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,95}/[A-Za-z0-9_][A-Za-z0-9._-]{0,95}$`)
)

// checkAdapter checks a tenant's model.adapter block.
func (c *poolChecker) checkAdapter(p string, a Adapter) {
	switch {
	case a.Name == "":
		c.errs.add(field(p, "name"), "required")
	case !adapterNameRE.MatchString(a.Name):
		c.errs.add(field(p, "name"), "must be 1-128 letters, digits, '-', '_' or '.', starting with a letter or digit (got %q)", a.Name)
	default:
		if c.adapters == nil {
			c.adapters = map[string]string{}
		}
		np := field(p, "name")
		if first, dup := c.adapters[a.Name]; dup {
			c.errs.add(np, "duplicate adapter name %q (first at %s)", a.Name, first)
		} else {
			c.adapters[a.Name] = np
		}
	}
	switch {
	case a.Dir == "" && a.Repo == "" && a.Volume == nil:
		c.errs.add(p, "set one of dir, repo or volume (got none)")
	case a.Dir != "" && a.Repo != "":
		c.errs.add(p, "set at most one of dir or repo (got both)")
	}
	if a.Repo != "" && !hfRepoRE.MatchString(a.Repo) {
		c.errs.add(field(p, "repo"), "must be a Hugging Face repository id, \"owner/name\" (got %q)", a.Repo)
	}
	if v := a.Volume; v != nil {
		vp := field(p, "volume")
		if a.Repo != "" {
			c.errs.add(vp, "not with repo: vLLM downloads a repo itself (give the volume with dir, or alone with rank)")
		}
		checkName(&c.errs, field(vp, "claimName"), v.ClaimName, true)
		if why := badSubPath(v.SubPath); why != "" {
			c.errs.add(field(vp, "subPath"), "%s (got %q)", why, v.SubPath)
		}
	}
	switch {
	case a.Rank < 0 || a.Rank > MaxAdapterRank:
		c.errs.add(field(p, "rank"), "must be between 1 and %d (got %d)", MaxAdapterRank, a.Rank)
	case a.Rank == 0 && a.Dir == "" && (a.Repo != "" || a.Volume != nil):
		c.errs.add(field(p, "rank"), "required with repo or a volume without dir (the rank sizes the engine's adapter slots)")
	}
}

// badSubPath says why s cannot be a volume mount's subPath (Kubernetes refuses an absolute one
// and one with a ".." element), or "".
func badSubPath(s string) string {
	switch {
	case strings.HasPrefix(s, "/"):
		return "must be relative to the claim's root"
	case slices.Contains(strings.Split(s, "/"), ".."):
		return "must not contain a \"..\" element"
	case strings.ContainsAny(s, "\\\x00\n"):
		return "must not contain a backslash, NUL or newline"
	case len(s) > 4096:
		return "must be at most 4096 characters"
	}
	return ""
}
