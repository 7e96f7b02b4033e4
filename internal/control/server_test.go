package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestAuthorizationMatrix enumerates every route × role (plus no token) and checks the status,
// and that whatever a tenant or agent reads names no other tenant or node.
func TestAuthorizationMatrix(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	// A cordoned node with no replica: the operator's DELETE /v1/nodes/{node} removes it.
	h.must("operator", "PUT", "/v1/nodes/spare", inv(1, 1, "spare"), 200)
	h.must("operator", "PUT", "/v1/nodes/spare/cordon", CordonRequest{Cordoned: true}, 200)
	// Concrete paths: "own" is the caller's object, "other" someone else's.
	fill := func(path, who string, own bool) string {
		tenant, node := "bob", "n2"
		if own {
			switch who {
			case "alice":
				tenant = "alice"
			case "agent-n1":
				node = "n1"
			}
		}
		if who == "operator" {
			tenant, node = "alice", "n1"
		}
		// The GPU is one of the inventory the PUT /v1/nodes/{node} row registers before.
		return strings.NewReplacer("{name}", tenant, "{node}", node, "{gpu}", "GPU-x-0", "{id}", "0123456789abcdef").Replace(path)
	}
	bodies := map[string]any{
		"POST /v1/tenants":                       Tenant{Name: "carol", Demand: 1},
		"PUT /v1/tenants/{name}":                 Tenant{Demand: 2},
		"PUT /v1/tenants/{name}/demand":          ReplicasDemand(1),
		"POST /v1/tokens":                        TokenRequest{Role: RoleTenant, Tenant: "carol"},
		"PUT /v1/nodes/{node}":                   inv(2, 2, "x"),
		"GET /v1/nodes/{node}/layout":            nil,
		"DELETE /v1/tenants/{name}":              nil,
		"POST /v1/nodes/{node}/heartbeat":        nil,
		"PUT /v1/nodes/{node}/cordon":            CordonRequest{Cordoned: false},
		"PUT /v1/nodes/{node}/gpus/{gpu}/layout": LayoutRequest{Layout: "7g.80gb@0"},
		"POST /v1/plans/dry-run":                 readFile(t, "../../examples/h100-7b-exclusive.yaml"),
		"POST /v1/plans/apply":                   bytes.ReplaceAll(readFile(t, "../../examples/h100-7b-exclusive.yaml"), []byte("name: node-a"), []byte("name: n2")),
	}
	whos := []string{"", "operator", "alice", "agent-n1"}
	checked := 0
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		for _, who := range whos {
			for _, own := range []bool{true, false} {
				if who == "operator" && !own {
					continue
				}
				path := fill(rt.Path, who, own)
				if key == "DELETE /v1/tenants/{name}" && who == "operator" {
					path = "/v1/tenants/carol" // keep alice for later rows
				}
				if key == "DELETE /v1/nodes/{node}" && who == "operator" {
					path = "/v1/nodes/spare" // keep n1 for later rows
				}
				if key == "DELETE /v1/tokens/{id}" && who == "operator" {
					path = "/v1/tokens/" + TokenID(HashToken(h.tokens["bob"])) // bob's token: no row uses it
				}
				if key == "POST /v1/nodes/{node}/admit" && who == "operator" {
					path = "/v1/nodes/spare/admit" // removed by the DELETE row
				}
				code, body := h.do(who, rt.Method, path, bodies[key])
				checked++
				allowed := who != "" && slices.Contains(rt.Roles, principalRole(who))
				otherObject := strings.Contains(rt.Path, "{") && !own
				switch {
				case who == "":
					if code != http.StatusUnauthorized {
						t.Errorf("%s %s without token: %d, want 401", rt.Method, path, code)
					}
				case !allowed:
					if code != http.StatusForbidden {
						t.Errorf("%s %s as %s: %d, want 403", rt.Method, path, who, code)
					}
				case otherObject:
					if code != http.StatusNotFound {
						t.Errorf("%s %s as %s (another's object): %d %s, want 404", rt.Method, path, who, code, body)
					}
				default:
					if code >= 300 {
						t.Errorf("%s %s as %s: %d %s, want success", rt.Method, path, who, code, body)
					}
					leaks(t, who, path, body)
				}
			}
		}
	}
	if want := len(routes) * 7; checked != want {
		t.Fatalf("checked %d cases, want %d", checked, want)
	}
}

func principalRole(who string) Role {
	switch {
	case who == "operator":
		return RoleOperator
	case strings.HasPrefix(who, "agent-"):
		return RoleAgent
	}
	return RoleTenant
}

// leaks fails when a tenant's or agent's answer names another tenant or node.
func leaks(t *testing.T, who, path string, body []byte) {
	t.Helper()
	s := string(body)
	switch who {
	case "alice":
		for _, bad := range []string{`"bob"`, `"carol"`, `tenant bob`} {
			if strings.Contains(s, bad) {
				t.Errorf("alice's answer to %s names %s: %s", path, bad, s)
			}
		}
	case "agent-n1": // an agent learns the tenants that run on its own node, nothing of others
		for _, bad := range []string{`"n2"`, `"carol"`} {
			if strings.Contains(s, bad) {
				t.Errorf("agent n1's answer to %s names %s: %s", path, bad, s)
			}
		}
	}
}

func TestTenantSeesOnlyOwnEventsAndGrants(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	h.must("bob", "PUT", "/v1/tenants/bob/demand", ReplicasDemand(5), 200)
	var evs []Event
	json.Unmarshal(h.must("alice", "GET", "/v1/events", nil, 200), &evs)
	if len(evs) == 0 {
		t.Fatal("alice sees no events at all")
	}
	for _, ev := range evs {
		if ev.Tenant != "alice" {
			t.Fatalf("alice sees event %+v", ev)
		}
	}
	var gs []Grant
	json.Unmarshal(h.must("bob", "GET", "/v1/grants", nil, 200), &gs)
	if len(gs) != 5 {
		t.Fatalf("bob holds %d grants, want 5 (8 slices, alice 2)", len(gs))
	}
	for _, g := range gs {
		if g.Tenant != "bob" {
			t.Fatalf("bob sees grant %+v", g)
		}
	}
}

func TestProblemDetailsCarryFieldPaths(t *testing.T) {
	h := newHarness(t, ServerConfig{MaxBody: 256})
	h.seedPool()
	cases := []struct {
		body       any
		path       string
		wantStatus int
		wantPath   string
	}{
		{Tenant{Name: "Bad!", Demand: -1}, "/v1/tenants", 400, "demand"},
		{[]byte(`{"name":"x","demand":"many"}`), "/v1/tenants", 400, "demand"},
		{[]byte(`{"name":"x","colour":"red"}`), "/v1/tenants", 400, "colour"},
		{[]byte(`{"replicas":-3}`), "/v1/tenants/alice/demand", 400, "replicas"},
		{[]byte(`{"name":"` + strings.Repeat("x", 400) + `"}`), "/v1/tenants", 413, ""},
	}
	for _, c := range cases {
		method := "POST"
		if strings.HasSuffix(c.path, "demand") {
			method = "PUT"
		}
		code, body := h.do("operator", method, c.path, c.body)
		if code != c.wantStatus {
			t.Errorf("%v: %d %s, want %d", c.body, code, body, c.wantStatus)
			continue
		}
		var p struct {
			Status int          `json:"status"`
			Title  string       `json:"title"`
			Errors []FieldError `json:"errors"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Status != code || p.Title == "" {
			t.Errorf("not a problem document: %s", body)
		}
		if c.wantPath != "" && !slices.ContainsFunc(p.Errors, func(f FieldError) bool { return f.Path == c.wantPath }) {
			t.Errorf("%v: errors %v do not name %q", c.body, p.Errors, c.wantPath)
		}
	}
}

func TestReservationBeyondPoolIsAConflict(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool() // 8 slices
	code, body := h.do("operator", "POST", "/v1/tenants", Tenant{Name: "big", Demand: 20, Reservation: 20})
	if code != http.StatusConflict || !strings.Contains(string(body), "big") {
		t.Fatalf("reservation 20 on 8 slices: %d %s, want 409 naming the tenant", code, body)
	}
}

// TestAllocatorRefusalsCarryFieldPaths: what the allocator refuses is a 409 problem whose
// errors[] name the request's field, like every other problem. Pool 8: a reservation of 20
// (reservation: the steady pool has 8); alice raising her reservation to 9 (3 + 9 > 8, on PUT);
// demand beyond the allocator's total of 2^22 = 4194304 replicas: 41 tenants of 100000 plus
// alice 2 and bob 3 is 4100005, and alice asking 100000 makes it 4200003 (replicas; rate
// when asked by rate: 100000 requests/s at 1 per replica).
func TestAllocatorRefusalsCarryFieldPaths(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	check := func(method, path string, body any, wantPath, wantText string) {
		t.Helper()
		code, raw := h.do("operator", method, path, body)
		var p struct {
			Status int          `json:"status"`
			Detail string       `json:"detail"`
			Errors []FieldError `json:"errors"`
		}
		if err := json.Unmarshal(raw, &p); err != nil || code != http.StatusConflict || p.Status != code {
			t.Fatalf("%s %s: %d %s, want a 409 problem", method, path, code, raw)
		}
		if len(p.Errors) != 1 || p.Errors[0].Path != wantPath || !strings.Contains(p.Errors[0].Message, wantText) {
			t.Errorf("%s %s: errors %+v, want one on %q saying %q", method, path, p.Errors, wantPath, wantText)
		}
	}
	check("POST", "/v1/tenants", Tenant{Name: "big", Demand: 20, Reservation: 20}, "reservation", "need 20 of slices, the steady pool has 8")
	h.must("operator", "PUT", "/v1/tenants/alice", Tenant{Demand: 2, Reservation: 3}, 200)
	check("PUT", "/v1/tenants/alice", Tenant{Demand: 2, Reservation: 9}, "reservation", "need 9 of slices, the steady pool has 8")
	h.must("operator", "PUT", "/v1/tenants/alice", Tenant{Demand: 2, RatePerReplica: 1}, 200)
	for i := range 41 {
		h.must("operator", "POST", "/v1/tenants", Tenant{Name: fmt.Sprintf("t%d", i), Demand: 100000}, 200)
	}
	check("PUT", "/v1/tenants/alice/demand", ReplicasDemand(100000), "replicas", "total demand 4200003 would exceed the limit of 4194304")
	check("PUT", "/v1/tenants/alice/demand", map[string]any{"rate": 100000}, "rate", "total demand 4200003 would exceed the limit of 4194304")
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, ServerConfig{Rate: 1, Burst: 3})
	codes := map[int]int{}
	for range 6 {
		code, _ := h.do("alice", "GET", "/v1/whoami", nil)
		codes[code]++
	}
	if codes[200] != 3 || codes[429] != 3 {
		t.Fatalf("codes %v, want 3×200 then 3×429 (burst 3, 1/s)", codes)
	}
}

// TestOpenAPIMatchesRoutes: the OpenAPI document lists exactly the routes the server serves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			inDoc[strings.ToUpper(m)+" "+p] = true
		}
	}
	for _, rt := range routes {
		k := rt.Method + " " + rt.Path
		if !inDoc[k] {
			t.Errorf("route %s is not in openapi.json", k)
		}
		delete(inDoc, k)
	}
	for k := range inDoc {
		t.Errorf("openapi.json lists %s, which no route serves", k)
	}
}

func TestLayoutLongPoll(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	var l Layout
	json.Unmarshal(h.must("agent-n1", "GET", "/v1/nodes/n1/layout", nil, 200), &l)
	got := make(chan Layout, 1)
	go func() {
		var l2 Layout
		_, body := h.do("agent-n1", "GET", fmt.Sprintf("/v1/nodes/n1/layout?after=%d&wait=5s", l.Revision), nil)
		json.Unmarshal(body, &l2)
		got <- l2
	}()
	h.must("operator", "DELETE", "/v1/tenants/alice", nil, 204)
	l2 := <-got
	if l2.Revision <= l.Revision {
		t.Fatalf("long poll returned revision %d, not past %d", l2.Revision, l.Revision)
	}
	for _, s := range l2.Slices {
		if s.Tenant == "alice" {
			t.Fatalf("layout still runs alice on %s", s.ID)
		}
	}
}

func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{`{"name":"a","demand":1}`, `{"replicas":3}`, `{"gpus":[{"uuid":"G","board":"H100","slices":["1g.10gb"]}]}`,
		`{"role":"tenant","tenant":"a"}`, `{"rate":1e308}`, `{"cordoned":true}`, `{`, `null`, `[]`, `{"demand":1e400}`, `{"weight":-1,"cap":1,"reservation":9}`} {
		f.Add(s)
	}
	h := newHarness(f, ServerConfig{Rate: 1e9, Burst: 1e9})
	h.seedPool()
	f.Fuzz(func(t *testing.T, body string) {
		h.t = t
		for _, ep := range [][2]string{{"POST", "/v1/tenants"}, {"PUT", "/v1/tenants/alice/demand"}, {"PUT", "/v1/nodes/n1"}, {"POST", "/v1/tokens"}, {"PUT", "/v1/nodes/n2/cordon"}} {
			code, out := h.do("operator", ep[0], ep[1], []byte(body))
			if code >= 500 {
				t.Fatalf("%s %s %q: %d %s", ep[0], ep[1], body, code, out)
			}
		}
	})
}

// TestReadYourWrites: once a change is answered, every read sees it (the view is published
// before the answer).
func TestReadYourWrites(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	for i := range 200 {
		var put, got Tenant
		json.Unmarshal(h.must("alice", "PUT", "/v1/tenants/alice/demand", ReplicasDemand(i%5), 200), &put)
		json.Unmarshal(h.must("alice", "GET", "/v1/tenants/alice", nil, 200), &got)
		if got.Version != put.Version || got.Demand != i%5 {
			t.Fatalf("write %d answered version %d, then read version %d demand %d", i, put.Version, got.Version, got.Demand)
		}
	}
}

func readFile(t *testing.T, p string) []byte {
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestPlanDryRun: a valid Pool comes back planned; an invalid one is a 400 whose errors carry
// api/v1's field paths.
func TestPlanDryRun(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	var p struct {
		Kind string `json:"kind"`
		GPUs []any  `json:"gpus"`
	}
	body := h.must("operator", "POST", "/v1/plans/dry-run", readFile(t, "../../examples/h100-7b-exclusive.yaml"), 200)
	if err := json.Unmarshal(body, &p); err != nil || p.Kind != "Plan" || len(p.GPUs) == 0 {
		t.Fatalf("dry-run answer: %v %.300s", err, body)
	}
	code, body := h.do("operator", "POST", "/v1/plans/dry-run", readFile(t, "../../api/v1/testdata/pool-invalid.yaml"))
	var prob struct {
		Errors []FieldError `json:"errors"`
	}
	json.Unmarshal(body, &prob)
	if code != 400 || len(prob.Errors) < 2 || prob.Errors[0].Path == "" {
		t.Fatalf("invalid pool: %d %.500s, want 400 with field paths", code, body)
	}
}

// TestAuditAndMetrics: every change leaves one audit record naming who did what; reads leave
// none; /metrics reports grants per tenant, request counts (unknown routes too), gate operations
// and nodes by state.
func TestAuditAndMetrics(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool() // 2 registrations + 2 tenants = 4 changes
	h.must("alice", "PUT", "/v1/tenants/alice/demand", ReplicasDemand(1), 200)
	h.must("alice", "GET", "/v1/tenants/alice", nil, 200)
	h.do("alice", "PUT", "/v1/tenants/bob/demand", ReplicasDemand(1)) // refused: no record
	lines := strings.Split(strings.TrimSpace(h.audit.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d audit records, want 5 (4 seed changes + 1 demand change):\n%s", len(lines), h.audit.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[4]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["role"] != "tenant" || rec["tenant"] != "alice" || rec["method"] != "PUT" || rec["path"] != "/v1/tenants/alice/demand" || rec["status"] != 200.0 {
		t.Fatalf("audit record %v", rec)
	}
	h.do("alice", "GET", "/v1/nosuch", nil)
	h.do("alice", "PATCH", "/v1/tenants/alice", nil)
	resp, err := http.Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	io.Copy(&b, resp.Body)
	for _, want := range []string{`gpupool_grants{tenant="alice"} 1`, `gpupool_demand_replicas{tenant="bob"} 3`,
		`gpupool_capacity_slices 8`, `gpupool_api_requests_total{code="200",route="/v1/tenants/{name}/demand"} 1`,
		`gpupool_api_requests_total{code="404",route="/v1/tenants/{name}/demand"} 1`,
		// requests no route takes, under one label; gate operations and nodes by state
		`gpupool_api_requests_total{code="404",route="unmatched"} 1`, `gpupool_api_requests_total{code="405",route="unmatched"} 1`,
		`gpupool_gate_operations{state="waiting"} 0`, `gpupool_gate_operations{state="applying"} 0`,
		`gpupool_nodes{state="ready"} 2`, `gpupool_gate_given_up_gpus 0`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestDemandAsRate: 250 requests/s at 60 per replica is ceil(4.17) = 5 replicas; a tenant without
// ratePerReplica, or a body with both fields, is a 400 naming "rate".
func TestDemandAsRate(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	h.must("operator", "PUT", "/v1/tenants/alice", Tenant{Demand: 1, RatePerReplica: 60}, 200)
	var got Tenant
	json.Unmarshal(h.must("alice", "PUT", "/v1/tenants/alice/demand", []byte(`{"rate":250}`), 200), &got)
	if got.Demand != 5 {
		t.Fatalf("rate 250 at 60 per replica: demand %d, want 5", got.Demand)
	}
	for _, body := range []string{`{"rate":10,"replicas":2}`} {
		if code, out := h.do("alice", "PUT", "/v1/tenants/alice/demand", []byte(body)); code != 400 || !strings.Contains(string(out), `"path":"rate"`) {
			t.Errorf("%s: %d %s", body, code, out)
		}
	}
	if code, out := h.do("bob", "PUT", "/v1/tenants/bob/demand", []byte(`{"rate":10}`)); code != 400 || !strings.Contains(string(out), "ratePerReplica") {
		t.Errorf("rate without ratePerReplica: %d %s", code, out)
	}
}

// BenchmarkAPIReadTenant is one authenticated read through the whole HTTP stack on loopback.
func BenchmarkAPIReadTenant(b *testing.B) {
	h := newHarness(b, ServerConfig{Rate: 1e9, Burst: 1e9})
	h.seedPool()
	for b.Loop() {
		if code, _ := h.do("alice", "GET", "/v1/tenants/alice", nil); code != 200 {
			b.Fatal(code)
		}
	}
}

// BenchmarkAPISetDemand is one acknowledged (fsynced) demand change through the HTTP stack.
func BenchmarkAPISetDemand(b *testing.B) {
	h := newHarness(b, ServerConfig{Rate: 1e9, Burst: 1e9})
	h.seedPool()
	i := 0
	for b.Loop() {
		i++
		if code, _ := h.do("alice", "PUT", "/v1/tenants/alice/demand", ReplicasDemand(i%4)); code != 200 {
			b.Fatal(code)
		}
	}
}

// TestProblemDetailsEverywhere: every error is problem+json with its field paths: an invalid
// path (400), a tenant whose node is another tenant's group or whose group is another tenant
// (409), duplicate keys, an unknown field reported together with the other problems, and a
// method or endpoint no route takes (405 with Allow, 404).
func TestProblemDetailsEverywhere(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	h.must("operator", "POST", "/v1/tenants", Tenant{Name: "team", Path: "org", Demand: 1}, 200)
	cases := []struct {
		method, path string
		body         string
		wantStatus   int
		wantPaths    []string
		wantAllow    string
	}{
		{"POST", "/v1/tenants", `{"name":"x","path":"a//b","demand":1}`, 400, []string{"path"}, ""},
		{"POST", "/v1/tenants", `{"name":"org","demand":1}`, 409, []string{"name"}, ""},
		{"POST", "/v1/tenants", `{"name":"y","path":"org/team","demand":1}`, 409, []string{"path"}, ""},
		{"POST", "/v1/tenants", `{"name":"dupk","demand":1,"demand":2}`, 400, []string{"demand"}, ""},
		{"POST", "/v1/tenants", `{"name":"light","weight":1e-7,"demand":1}`, 400, []string{"weight"}, ""},
		{"POST", "/v1/tenants", `{"name":"Bad!","demand":-1,"colour":"red","size":2}`, 400, []string{"name", "demand", "colour", "size"}, ""},
		{"PUT", "/v1/tenants/alice/demand", `{"replicas":1,"rate":2,"extra":true}`, 400, []string{"rate", "extra"}, ""},
		{"PATCH", "/v1/tenants/alpha", `{}`, 405, nil, "DELETE, GET, HEAD, PUT"},
		{"GET", "/v1/nosuch", ``, 404, nil, ""},
		// The console's catch-all takes any GET, but not under /v1/: no GET in these Allow lists.
		{"POST", "/v1/nodes/node-a", ``, 405, nil, "DELETE, PUT"},
		// A live node that is not cordoned is not removed.
		{"DELETE", "/v1/nodes/n1", ``, 409, []string{"node"}, ""},
		{"POST", "/v1/whoami", `{}`, 405, nil, "GET, HEAD"},
		{"DELETE", "/v1/tokens", ``, 405, nil, "GET, HEAD, POST"},
		{"PUT", "/v1/tokens/0123456789abcdef", ``, 405, nil, "DELETE"},
		{"DELETE", "/v1/tokens/0123456789abcdef", ``, 404, nil, ""},
		{"DELETE", "/v1/nosuch", ``, 404, nil, ""},
		// A token request names only what its role acts for; a malformed name is not "missing".
		{"POST", "/v1/tokens", `{"role":"agent","node":"n1","tenant":"alice"}`, 400, []string{"tenant"}, ""},
		{"POST", "/v1/tokens", `{"role":"tenant","tenant":"alice","node":"n1"}`, 400, []string{"node"}, ""},
		{"POST", "/v1/tokens", `{"role":"operator","tenant":"alice"}`, 400, []string{"tenant"}, ""},
		{"POST", "/v1/tokens", `{"role":"agent","node":"N 1"}`, 400, []string{"node"}, ""},
		// Query parameters that do not parse are named, not ignored.
		{"GET", "/v1/events?after=abc", ``, 400, []string{"after"}, ""},
		{"GET", "/v1/nodes/n1/layout?after=x1", ``, 400, []string{"after"}, ""},
		{"GET", "/v1/nodes/n1/layout?after=1&wait=abc", ``, 400, []string{"wait"}, ""},
		{"GET", "/v1/nodes/n1/layout?after=1&wait=-5s", ``, 400, []string{"wait"}, ""},
	}
	for _, c := range cases {
		var rd io.Reader
		if c.body != "" {
			rd = strings.NewReader(c.body)
		}
		req, _ := http.NewRequest(c.method, h.srv.URL+c.path, rd)
		req.Header.Set("Authorization", "Bearer "+h.tokens["operator"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		what := c.method + " " + c.path + " " + c.body
		if resp.StatusCode != c.wantStatus {
			t.Errorf("%s: %d %s, want %d", what, resp.StatusCode, body, c.wantStatus)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
		}
		if a := resp.Header.Get("Allow"); a != c.wantAllow {
			t.Errorf("%s: Allow %q, want %q", what, a, c.wantAllow)
		}
		var p struct {
			Status int          `json:"status"`
			Errors []FieldError `json:"errors"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Status != c.wantStatus {
			t.Errorf("%s: not a problem document: %s", what, body)
		}
		for _, w := range c.wantPaths {
			if !slices.ContainsFunc(p.Errors, func(f FieldError) bool { return f.Path == w }) {
				t.Errorf("%s: errors %v do not name %q", what, p.Errors, w)
			}
		}
	}
}

// TestPlanApplyTakesLargePool: a Pool document over the 64 KiB bound of other bodies (but within
// maxPoolBody) is applied as it is dry-run; before, the apply answered 413 for a Pool the dry run
// had planned. A Pool over maxPoolBody is a 413 on both.
func TestPlanApplyTakesLargePool(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.must("operator", "PUT", "/v1/nodes/node-a", Inventory{GPUs: []GPU{{UUID: "GPU-a", Board: "H100-SXM5-80GB", MIG: "7g.80gb@0", Slices: []string{"7g.80gb"}}}}, 200)
	pool := readFile(t, "../../examples/h100-7b-exclusive.yaml")
	pad := func(n int) []byte {
		out := append([]byte{}, pool...)
		line := "# " + strings.Repeat("x", 1000) + "\n"
		for len(out) < n {
			out = append(out, line...)
		}
		return out
	}
	big := pad(100 << 10)
	h.must("operator", "POST", "/v1/plans/dry-run", big, 200)
	h.must("operator", "POST", "/v1/plans/apply", big, 200)
	huge := pad(maxPoolBody + 1)
	h.must("operator", "POST", "/v1/plans/dry-run", huge, 413)
	h.must("operator", "POST", "/v1/plans/apply", huge, 413)
}

// TestRequestBodyEdges: a demand body must give replicas or rate (an empty one used to set 0 and
// stop every replica); a Go client's 0 replicas is sent as such; a body in another format is a
// 415; a tenant's version is a precondition; whole-body and number problems are worded in JSON's
// terms with the field's path.
func TestRequestBodyEdges(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	send := func(method, path, ct, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.tokens["operator"])
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	demand := func() int {
		var ts TenantStatus
		json.Unmarshal(h.must("operator", "GET", "/v1/tenants/alice", nil, 200), &ts)
		return ts.Demand
	}
	for _, body := range []string{`{}`, `null`} {
		if code, out := send("PUT", "/v1/tenants/alice/demand", "application/json", body); code != 400 || !strings.Contains(out, `"path":"replicas"`) {
			t.Errorf("demand %s: %d %s, want 400 naming replicas", body, code, out)
		}
	}
	if d := demand(); d != 2 {
		t.Fatalf("alice's demand %d after refused bodies, want 2", d)
	}
	if raw, _ := json.Marshal(ReplicasDemand(0)); string(raw) != `{"replicas":0}` {
		t.Errorf("ReplicasDemand(0) encodes as %s", raw)
	}
	h.must("operator", "PUT", "/v1/tenants/alice/demand", ReplicasDemand(0), 200)
	if d := demand(); d != 0 {
		t.Fatalf("alice's demand %d after replicas 0", d)
	}
	if code, out := send("PUT", "/v1/tenants/alice/demand", "application/json", `{"replicas":1,"rate":0}`); code != 400 || !strings.Contains(out, `"path":"rate"`) {
		t.Errorf("replicas and rate: %d %s", code, out)
	}
	// Content types: JSON (and curl's default for -d) is read, another format is a 415.
	for ct, want := range map[string]int{"application/json; charset=utf-8": 200, "application/x-www-form-urlencoded": 200,
		"application/merge-patch+json": 200, "application/xml": 415, "text/plain": 415, "application/yaml": 415} {
		if code, out := send("PUT", "/v1/tenants/alice/demand", ct, `{"replicas":1}`); code != want {
			t.Errorf("Content-Type %s: %d %s, want %d", ct, code, out, want)
		}
	}
	// A version given must be the stored one.
	var ts TenantStatus
	json.Unmarshal(h.must("operator", "GET", "/v1/tenants/alice", nil, 200), &ts)
	stale := fmt.Sprintf(`{"demand":3,"version":%d}`, ts.Version-1)
	if code, out := send("PUT", "/v1/tenants/alice", "application/json", stale); code != 409 || !strings.Contains(out, `"path":"version"`) {
		t.Errorf("stale version: %d %s, want 409 naming version", code, out)
	}
	if code, out := send("PUT", "/v1/tenants/newbie", "application/json", `{"demand":1,"version":4}`); code != 409 {
		t.Errorf("version on a new tenant: %d %s, want 409", code, out)
	}
	fresh := fmt.Sprintf(`{"demand":3,"version":%d}`, ts.Version)
	if code, out := send("PUT", "/v1/tenants/alice", "application/json", fresh); code != 200 || !strings.Contains(out, fmt.Sprintf(`"version":%d`, ts.Version+1)) {
		t.Errorf("current version: %d %s", code, out)
	}
	// Whole-body and number problems: no empty path before a colon, no Go type names.
	for _, c := range []struct{ path, body, field string }{
		{"/v1/tenants", `[]`, ""},
		{"/v1/tenants/alice/demand", `{"replicas":1e400}`, "replicas"},
		{"/v1/tenants/alice/demand", `{"rate":1e400}`, "rate"},
		{"/v1/tenants/alice/demand", `{"replicas":"two"}`, "replicas"},
	} {
		method := "PUT"
		if c.path == "/v1/tenants" {
			method = "POST"
		}
		code, out := send(method, c.path, "application/json", c.body)
		var p struct {
			Detail string       `json:"detail"`
			Errors []FieldError `json:"errors"`
		}
		json.Unmarshal([]byte(out), &p)
		if code != 400 || len(p.Errors) == 0 || p.Errors[0].Path != c.field {
			t.Errorf("%s %s: %d %s, want 400 naming %q", c.path, c.body, code, out, c.field)
		}
		for _, bad := range []string{": :", "request: :", "control.", "Go value", "float64", "int"} {
			if strings.Contains(p.Detail, bad) {
				t.Errorf("%s %s: detail %q contains %q", c.path, c.body, p.Detail, bad)
			}
		}
	}
}

// TestRegistrationChecksInventory: a report is checked against the catalog with field paths: an
// unknown board, a MIG layout that does not parse or is illegal, slices that are not the
// layout's, an unknown slice kind (400); a GPU another node reports (409). A board given by its
// NVML product name is taken and stored under its catalog name.
func TestRegistrationChecksInventory(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.seedPool()
	gpuJSON := func(uuid, board, mig string, slices ...string) Inventory {
		return Inventory{GPUs: []GPU{{UUID: uuid, Board: board, MIG: mig, Slices: slices}}}
	}
	cases := []struct {
		name   string
		inv    Inventory
		status int
		path   string
	}{
		{"unknown board", gpuJSON("GPU-q", "H999", "", "exclusive"), 400, "inventory.gpus[0].board"},
		{"layout that does not parse", gpuJSON("GPU-r", "H100-SXM5-80GB", "garbage", "7g.80gb"), 400, "inventory.gpus[0].mig"},
		{"illegal layout", gpuJSON("GPU-r", "H100-SXM5-80GB", "7g.80gb@1", "7g.80gb"), 400, "inventory.gpus[0].mig"},
		{"slices not the layout's", gpuJSON("GPU-s", "H100-SXM5-80GB", "7g.80gb@0", "1g.10gb", "1g.10gb", "1g.10gb"), 400, "inventory.gpus[0].slices"},
		{"unknown slice kind", gpuJSON("GPU-z", "H100-SXM5-80GB", "", "banana"), 400, "inventory.gpus[0].slices[0]"},
		{"mps share out of range", gpuJSON("GPU-z", "H100-SXM5-80GB", "", "mps-0"), 400, "inventory.gpus[0].slices[0]"},
		{"UUID of another node", gpuJSON("GPU-n1-0", "H100-SXM5-80GB", "", "exclusive"), 409, "inventory.gpus[0].uuid"},
	}
	for _, c := range cases {
		code, out := h.do("operator", "PUT", "/v1/nodes/node-x", c.inv)
		if code != c.status || !strings.Contains(string(out), `"path":"`+c.path+`"`) {
			t.Errorf("%s: %d %s, want %d naming %s", c.name, code, out, c.status, c.path)
		}
	}
	var nodes []Node
	json.Unmarshal(h.must("operator", "GET", "/v1/nodes", nil, 200), &nodes)
	if len(nodes) != 2 {
		t.Fatalf("%d nodes after refused reports, want 2", len(nodes))
	}
	// Taken: an NVML product name (stored canonical), a MIG layout with its slices, MPS shares.
	var n Node
	json.Unmarshal(h.must("operator", "PUT", "/v1/nodes/node-y", Inventory{GPUs: []GPU{
		{UUID: "GPU-y0", Board: "NVIDIA H100 80GB HBM3", MIG: "3g.40gb@4 3g.40gb@0", Slices: []string{"3g.40gb", "3g.40gb"}},
		{UUID: "GPU-y1", Board: "H100-SXM5-80GB", Slices: []string{"mps-50", "mps-25", "mps-25"}},
	}}, 200), &n)
	if b := n.Inventory.GPUs[0].Board; b != "H100-SXM5-80GB" {
		t.Errorf("board stored as %q, want the catalog name", b)
	}
}

// TestRemovedNodeIsGone: a removed node's agent, still running, is answered 410 Gone on its
// reports and heartbeats, with how to re-admit the node, until an operator does
// (POST /v1/nodes/{node}/admit). Before, its next report registered the node again.
func TestRemovedNodeIsGone(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	h.must("agent-n1", "PUT", "/v1/nodes/n1", inv(1, 1, "n1"), 200)
	h.must("operator", "PUT", "/v1/nodes/n1/cordon", CordonRequest{Cordoned: true}, 200)
	h.must("operator", "DELETE", "/v1/nodes/n1", nil, 204)
	if out := strings.TrimSpace(string(h.must("operator", "GET", "/v1/nodes", nil, 200))); out != "[]" {
		t.Errorf("GET /v1/nodes with no node: %s, want []", out)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{{"PUT", "/v1/nodes/n1", inv(1, 1, "n1")}, {"POST", "/v1/nodes/n1/heartbeat", nil}} {
		code, out := h.do("agent-n1", c.method, c.path, c.body)
		if code != http.StatusGone || !strings.Contains(string(out), "gpupool node admit n1") {
			t.Errorf("%s %s of the removed node: %d %s, want 410 saying how to re-admit it", c.method, c.path, code, out)
		}
	}
	h.must("operator", "POST", "/v1/nodes/n2/admit", nil, 404)
	h.must("operator", "POST", "/v1/nodes/n1/admit", nil, 204)
	h.must("agent-n1", "PUT", "/v1/nodes/n1", inv(1, 1, "n1"), 200)
}
