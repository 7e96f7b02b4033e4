package v1

import (
	"regexp"
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
	case a.Dir == "" && a.Repo == "":
		c.errs.add(p, "set exactly one of dir or repo (got neither)")
	case a.Dir != "" && a.Repo != "":
		c.errs.add(p, "set exactly one of dir or repo (got both)")
	}
	if a.Repo != "" && !hfRepoRE.MatchString(a.Repo) {
		c.errs.add(field(p, "repo"), "must be a Hugging Face repository id, \"owner/name\" (got %q)", a.Repo)
	}
	switch {
	case a.Rank < 0 || a.Rank > MaxAdapterRank:
		c.errs.add(field(p, "rank"), "must be between 1 and %d (got %d)", MaxAdapterRank, a.Rank)
	case a.Rank == 0 && a.Repo != "" && a.Dir == "":
		c.errs.add(field(p, "rank"), "required with repo (the rank sizes the engine's adapter slots)")
	}
}
