package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

var smallTenants = []string{"chat", "batch", "code"}

func TestReadTraceGpupool(t *testing.T) {
	tr := readTrace(t, "trace-small.csv", TraceOptions{Tenants: smallTenants})
	if tr.Format != "gpupool" || len(tr.Requests) != 6 || tr.ZeroTokens != 1 {
		t.Fatalf("format %q, %d requests, %d zero-token rows; want gpupool, 6, 1", tr.Format, len(tr.Requests), tr.ZeroTokens)
	}
	// Row 6 (line 6) is "1.5,chat,0,80": 1.5 s after the first row, its 0 input tokens replayed as 1.
	r := tr.Requests[4]
	if r.At != 1500*time.Millisecond || r.Tenant != "chat" || r.InputTokens != 1 || r.OutputTokens != 80 || r.Line != 6 {
		t.Errorf("row 5 = %+v", r)
	}
}

func TestReadTraceAzure(t *testing.T) {
	tr := readTrace(t, "trace-azure.csv", TraceOptions{Tenant: "chat"})
	// 18:15:50.9951690 − 18:15:46.6805900 = 4.314579 s.
	if tr.Format != "azure" || len(tr.Requests) != 4 || tr.Requests[1].At != 4314579*time.Microsecond ||
		tr.Requests[1].Tenant != "chat" || tr.Requests[1].InputTokens != 396 || tr.Requests[1].OutputTokens != 109 {
		t.Errorf("got %+v", tr)
	}
	if _, err := ReadTrace(strings.NewReader("TIMESTAMP,ContextTokens,GeneratedTokens\n"), TraceOptions{}); err == nil {
		t.Error("an Azure trace without a tenant was accepted")
	}
}

// TestReadTraceErrors: every bad row is reported with its line number, all at once.
func TestReadTraceErrors(t *testing.T) {
	const header = "timestamp,tenant,input_tokens,output_tokens\n"
	cases := []struct {
		name, body string
		wants      []string
	}{
		{"empty", "", []string{"empty file"}},
		{"bad header", "a,b,c\n", []string{"line 1", "want columns"}},
		{"negative tokens", header + "0,chat,-5,10\n", []string{"line 2", "input tokens -5: negative"}},
		{"not a number", header + "0,chat,ten,10\n", []string{"line 2", `input tokens "ten"`}},
		{"unknown tenant", header + "0,chat,1,1\n1,ghost,1,1\n", []string{"line 3", `unknown tenant "ghost"`}},
		{"unsorted", header + "5,chat,1,1\n4,chat,1,1\n", []string{"line 3", "before the previous row's (line 2)"}},
		{"bad timestamp", header + "yesterday,chat,1,1\n", []string{"line 2", "timestamp"}},
		{"short row", header + "0,chat\n", []string{"line 2", "2 columns"}},
		{"too many tokens", header + "0,chat,1,99999999\n", []string{"line 2", "more than"}},
		{"all at once", header + "0,chat,-1,1\n1,ghost,1,1\n0.5,chat,1,1\n", []string{"line 2", "line 3", "line 4"}},
		{"bad quote", header + "0,\"chat,1,1\n", []string{"line 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(c.body), TraceOptions{Tenants: smallTenants})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestTraceReplay: a replayed trace delivers exactly its rows, to the tenants it names.
func TestTraceReplay(t *testing.T) {
	tr := readTrace(t, "trace-small.csv", TraceOptions{Tenants: smallTenants})
	in := Input{Pool: loadPool(t, "pool-small.yaml"), Plan: loadPlan(t, "plan-small.yaml"), Trace: tr}
	s, res := runSim(t, in, Config{Duration: time.Minute})
	want := map[string]int64{"chat": 3, "batch": 1, "code": 2}
	for _, tn := range res.Report.Tenants {
		if tn.Arrived != want[tn.Name] || tn.Completed != want[tn.Name] {
			t.Errorf("%s: arrived %d, completed %d; want %d", tn.Name, tn.Arrived, tn.Completed, want[tn.Name])
		}
	}
	checkInvariants(t, s, res)

	// A duration of 1 s replays the rows at 0, 0.25 and 0.5 s and says the other three were not.
	_, res = runSim(t, in, Config{Duration: time.Second})
	var arrived int64
	for _, tn := range res.Report.Tenants {
		arrived += tn.Arrived
	}
	if arrived != 3 || !strings.Contains(strings.Join(res.Report.Notes, "\n"), "3 of 6 rows arrive after") {
		t.Errorf("1 s of the trace: %d arrivals, notes %q", arrived, res.Report.Notes)
	}
}

func FuzzReadTrace(f *testing.F) {
	for _, name := range []string{"trace-small.csv", "trace-azure.csv"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("timestamp,tenant,input_tokens,output_tokens\n1e308,chat,1,1\n"))
	f.Add([]byte("timestamp,tenant,input_tokens,output_tokens\nNaN,chat,1,1\n"))
	f.Add([]byte("\ufefftimestamp,tenant,input_tokens,output_tokens\n0,\"a\"\"b\",1,1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadTrace(strings.NewReader(string(data)), TraceOptions{Tenant: "chat"})
		if err != nil {
			return
		}
		var prev time.Duration
		for i, r := range tr.Requests {
			if r.At < prev || r.InputTokens < 1 || r.OutputTokens < 1 || r.InputTokens > maxTraceTokens ||
				r.OutputTokens > maxTraceTokens || r.Tenant == "" || r.At < 0 {
				t.Fatalf("request %d accepted but invalid: %+v", i, r)
			}
			prev = r.At
		}
	})
}

// TestTraceOverMaxModelLen: a trace request whose prompt + output exceed its replica's
// --max-model-len is refused as vLLM refuses it, counted as dropped (against the SLO
// attainment) and named in a note, even when the KV cache could hold it.
func TestTraceOverMaxModelLen(t *testing.T) {
	const dir = "../../testdata/review2/"
	read := func(name string) []byte {
		data, err := os.ReadFile(dir + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	pool, err := v1.LoadPool(read("pool-h100x2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := v1.DecodePlan(read("plan-h100x2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTrace(strings.NewReader(string(read("trace-edge.csv"))), TraceOptions{Tenants: []string{"rag", "chat", "idle"}})
	if err != nil {
		t.Fatal(err)
	}
	s, res := runSim(t, Input{Pool: pool, Plan: plan, Trace: tr}, Config{Duration: 10 * time.Second})
	checkInvariants(t, s, res)
	// rag's 40,000 + 100-token row is over its 32768; chat's 5,000 + 100-token row over 4096.
	for _, c := range []struct {
		name string
		ml   int
	}{{"rag", 32768}, {"chat", 4096}} {
		tn := tenantByName(res.Report, c.name)
		if tn.DroppedOverContext != 1 || tn.Dropped < 1 || tn.DroppedTooLong != 0 {
			t.Errorf("%s: dropped %d (over context %d, over KV cache %d); want the one row over --max-model-len %d",
				c.name, tn.Dropped, tn.DroppedOverContext, tn.DroppedTooLong, c.ml)
		}
		if tn.SLOJudged != tn.Completed+tn.Dropped || tn.SLOAttainment >= 1 {
			t.Errorf("%s: attainment %.3f over %d; the rejection must count against it", c.name, tn.SLOAttainment, tn.SLOJudged)
		}
		want := fmt.Sprintf("tenant %s: 1 request(s) rejected: prompt + output tokens over --max-model-len %d", c.name, c.ml)
		if !strings.Contains(strings.Join(res.Report.Notes, "\n"), want) {
			t.Errorf("notes %q do not say %q", res.Report.Notes, want)
		}
	}
	if got := maxModelLen([]string{"--max-model-len=2048", "--x", "--max-model-len", "1024"}, 4096); got != 1024 {
		t.Errorf("maxModelLen: %d, want the last flag's 1024", got)
	}
	if got := maxModelLen(nil, 4096); got != 4096 {
		t.Errorf("maxModelLen without the flag: %d, want maxContext 4096", got)
	}
}
