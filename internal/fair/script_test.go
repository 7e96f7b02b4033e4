package fair

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden decision traces under testdata/")

// A scenario script is one command per line ('#' starts a comment):
//
//	capacity cpu=9 mem=18                 base capacity (after start: a SetCapacity event)
//	burst percent=20 lease=60s            burst pool and lease duration (before start only)
//	group org/team weight=2               a group weight (after start: SetGroup)
//	tenant a task=cpu:1,mem:4 weight=2 path=org/team demand=5 reserve=1 cap=4 minrun=30s
//	tenant b slice=H100-SXM5-80GB/3g.40gb demand=2       task from the board table
//	node n1 cpu=4 mem=8                   a named capacity unit added to the base
//	gpu n1/3 slices=H100-SXM5-80GB/3g.40gb:2,H100-SXM5-80GB/1g.10gb:1
//	start                                 New + Recompute (implicit before the first event)
//	demand a 7 | update a cap=2 | remove a | fail n1 | fail-gpu n1/3 | restore n1
//	tick 30s                              advance the clock and Apply with no event
//	recompute                             full Recompute at the current time
type scriptCmd struct {
	line int
	verb string
	args []string
	kv   map[string]string
}

func parseScript(src string) ([]scriptCmd, error) {
	var cmds []scriptCmd
	for i, raw := range strings.Split(src, "\n") {
		if j := strings.IndexByte(raw, '#'); j >= 0 {
			raw = raw[:j]
		}
		f := strings.Fields(raw)
		if len(f) == 0 {
			continue
		}
		c := scriptCmd{line: i + 1, verb: f[0], kv: map[string]string{}}
		for _, w := range f[1:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				if k == "" {
					return nil, fmt.Errorf("line %d: empty key in %q", c.line, w)
				}
				c.kv[k] = v
			} else {
				c.args = append(c.args, w)
			}
		}
		if _, ok := scriptArity[c.verb]; !ok {
			return nil, fmt.Errorf("line %d: unknown command %q", c.line, c.verb)
		}
		if len(c.args) != scriptArity[c.verb] {
			return nil, fmt.Errorf("line %d: %s takes %d plain arguments, got %d", c.line, c.verb, scriptArity[c.verb], len(c.args))
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

var scriptArity = map[string]int{"capacity": 0, "burst": 0, "group": 1, "tenant": 1, "node": 1, "gpu": 1,
	"start": 0, "demand": 2, "update": 1, "remove": 1, "fail": 1, "fail-gpu": 1, "restore": 1,
	"tick": 1, "recompute": 0}

func parseVector(s string) (Vector, error) {
	v := Vector{}
	for part := range strings.SplitSeq(s, ",") {
		k, x, ok := strings.Cut(part, ":")
		f, err := strconv.ParseFloat(x, 64)
		if !ok || err != nil || k == "" {
			return nil, fmt.Errorf("vector item %q: want name:amount", part)
		}
		v[k] += f
	}
	return v, nil
}

// scriptRun holds a running scenario.
type scriptRun struct {
	cfg     Config
	base    Vector
	units   map[string]Vector
	down    map[string]bool
	a       *Allocator
	now     time.Time
	out     strings.Builder
	lastCmd string
}

func (r *scriptRun) capacity() Vector {
	c := cloneVector(r.base)
	for _, name := range sortedKeys(r.units) {
		if r.down[name] {
			continue
		}
		for k, x := range r.units[name] {
			c[k] += x
		}
	}
	return c
}

func (r *scriptRun) unit(c scriptCmd) error {
	if s, ok := c.kv["slices"]; ok {
		counts := map[string]int{}
		v, err := parseVector(s)
		if err != nil {
			return err
		}
		for k, x := range v {
			counts[k] = int(x)
		}
		capv, _, err := SliceCapacity(counts)
		if err != nil {
			return err
		}
		r.units[c.args[0]] = capv
		return nil
	}
	v := Vector{}
	for k, x := range c.kv {
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return fmt.Errorf("%s=%s: %w", k, x, err)
		}
		v[k] = f
	}
	r.units[c.args[0]] = v
	return nil
}

func tenantFromKV(name string, kv map[string]string, base Tenant) (Tenant, error) {
	t := base
	t.Name = name
	var err error
	for _, k := range sortedKeys(kv) {
		x := kv[k]
		switch k {
		case "task":
			t.Task, err = parseVector(x)
		case "slice":
			var s SliceShape
			s, err = SliceVector(x)
			t.Task = s.Vector
		case "weight":
			t.Weight, err = strconv.ParseFloat(x, 64)
		case "path":
			t.Path = x
		case "demand":
			t.Demand, err = strconv.Atoi(x)
		case "reserve":
			t.Reservation, err = strconv.Atoi(x)
		case "cap":
			t.Cap, err = strconv.Atoi(x)
		case "minrun":
			t.MinRuntime, err = time.ParseDuration(x)
		default:
			err = fmt.Errorf("unknown tenant field %q", k)
		}
		if err != nil {
			return t, err
		}
	}
	return t, nil
}

func (r *scriptRun) config(c scriptCmd) error {
	switch c.verb {
	case "capacity":
		r.base = Vector{}
		for k, x := range c.kv {
			f, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return err
			}
			r.base[k] = f
		}
	case "burst":
		p, err := strconv.ParseFloat(c.kv["percent"], 64)
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(c.kv["lease"])
		if err != nil {
			return err
		}
		r.cfg.BurstPoolPercent, r.cfg.LeaseDuration = p, d
	case "group":
		w, err := strconv.ParseFloat(c.kv["weight"], 64)
		if err != nil {
			return err
		}
		r.cfg.Groups = append(r.cfg.Groups, Group{Path: c.args[0], Weight: w})
	case "tenant":
		t, err := tenantFromKV(c.args[0], c.kv, Tenant{})
		if err != nil {
			return err
		}
		r.cfg.Tenants = append(r.cfg.Tenants, t)
	case "node", "gpu":
		return r.unit(c)
	default:
		return fmt.Errorf("%s needs a started scenario", c.verb)
	}
	return nil
}

func (r *scriptRun) start() error {
	r.cfg.Capacity = r.capacity()
	a, err := New(r.cfg)
	if err != nil {
		return err
	}
	r.a = a
	r.lastCmd = "start"
	d, err := a.Recompute(r.now)
	r.trace(d, err)
	return nil
}

// event turns a command into events (nil for tick and recompute).
func (r *scriptRun) event(c scriptCmd) ([]Event, error) {
	switch c.verb {
	case "demand":
		n, err := strconv.Atoi(c.args[1])
		return []Event{SetDemand{Tenant: c.args[0], Demand: n}}, err
	case "update":
		var base Tenant
		for _, t := range r.a.Config().Tenants {
			if t.Name == c.args[0] {
				base = t
			}
		}
		t, err := tenantFromKV(c.args[0], c.kv, base)
		return []Event{UpdateTenant{Tenant: t}}, err
	case "remove":
		return []Event{RemoveTenant{Tenant: c.args[0]}}, nil
	case "tenant":
		t, err := tenantFromKV(c.args[0], c.kv, Tenant{})
		return []Event{AddTenant{Tenant: t}}, err
	case "group":
		w, err := strconv.ParseFloat(c.kv["weight"], 64)
		return []Event{SetGroup{Group: Group{Path: c.args[0], Weight: w}}}, err
	case "capacity", "node", "gpu", "fail", "fail-gpu", "restore":
		if err := r.capacityCmd(c); err != nil {
			return nil, err
		}
		return []Event{SetCapacity{Capacity: r.capacity()}}, nil
	}
	return nil, nil
}

func (r *scriptRun) capacityCmd(c scriptCmd) error {
	switch c.verb {
	case "capacity":
		return r.config(c)
	case "node", "gpu":
		return r.unit(c)
	}
	if _, ok := r.units[c.args[0]]; !ok {
		return fmt.Errorf("unknown unit %q", c.args[0])
	}
	r.down[c.args[0]] = c.verb != "restore"
	return nil
}

func (r *scriptRun) exec(c scriptCmd) error {
	if r.a == nil {
		if c.verb != "start" && c.verb != "demand" && c.verb != "tick" && c.verb != "update" &&
			c.verb != "remove" && c.verb != "fail" && c.verb != "fail-gpu" && c.verb != "restore" && c.verb != "recompute" {
			return r.config(c)
		}
		if err := r.start(); err != nil || c.verb == "start" {
			return err
		}
	}
	r.lastCmd = strings.Join(append([]string{c.verb}, c.args...), " ")
	for _, k := range sortedKeys(c.kv) {
		r.lastCmd += " " + k + "=" + c.kv[k]
	}
	switch c.verb {
	case "start":
		return fmt.Errorf("start twice")
	case "tick":
		d, err := time.ParseDuration(c.args[0])
		if err != nil {
			return err
		}
		r.now = r.now.Add(d)
		dec, err := r.a.Apply(r.now)
		r.trace(dec, err)
		return nil
	case "recompute":
		dec, err := r.a.Recompute(r.now)
		r.trace(dec, err)
		return nil
	}
	evs, err := r.event(c)
	if err != nil {
		return err
	}
	dec, err := r.a.Apply(r.now, evs...)
	r.trace(dec, err)
	return nil
}

func (r *scriptRun) trace(d Decision, err error) {
	fmt.Fprintf(&r.out, "== +%s %s\n", r.now.Sub(t0), r.lastCmd)
	if err != nil {
		fmt.Fprintf(&r.out, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", "\n error: "))
		return
	}
	for _, it := range d.Items {
		s := it.String()
		if !it.Expires.IsZero() {
			s += " until=+" + it.Expires.Sub(t0).String()
		}
		if !it.RetryAt.IsZero() {
			s += " retryAt=+" + it.RetryAt.Sub(t0).String()
		}
		fmt.Fprintf(&r.out, "%s\n", s)
	}
	for _, s := range r.a.Snapshot() {
		fmt.Fprintf(&r.out, "  %-8s tasks=%d steady=%d leased=%d demand=%d share=%.6f wshare=%.6f\n",
			s.Name, s.Tasks, s.Steady, s.Leased, s.Demand, s.DominantShare, s.WeightedShare)
	}
}

func runScript(src string) (string, error) {
	cmds, err := parseScript(src)
	if err != nil {
		return "", err
	}
	r := &scriptRun{base: Vector{}, units: map[string]Vector{}, down: map[string]bool{}, now: t0}
	for _, c := range cmds {
		if err := r.exec(c); err != nil {
			return "", fmt.Errorf("line %d: %s: %w", c.line, c.verb, err)
		}
	}
	if r.a == nil {
		if err := r.start(); err != nil {
			return "", err
		}
	}
	return r.out.String(), nil
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runScript(string(src))
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("trace differs from %s (run with -update after checking):\n%s", golden, firstDiff(string(want), got))
			}
		})
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n want %q\n got  %q", i+1, a, b)
		}
	}
	return ""
}

func FuzzParseScript(f *testing.F) {
	f.Add("capacity cpu=9 mem=18\ntenant a task=cpu:1,mem:4 demand=5\ndemand a 3\ntick 30s\n")
	f.Add("node n1 cpu=4\nfail n1\n# comment\n=x\n")
	f.Add("tenant a task=cpu:x,mem:1 slice=H100-SXM5-80GB/3g.40gb minrun=-1s\nstart\nstart\n")
	f.Fuzz(func(t *testing.T, src string) {
		cmds, err := parseScript(src)
		if err != nil {
			return
		}
		for _, c := range cmds {
			if len(c.args) != scriptArity[c.verb] {
				t.Fatalf("line %d: arity not enforced", c.line)
			}
			if c.verb == "tenant" {
				_, _ = tenantFromKV(c.args[0], c.kv, Tenant{}) // must not panic
			}
		}
	})
}
