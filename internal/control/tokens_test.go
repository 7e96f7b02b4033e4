package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/store"
)

// listTokens is GET /v1/tokens as the operator, decoded, with the raw body.
func (h *harness) listTokens() ([]TokenInfo, string) {
	h.t.Helper()
	raw := h.must("operator", "GET", "/v1/tokens", nil, 200)
	var ts []TokenInfo
	if err := json.Unmarshal(raw, &ts); err != nil {
		h.t.Fatalf("GET /v1/tokens: %v: %s", err, raw)
	}
	return ts, string(raw)
}

func findToken(ts []TokenInfo, id string) (TokenInfo, bool) {
	for _, t := range ts {
		if t.ID == id {
			return t, true
		}
	}
	return TokenInfo{}, false
}

// TestTokenListAndRevoke: a token whose creation answer was lost (the same request sent twice
// makes two tokens) is listed with its principal and creation time, never its secret or hash,
// and revoked by its id: its next request is a 401 while the other token keeps working. An
// unknown id is a 404 naming it; the operator's own token is refused (409) and keeps working.
func TestTokenListAndRevoke(t *testing.T) {
	h := newHarness(t, ServerConfig{})
	before := time.Now()
	req := TokenRequest{Role: RoleTenant, Tenant: "alice", Name: "ci"}
	var first, second TokenResponse
	json.Unmarshal(h.must("operator", "POST", "/v1/tokens", req, 201), &first)
	json.Unmarshal(h.must("operator", "POST", "/v1/tokens", req, 201), &second)
	after := time.Now()
	if first.ID != TokenID(HashToken(first.Token)) || second.ID == first.ID || len(first.ID) != 16 {
		t.Fatalf("created tokens' ids %q and %q, want the first 16 hex digits of each one's hash", first.ID, second.ID)
	}
	h.tokens["first"], h.tokens["second"] = first.Token, second.Token
	h.must("first", "GET", "/v1/whoami", nil, 200)

	ts, raw := h.listTokens()
	if len(ts) != 5+2 { // the harness's five and the two just made
		t.Fatalf("GET /v1/tokens lists %d tokens, want 7: %s", len(ts), raw)
	}
	for label, secret := range h.tokens {
		if strings.Contains(raw, secret) || strings.Contains(raw, HashToken(secret)) {
			t.Errorf("GET /v1/tokens shows the secret or the hash of token %s: %s", label, raw)
		}
		if _, ok := findToken(ts, TokenID(HashToken(secret))); !ok {
			t.Errorf("GET /v1/tokens does not list token %s (id %s): %s", label, TokenID(HashToken(secret)), raw)
		}
	}
	got, _ := findToken(ts, first.ID)
	if got.Principal != (Principal{Role: RoleTenant, Tenant: "alice", Name: "ci"}) {
		t.Errorf("first token listed as %+v, want tenant alice named ci", got.Principal)
	}
	if got.Created.Before(before) || got.Created.After(after) {
		t.Errorf("first token created at %v, want between %v and %v", got.Created, before, after)
	}
	for i := 1; i < len(ts); i++ {
		if ts[i].Created.Before(ts[i-1].Created) {
			t.Errorf("GET /v1/tokens is not oldest first: %v before %v", ts[i-1].Created, ts[i].Created)
		}
	}

	var revoked TokenInfo
	json.Unmarshal(h.must("operator", "DELETE", "/v1/tokens/"+first.ID, nil, 200), &revoked)
	if revoked.ID != first.ID || revoked.Tenant != "alice" || revoked.Name != "ci" {
		t.Errorf("DELETE answered %+v, want the revoked token %s", revoked, first.ID)
	}
	if code, out := h.do("first", "GET", "/v1/whoami", nil); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token's next request: %d %s, want 401", code, out)
	}
	h.must("second", "GET", "/v1/whoami", nil, 200)
	if ts, raw := h.listTokens(); len(ts) != 6 {
		t.Errorf("after the revocation GET /v1/tokens lists %d tokens, want 6: %s", len(ts), raw)
	} else if _, ok := findToken(ts, first.ID); ok {
		t.Errorf("the revoked token %s is still listed: %s", first.ID, raw)
	}
	var evs []Event
	json.Unmarshal(h.must("operator", "GET", "/v1/events", nil, 200), &evs)
	if !containsEvent(evs, CodeTokenRevoked, first.ID) {
		t.Errorf("no TokenRevoked event naming %s in %+v", first.ID, evs)
	}

	for _, id := range []string{first.ID, "0123456789abcdef"} {
		if code, out := h.do("operator", "DELETE", "/v1/tokens/"+id, nil); code != http.StatusNotFound || !strings.Contains(string(out), id) {
			t.Errorf("DELETE /v1/tokens/%s (no such token): %d %s, want 404 naming the id", id, code, out)
		}
	}
	own := TokenID(HashToken(h.tokens["operator"]))
	if code, out := h.do("operator", "DELETE", "/v1/tokens/"+own, nil); code != http.StatusConflict || !strings.Contains(string(out), "this request is authenticated with") {
		t.Errorf("the operator revoking its own token: %d %s, want 409 saying why", code, out)
	}
	h.must("operator", "GET", "/v1/whoami", nil, 200)
	if code, _ := h.do("alice", "DELETE", "/v1/tokens/"+second.ID, nil); code != http.StatusForbidden {
		t.Errorf("a tenant revoking a token: %d, want 403", code)
	}
	h.must("second", "GET", "/v1/whoami", nil, 200)
}

func containsEvent(evs []Event, code Code, text string) bool {
	for _, ev := range evs {
		if ev.Code == code && strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}

// TestRevokedTokenStaysRevokedAfterRestart: a revocation is acknowledged state. After the engine
// is rebuilt from the store the revoked token is still refused, the other token still works with
// its creation time kept, and the token file's operator token (which the server stores again at
// every start) cannot be revoked.
func TestRevokedTokenStaysRevokedAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fileSecret := NewSecret()
	start := func() (*httptest.Server, func()) {
		loop, stopLoop := runLoopOn(t, path, log)
		ctx := context.Background()
		if _, ok := loop.View().Tokens[HashToken(fileSecret)]; !ok { // as Run stores the token file's
			loop.Do(ctx, func(e *Engine, now time.Time) (any, error) {
				e.AddToken(now, HashToken(fileSecret), Principal{Role: RoleOperator, Name: "bootstrap"})
				return nil, nil
			})
		}
		api := NewServer(loop, ServerConfig{}, log, slog.New(slog.NewTextHandler(io.Discard, nil)))
		api.tokenFile = HashToken(fileSecret)
		srv := httptest.NewServer(api)
		return srv, func() { srv.Close(); stopLoop() }
	}
	call := func(srv *httptest.Server, secret, method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	srv, stop := start()
	var op, keep, gone TokenResponse
	for _, c := range []struct {
		secret string
		req    TokenRequest
		out    *TokenResponse
	}{{fileSecret, TokenRequest{Role: RoleOperator, Name: "second-op"}, &op},
		{fileSecret, TokenRequest{Role: RoleAgent, Node: "n1", Name: "keep"}, &keep},
		{fileSecret, TokenRequest{Role: RoleAgent, Node: "n1", Name: "gone"}, &gone}} {
		code, out := call(srv, c.secret, "POST", "/v1/tokens", c.req)
		if code != 201 || json.Unmarshal(out, c.out) != nil {
			t.Fatalf("create token %+v: %d %s", c.req, code, out)
		}
	}
	if code, out := call(srv, fileSecret, "DELETE", "/v1/tokens/"+gone.ID, nil); code != 200 {
		t.Fatalf("revoke: %d %s", code, out)
	}
	fileID := TokenID(HashToken(fileSecret))
	if code, out := call(srv, op.Token, "DELETE", "/v1/tokens/"+fileID, nil); code != http.StatusConflict || !strings.Contains(string(out), "token file") {
		t.Errorf("revoking the token file's operator token: %d %s, want 409 saying why", code, out)
	}
	_, raw := call(srv, fileSecret, "GET", "/v1/tokens", nil)
	var beforeList []TokenInfo
	json.Unmarshal(raw, &beforeList)
	stop()

	srv, stop = start()
	defer stop()
	if code, out := call(srv, gone.Token, "GET", "/v1/whoami", nil); code != http.StatusUnauthorized {
		t.Errorf("the revoked token after a restart: %d %s, want 401", code, out)
	}
	if code, out := call(srv, keep.Token, "GET", "/v1/whoami", nil); code != 200 {
		t.Errorf("the kept token after a restart: %d %s, want 200", code, out)
	}
	_, raw = call(srv, op.Token, "GET", "/v1/tokens", nil)
	var afterList []TokenInfo
	if err := json.Unmarshal(raw, &afterList); err != nil || len(afterList) != 3 {
		t.Fatalf("after a restart GET /v1/tokens: %v %s, want the token file's, second-op and keep", err, raw)
	}
	for i, ti := range afterList {
		if ti.ID != beforeList[i].ID || !ti.Created.Equal(beforeList[i].Created) || ti.Created.IsZero() || ti.Principal != beforeList[i].Principal {
			t.Errorf("token %d after a restart: %+v, before: %+v", i, ti, beforeList[i])
		}
		if ti.TokenFile != (ti.ID == fileID) {
			t.Errorf("token %s listed with tokenFile %v", ti.ID, ti.TokenFile)
		}
	}
}

// TestTokenRecordOfOldStore: a token record stored before creation times were kept (the
// principal alone) still authenticates and is listed without a creation time.
func TestTokenRecordOfOldStore(t *testing.T) {
	snap := store.Snapshot{Records: map[string]map[string][]byte{kindTokens: {
		HashToken("gp_old"): []byte(`{"role":"tenant","tenant":"chat","name":"old"}`)}}}
	st, err := stateFrom(snap)
	if err != nil {
		t.Fatal(err)
	}
	rec := st.Tokens[HashToken("gp_old")]
	if rec.Principal != (Principal{Role: RoleTenant, Tenant: "chat", Name: "old"}) || !rec.Created.IsZero() {
		t.Fatalf("old record read as %+v", rec)
	}
	e, err := restoreEngine(EngineConfig{}, t0, st)
	if err != nil {
		t.Fatal(err)
	}
	if v := e.View(1); v.Tokens[HashToken("gp_old")].Tenant != "chat" {
		t.Errorf("the restored engine does not hold the old token: %+v", v.Tokens)
	}
	raw, _ := json.Marshal(TokenInfo{ID: TokenID(HashToken("gp_old")), Principal: rec.Principal, Created: rec.Created})
	if strings.Contains(string(raw), "created") {
		t.Errorf("a token without a creation time is listed with one: %s", raw)
	}
}

// TestRevokeAmbiguousID: two stored hashes with one id are refused (409), never guessed between.
func TestRevokeAmbiguousID(t *testing.T) {
	e, err := NewEngine(EngineConfig{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := strings.Repeat("a", 16)+strings.Repeat("0", 48), strings.Repeat("a", 16)+strings.Repeat("1", 48)
	e.AddToken(t0, a, Principal{Role: RoleOperator})
	e.AddToken(t0, b, Principal{Role: RoleOperator})
	if _, err := e.RevokeToken(t0, strings.Repeat("a", 16)); err == nil || !strings.Contains(err.Error(), "names 2 tokens") {
		t.Fatalf("revoke of an id two tokens share: %v", err)
	}
	if len(e.tokens) != 2 {
		t.Fatalf("%d tokens left, want both", len(e.tokens))
	}
}
