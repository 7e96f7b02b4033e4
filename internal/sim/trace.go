package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// TraceRequest is one request of a trace: when it arrives (from the first row of the trace),
// whose it is and its token lengths.
type TraceRequest struct {
	At           time.Duration `json:"at"`
	Tenant       string        `json:"tenant"`
	InputTokens  int           `json:"inputTokens"`
	OutputTokens int           `json:"outputTokens"`
	// Line is the row's line number in the file (the header is line 1).
	Line int `json:"line"`
}

// Trace is a request trace, sorted by arrival.
type Trace struct {
	// Format is "gpupool" (timestamp,tenant,input_tokens,output_tokens) or "azure"
	// (TIMESTAMP,ContextTokens,GeneratedTokens).
	Format   string         `json:"format"`
	Requests []TraceRequest `json:"requests"`
	// ZeroTokens counts rows with 0 input or output tokens, replayed as 1 (an engine computes
	// at least one prompt token and produces at least one output token).
	ZeroTokens int `json:"zeroTokens"`
}

// TraceOptions say how to read a trace.
type TraceOptions struct {
	// Tenant is the tenant the rows of an Azure trace (which has no tenant column) belong to.
	Tenant string
	// Tenants, when not nil, are the known tenant names; a row naming another is an error.
	Tenants []string
	// MaxErrors is how many row errors are reported before giving up; default 20.
	MaxErrors int
}

// maxTraceTokens bounds a row's token counts (no model has a context this long).
const maxTraceTokens = 1 << 24

// ReadTrace reads a CSV trace with a header row. Two layouts are recognised by their header
// (case-insensitively, columns in any order, extra columns ignored):
//
//	timestamp,tenant,input_tokens,output_tokens        gpupool's own
//	TIMESTAMP,ContextTokens,GeneratedTokens            the Azure LLM inference traces (2023, 2024),
//	                                                   all rows for opts.Tenant
//
// A timestamp is seconds as a decimal number, or a date-time ("2023-11-16 18:15:46.6805900",
// RFC 3339); arrivals are measured from the first row. Rows must be in time order. A row that
// does not parse, a negative or too large token count, an unknown tenant or a timestamp earlier
// than the row before is an error naming its line; ReadTrace reports up to MaxErrors of them at
// once. Rows with 0 tokens are replayed with 1 and counted in Trace.ZeroTokens.
func ReadTrace(r io.Reader, opts TraceOptions) (*Trace, error) {
	if opts.MaxErrors <= 0 {
		opts.MaxErrors = 20
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("read trace: empty file (want a header row)")
		}
		return nil, fmt.Errorf("read trace: line 1: %w", err)
	}
	cols, err := traceColumns(header, opts)
	if err != nil {
		return nil, err
	}
	tr := &Trace{Format: cols.format}
	p := traceParser{cols: cols, opts: opts, known: knownSet(opts.Tenants)}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("read trace: %w", err)
			}
			if p.fail(fmt.Errorf("line %d: %w", pe.Line, pe.Err)) {
				break
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		req, zero, err := p.row(rec, line)
		if err != nil {
			if p.fail(err) {
				break
			}
			continue
		}
		if zero {
			tr.ZeroTokens++
		}
		tr.Requests = append(tr.Requests, req)
	}
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("read trace: %w", errors.Join(p.errs...))
	}
	return tr, nil
}

func knownSet(names []string) map[string]bool {
	if names == nil {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// traceCols are the column positions of a trace's header.
type traceCols struct {
	format                  string
	ts, tenant, input, outp int // tenant -1 for azure
}

func traceColumns(header []string, opts TraceOptions) (traceCols, error) {
	idx := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := idx[h]; !dup {
			idx[h] = i
		}
	}
	get := func(k string) int {
		if i, ok := idx[k]; ok {
			return i
		}
		return -1
	}
	c := traceCols{format: "gpupool", ts: get("timestamp"), tenant: get("tenant"), input: get("input_tokens"), outp: get("output_tokens")}
	if c.ts >= 0 && c.tenant >= 0 && c.input >= 0 && c.outp >= 0 {
		return c, nil
	}
	a := traceCols{format: "azure", ts: get("timestamp"), tenant: -1, input: get("contexttokens"), outp: get("generatedtokens")}
	if a.ts >= 0 && a.input >= 0 && a.outp >= 0 {
		if opts.Tenant == "" {
			return a, errors.New("read trace: an Azure trace (TIMESTAMP,ContextTokens,GeneratedTokens) has no tenant column: name the tenant its rows belong to")
		}
		return a, nil
	}
	return c, fmt.Errorf("read trace: line 1: header %q: want columns timestamp,tenant,input_tokens,output_tokens or TIMESTAMP,ContextTokens,GeneratedTokens",
		strings.Join(header, ","))
}

// traceParser turns rows into requests, keeping the errors and the time order.
type traceParser struct {
	cols     traceCols
	opts     TraceOptions
	known    map[string]bool
	errs     []error
	origin   int64 // ns of the first row
	last     int64 // latest ns seen
	started  bool
	lastLine int
}

// fail records err and says whether to stop.
func (p *traceParser) fail(err error) bool {
	p.errs = append(p.errs, err)
	if len(p.errs) >= p.opts.MaxErrors {
		p.errs = append(p.errs, fmt.Errorf("stopped after %d errors", len(p.errs)))
		return true
	}
	return false
}

func (p *traceParser) row(rec []string, line int) (TraceRequest, bool, error) {
	c := p.cols
	need := max(c.ts, c.tenant, c.input, c.outp)
	if len(rec) <= need {
		return TraceRequest{}, false, fmt.Errorf("line %d: %d columns, want at least %d", line, len(rec), need+1)
	}
	ns, err := parseTimestamp(rec[c.ts])
	if err != nil {
		return TraceRequest{}, false, fmt.Errorf("line %d: timestamp: %w", line, err)
	}
	var errs []error
	if p.started && ns < p.last {
		errs = append(errs, fmt.Errorf("timestamp %s is before the previous row's (line %d): rows must be in time order",
			strings.TrimSpace(rec[c.ts]), p.lastLine))
	}
	if !p.started {
		p.started, p.origin = true, ns
	}
	p.last, p.lastLine = max(p.last, ns), line
	tenant := p.opts.Tenant
	if c.tenant >= 0 {
		tenant = strings.TrimSpace(rec[c.tenant])
	}
	if tenant == "" {
		errs = append(errs, errors.New("empty tenant"))
	} else if p.known != nil && !p.known[tenant] {
		errs = append(errs, fmt.Errorf("unknown tenant %q", tenant))
	}
	in, err1 := parseTokens("input tokens", rec[c.input])
	out, err2 := parseTokens("output tokens", rec[c.outp])
	errs = append(errs, err1, err2)
	if err := errors.Join(errs...); err != nil {
		return TraceRequest{}, false, fmt.Errorf("line %d: %w", line, err)
	}
	zero := in == 0 || out == 0
	at := time.Duration(ns - p.origin)
	if at < 0 {
		return TraceRequest{}, false, fmt.Errorf("line %d: timestamp before the first row's", line)
	}
	return TraceRequest{At: at, Tenant: tenant, InputTokens: max(in, 1), OutputTokens: max(out, 1), Line: line}, zero, nil
}

func parseTokens(what, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %q: not an integer", what, s)
	case n < 0:
		return 0, fmt.Errorf("%s %d: negative", what, n)
	case n > maxTraceTokens:
		return 0, fmt.Errorf("%s %d: more than %d", what, n, maxTraceTokens)
	}
	return n, nil
}

// timeLayouts are the date-time forms a timestamp may take.
var timeLayouts = []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999"}

// parseTimestamp returns nanoseconds: a decimal number of seconds, or a date-time (UTC unless it
// carries a zone) since the Unix epoch.
func parseTimestamp(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.Abs(f) > 9e9 {
			return 0, fmt.Errorf("%q: out of range (at most 9e9 seconds)", s)
		}
		return int64(math.Round(f * 1e9)), nil
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			if y := t.Year(); y < 1970 || y > 2200 {
				return 0, fmt.Errorf("%q: year outside 1970-2200", s)
			}
			return t.UnixNano(), nil
		}
	}
	return 0, fmt.Errorf("%q: want seconds or a date-time like 2023-11-16 18:15:46.68", s)
}
